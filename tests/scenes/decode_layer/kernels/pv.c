/*
 * Weighted sum of values for head HEAD:
 *   o[d] = sum_t p[HEAD*T + t] * V[t, HEAD*hd + d]   (t = 0..T-1 in order)
 * Blocks split d.
 *
 * args: probs [NH*T] (in), v_cache [S*H] (in), o [hd] (out, this head's
 *       slice of the attention output), T, head_dim, n_heads
 */
#include "scene_kernel.h"

#ifndef HEAD
#error "HEAD must be defined"
#endif

SCENE_KERNEL_ENTRY(ka) {
    const float *probs = SCENE_ARG_PTR(ka, 0, const float);
    const float *vc = SCENE_ARG_PTR(ka, 1, const float);
    float *o = SCENE_ARG_PTR(ka, 2, float);
    uint64_t tn = SCENE_ARG_U64(ka, 3);
    uint64_t hd = SCENE_ARG_U64(ka, 4);
    uint64_t hid = hd * SCENE_ARG_U64(ka, 5); /* cache row stride H */
    const float *p = probs + HEAD * tn;
    SCENE_FOR_BLOCK_RANGE(ka, hd, d) {
        float acc = 0.0f;
        for (uint64_t t = 0; t < tn; ++t) acc += p[t] * vc[t * hid + HEAD * hd + d];
        o[d] = acc;
    }
}
