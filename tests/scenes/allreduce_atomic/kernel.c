/*
 * AllReduce by window atomics: every rank adds its input into every rank's
 * window with an atomic f32 add, all-rank barrier (which makes the adds
 * visible), then reads its own window. The pattern of simpler's EP
 * dispatch "publish" phase (TNOTIFY(.., AtomicAdd) into peers' windows,
 * then a barrier, then local reads), on a whole vector. Each rank also
 * counts itself into rank 0's i32 and i64 counters with fetch-adds, and
 * checks after the barrier that every rank was counted once; a bad offset
 * must be refused. A check that fails returns early: `out` is then wrong.
 *   arg 0: in  [N] f32 (this rank's slice)
 *   arg 1: out [N] f32
 * Window: N floats, then the two counters (16 bytes), zero at the start of
 * the case. Signals: slots [0, nranks) (barrier).
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const SceneCommCtx *c = scene_comm_ctx(ka);
    if (!c) return;
    const float *in = SCENE_ARG_PTR(ka, 0, const float);
    float *out = SCENE_ARG_PTR(ka, 1, float);
    uint64_t n = SCENE_ARG_LEN(ka, 1, float);
    uint64_t count32 = (n * sizeof(float) + 7) & ~(uint64_t)7, count64 = count32 + 8;
    /* Misaligned, or past the window: refused, nothing written. */
    if (scene_comm_atomic_add_f32(c, c->rank, 2, 1.0f) != SCENE_RT_E_INVALID ||
        scene_comm_fetch_add_i32(c, c->rank, c->window_size, 1, 0) != SCENE_RT_E_INVALID)
        return;
    /* Start at a different peer on every rank, so adds to one word race. */
    for (uint32_t k = 0; k < c->nranks; ++k) {
        uint32_t peer = (c->rank + k) % c->nranks;
        for (uint64_t i = 0; i < n; ++i)
            if (scene_comm_atomic_add_f32(c, peer, i * sizeof(float), in[i]) != SCENE_RT_OK)
                return;
    }
    int32_t before32 = -1;
    int64_t before64 = -1;
    if (scene_comm_fetch_add_i32(c, 0, count32, 1, &before32) != SCENE_RT_OK ||
        scene_comm_fetch_add_i64(c, 0, count64, (int64_t)1 << 40, &before64) != SCENE_RT_OK ||
        before32 < 0 || before32 >= (int32_t)c->nranks)
        return;
    if (scene_comm_barrier(c, 0) != SCENE_RT_OK) return;
    const uint8_t *rank0 = (const uint8_t *)scene_comm_peer_ptr(c, 0, 0);
    if (*(const int32_t *)(rank0 + count32) != (int32_t)c->nranks ||
        *(const int64_t *)(rank0 + count64) != ((int64_t)c->nranks << 40))
        return;
    const float *sum = (const float *)scene_comm_local_ptr(c, 0);
    for (uint64_t i = 0; i < n; ++i) out[i] = sum[i];
}
