/*
 * Stage 2 (AIV): y = sum over ranks of partial (simpler:
 * kernels/aiv/kernel_allreduce_sum.cpp), the four-phase collective:
 * publish my partial into slot `rank` of every peer's mailbox (remote
 * writes), notify each peer's signal `rank`, wait for every peer's signal
 * in mine, accumulate the mailbox.
 *   arg 0: partial [M * N] f32, arg 1: y [M * N] f32
 * Window: nranks * M * N floats (the mailbox). Signals: [0, nranks).
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const SceneCommCtx *c = scene_comm_ctx(ka);
    if (!c) return;
    const float *partial = SCENE_ARG_PTR(ka, 0, const float);
    float *y = SCENE_ARG_PTR(ka, 1, float);
    uint64_t n = SCENE_ARG_LEN(ka, 1, float);
    if (n * c->nranks * sizeof(float) > c->window_size) return;
    uint64_t slot_bytes = n * sizeof(float);
    /* Phase 1: publish. */
    for (uint32_t peer = 0; peer < c->nranks; ++peer) {
        if (peer == c->rank) continue;
        float *remote = (float *)scene_comm_peer_ptr(c, peer, c->rank * slot_bytes);
        for (uint64_t i = 0; i < n; ++i) remote[i] = partial[i];
    }
    /* Phase 2: notify every peer, wait for every peer. */
    for (uint32_t peer = 0; peer < c->nranks; ++peer)
        if (peer != c->rank && scene_comm_signal(c, peer, c->rank, 1) != 0) return;
    for (uint32_t peer = 0; peer < c->nranks; ++peer)
        if (peer != c->rank && scene_comm_wait_from(c, peer, peer, 1) != 0) return;
    /* Phase 3: accumulate. */
    for (uint64_t i = 0; i < n; ++i) y[i] = partial[i];
    for (uint32_t peer = 0; peer < c->nranks; ++peer) {
        if (peer == c->rank) continue;
        const float *slot = (const float *)scene_comm_local_ptr(c, peer * slot_bytes);
        for (uint64_t i = 0; i < n; ++i) y[i] += slot[i];
    }
}
