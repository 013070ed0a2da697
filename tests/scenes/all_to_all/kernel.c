/*
 * Push-based mesh AllToAll (simpler: collectives/all_to_all): rank r pushes
 * chunk d of its input into slot r of rank d's window (a remote write),
 * all-rank barrier, then copies its window's slots to its output.
 *   arg 0: in [nranks * C] f32, arg 1: out [nranks * C] f32
 * Window: nranks * C floats. Signals: [0, nranks).
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const SceneCommCtx *c = scene_comm_ctx(ka);
    if (!c) return;
    const float *in = SCENE_ARG_PTR(ka, 0, const float);
    float *out = SCENE_ARG_PTR(ka, 1, float);
    uint64_t total = SCENE_ARG_LEN(ka, 1, float);
    uint64_t n = total / c->nranks;
    if (SCENE_ARG_LEN(ka, 0, float) != total || total * sizeof(float) > c->window_size) return;
    for (uint32_t dest = 0; dest < c->nranks; ++dest) {
        float *slot = (float *)scene_comm_peer_ptr(c, dest, c->rank * n * sizeof(float));
        for (uint64_t i = 0; i < n; ++i) slot[i] = in[dest * n + i];
    }
    /* The release of every signal covers the pushes before it. */
    if (scene_comm_barrier(c, 0) != 0) return;
    const float *window = (const float *)scene_comm_local_ptr(c, 0);
    for (uint64_t i = 0; i < total; ++i) out[i] = window[i];
}
