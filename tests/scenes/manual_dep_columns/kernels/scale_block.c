/*
 * out = 2 * in over a 2-D view (rows x block columns, row stride = the
 * whole matrix's width), read through the views' shapes and strides.
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const float *in = SCENE_ARG_PTR(ka, 0, const float);
    float *out = SCENE_ARG_PTR(ka, 1, float);
    uint64_t rows = SCENE_ARG_DIM(ka, 1, 0), cols = SCENE_ARG_DIM(ka, 1, 1);
    uint64_t in_stride = SCENE_ARG_STRIDE(ka, 0, 0), out_stride = SCENE_ARG_STRIDE(ka, 1, 0);
    SCENE_FOR_BLOCK_RANGE(ka, rows, r) {
        for (uint64_t k = 0; k < cols; ++k) out[r * out_stride + k] = 2.0f * in[r * in_stride + k];
    }
}
