// c = a + s, with the scalar s passed as f32 bits.
#include "elementwise.hpp"

SCENE_KERNEL_ENTRY(ka) {
    const float *a = SCENE_ARG_PTR(ka, 0, const float);
    scene_cxx::elementwise(ka, a, scene_arg_f32(ka, 1),
                           [](float x, float s, uint64_t) { return scene_cxx::plus(x, s); });
}
