/* Vector kernel: once the cube kernel signals flag 0, y = relu(ws + bias)
 * over this lane's share of the block's rows (lane scene_sub_block_id of
 * scene_sub_block_num). Arguments (x, w, bias [N], ws [M, N], y [M, N], TM). */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    if (scene_cluster_wait(ka, 0) != SCENE_RT_OK) return; /* the run fails, naming why */
    uint64_t n_dim = SCENE_ARG_DIM(ka, 4, 1), tm = SCENE_ARG_U64(ka, 5);
    uint64_t share = tm / scene_sub_block_num(ka);
    uint64_t r0 = (uint64_t)ka->block_idx * tm + scene_sub_block_id(ka) * share;
    for (uint64_t r = r0; r < r0 + share; r++) {
        for (uint64_t j = 0; j < n_dim; j++) {
            float v = *SCENE_AT2(ka, 3, const float, r, j) + *SCENE_AT1(ka, 2, const float, j);
            *SCENE_AT2(ka, 4, float, r, j) = v > 0.0f ? v : 0.0f;
        }
    }
}
