/* What a block of the tail scenes writes: one row of 8 int32 at
 * row `base + block * stride + slot` of the INOUT tensor args[0]:
 * {block_idx, block_num, runtime and arch tags, core (1 vector, 2 cube),
 *  sub_block_id, the dirs seen, 0, 0}. Scalars: args[1] base, args[2]
 * stride (1: a plain vector task; 3: a mixed one, cube in slot 0, the
 * vector lanes in slots 1 and 2). */
#pragma once
#include <cstdint>

#include "arch_tag.h"
#include "incore_tag.h"
#include "intrinsic.h"
#include "runtime_tag.h"
#include "tensor.h"

/* The original's sim build: its defines and language standard. */
#if PTO_CPU_MAX_THREADS != 1
#error "PTO_CPU_MAX_THREADS=1 is not defined"
#endif
#ifndef NDEBUG
#error "NDEBUG is not defined"
#endif
#ifndef __CPU_SIM
#error "__CPU_SIM is not defined"
#endif
static_assert(__cplusplus > 202002L, "not C++23");

#ifdef __DAV_CUBE__
#define CORE_TAG 2
#else
#define CORE_TAG 1
#endif

static inline void write_row(int64_t *args, int32_t slot) {
    auto *out = reinterpret_cast<ChipTensor *>(args[0]);
    auto *rows = reinterpret_cast<int32_t *>(out->buffer.addr) + out->start_offset;
    const int64_t base = args[1], stride = args[2];
    const int32_t block = get_block_idx(args);
    int32_t *r = rows + 8 * (base + block * stride + slot);
    r[0] = block;
    r[1] = get_block_num(args);
    r[2] = RUNTIME_TAG * 10 + ARCH_TAG;
    r[3] = CORE_TAG;
    r[4] = CORE_TAG == 1 ? get_sub_block_id(args) : 0;
    r[5] = INCORE_DIR_SEEN + RUNTIME_DIR_SEEN;
}
