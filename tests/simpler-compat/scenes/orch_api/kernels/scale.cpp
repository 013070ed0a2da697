/* out = x * scale, this block's share of the elements (args: x, out, scale). */
#include "common.hpp"

extern "C" void kernel_entry(int64_t *args) {
    const float *x = tensor_data<float>(args, 0);
    float *out = tensor_data<float>(args, 1);
    const uint32_t n = tensor_len(args, 1);
    const uint32_t blocks = static_cast<uint32_t>(get_block_num(args));
    const uint32_t per = n / blocks, b = static_cast<uint32_t>(get_block_idx(args));
    for (uint32_t i = b * per; i < (b + 1 == blocks ? n : (b + 1) * per); i++)
        out[i] = x[i] * scalar_f32(args, 2);
}
