/* The context tail of a chip_tensor argument array: args[48] points at the
 * block's local context, args[49] at the core's global context. Each
 * runtime's intrinsic.h names the local context's fields (a5 prefixes them
 * with s_) and defines RUNTIME_TAG. */
#pragma once
#include <cstdint>

#ifndef __gm__
#define __gm__
#endif
#ifndef __aicore__
#define __aicore__
#endif

struct AsyncCtx {
    volatile uint32_t *completion_count;
    volatile int32_t *completion_error_code;
    volatile void *completion_entries;
    uint32_t completion_capacity;
    uint64_t task_token;
};

static constexpr int32_t SPMD_LOCAL_CONTEXT_INDEX = 48;
static constexpr int32_t SPMD_GLOBAL_CONTEXT_INDEX = 49;
