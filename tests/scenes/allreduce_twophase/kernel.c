/*
 * AllReduce, two phases (simpler: collectives/allreduce twophase): mesh
 * reduce-scatter then mesh allgather over N / nranks chunks.
 *   arg 0: in  [N] f32, arg 1: out [N] f32 (N divisible by nranks)
 * Window: N floats (nranks chunk slots). Signals: [0, 16) reduce-scatter
 * barrier, [16, 32) allgather barrier.
 */
#include "scene_kernel.h"

#define MAX_RANKS 16

SCENE_KERNEL_ENTRY(ka) {
    const SceneCommCtx *c = scene_comm_ctx(ka);
    if (!c) return;
    const float *in = SCENE_ARG_PTR(ka, 0, const float);
    float *out = SCENE_ARG_PTR(ka, 1, float);
    uint64_t n = SCENE_ARG_LEN(ka, 1, float);
    uint32_t p = c->nranks, me = c->rank;
    if (p < 2 || n % p != 0 || n * sizeof(float) > c->window_size) return;
    uint64_t chunk = n / p;
    float *scratch = (float *)scene_comm_local_ptr(c, 0);
    /* Phase 1: stage-in. */
    for (uint64_t i = 0; i < n; ++i) scratch[i] = in[i];
    /* Phase 2: reduce-scatter barrier. */
    if (scene_comm_barrier(c, 0) != 0) return;
    /* Phase 3: reduce chunk `me` from every peer into my scratch. */
    float *mine = scratch + me * chunk;
    for (uint32_t peer = 0; peer < p; ++peer) {
        if (peer == me) continue;
        const float *remote = (const float *)scene_comm_peer_ptr(c, peer, me * chunk * sizeof(float));
        for (uint64_t i = 0; i < chunk; ++i) mine[i] += remote[i];
    }
    /* Phase 4: allgather barrier: every reduced chunk is in place. */
    if (scene_comm_barrier(c, MAX_RANKS) != 0) return;
    /* Phase 5: read chunk r from its owner, rank r. */
    for (uint32_t r = 0; r < p; ++r) {
        const float *remote = (const float *)scene_comm_peer_ptr(c, r, r * chunk * sizeof(float));
        for (uint64_t i = 0; i < chunk; ++i) out[r * chunk + i] = remote[i];
    }
}
