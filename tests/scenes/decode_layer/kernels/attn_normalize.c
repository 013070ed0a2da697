/*
 * Softmax step 3 for head HEAD: p[t] = e[HEAD*T + t] / sums[HEAD].
 *
 * args: e [NH*T] (in), sums [NH] (in), p [T] (out, this head's slice), T
 */
#include "scene_kernel.h"

#ifndef HEAD
#error "HEAD must be defined"
#endif

SCENE_KERNEL_ENTRY(ka) {
    const float *e = SCENE_ARG_PTR(ka, 0, const float);
    const float *sums = SCENE_ARG_PTR(ka, 1, const float);
    float *p = SCENE_ARG_PTR(ka, 2, float);
    uint64_t tn = SCENE_ARG_U64(ka, 3);
    float s = sums[HEAD];
    SCENE_FOR_BLOCK_RANGE(ka, tn, t) { p[t] = e[HEAD * tn + t] / s; }
}
