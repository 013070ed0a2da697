/*
 * Mesh ReduceScatter (simpler: collectives/reduce_scatter): stage all
 * nranks input chunks into my window, all-rank barrier, then rank r sums
 * chunk r of every rank's window.
 *   arg 0: in [nranks * C] f32, arg 1: out [C] f32
 * Window: nranks * C floats. Signals: [0, nranks).
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const SceneCommCtx *c = scene_comm_ctx(ka);
    if (!c) return;
    const float *in = SCENE_ARG_PTR(ka, 0, const float);
    float *out = SCENE_ARG_PTR(ka, 1, float);
    uint64_t n = SCENE_ARG_LEN(ka, 1, float);
    uint64_t total = n * c->nranks;
    if (SCENE_ARG_LEN(ka, 0, float) != total || total * sizeof(float) > c->window_size) return;
    float *scratch = (float *)scene_comm_local_ptr(c, 0);
    for (uint64_t i = 0; i < total; ++i) scratch[i] = in[i];
    if (scene_comm_barrier(c, 0) != 0) return;
    const float *mine = scratch + c->rank * n;
    for (uint64_t i = 0; i < n; ++i) out[i] = mine[i];
    for (uint32_t peer = 0; peer < c->nranks; ++peer) {
        if (peer == c->rank) continue;
        const float *remote = (const float *)scene_comm_peer_ptr(c, peer, c->rank * n * sizeof(float));
        for (uint64_t i = 0; i < n; ++i) out[i] += remote[i];
    }
}
