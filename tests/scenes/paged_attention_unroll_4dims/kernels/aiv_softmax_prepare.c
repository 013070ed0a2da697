/*
 * Two-pass softmax (AIV) over a group of n_blocks score tiles. Port of
 * simpler's paged_attention_unroll_4dims aiv_softmax_prepare.cpp.
 *
 *   0 sij_buf [1, 1, M, n_blocks*N] f32    scores                       in
 *   1 pij_buf [1, 1, M, n_blocks*N] bf16   exp(sij*scale - mij) as bf16 out
 *   2 mij     [1, 1, M] f32                row max over the whole group out
 *   3 lij     [1, 1, M] f32                row sum of the bf16 pij      out
 *   4 scale (f32 bits), 5 n_blocks, 6 valid_len_last
 *
 * Columns valid_len_last.. of the last block are -inf (pij 0). Pass 1 finds
 * the group's row max, pass 2 writes pij and sums it (per column across
 * the blocks, then across the columns, as the original's tile adds and
 * row sum), so every block of the group shares one max and the PV kernel
 * can accumulate them directly.
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    if (!scene_arg_desc(ka, 0) || ka->descs[0].rank != 4 || ka->descs[1].rank != 4 ||
        ka->descs[2].rank != 3 || ka->descs[3].rank != 3)
        __builtin_trap();
    float scale = scene_arg_f32(ka, 4);
    uint64_t n_blocks = SCENE_ARG_U64(ka, 5), valid_len_last = SCENE_ARG_U64(ka, 6);
    uint64_t M = SCENE_ARG_DIM(ka, 0, 2), W = SCENE_ARG_DIM(ka, 0, 3);
    if (n_blocks == 0 || W % n_blocks != 0 || SCENE_ARG_DIM(ka, 1, 2) != M ||
        SCENE_ARG_DIM(ka, 1, 3) != W || SCENE_ARG_DIM(ka, 2, 2) != M ||
        SCENE_ARG_DIM(ka, 3, 2) != M)
        __builtin_trap();
    uint64_t N = W / n_blocks;
    if (valid_len_last == 0 || valid_len_last > N) __builtin_trap();
    uint64_t valid = (n_blocks - 1) * N + valid_len_last; /* columns 0..valid */
    for (uint64_t m = 0; m < M; m++) {
        float mx = -__builtin_inff();
        for (uint64_t c = 0; c < valid; c++) {
            float s = *SCENE_AT4(ka, 0, float, 0, 0, m, c) * scale;
            if (s > mx) mx = s;
        }
        float sum = 0.0f;
        for (uint64_t n = 0; n < N; n++) {
            float col = 0.0f;
            for (uint64_t i = 0; i < n_blocks; i++) {
                uint64_t c = i * N + n;
                uint16_t p = 0; /* exp(-inf) */
                if (c < valid)
                    p = scene_f32_to_bf16(
                        scene_expf(*SCENE_AT4(ka, 0, float, 0, 0, m, c) * scale - mx));
                *SCENE_AT4(ka, 1, uint16_t, 0, 0, m, c) = p;
                col += scene_bf16_to_f32(p);
            }
            sum += col;
        }
        *SCENE_AT3(ka, 2, float, 0, 0, m) = mx;
        *SCENE_AT3(ka, 3, float, 0, 0, m) = sum;
    }
}
