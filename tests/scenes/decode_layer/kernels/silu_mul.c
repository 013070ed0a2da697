/*
 * SwiGLU gating: out = silu(g) * u, silu(g) = g / (1 + exp(-g)).
 *
 * args: g [F] (in), u [F] (in), out [F] (out)
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const float *g = SCENE_ARG_PTR(ka, 0, const float);
    const float *u = SCENE_ARG_PTR(ka, 1, const float);
    float *out = SCENE_ARG_PTR(ka, 2, float);
    uint64_t n = SCENE_ARG_LEN(ka, 2, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) {
        float gv = g[i];
        out[i] = gv / (1.0f + scene_expf(-gv)) * u[i];
    }
}
