/*
 * Softmax step 2 for head HEAD: e[t] = exp(scores[HEAD*T + t] - m[HEAD])
 * and sum = e[0] + e[1] + ... (left to right).
 *
 * args: scores [NH*T] (in), m [NH] (in), e [T] (out, this head's slice),
 *       sum [1] (out, this head's slot), T
 */
#include "scene_kernel.h"

#ifndef HEAD
#error "HEAD must be defined"
#endif

SCENE_KERNEL_ENTRY(ka) {
    if (ka->block_idx != 0) return;
    const float *scores = SCENE_ARG_PTR(ka, 0, const float);
    const float *m = SCENE_ARG_PTR(ka, 1, const float);
    float *e = SCENE_ARG_PTR(ka, 2, float);
    float *sum = SCENE_ARG_PTR(ka, 3, float);
    uint64_t tn = SCENE_ARG_U64(ka, 4);
    const float *row = scores + HEAD * tn;
    float mx = m[HEAD];
    float acc = 0.0f;
    for (uint64_t t = 0; t < tn; ++t) {
        float v = scene_expf(row[t] - mx);
        e[t] = v;
        acc += v;
    }
    sum[0] = acc;
}
