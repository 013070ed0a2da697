// A template helper shared by the C++ kernels: out[i] = op(x[i], y) over
// this block's share of the elements. Header-only, so every kernel image
// carries only the instantiations it uses.
#pragma once
#include "scene_kernel.h"

namespace scene_cxx {

// constexpr: folded at compile time, no static constructor.
constexpr uint32_t kOut = 2;

template <typename T, typename Y, typename Op>
inline void elementwise(const SceneKernelArgs *ka, const T *x, Y y, Op op) {
    T *out = SCENE_ARG_PTR(ka, kOut, T);
    uint64_t n = SCENE_ARG_LEN(ka, kOut, T);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { out[i] = op(x[i], y, i); }
}

template <typename T>
constexpr T plus(T a, T b) {
    return a + b;
}

static_assert(plus(1, 2) == 3, "constexpr evaluation works in kernels");

}  // namespace scene_cxx
