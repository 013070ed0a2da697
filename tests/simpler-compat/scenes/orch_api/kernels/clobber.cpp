/* dst[0] = 999 (args: dst): only when its predicate holds. */
#include "common.hpp"

extern "C" void kernel_entry(int64_t *args) { tensor_data<float>(args, 0)[0] = 999.0f; }
