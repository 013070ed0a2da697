/*
 * Attention scores of head HEAD against the first T cache rows:
 *   s[t] = (sum_d q[HEAD*hd + d] * K[t, HEAD*hd + d]) * (1 / sqrt(hd))
 * (dot product in d order, then the scale). Blocks split t.
 *
 * args: q [H] (in), k_cache [S*H] (in), s [T] (out, this head's slice),
 *       head_dim, T
 */
#include "scene_kernel.h"

#ifndef HEAD
#error "HEAD must be defined"
#endif

SCENE_KERNEL_ENTRY(ka) {
    const float *q = SCENE_ARG_PTR(ka, 0, const float);
    const float *kc = SCENE_ARG_PTR(ka, 1, const float);
    float *s = SCENE_ARG_PTR(ka, 2, float);
    uint64_t hd = SCENE_ARG_U64(ka, 3);
    uint64_t tn = SCENE_ARG_U64(ka, 4);
    uint64_t h = SCENE_ARG_LEN(ka, 0, float);
    float scale = 1.0f / scene_sqrtf((float)hd);
    const float *qh = q + HEAD * hd;
    SCENE_FOR_BLOCK_RANGE(ka, tn, t) {
        const float *kr = kc + t * h + HEAD * hd;
        float acc = 0.0f;
        for (uint64_t d = 0; d < hd; ++d) acc += qh[d] * kr[d];
        s[t] = acc * scale;
    }
}
