/*
 * RMSNorm step 2: out[i] = x[i] * (1 / sqrt(ss / n + eps)) * w[i].
 * NORM_ID: 0 = attention-input norm, 1 = FFN-input norm.
 *
 * args: x [n], ss [1], w [n] (in), out [n] (out), eps (f32 bits)
 */
#include "scene_kernel.h"

#ifndef NORM_ID
#error "NORM_ID must be defined"
#endif

SCENE_KERNEL_ENTRY(ka) {
    const float *x = SCENE_ARG_PTR(ka, 0, const float);
    const float *ss = SCENE_ARG_PTR(ka, 1, const float);
    const float *w = SCENE_ARG_PTR(ka, 2, const float);
    float *out = SCENE_ARG_PTR(ka, 3, float);
    float eps = scene_arg_f32(ka, 4);
    uint64_t n = SCENE_ARG_LEN(ka, 3, float);
    float inv = 1.0f / scene_sqrtf(ss[0] / (float)n + eps);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { out[i] = x[i] * inv * w[i]; }
}
