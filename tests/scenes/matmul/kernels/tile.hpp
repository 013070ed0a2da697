// One 128x128 tile, as every kernel of simpler's matmul scene test works
// on (its PTO Tile / GlobalTensor shapes are these constants). A kernel
// checks that its buffers hold exactly one tile before it touches them.
#pragma once
#include "scene_kernel.h"

namespace matmul_st {

constexpr int kRows = 128;
constexpr int kCols = 128;
constexpr uint64_t kTile = uint64_t(kRows) * kCols;

// half: f16 bits in memory, float in registers.
struct Half {
    using Storage = uint16_t;
    static float load(Storage h) { return scene_f16_to_f32(h); }
    static Storage store(float x) { return scene_f32_to_f16(x); }
};

struct Float {
    using Storage = float;
    static float load(Storage x) { return x; }
    static Storage store(float x) { return x; }
};

// Argument `i` as a tile of `T`, or a trap if it is not exactly one tile.
template <typename T, int Rows = kRows, int Cols = kCols>
inline typename T::Storage *tile_arg(const SceneKernelArgs *ka, uint32_t i) {
    if (SCENE_ARG_LEN(ka, i, typename T::Storage) != uint64_t(Rows) * Cols) __builtin_trap();
    return SCENE_ARG_PTR(ka, i, typename T::Storage);
}

static_assert(kTile == 16384, "SIZE = ROWS * COLS");

}  // namespace matmul_st
