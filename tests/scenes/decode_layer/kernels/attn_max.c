/*
 * Softmax step 1 for head HEAD: m = max_t scores[HEAD*T + t].
 *
 * args: scores [NH*T] (in, all heads), m [1] (out, this head's slot), T
 */
#include "scene_kernel.h"

#ifndef HEAD
#error "HEAD must be defined"
#endif

SCENE_KERNEL_ENTRY(ka) {
    if (ka->block_idx != 0) return;
    const float *scores = SCENE_ARG_PTR(ka, 0, const float);
    float *m = SCENE_ARG_PTR(ka, 1, float);
    uint64_t tn = SCENE_ARG_U64(ka, 2);
    const float *row = scores + HEAD * tn;
    float mx = row[0];
    for (uint64_t t = 1; t < tn; ++t)
        if (row[t] > mx) mx = row[t];
    m[0] = mx;
}
