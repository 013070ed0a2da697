/* dst = src (args: src, dst). */
#include "common.hpp"

extern "C" void kernel_entry(int64_t *args) {
    const float *src = tensor_data<float>(args, 0);
    float *dst = tensor_data<float>(args, 1);
    for (uint32_t i = 0; i < tensor_len(args, 1); i++) dst[i] = src[i];
}
