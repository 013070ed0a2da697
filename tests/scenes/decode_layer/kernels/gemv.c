/*
 * Projection of one token: out[N] = x[K] @ W[K, N] (W row-major, f32).
 * Cube-style: the output is cut into TILE_N-wide column tiles, blocks take
 * whole tiles, and each tile streams W's rows k = 0..K-1 into an f32
 * accumulator (so every output sums in k order).
 * PROJ_ID names the projection (q, k, v, o, gate, up, down) and TILE_N is
 * chosen per projection.
 *
 * args: x [K] (in), W [K*N] (in), out [N] (out)
 */
#include "scene_kernel.h"

#ifndef PROJ_ID
#error "PROJ_ID must be defined"
#endif
#ifndef TILE_N
#define TILE_N 16
#endif

SCENE_KERNEL_ENTRY(ka) {
    const float *x = SCENE_ARG_PTR(ka, 0, const float);
    const float *w = SCENE_ARG_PTR(ka, 1, const float);
    float *out = SCENE_ARG_PTR(ka, 2, float);
    uint64_t n = SCENE_ARG_LEN(ka, 2, float);
    uint64_t k = SCENE_ARG_LEN(ka, 0, float);
    if (n == 0 || SCENE_ARG_LEN(ka, 1, float) != k * n) return;
    uint64_t tiles = (n + TILE_N - 1) / TILE_N;
    float acc[TILE_N];
    SCENE_FOR_BLOCK_RANGE(ka, tiles, t) {
        uint64_t j0 = t * TILE_N;
        uint64_t jm = n - j0 < TILE_N ? n - j0 : TILE_N;
        for (uint64_t j = 0; j < TILE_N; ++j) acc[j] = 0.0f;
        for (uint64_t i = 0; i < k; ++i) {
            float xv = x[i];
            const float *wr = w + i * n + j0;
            for (uint64_t j = 0; j < jm; ++j) acc[j] += xv * wr[j];
        }
        for (uint64_t j = 0; j < jm; ++j) out[j0 + j] = acc[j];
    }
}
