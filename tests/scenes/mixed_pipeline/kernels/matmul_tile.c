/* Cube kernel: rows [b * TM, (b + 1) * TM) of ws = x @ w for block b, then
 * signal flag 0 of every vector kernel of the block. Arguments
 * (x [M, K], w [K, N], bias, ws [M, N], y, TM). */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    uint64_t k_dim = SCENE_ARG_DIM(ka, 0, 1), n_dim = SCENE_ARG_DIM(ka, 1, 1);
    uint64_t tm = SCENE_ARG_U64(ka, 5), r0 = (uint64_t)ka->block_idx * tm;
    for (uint64_t r = r0; r < r0 + tm; r++) {
        for (uint64_t j = 0; j < n_dim; j++) {
            float acc = 0.0f;
            for (uint64_t k = 0; k < k_dim; k++)
                acc += *SCENE_AT2(ka, 0, const float, r, k) * *SCENE_AT2(ka, 1, const float, k, j);
            *SCENE_AT2(ka, 3, float, r, j) = acc;
        }
    }
    for (uint32_t slot = SCENE_SLOT_AIV0; slot <= SCENE_SLOT_AIV1; slot++)
        if (ka->slot_mask & (1u << slot)) scene_cluster_signal(ka, slot, 0);
}
