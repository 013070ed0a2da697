/* The vector kernel: its row is its block's, or in a mixed task its lane's. */
#if !defined(__DAV_VEC__) || defined(__DAV_CUBE__)
#error "a vector kernel is compiled with __DAV_VEC__ alone"
#endif
#include "../tail.hpp"

extern "C" void kernel_entry(int64_t *args) {
    write_row(args, args[2] == 3 ? 1 + get_sub_block_id(args) : 0);
}
