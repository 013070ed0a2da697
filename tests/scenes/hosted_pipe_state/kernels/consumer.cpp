// Vector kernel: once the cube kernel signalled, stores what the block's
// pipe state holds in seen[block][lane] (-1: no state).
#include "pipe.hpp"

extern "C" void kernel_entry(const SceneKernelArgs *ka) {
    if (scene_cluster_wait(ka, 0) != SCENE_RT_OK) return;
    auto *state = pipe_state();
    *SCENE_AT2(ka, 0, std::int64_t, ka->block_idx, scene_sub_block_id(ka)) = state ? state->load() : -1;
}
