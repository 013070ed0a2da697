/* Vector kernel: out = x * y elementwise, on arguments 3 (x), 4 (y),
 * 5 (out) (the original's kernel_mul_standalone). */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const float *x = SCENE_ARG_PTR(ka, 3, const float);
    const float *y = SCENE_ARG_PTR(ka, 4, const float);
    float *out = SCENE_ARG_PTR(ka, 5, float);
    uint64_t n = SCENE_ARG_LEN(ka, 5, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { out[i] = x[i] * y[i]; }
}
