// c = a + b, elementwise.
#include "elementwise.hpp"

SCENE_KERNEL_ENTRY(ka) {
    const float *a = SCENE_ARG_PTR(ka, 0, const float);
    const float *b = SCENE_ARG_PTR(ka, 1, const float);
    scene_cxx::elementwise(ka, a, b, [](float x, const float *y, uint64_t i) {
        return scene_cxx::plus(x, y[i]);
    });
}
