/* The tensor record of the chip_tensor convention (128 bytes, 64-aligned),
 * as the original lays it out; written for the harness's tests. */
#pragma once
#include <cstddef>
#include <cstdint>

struct ChipBuffer {
    uint64_t addr;
    uint64_t size;
};

struct alignas(64) ChipTensor {
    ChipBuffer buffer;
    uint64_t owner_task_id;
    uint64_t start_offset;
    int32_t version;
    uint32_t ndims;
    uint8_t dtype;
    bool manual_dep;
    bool is_contiguous;
    uint8_t address_space;
    uint32_t shapes[5];
    uint64_t extent_elem_cache;
    uint32_t strides[5];
    uint8_t reserved[36];
};
static_assert(sizeof(ChipTensor) == 128 && offsetof(ChipTensor, shapes) == 44);
static_assert(offsetof(ChipTensor, strides) == 72);
