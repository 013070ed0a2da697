/* The original's kernel convention: args[i] is the address of a tensor
 * record (tensors first) or a scalar's 64 bits; the context tail gives the
 * block. */
#pragma once
#include <cstdint>
#include <cstring>

#include "intrinsic.h"
#include "tensor.h"

template <typename T>
static inline T *tensor_data(int64_t *args, int i) {
    auto *t = reinterpret_cast<ChipTensor *>(args[i]);
    return reinterpret_cast<T *>(t->buffer.addr) + t->start_offset;
}

static inline uint32_t tensor_len(int64_t *args, int i) {
    return reinterpret_cast<ChipTensor *>(args[i])->shapes[0];
}

/* This block's share [lo, hi) of n elements. */
static inline void block_range(int64_t *args, uint32_t n, uint32_t *lo, uint32_t *hi) {
    const uint32_t blocks = static_cast<uint32_t>(get_block_num(args));
    const uint32_t b = static_cast<uint32_t>(get_block_idx(args));
    const uint32_t per = n / blocks;
    *lo = b * per;
    *hi = b + 1 == blocks ? n : (b + 1) * per;
}
