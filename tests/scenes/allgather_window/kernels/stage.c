/*
 * arg 0: x [C] f32 (in); arg 1: a view of C floats of the window tensor
 * (out): the orchestration chose which slot. A plain copy: the kernel
 * writes its window as it writes any tensor.
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const float *x = SCENE_ARG_PTR(ka, 0, const float);
    float *slot = SCENE_ARG_PTR(ka, 1, float);
    uint64_t n = SCENE_ARG_LEN(ka, 0, float);
    if (scene_arg_dim(ka, 1, 0) != n) return;
    for (uint64_t i = 0; i < n; ++i) slot[i] = x[i];
}
