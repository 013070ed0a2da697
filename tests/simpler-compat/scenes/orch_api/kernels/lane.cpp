/* One kernel of a mixed task: the cube writes lanes[0] = 7, each vector
 * lane lanes[1 + lane] = 10 + lane (args: lanes). */
#include "common.hpp"

extern "C" void kernel_entry(int64_t *args) {
    int32_t *lanes = tensor_data<int32_t>(args, 0);
#ifdef __DAV_CUBE__
    lanes[0] = 7;
#else
    lanes[1 + get_sub_block_id(args)] = 10 + get_sub_block_id(args);
#endif
}
