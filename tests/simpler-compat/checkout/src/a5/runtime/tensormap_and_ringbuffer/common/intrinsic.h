/* The tensormap_and_ringbuffer runtime's kernel context (a5): its tag and accessors. */
#pragma once
#include "common/context_tail.h"

#define RUNTIME_TAG 1

struct GlobalContext {
    int32_t sub_block_id;
    uint64_t dma_workspace[2];
};

struct LocalContext {
    int32_t s_block_idx;
    int32_t s_block_num;
    AsyncCtx async_ctx;
};

static __aicore__ inline int32_t get_block_idx(__gm__ int64_t *args) {
    return reinterpret_cast<__gm__ LocalContext *>(args[SPMD_LOCAL_CONTEXT_INDEX])->s_block_idx;
}
static __aicore__ inline int32_t get_block_num(__gm__ int64_t *args) {
    return reinterpret_cast<__gm__ LocalContext *>(args[SPMD_LOCAL_CONTEXT_INDEX])->s_block_num;
}
static __aicore__ inline int32_t get_sub_block_id(__gm__ int64_t *args) {
    return reinterpret_cast<__gm__ GlobalContext *>(args[SPMD_GLOBAL_CONTEXT_INDEX])->sub_block_id;
}
