/*
 * Bidirectional ring AllReduce (simpler: collectives/allreduce
 * bidirectional_ring): every chunk is split in two halves; ring 0 moves
 * first halves clockwise (push to the right), ring 1 second halves
 * counter-clockwise (push to the left), both in the same rounds: (P-1)
 * reduce-scatter rounds pushing with an add into the neighbour's slot,
 * (P-1) allgather rounds pushing copies, a final barrier, then stage-out.
 * Each round starts with a barrier with both neighbours.
 *   arg 0: in [N] f32, arg 1: out [N] f32 (N divisible by 2 * nranks)
 * Window: N floats (ring 0's P sub-chunks, then ring 1's). Signals: row
 * `round` (16 slots each), slot round * 16 + sender, 2 * (P - 1) + 1 rows.
 */
#include "scene_kernel.h"

#define MAX_RANKS 16

/* Notify both neighbours, wait for both (once when they are the same). */
static int neighbor_barrier(const SceneCommCtx *c, uint32_t round, uint32_t left, uint32_t right) {
    uint32_t slot = round * MAX_RANKS;
    if (scene_comm_signal(c, right, slot + c->rank, 1) != 0) return -1;
    if (left != right && scene_comm_signal(c, left, slot + c->rank, 1) != 0) return -1;
    if (scene_comm_wait_from(c, left, slot + left, 1) != 0) return -1;
    if (left != right && scene_comm_wait_from(c, right, slot + right, 1) != 0) return -1;
    return 0;
}

SCENE_KERNEL_ENTRY(ka) {
    const SceneCommCtx *c = scene_comm_ctx(ka);
    if (!c) return;
    const float *in = SCENE_ARG_PTR(ka, 0, const float);
    float *out = SCENE_ARG_PTR(ka, 1, float);
    uint64_t n = SCENE_ARG_LEN(ka, 1, float);
    uint32_t p = c->nranks, me = c->rank;
    if (p < 2 || n % (2 * p) != 0 || n * sizeof(float) > c->window_size) return;
    uint64_t sub = n / (2 * p), chunk = 2 * sub, stride = p * sub;
    float *ring0 = (float *)scene_comm_local_ptr(c, 0);
    float *ring1 = ring0 + stride;
    uint32_t left = (me + p - 1) % p, right = (me + 1) % p;
    /* Phase 1: stage-in: first half of chunk k to ring0[k], second to ring1[k]. */
    for (uint32_t k = 0; k < p; ++k) {
        for (uint64_t i = 0; i < sub; ++i) {
            ring0[k * sub + i] = in[k * chunk + i];
            ring1[k * sub + i] = in[k * chunk + sub + i];
        }
    }
    /* Phase 2: reduce-scatter, pushing with an add. */
    for (uint32_t step = 1; step < p; ++step) {
        if (neighbor_barrier(c, step - 1, left, right) != 0) return;
        uint32_t idx0 = (me + p - step) % p;
        float *dst0 = (float *)scene_comm_peer_ptr(c, right, idx0 * sub * sizeof(float));
        for (uint64_t i = 0; i < sub; ++i) dst0[i] += ring0[idx0 * sub + i];
        uint32_t idx1 = (me + step) % p;
        float *dst1 = (float *)scene_comm_peer_ptr(c, left, (stride + idx1 * sub) * sizeof(float));
        for (uint64_t i = 0; i < sub; ++i) dst1[i] += ring1[idx1 * sub + i];
    }
    /* Phase 3: allgather, pushing copies. */
    for (uint32_t step = 1; step < p; ++step) {
        if (neighbor_barrier(c, p - 1 + step - 1, left, right) != 0) return;
        uint32_t idx0 = (me + p - step + 1) % p;
        float *dst0 = (float *)scene_comm_peer_ptr(c, right, idx0 * sub * sizeof(float));
        for (uint64_t i = 0; i < sub; ++i) dst0[i] = ring0[idx0 * sub + i];
        uint32_t idx1 = (me + step - 1) % p;
        float *dst1 = (float *)scene_comm_peer_ptr(c, left, (stride + idx1 * sub) * sizeof(float));
        for (uint64_t i = 0; i < sub; ++i) dst1[i] = ring1[idx1 * sub + i];
    }
    /* Final barrier: every push into my window is visible. */
    if (neighbor_barrier(c, 2 * (p - 1), left, right) != 0) return;
    /* Phase 4: stage-out. */
    for (uint32_t k = 0; k < p; ++k) {
        for (uint64_t i = 0; i < sub; ++i) {
            out[k * chunk + i] = ring0[k * sub + i];
            out[k * chunk + sub + i] = ring1[k * sub + i];
        }
    }
}
