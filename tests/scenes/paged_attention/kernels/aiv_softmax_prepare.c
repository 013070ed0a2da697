/*
 * Softmax prepare (AIV) of one block's valid columns. Port of simpler's
 * host_build_graph paged_attention aiv_softmax_prepare.cpp: there the task
 * gets the [M, valid_len] view of a [M, block_size] score tile and pads
 * columns valid_len.. with -inf (exp -> 0); here the views carry only the
 * valid columns, so nothing needs padding.
 *
 *   0 sij [M, N] f32   scores, N = valid_len                      in
 *   1 pij [M, N] bf16  exp(sij*scale - mij), rounded to bf16      out
 *   2 mij [M]    f32   row max of sij*scale                       out
 *   3 lij [M]    f32   row sum of pij (the bf16-rounded values)   out
 *   4 scale (f32 bits)
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    if (!scene_arg_desc(ka, 0) || ka->descs[0].rank != 2 || ka->descs[1].rank != 2 ||
        ka->descs[2].rank != 1 || ka->descs[3].rank != 1)
        __builtin_trap();
    uint64_t M = SCENE_ARG_DIM(ka, 0, 0), N = SCENE_ARG_DIM(ka, 0, 1);
    if (SCENE_ARG_DIM(ka, 1, 0) != M || SCENE_ARG_DIM(ka, 1, 1) != N ||
        SCENE_ARG_DIM(ka, 2, 0) != M || SCENE_ARG_DIM(ka, 3, 0) != M || N == 0)
        __builtin_trap();
    float scale = scene_arg_f32(ka, 4);
    for (uint64_t m = 0; m < M; m++) {
        float mx = -__builtin_inff();
        for (uint64_t n = 0; n < N; n++) {
            float s = *SCENE_AT2(ka, 0, float, m, n) * scale;
            if (s > mx) mx = s;
        }
        float sum = 0.0f;
        for (uint64_t n = 0; n < N; n++) {
            float s = *SCENE_AT2(ka, 0, float, m, n) * scale;
            uint16_t p = scene_f32_to_bf16(scene_expf(s - mx));
            *SCENE_AT2(ka, 1, uint16_t, m, n) = p;
            sum += scene_bf16_to_f32(p);
        }
        *SCENE_AT1(ka, 2, float, m) = mx;
        *SCENE_AT1(ka, 3, float, m) = sum;
    }
}
