/* gate[2] = y[0] as an integer (args: y, gate). */
#include "common.hpp"

extern "C" void kernel_entry(int64_t *args) {
    tensor_data<int32_t>(args, 1)[2] = static_cast<int32_t>(tensor_data<float>(args, 0)[0]);
}
