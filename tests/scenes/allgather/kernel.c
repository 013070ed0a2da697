/*
 * Mesh AllGather (simpler: collectives/allgather): stage my input into my
 * window, all-rank barrier, then read every rank's window into its slot
 * of the output.
 *   arg 0: in [C] f32, arg 1: out [nranks * C] f32
 * Window: C floats. Signals: [0, nranks).
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const SceneCommCtx *c = scene_comm_ctx(ka);
    if (!c) return;
    const float *in = SCENE_ARG_PTR(ka, 0, const float);
    float *out = SCENE_ARG_PTR(ka, 1, float);
    uint64_t n = SCENE_ARG_LEN(ka, 0, float);
    if (n * sizeof(float) > c->window_size || SCENE_ARG_LEN(ka, 1, float) != n * c->nranks) return;
    float *scratch = (float *)scene_comm_local_ptr(c, 0);
    for (uint64_t i = 0; i < n; ++i) scratch[i] = in[i];
    if (scene_comm_barrier(c, 0) != 0) return;
    for (uint32_t r = 0; r < c->nranks; ++r) {
        const float *remote = (const float *)scene_comm_peer_ptr(c, r, 0);
        for (uint64_t i = 0; i < n; ++i) out[r * n + i] = remote[i];
    }
}
