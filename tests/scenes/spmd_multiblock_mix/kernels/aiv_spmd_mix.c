/* A vector kernel of a block: its block index into the first float of the
 * block's cache line 1 + its lane (the original's
 * kernels/aiv/kernel_spmd_mix.cpp, for both aiv0 and aiv1). */
#include "scene_kernel.h"

#define FLOATS_PER_CACHE_LINE 16
#define SLOTS_PER_BLOCK 3

SCENE_KERNEL_ENTRY(ka) {
    float *out = SCENE_ARG_PTR(ka, 0, float);
    int64_t base_cl = SCENE_ARG_I64(ka, 1);
    int64_t sub_block_id = (int64_t)scene_sub_block_id(ka);
    int64_t offset =
        (base_cl + (int64_t)ka->block_idx * SLOTS_PER_BLOCK + 1 + sub_block_id) * FLOATS_PER_CACHE_LINE;
    out[offset] = (float)ka->block_idx;
}
