// Cube kernel: adds block + 1 to the block's pipe state, then signals
// flag 0 of both vector kernels.
#include "pipe.hpp"

extern "C" void kernel_entry(const SceneKernelArgs *ka) {
    if (auto *state = pipe_state()) state->fetch_add(ka->block_idx + 1);
    scene_cluster_signal(ka, SCENE_SLOT_AIV0, 0);
    scene_cluster_signal(ka, SCENE_SLOT_AIV1, 0);
}
