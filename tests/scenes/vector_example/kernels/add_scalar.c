/* c = a + s, with the scalar s passed as f32 bits. */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const float *a = SCENE_ARG_PTR(ka, 0, const float);
    float s = scene_arg_f32(ka, 1);
    float *c = SCENE_ARG_PTR(ka, 2, float);
    uint64_t n = SCENE_ARG_LEN(ka, 2, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { c[i] = a[i] + s; }
}
