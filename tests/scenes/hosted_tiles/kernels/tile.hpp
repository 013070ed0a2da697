// A small tile library in the style of PTO-ISA's CPU backend: fixed-size
// tiles in per-thread "on-chip" storage, loads and stores between global
// memory and tiles, element-wise operations as templates. Hosted C++20:
// it needs <array>, <cmath>, <span>, <vector> and thread_local, which an
// image kernel cannot have.
#pragma once

#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <span>
#include <vector>

#include "scene_kernel.h"

namespace tiles {

template <typename T>
concept Element = std::floating_point<T>;

// One tile: up to Cap elements, `valid` of them in use (the tail tile of a
// row is partial).
template <Element T, std::size_t Cap>
struct Tile {
    alignas(64) std::array<T, Cap> data{};
    std::size_t valid = 0;
};

constexpr std::size_t kTile = 256;

// Each emulated core runs its blocks on one thread, so per-thread storage
// stands for a core's unified buffer.
struct UnifiedBuffer {
    Tile<float, kTile> x, y, z;
    std::vector<std::size_t> trace;  // tile starts this thread touched
};
inline thread_local UnifiedBuffer ub;

template <Element T, std::size_t Cap>
void load(Tile<T, Cap> &t, std::span<const T> gm, std::size_t at) {
    t.valid = std::min(Cap, gm.size() - at);
    for (std::size_t i = 0; i < t.valid; ++i) t.data[i] = gm[at + i];
}

template <Element T, std::size_t Cap>
void store(std::span<T> gm, std::size_t at, const Tile<T, Cap> &t) {
    for (std::size_t i = 0; i < t.valid; ++i) gm[at + i] = t.data[i];
}

template <Element T, std::size_t Cap, typename Op>
void binary(Tile<T, Cap> &out, const Tile<T, Cap> &a, const Tile<T, Cap> &b, Op op) {
    out.valid = a.valid;
    for (std::size_t i = 0; i < a.valid; ++i) out.data[i] = op(a.data[i], b.data[i]);
}

template <Element T, std::size_t Cap, typename Op>
void unary(Tile<T, Cap> &out, const Tile<T, Cap> &a, Op op) {
    out.valid = a.valid;
    for (std::size_t i = 0; i < a.valid; ++i) out.data[i] = op(a.data[i]);
}

// This block's tiles of an n-element tensor: tile k goes to block
// k % block_num, so every block gets whole tiles.
template <typename F>
void for_my_tiles(const SceneKernelArgs *ka, std::size_t n, F f) {
    for (std::size_t at = std::size_t(ka->block_idx) * kTile; at < n;
         at += std::size_t(ka->block_num) * kTile) {
        ub.trace.push_back(at);
        f(at);
    }
}

template <typename T>
std::span<T> arg(const SceneKernelArgs *ka, unsigned i) {
    return {reinterpret_cast<T *>(ka->args[i]), ka->arg_sizes[i] / sizeof(T)};
}

}  // namespace tiles
