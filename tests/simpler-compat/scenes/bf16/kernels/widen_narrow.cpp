/* wide[i] = float(x[i]) * 3; narrow[i] = bf16(float(x[i]) * 3 + 1/3):
 * conversions both ways at run time. The bf16 type is chosen as PTO-ISA
 * chooses it; with a half in its place the values overflow. */
#include <cstdint>

#if defined(__has_include) && __has_include(<stdfloat>) && __cplusplus >= 202302L && defined(__STDCPP_BFLOAT16_T__)
#include <stdfloat>
typedef std::bfloat16_t bf16_t;
#else
typedef _Float16 bf16_t;
#endif

#include "tensor.h"

template <typename T>
static inline T *data(int64_t *args, int i) {
    auto *t = reinterpret_cast<ChipTensor *>(args[i]);
    return reinterpret_cast<T *>(t->buffer.addr) + t->start_offset;
}

extern "C" void kernel_entry(int64_t *args) {
    const bf16_t *x = data<bf16_t>(args, 0);
    float *wide = data<float>(args, 1);
    bf16_t *narrow = data<bf16_t>(args, 2);
    const uint32_t n = reinterpret_cast<ChipTensor *>(args[0])->shapes[0];
    for (uint32_t i = 0; i < n; i++) {
        const float w = static_cast<float>(x[i]) * 3.0f;
        wide[i] = w;
        narrow[i] = static_cast<bf16_t>(w + 1.0f / 3.0f);
    }
}
