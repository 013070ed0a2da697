// c = a + s (s an f32 scalar), tile by tile.
#include <bit>

#include "tile.hpp"

extern "C" void kernel_entry(const SceneKernelArgs *ka) {
    using namespace tiles;
    auto a = arg<const float>(ka, 0);
    const float s = std::bit_cast<float>(static_cast<std::uint32_t>(ka->args[1]));
    auto c = arg<float>(ka, 2);
    for_my_tiles(ka, c.size(), [&](std::size_t at) {
        load(ub.x, a, at);
        unary(ub.z, ub.x, [s](float v) { return v + s; });
        store(c, at, ub.z);
    });
}
