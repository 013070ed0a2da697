/*
 * Split-K PV matmul (AIC): oi_new = sum over the group's blocks i of
 * pij[:, i*K:(i+1)*K] @ V_i, V_i = value_cache[block_table[i]]. Port of
 * simpler's paged_attention_unroll_4dims aic_pv_matmul.cpp (TMATMUL then
 * TMATMUL_ACC per block there; one f32 accumulator per element here).
 *
 *   0 pij_buf     [1, 1, M, n_blocks*K] bf16                            in
 *   1 value_cache [blocks, K, 1, N] bf16       the whole cache          in
 *   2 block_table [1, n_blocks] i32            this group's entries     in
 *   3 oi_new      [1, 1, M, N] f32                                      out
 *   4 n_blocks
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    if (!scene_arg_desc(ka, 0) || ka->descs[0].rank != 4 || ka->descs[1].rank != 4 ||
        ka->descs[2].rank != 2 || ka->descs[3].rank != 4)
        __builtin_trap();
    uint64_t n_blocks = SCENE_ARG_U64(ka, 4);
    uint64_t M = SCENE_ARG_DIM(ka, 0, 2);
    uint64_t blocks = SCENE_ARG_DIM(ka, 1, 0), K = SCENE_ARG_DIM(ka, 1, 1),
             N = SCENE_ARG_DIM(ka, 1, 3);
    if (SCENE_ARG_DIM(ka, 0, 3) != n_blocks * K || SCENE_ARG_DIM(ka, 2, 1) != n_blocks ||
        SCENE_ARG_DIM(ka, 3, 2) != M || SCENE_ARG_DIM(ka, 3, 3) != N)
        __builtin_trap();
    for (uint64_t m = 0; m < M; m++)
        for (uint64_t n = 0; n < N; n++) *SCENE_AT4(ka, 3, float, 0, 0, m, n) = 0.0f;
    for (uint64_t i = 0; i < n_blocks; i++) {
        int32_t blk = *SCENE_AT2(ka, 2, int32_t, 0, i);
        if (blk < 0 || (uint64_t)blk >= blocks) __builtin_trap();
        for (uint64_t m = 0; m < M; m++) {
            for (uint64_t n = 0; n < N; n++) {
                float acc = *SCENE_AT4(ka, 3, float, 0, 0, m, n);
                for (uint64_t k = 0; k < K; k++)
                    acc += scene_bf16_to_f32(*SCENE_AT4(ka, 0, uint16_t, 0, 0, m, i * K + k)) *
                           scene_bf16_to_f32(*SCENE_AT4(ka, 1, uint16_t, blk, k, 0, n));
                *SCENE_AT4(ka, 3, float, 0, 0, m, n) = acc;
            }
        }
    }
}
