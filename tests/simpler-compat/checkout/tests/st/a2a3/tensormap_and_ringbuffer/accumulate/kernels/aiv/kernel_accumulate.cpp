/* acc += x; count[0] = the elements added (args: acc, x, count). */
#include "../../../vector_scale/kernels/aiv/kernel_common.hpp"

extern "C" void kernel_entry(int64_t *args) {
    float *acc = tensor_data<float>(args, 0);
    const float *x = tensor_data<float>(args, 1);
    int32_t *count = tensor_data<int32_t>(args, 2);
    const uint32_t n = tensor_len(args, 0);
    for (uint32_t i = 0; i < n; i++) acc[i] += x[i];
    count[0] = static_cast<int32_t>(n);
}
