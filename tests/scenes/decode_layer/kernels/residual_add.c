/*
 * Residual connection: out = a + b. RESID_ID: 0 = after attention,
 * 1 = after the MLP.
 *
 * args: a [n] (in), b [n] (in), out [n] (out)
 */
#include "scene_kernel.h"

#ifndef RESID_ID
#error "RESID_ID must be defined"
#endif

SCENE_KERNEL_ENTRY(ka) {
    const float *a = SCENE_ARG_PTR(ka, 0, const float);
    const float *b = SCENE_ARG_PTR(ka, 1, const float);
    float *out = SCENE_ARG_PTR(ka, 2, float);
    uint64_t n = SCENE_ARG_LEN(ka, 2, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { out[i] = a[i] + b[i]; }
}
