/* x = 7, elementwise over f32. */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    uint64_t n = SCENE_ARG_DIM(ka, 0, 0);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { x[i] = 7.0f; }
}
