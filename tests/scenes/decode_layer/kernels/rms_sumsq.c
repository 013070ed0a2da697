/*
 * RMSNorm step 1: ss[0] = sum(x[i]^2), f32, left to right. One block does
 * the whole (short) reduction so the order is fixed.
 * NORM_ID tells the attention-input norm (0) from the FFN-input norm (1).
 *
 * args: x [n] (in), ss [1] (out)
 */
#include "scene_kernel.h"

#ifndef NORM_ID
#error "NORM_ID must be defined"
#endif

SCENE_KERNEL_ENTRY(ka) {
    if (ka->block_idx != 0) return;
    const float *x = SCENE_ARG_PTR(ka, 0, const float);
    float *ss = SCENE_ARG_PTR(ka, 1, float);
    uint64_t n = SCENE_ARG_LEN(ka, 0, float);
    float acc = 0.0f;
    for (uint64_t i = 0; i < n; ++i) acc += x[i] * x[i];
    ss[0] = acc;
}
