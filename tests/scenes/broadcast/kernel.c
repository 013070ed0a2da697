/*
 * Mesh Broadcast (simpler: collectives/broadcast): the root stages its
 * input into its window, all-rank barrier, every rank reads the root's
 * window.
 *   arg 0: in [C] f32, arg 1: out [C] f32, arg 2: root (i64 scalar)
 * Window: C floats. Signals: [0, nranks).
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const SceneCommCtx *c = scene_comm_ctx(ka);
    if (!c) return;
    const float *in = SCENE_ARG_PTR(ka, 0, const float);
    float *out = SCENE_ARG_PTR(ka, 1, float);
    uint64_t n = SCENE_ARG_LEN(ka, 1, float);
    int64_t root = SCENE_ARG_I64(ka, 2);
    if (root < 0 || root >= (int64_t)c->nranks || n * sizeof(float) > c->window_size) return;
    if (c->rank == (uint32_t)root) {
        float *scratch = (float *)scene_comm_local_ptr(c, 0);
        for (uint64_t i = 0; i < n; ++i) scratch[i] = in[i];
    }
    if (scene_comm_barrier(c, 0) != 0) return;
    const float *src = (const float *)scene_comm_peer_ptr(c, (uint32_t)root, 0);
    for (uint64_t i = 0; i < n; ++i) out[i] = src[i];
}
