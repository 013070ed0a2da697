/*
 * arg 0: the whole window tensor [nranks * C] f32 (in: this rank's
 * window); arg 1: y [nranks * C] f32 (out).
 * Barrier (signals [0, nranks)): every rank's stage task has written its
 * slot before its gather task signals. Then slot p of peer p's window is
 * the same place as slot p of this rank's window argument:
 * scene_comm_offset of a pointer into the argument is the offset in every
 * rank's window.
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const SceneCommCtx *c = scene_comm_ctx(ka);
    if (!c) return;
    const float *window = SCENE_ARG_PTR(ka, 0, const float);
    float *out = SCENE_ARG_PTR(ka, 1, float);
    uint64_t total = SCENE_ARG_LEN(ka, 0, float);
    if (total * sizeof(float) != c->window_size || SCENE_ARG_LEN(ka, 1, float) != total ||
        total % c->nranks != 0)
        return;
    uint64_t n = total / c->nranks;
    if (scene_comm_barrier(c, 0) != SCENE_RT_OK) return;
    for (uint32_t p = 0; p < c->nranks; ++p) {
        uint64_t offset = scene_comm_offset(c, window + p * n);
        const float *remote = (const float *)scene_comm_peer_ptr(c, p, offset);
        if (!remote) return;
        for (uint64_t i = 0; i < n; ++i) out[p * n + i] = remote[i];
    }
}
