/*
 * Multi-block QK matmul (AIC): for each of the n_blocks cache blocks of a
 * group, sij[:, i*N:(i+1)*N] = qi @ K_i^T, K_i = key_cache[block_table[i]].
 * Port of simpler's paged_attention_unroll_4dims aic_qk_matmul.cpp (which
 * reads the block table on the device, as here).
 *
 *   0 qi          [1, 1, M, K] bf16            query tile (view)          in
 *   1 key_cache   [blocks, N, 1, K] bf16       the whole cache            in
 *   2 block_table [1, n_blocks] i32            this group's entries (view) in
 *   3 sij_buf     [1, 1, M, n_blocks*N] f32                               out
 *   4 n_blocks
 * Every row of each block is computed; softmax masks the last block's tail.
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    if (!scene_arg_desc(ka, 0) || ka->descs[0].rank != 4 || ka->descs[1].rank != 4 ||
        ka->descs[2].rank != 2 || ka->descs[3].rank != 4)
        __builtin_trap();
    uint64_t n_blocks = SCENE_ARG_U64(ka, 4);
    uint64_t M = SCENE_ARG_DIM(ka, 0, 2), K = SCENE_ARG_DIM(ka, 0, 3);
    uint64_t blocks = SCENE_ARG_DIM(ka, 1, 0), N = SCENE_ARG_DIM(ka, 1, 1);
    if (SCENE_ARG_DIM(ka, 1, 3) != K || SCENE_ARG_DIM(ka, 2, 1) != n_blocks ||
        SCENE_ARG_DIM(ka, 3, 2) != M || SCENE_ARG_DIM(ka, 3, 3) != n_blocks * N)
        __builtin_trap();
    for (uint64_t i = 0; i < n_blocks; i++) {
        int32_t blk = *SCENE_AT2(ka, 2, int32_t, 0, i);
        if (blk < 0 || (uint64_t)blk >= blocks) __builtin_trap();
        for (uint64_t m = 0; m < M; m++) {
            for (uint64_t n = 0; n < N; n++) {
                float acc = 0.0f;
                for (uint64_t k = 0; k < K; k++)
                    acc += scene_bf16_to_f32(*SCENE_AT4(ka, 0, uint16_t, 0, 0, m, k)) *
                           scene_bf16_to_f32(*SCENE_AT4(ka, 1, uint16_t, blk, n, 0, k));
                *SCENE_AT4(ka, 3, float, 0, 0, m, i * N + n) = acc;
            }
        }
    }
}
