/*
 * Append this token's key or value row to the cache: cache[pos, :] = src.
 * Other rows are left untouched. CACHE_ID: 0 = K cache, 1 = V cache.
 *
 * args: src [H] (in), cache [S*H] (inout), pos
 */
#include "scene_kernel.h"

#ifndef CACHE_ID
#error "CACHE_ID must be defined"
#endif

SCENE_KERNEL_ENTRY(ka) {
    const float *src = SCENE_ARG_PTR(ka, 0, const float);
    float *cache = SCENE_ARG_PTR(ka, 1, float);
    uint64_t pos = SCENE_ARG_U64(ka, 2);
    uint64_t h = SCENE_ARG_LEN(ka, 0, float);
    if ((pos + 1) * h > SCENE_ARG_LEN(ka, 1, float)) return;
    float *row = cache + pos * h;
    SCENE_FOR_BLOCK_RANGE(ka, h, i) { row[i] = src[i]; }
}
