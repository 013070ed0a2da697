/*
 * y[r, :] = x[r, :] * (1 / sqrt(sum(x^2) / d + eps)) * weight, bf16 in and
 * out, f32 math (squares summed left to right). Blocks split the rows.
 *
 * args: x, weight, y, eps (f32 bits), d
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const uint16_t *x = SCENE_ARG_PTR(ka, 0, const uint16_t);
    const uint16_t *w = SCENE_ARG_PTR(ka, 1, const uint16_t);
    uint16_t *y = SCENE_ARG_PTR(ka, 2, uint16_t);
    float eps = scene_arg_f32(ka, 3);
    uint64_t d = SCENE_ARG_U64(ka, 4);
    uint64_t rows = SCENE_ARG_LEN(ka, 2, uint16_t) / d;

    SCENE_FOR_BLOCK_RANGE(ka, rows, r) {
        const uint16_t *xr = x + r * d;
        uint16_t *yr = y + r * d;
        float ss = 0.0f;
        for (uint64_t j = 0; j < d; ++j) {
            float v = scene_bf16_to_f32(xr[j]);
            ss += v * v;
        }
        float inv = 1.0f / scene_sqrtf(ss / (float)d + eps);
        for (uint64_t j = 0; j < d; ++j)
            yr[j] = scene_f32_to_bf16(scene_bf16_to_f32(xr[j]) * inv * scene_bf16_to_f32(w[j]));
    }
}
