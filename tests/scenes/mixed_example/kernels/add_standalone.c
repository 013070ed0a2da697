/* Vector kernel: out = x + y elementwise, on arguments 0 (x), 1 (y),
 * 2 (out) (the original's kernel_add_standalone). */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const float *x = SCENE_ARG_PTR(ka, 0, const float);
    const float *y = SCENE_ARG_PTR(ka, 1, const float);
    float *out = SCENE_ARG_PTR(ka, 2, float);
    uint64_t n = SCENE_ARG_LEN(ka, 2, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { out[i] = x[i] + y[i]; }
}
