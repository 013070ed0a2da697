/*
 * out = x + y, elementwise over f32: arguments (x in, y in, out out).
 *
 * With a v2 runtime each argument comes with its view (scene_arg_desc):
 * the length is the output view's and every operand is walked with its own
 * stride. Arguments without an f32 rank-1 view (a v1 submit) are contiguous
 * buffers whose length is their byte size.
 */
#include "scene_kernel.h"

/* Elements between consecutive elements of argument i. */
static inline uint64_t stride_of(const SceneKernelArgs *ka, uint32_t i) {
    const SceneTensorDesc *d = scene_arg_desc(ka, i);
    return d && d->dtype == SCENE_DTYPE_F32 && d->rank == 1 ? d->strides[0] : 1;
}

/* Elements in argument i. */
static inline uint64_t len_of(const SceneKernelArgs *ka, uint32_t i) {
    const SceneTensorDesc *d = scene_arg_desc(ka, i);
    return d && d->dtype == SCENE_DTYPE_F32 && d->rank == 1 ? d->shape[0]
                                                            : SCENE_ARG_LEN(ka, i, float);
}

SCENE_KERNEL_ENTRY(ka) {
    const float *x = SCENE_ARG_PTR(ka, 0, const float);
    const float *y = SCENE_ARG_PTR(ka, 1, const float);
    float *out = SCENE_ARG_PTR(ka, 2, float);
    uint64_t sx = stride_of(ka, 0), sy = stride_of(ka, 1), so = stride_of(ka, 2);
    uint64_t n = len_of(ka, 2);
    if (len_of(ka, 0) < n || len_of(ka, 1) < n) return; /* the orchestration checks sizes */
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { out[i * so] = x[i * sx] + y[i * sy]; }
}
