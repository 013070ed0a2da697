/* c = a + b, elementwise. */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const float *a = SCENE_ARG_PTR(ka, 0, const float);
    const float *b = SCENE_ARG_PTR(ka, 1, const float);
    float *c = SCENE_ARG_PTR(ka, 2, float);
    uint64_t n = SCENE_ARG_LEN(ka, 2, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { c[i] = a[i] + b[i]; }
}
