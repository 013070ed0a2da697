/*
 * QK matmul (AIC): sij = qi @ kj^T, bf16 in, f32 accumulate and out.
 * Port of simpler's host_build_graph paged_attention aic_qk_matmul.cpp
 * (PTO tiles there, plain loops over the views here).
 *
 *   0 qi  [M, K] bf16  query tile (q_tile heads of one batch)       in
 *   1 kj  [N, K] bf16  key rows of one cache block, N = valid_len   in
 *   2 sij [M, N] f32   scores (a view of a [M, block_size] buffer)  out
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    if (!scene_arg_desc(ka, 0) || ka->descs[0].rank != 2 || ka->descs[1].rank != 2 ||
        ka->descs[2].rank != 2)
        __builtin_trap();
    uint64_t M = SCENE_ARG_DIM(ka, 0, 0), K = SCENE_ARG_DIM(ka, 0, 1), N = SCENE_ARG_DIM(ka, 1, 0);
    if (SCENE_ARG_DIM(ka, 1, 1) != K || SCENE_ARG_DIM(ka, 2, 0) != M || SCENE_ARG_DIM(ka, 2, 1) != N)
        __builtin_trap();
    for (uint64_t m = 0; m < M; m++) {
        for (uint64_t n = 0; n < N; n++) {
            float acc = 0.0f;
            for (uint64_t k = 0; k < K; k++)
                acc += scene_bf16_to_f32(*SCENE_AT2(ka, 0, uint16_t, m, k)) *
                       scene_bf16_to_f32(*SCENE_AT2(ka, 1, uint16_t, n, k));
            *SCENE_AT2(ka, 2, float, m, n) = acc;
        }
    }
}
