// The pipe state of key 42 of the calling kernel's mixed block, found as
// PTO-ISA's CPU backend finds it (dlsym of the simulator's hook).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <dlfcn.h>
#include "scene_kernel.h"

inline std::atomic<std::int64_t> *pipe_state() {
    using Hook = void *(*)(std::uint64_t, std::size_t);
    auto hook = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "pto_sim_get_pipe_shared_state"));
    return hook ? static_cast<std::atomic<std::int64_t> *>(hook(42, 64)) : nullptr;
}
