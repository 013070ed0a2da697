/* c = a + b (args: a, b, c). */
#include "kernel_common.hpp"

extern "C" void kernel_entry(int64_t *args) {
    const float *a = tensor_data<float>(args, 0);
    const float *b = tensor_data<float>(args, 1);
    float *c = tensor_data<float>(args, 2);
    uint32_t lo, hi;
    block_range(args, tensor_len(args, 2), &lo, &hi);
    for (uint32_t i = lo; i < hi; i++) c[i] = a[i] + b[i];
}
