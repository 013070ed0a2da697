// c = a * b, elementwise.
#include "elementwise.hpp"

namespace {
template <typename T>
struct Times {
    constexpr T operator()(T x, const T *y, uint64_t i) const { return x * y[i]; }
};
}  // namespace

SCENE_KERNEL_ENTRY(ka) {
    const float *a = SCENE_ARG_PTR(ka, 0, const float);
    const float *b = SCENE_ARG_PTR(ka, 1, const float);
    scene_cxx::elementwise(ka, a, b, Times<float>{});
}
