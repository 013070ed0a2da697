/*
 * Ring AllReduce (simpler: collectives/allreduce ring): (P-1) reduce-scatter
 * steps then (P-1) allgather steps; each step a neighbour barrier (notify
 * the right neighbour, wait for the left one), then read the left
 * neighbour's chunk slot.
 *   arg 0: in  [N] f32, arg 1: out [N] f32 (N divisible by nranks)
 * Window: N floats (P chunk slots). Signals: row `round` (16 slots each),
 * slot round * 16 + sender, 2 * (P - 1) rows.
 */
#include "scene_kernel.h"

#define MAX_RANKS 16

/* Notify the right neighbour (who reads my chunks), wait for the left one
 * (whose chunks I read). Each row is used once. */
static int neighbor_barrier(const SceneCommCtx *c, uint32_t round, uint32_t left) {
    uint32_t right = (c->rank + 1) % c->nranks;
    if (scene_comm_signal(c, right, round * MAX_RANKS + c->rank, 1) != 0) return -1;
    return scene_comm_wait_from(c, left, round * MAX_RANKS + left, 1);
}

SCENE_KERNEL_ENTRY(ka) {
    const SceneCommCtx *c = scene_comm_ctx(ka);
    if (!c) return;
    const float *in = SCENE_ARG_PTR(ka, 0, const float);
    float *out = SCENE_ARG_PTR(ka, 1, float);
    uint64_t n = SCENE_ARG_LEN(ka, 1, float);
    uint32_t p = c->nranks, me = c->rank;
    if (p < 2 || n % p != 0 || n * sizeof(float) > c->window_size) return;
    uint64_t chunk = n / p;
    float *chunks = (float *)scene_comm_local_ptr(c, 0);
    uint32_t left = (me + p - 1) % p;
    /* Phase 1: stage-in. */
    for (uint64_t i = 0; i < n; ++i) chunks[i] = in[i];
    uint32_t round = 0;
    /* Phase 2: reduce-scatter: rank r ends with reduced chunk r. */
    for (uint32_t step = 1; step < p; ++step) {
        uint32_t recv_add = (me + 2 * p - step - 1) % p;
        if (neighbor_barrier(c, round++, left) != 0) return;
        uint32_t left_send = (left + p - step) % p;
        const float *remote =
            (const float *)scene_comm_peer_ptr(c, left, left_send * chunk * sizeof(float));
        float *acc = chunks + recv_add * chunk;
        for (uint64_t i = 0; i < chunk; ++i) acc[i] += remote[i];
    }
    /* Phase 3: allgather: collect every reduced chunk from the left. */
    for (uint32_t step = 1; step < p; ++step) {
        uint32_t recv = (me + p - step) % p;
        if (neighbor_barrier(c, round++, left) != 0) return;
        uint32_t left_send = (left + p - step + 1) % p;
        const float *remote =
            (const float *)scene_comm_peer_ptr(c, left, left_send * chunk * sizeof(float));
        float *dst = chunks + recv * chunk;
        for (uint64_t i = 0; i < chunk; ++i) dst[i] = remote[i];
    }
    /* Phase 4: stage-out. */
    for (uint64_t i = 0; i < n; ++i) out[i] = chunks[i];
}
