/*
 * AllReduce, one phase (simpler: collectives/allreduce onephase): stage the
 * input into my window, all-rank barrier, then sum every rank's window.
 *   arg 0: in  [N] f32 (this rank's slice)
 *   arg 1: out [N] f32
 * Window: N floats. Signals: slots [0, nranks) (barrier).
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const SceneCommCtx *c = scene_comm_ctx(ka);
    if (!c) return;
    const float *in = SCENE_ARG_PTR(ka, 0, const float);
    float *out = SCENE_ARG_PTR(ka, 1, float);
    uint64_t n = SCENE_ARG_LEN(ka, 1, float);
    if (n * sizeof(float) > c->window_size) return;
    float *scratch = (float *)scene_comm_local_ptr(c, 0);
    /* Phase 1: stage-in. */
    for (uint64_t i = 0; i < n; ++i) scratch[i] = in[i];
    /* Phase 2: every peer's stage-in is visible after the barrier. */
    if (scene_comm_barrier(c, 0) != 0) return;
    /* Phase 3: accumulate my scratch, then every peer's. */
    for (uint64_t i = 0; i < n; ++i) out[i] = scratch[i];
    for (uint32_t peer = 0; peer < c->nranks; ++peer) {
        if (peer == c->rank) continue;
        const float *remote = (const float *)scene_comm_peer_ptr(c, peer, 0);
        for (uint64_t i = 0; i < n; ++i) out[i] += remote[i];
    }
}
