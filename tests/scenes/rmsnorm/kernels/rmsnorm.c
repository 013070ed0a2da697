/*
 * y[r, :] = x[r, :] * (1 / sqrt(sum(x^2) / d + eps)) * weight, in the
 * element type RMSNORM_DTYPE (SCENE_DTYPE_BF16, _F16 or _F32: one source,
 * one image per dtype), f32 math (squares summed left to right). Blocks
 * split the rows.
 *
 * args: x, weight, y, eps (f32 bits), d
 */
#include "scene_kernel.h"

#if !defined(RMSNORM_DTYPE) || RMSNORM_DTYPE == SCENE_DTYPE_BF16
typedef uint16_t elem_t;
static inline float load(elem_t v) { return scene_bf16_to_f32(v); }
static inline elem_t store(float v) { return scene_f32_to_bf16(v); }
#elif RMSNORM_DTYPE == SCENE_DTYPE_F16
typedef uint16_t elem_t;
static inline float load(elem_t v) { return scene_f16_to_f32(v); }
static inline elem_t store(float v) { return scene_f32_to_f16(v); }
#elif RMSNORM_DTYPE == SCENE_DTYPE_F32
typedef float elem_t;
static inline float load(elem_t v) { return v; }
static inline elem_t store(float v) { return v; }
#else
#error "RMSNORM_DTYPE must be SCENE_DTYPE_BF16, SCENE_DTYPE_F16 or SCENE_DTYPE_F32"
#endif

SCENE_KERNEL_ENTRY(ka) {
    const elem_t *x = SCENE_ARG_PTR(ka, 0, const elem_t);
    const elem_t *w = SCENE_ARG_PTR(ka, 1, const elem_t);
    elem_t *y = SCENE_ARG_PTR(ka, 2, elem_t);
    float eps = scene_arg_f32(ka, 3);
    uint64_t d = SCENE_ARG_U64(ka, 4);
    uint64_t rows = SCENE_ARG_LEN(ka, 2, elem_t) / d;

    SCENE_FOR_BLOCK_RANGE(ka, rows, r) {
        const elem_t *xr = x + r * d;
        elem_t *yr = y + r * d;
        float ss = 0.0f;
        for (uint64_t j = 0; j < d; ++j) {
            float v = load(xr[j]);
            ss += v * v;
        }
        float inv = 1.0f / scene_sqrtf(ss / (float)d + eps);
        for (uint64_t j = 0; j < d; ++j) yr[j] = store(load(xr[j]) * inv * load(w[j]));
    }
}
