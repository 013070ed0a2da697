/* acc += a (args: a, acc). */
#include "common.hpp"

extern "C" void kernel_entry(int64_t *args) {
    const float *a = tensor_data<float>(args, 0);
    float *acc = tensor_data<float>(args, 1);
    for (uint32_t i = 0; i < tensor_len(args, 1); i++) acc[i] += a[i];
}
