/* acc += x, elementwise over f32. */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    float *acc = SCENE_ARG_PTR(ka, 0, float);
    const float *x = SCENE_ARG_PTR(ka, 1, const float);
    uint64_t n = SCENE_ARG_DIM(ka, 0, 0);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { acc[i] += x[i]; }
}
