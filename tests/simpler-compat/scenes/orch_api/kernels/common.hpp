/* Kernels of the orch_api scene, in the original's convention: args[i]
 * is a tensor record (tensors first) or a scalar's bits, and the context
 * tail gives the block. */
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

static inline float scalar_f32(int64_t *args, int i) {
    float f;
    uint32_t bits = static_cast<uint32_t>(args[i]);
    memcpy(&f, &bits, sizeof f);
    return f;
}
