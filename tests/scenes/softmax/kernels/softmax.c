/*
 * y[r, :] = softmax(scale * x[r, :]) over rows of `cols` elements, blocks
 * split the rows. f32 math: row max, then sum of exp(v - max) left to
 * right, then exp(v - max) / sum. SOFTMAX_F16=1 reads and writes f16.
 *
 * args: x, y, scale (f32 bits), cols
 */
#include "scene_kernel.h"

#ifndef SOFTMAX_F16
#error "SOFTMAX_F16 must be defined (0 = f32, 1 = f16)"
#endif

#if SOFTMAX_F16
typedef uint16_t elem_t;
static inline float load(const elem_t *p, uint64_t i) { return scene_f16_to_f32(p[i]); }
static inline void store(elem_t *p, uint64_t i, float v) { p[i] = scene_f32_to_f16(v); }
#else
typedef float elem_t;
static inline float load(const elem_t *p, uint64_t i) { return p[i]; }
static inline void store(elem_t *p, uint64_t i, float v) { p[i] = v; }
#endif

SCENE_KERNEL_ENTRY(ka) {
    const elem_t *x = SCENE_ARG_PTR(ka, 0, const elem_t);
    elem_t *y = SCENE_ARG_PTR(ka, 1, elem_t);
    float scale = scene_arg_f32(ka, 2);
    uint64_t cols = SCENE_ARG_U64(ka, 3);
    uint64_t rows = SCENE_ARG_LEN(ka, 1, elem_t) / cols;

    SCENE_FOR_BLOCK_RANGE(ka, rows, r) {
        const elem_t *xr = x + r * cols;
        elem_t *yr = y + r * cols;
        float mx = -__builtin_inff();
        for (uint64_t j = 0; j < cols; ++j) {
            float v = scale * load(xr, j);
            if (v > mx) mx = v;
        }
        float sum = 0.0f;
        for (uint64_t j = 0; j < cols; ++j) sum += scene_expf(scale * load(xr, j) - mx);
        for (uint64_t j = 0; j < cols; ++j) store(yr, j, scene_expf(scale * load(xr, j) - mx) / sum);
    }
}
