// c = a + b, tile by tile.
#include "tile.hpp"

extern "C" void kernel_entry(const SceneKernelArgs *ka) {
    using namespace tiles;
    auto a = arg<const float>(ka, 0);
    auto b = arg<const float>(ka, 1);
    auto c = arg<float>(ka, 2);
    for_my_tiles(ka, c.size(), [&](std::size_t at) {
        load(ub.x, a, at);
        load(ub.y, b, at);
        binary(ub.z, ub.x, ub.y, [](float p, float q) { return p + q; });
        store(c, at, ub.z);
    });
}
