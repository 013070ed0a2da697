/* out = x * scale (args: x, out, scale as f32 bits). */
#include "kernel_common.hpp"

extern "C" void kernel_entry(int64_t *args) {
    const float *x = tensor_data<float>(args, 0);
    float *out = tensor_data<float>(args, 1);
    float scale;
    const uint32_t bits = static_cast<uint32_t>(args[2]);
    memcpy(&scale, &bits, sizeof scale);
    uint32_t lo, hi;
    block_range(args, tensor_len(args, 1), &lo, &hi);
    for (uint32_t i = lo; i < hi; i++) out[i] = x[i] * scale;
}
