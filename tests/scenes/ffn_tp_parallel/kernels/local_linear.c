/*
 * Stage 1 (AIC): partial[M, N] = x[M, K] @ w[K, N], f32; args 3-5 are M, K, N
 * (simpler:
 * kernels/aic/kernel_local_linear.cpp).
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const float *x = SCENE_ARG_PTR(ka, 0, const float);
    const float *w = SCENE_ARG_PTR(ka, 1, const float);
    float *out = SCENE_ARG_PTR(ka, 2, float);
    uint64_t m = SCENE_ARG_U64(ka, 3), k = SCENE_ARG_U64(ka, 4), n = SCENE_ARG_U64(ka, 5);
    if (SCENE_ARG_LEN(ka, 0, float) != m * k || SCENE_ARG_LEN(ka, 1, float) != k * n ||
        SCENE_ARG_LEN(ka, 2, float) != m * n)
        return;
    SCENE_FOR_BLOCK_RANGE(ka, m, i) {
        for (uint64_t j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (uint64_t p = 0; p < k; ++p) acc += x[i * k + p] * w[p * n + j];
            out[i * n + j] = acc;
        }
    }
}
