/*
 * Rotary embedding (rotate-half form) on every head of one token:
 *   out[h*hd + i]        = x[h*hd + i] * cos_i - x[h*hd + half + i] * sin_i
 *   out[h*hd + half + i] = x[h*hd + half + i] * cos_i + x[h*hd + i] * sin_i
 * ROPE_TARGET: 0 = q, 1 = k. Blocks split the heads.
 *
 * args: x [H] (in), cs [hd] (in: cos then sin), out [H] (out), head_dim
 */
#include "scene_kernel.h"

#ifndef ROPE_TARGET
#error "ROPE_TARGET must be defined"
#endif

SCENE_KERNEL_ENTRY(ka) {
    const float *x = SCENE_ARG_PTR(ka, 0, const float);
    const float *cs = SCENE_ARG_PTR(ka, 1, const float);
    float *out = SCENE_ARG_PTR(ka, 2, float);
    uint64_t hd = SCENE_ARG_U64(ka, 3);
    uint64_t half = hd / 2;
    uint64_t heads = SCENE_ARG_LEN(ka, 2, float) / hd;
    SCENE_FOR_BLOCK_RANGE(ka, heads, h) {
        const float *xh = x + h * hd;
        float *oh = out + h * hd;
        for (uint64_t i = 0; i < half; ++i) {
            float c = cs[i], s = cs[half + i];
            float x1 = xh[i], x2 = xh[half + i];
            oh[i] = x1 * c - x2 * s;
            oh[half + i] = x2 * c + x1 * s;
        }
    }
}
