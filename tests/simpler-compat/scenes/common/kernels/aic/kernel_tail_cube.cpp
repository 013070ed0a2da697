/* The cube kernel of the mixed task: slot 0 of its block. */
#if !defined(__DAV_CUBE__) || defined(__DAV_VEC__)
#error "a cube kernel is compiled with __DAV_CUBE__ alone"
#endif
#include "../tail.hpp"

extern "C" void kernel_entry(int64_t *args) { write_row(args, 0); }
