/*
 * C[M,N] (f32) = A[M,K] @ B[K,N], A and B in bf16 (GEMM_F16=0) or f16
 * (GEMM_F16=1), products and accumulation in f32.
 *
 * The output is cut into TILE x TILE tiles; each block takes a contiguous
 * range of tiles (row-major over the tile grid). For one tile the K loop
 * walks TILE-deep slabs: A and B slabs are widened to f32 into local
 * buffers, then multiplied into an f32 accumulator tile. Every C element
 * therefore sums its K products in order k = 0, 1, ..., K-1.
 *
 * args: a, b, c, m, k, n
 */
#include "scene_kernel.h"

#ifndef GEMM_F16
#error "GEMM_F16 must be defined (0 = bf16, 1 = f16)"
#endif
#define TILE 16

static inline float load_in(const uint16_t *p, uint64_t i) {
#if GEMM_F16
    return scene_f16_to_f32(p[i]);
#else
    return scene_bf16_to_f32(p[i]);
#endif
}

SCENE_KERNEL_ENTRY(ka) {
    const uint16_t *a = SCENE_ARG_PTR(ka, 0, const uint16_t);
    const uint16_t *b = SCENE_ARG_PTR(ka, 1, const uint16_t);
    float *c = SCENE_ARG_PTR(ka, 2, float);
    uint64_t m = SCENE_ARG_U64(ka, 3);
    uint64_t k = SCENE_ARG_U64(ka, 4);
    uint64_t n = SCENE_ARG_U64(ka, 5);

    uint64_t mt = (m + TILE - 1) / TILE;
    uint64_t nt = (n + TILE - 1) / TILE;
    float acc[TILE][TILE];
    float as[TILE][TILE];
    float bs[TILE][TILE];

    SCENE_FOR_BLOCK_RANGE(ka, mt * nt, tile) {
        uint64_t i0 = (tile / nt) * TILE;
        uint64_t j0 = (tile % nt) * TILE;
        uint64_t im = m - i0 < TILE ? m - i0 : TILE;
        uint64_t jm = n - j0 < TILE ? n - j0 : TILE;
        for (uint64_t i = 0; i < TILE; ++i)
            for (uint64_t j = 0; j < TILE; ++j) acc[i][j] = 0.0f;

        for (uint64_t k0 = 0; k0 < k; k0 += TILE) {
            uint64_t km = k - k0 < TILE ? k - k0 : TILE;
            /* Load the A slab [im, km] and the B slab [km, jm] as f32. */
            for (uint64_t i = 0; i < im; ++i)
                for (uint64_t kk = 0; kk < km; ++kk)
                    as[i][kk] = load_in(a, (i0 + i) * k + k0 + kk);
            for (uint64_t kk = 0; kk < km; ++kk)
                for (uint64_t j = 0; j < jm; ++j)
                    bs[kk][j] = load_in(b, (k0 + kk) * n + j0 + j);
            /* acc += as @ bs, k innermost-ordered per element. */
            for (uint64_t i = 0; i < im; ++i)
                for (uint64_t kk = 0; kk < km; ++kk) {
                    float av = as[i][kk];
                    for (uint64_t j = 0; j < jm; ++j) acc[i][j] += av * bs[kk][j];
                }
        }
        for (uint64_t i = 0; i < im; ++i)
            for (uint64_t j = 0; j < jm; ++j) c[(i0 + i) * n + j0 + j] = acc[i][j];
    }
}
