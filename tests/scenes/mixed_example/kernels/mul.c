/* Vector kernel of a mixed task: out = x * y elementwise, on arguments
 * 6 (x), 7 (y), 8 (out) of the task's shared list (the
 * original's kernel_mul reads args[6..8]). */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const float *x = SCENE_ARG_PTR(ka, 6, const float);
    const float *y = SCENE_ARG_PTR(ka, 7, const float);
    float *out = SCENE_ARG_PTR(ka, 8, float);
    uint64_t n = SCENE_ARG_LEN(ka, 8, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { out[i] = x[i] * y[i]; }
}
