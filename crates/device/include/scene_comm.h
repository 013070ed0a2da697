/*
 * scene_comm.h - the communication context of a level-3 (multi-card) scene,
 * as kernels see it. Included by scene_kernel.h; usable from C and C++,
 * freestanding.
 *
 * A level-3 case runs one chip callable per rank, each rank on its own card.
 * The runtime allocates a communication domain for the group: one window of
 * `window_size` bytes per rank (zeroed, addressable by every rank) and
 * SCENE_COMM_SIGNAL_SLOTS int32 signal slots per rank (zeroed). Kernels get
 * the context through `scene_comm_ctx(ka)`:
 *
 *     #include "scene_kernel.h"
 *     SCENE_KERNEL_ENTRY(ka) {
 *         const SceneCommCtx *c = scene_comm_ctx(ka);
 *         if (!c) return;
 *         float *mine = (float *)scene_comm_local_ptr(c, 0);
 *         mine[0] = (float)c->rank;
 *         uint32_t right = (c->rank + 1) % c->nranks;
 *         uint32_t left = (c->rank + c->nranks - 1) % c->nranks;
 *         if (scene_comm_signal(c, right, 0, 1) != SCENE_RT_OK) return;
 *         if (scene_comm_wait_from(c, left, 0, 1) != SCENE_RT_OK) return;
 *         const float *theirs = (const float *)scene_comm_peer_ptr(c, left, 0);
 *         mine[1] = theirs[0];
 *     }
 *
 * Memory ordering: `scene_comm_signal` is a release operation and a
 * successful `scene_comm_wait*` an acquire one, as TNOTIFY / TWAIT on the
 * hardware: every write the signalling rank made (to its own window, a
 * peer's window or its tensors) before the signal is visible to the rank
 * whose wait observed it.
 *
 * Failures follow scene_abi.h: signal, wait and barrier return
 * SCENE_RT_OK or a negative SCENE_RT_E_* status (SCENE_RT_E_COMM when the
 * group failed or a wait timed out, SCENE_RT_E_INVALID for a peer or slot
 * that does not exist, which fails the group too). Runtimes before this
 * revision returned -1 for every failure; test `!= SCENE_RT_OK`. The
 * message ("rank 1 waited for rank 0 signal 3 for 30 s") is the run's
 * error. The pointer helpers are queries: NULL for a bad peer or offset.
 *
 * Waits are bounded: past the group's timeout (SCENE_COMM_TIMEOUT, 30 s by
 * default) the case fails with "rank 1 waited for rank 0 signal 3 for 30 s"
 * and every wait of the group returns SCENE_RT_E_COMM at once. A kernel
 * returns when a call fails; its results are not compared.
 */
#ifndef SCENE_COMM_H
#define SCENE_COMM_H

#include <stdint.h>
#include "scene_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ranks of one group, at most. */
#define SCENE_COMM_MAX_RANKS 16
/* int32 signal slots per rank. */
#define SCENE_COMM_SIGNAL_SLOTS 1024

typedef struct SceneCommCtx SceneCommCtx;

struct SceneCommCtx {
    uint32_t rank;        /* this rank, 0 <= rank < nranks */
    uint32_t nranks;
    uint64_t window_size; /* bytes of every rank's window */
    /* Host-visible base of each rank's window; 0 past nranks. */
    uint64_t windows[SCENE_COMM_MAX_RANKS];
    /* Base of each rank's int32 signal slots; 0 past nranks. */
    uint64_t signals[SCENE_COMM_MAX_RANKS];
    uint32_t num_signals; /* SCENE_COMM_SIGNAL_SLOTS */
    uint32_t reserved;    /* 0 (padding) */
    void *domain;         /* the runtime's */
    /* Atomically adds `value` to `peer`'s signal `slot` (release). A status. */
    int32_t (*signal)(const SceneCommCtx *ctx, uint32_t peer, uint32_t slot, int32_t value);
    /* Waits until this rank's signal `slot` >= `expected` (acquire), at most
     * the group's timeout; `from` names the rank expected to signal, or -1.
     * A status: SCENE_RT_E_COMM = timed out or the group failed: return. */
    int32_t (*wait)(const SceneCommCtx *ctx, int32_t from, uint32_t slot, int32_t expected);
};

/* `peer`'s window at byte `offset` (NULL for a bad peer or offset). */
static inline void *scene_comm_peer_ptr(const SceneCommCtx *ctx, uint32_t peer, uint64_t offset) {
    if (peer >= ctx->nranks || peer >= SCENE_COMM_MAX_RANKS || offset >= ctx->window_size)
        return (void *)0;
    return (void *)(uintptr_t)(ctx->windows[peer] + offset);
}

/* This rank's own window at byte `offset`. */
static inline void *scene_comm_local_ptr(const SceneCommCtx *ctx, uint64_t offset) {
    return scene_comm_peer_ptr(ctx, ctx->rank, offset);
}

/* The offset of `ptr` in this rank's window (for the same place in a peer's). */
static inline uint64_t scene_comm_offset(const SceneCommCtx *ctx, const void *ptr) {
    return (uint64_t)(uintptr_t)ptr - ctx->windows[ctx->rank];
}

/* Adds `value` to `peer`'s signal `slot`, after every earlier write. */
static inline int32_t scene_comm_signal(const SceneCommCtx *ctx, uint32_t peer, uint32_t slot,
                                        int32_t value) {
    return ctx->signal(ctx, peer, slot, value);
}

/* Waits for this rank's signal `slot` >= `expected`, from any peer. */
static inline int32_t scene_comm_wait(const SceneCommCtx *ctx, uint32_t slot, int32_t expected) {
    return ctx->wait(ctx, -1, slot, expected);
}

/* As scene_comm_wait; `from` is the rank expected to signal (messages name it). */
static inline int32_t scene_comm_wait_from(const SceneCommCtx *ctx, uint32_t from, uint32_t slot,
                                           int32_t expected) {
    return ctx->wait(ctx, (int32_t)from, slot, expected);
}

/* Window atomics: read-modify-write of one aligned 4- or 8-byte word in
 * any rank's window (simpler's TNOTIFY(.., NotifyOp::AtomicAdd) on a
 * window address), atomic against every other rank's atomics on that word.
 *
 * Memory ordering: relaxed. An atomic orders nothing else, and another
 * rank is only guaranteed to see its result after this rank's next
 * scene_comm_signal (release) has been observed by that rank's wait
 * (acquire): scene_comm_barrier after the atomics is the usual way (as
 * simpler's dispatch kernel needs its pipe_barrier between the AtomicAdd
 * TNOTIFYs and the count_done signals). A plain load or store of a word
 * while another rank may update it atomically is a data race.
 *
 * A status: SCENE_RT_OK, or SCENE_RT_E_INVALID for a bad peer, a word past
 * the end of the window, or an offset not a multiple of the word's size
 * (nothing is written then). `old` (may be NULL) receives the value
 * before the add. */
static inline void *scene_comm_word(const SceneCommCtx *ctx, uint32_t peer, uint64_t offset,
                                    uint64_t size) {
    if (offset % size != 0 || offset + size < offset || offset + size > ctx->window_size)
        return (void *)0;
    return scene_comm_peer_ptr(ctx, peer, offset);
}

static inline int32_t scene_comm_fetch_add_i32(const SceneCommCtx *ctx, uint32_t peer,
                                               uint64_t offset, int32_t value, int32_t *old) {
    int32_t *word = (int32_t *)scene_comm_word(ctx, peer, offset, sizeof(int32_t));
    if (!word) return SCENE_RT_E_INVALID;
    int32_t before = __atomic_fetch_add(word, value, __ATOMIC_RELAXED);
    if (old) *old = before;
    return SCENE_RT_OK;
}

static inline int32_t scene_comm_fetch_add_i64(const SceneCommCtx *ctx, uint32_t peer,
                                               uint64_t offset, int64_t value, int64_t *old) {
    int64_t *word = (int64_t *)scene_comm_word(ctx, peer, offset, sizeof(int64_t));
    if (!word) return SCENE_RT_E_INVALID;
    int64_t before = __atomic_fetch_add(word, value, __ATOMIC_RELAXED);
    if (old) *old = before;
    return SCENE_RT_OK;
}

/* Adds `value` to the f32 at `offset` of `peer`'s window (a compare-and-
 * swap loop: float addition is not associative, so the sum of concurrent
 * adds depends on their order, as on the hardware). */
static inline int32_t scene_comm_atomic_add_f32(const SceneCommCtx *ctx, uint32_t peer,
                                                uint64_t offset, float value) {
    uint32_t *word = (uint32_t *)scene_comm_word(ctx, peer, offset, sizeof(uint32_t));
    if (!word) return SCENE_RT_E_INVALID;
    uint32_t seen = __atomic_load_n(word, __ATOMIC_RELAXED);
    for (;;) {
        union { uint32_t u; float f; } sum;
        sum.u = seen;
        sum.f += value;
        if (__atomic_compare_exchange_n(word, &seen, sum.u, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return SCENE_RT_OK;
    }
}

/* All-rank barrier on slots [base, base + nranks): every rank adds 1 to
 * slot base + rank of every peer, then waits for slot base + peer >= 1 of
 * each peer. Each base is used once per run (slots are never reset).
 * Returns the status of the first call that failed (SCENE_RT_OK if none). */
static inline int32_t scene_comm_barrier(const SceneCommCtx *ctx, uint32_t base) {
    int32_t rc;
    for (uint32_t p = 0; p < ctx->nranks; ++p)
        if (p != ctx->rank && (rc = scene_comm_signal(ctx, p, base + ctx->rank, 1)) != SCENE_RT_OK)
            return rc < 0 ? rc : SCENE_RT_E_COMM;
    for (uint32_t p = 0; p < ctx->nranks; ++p)
        if (p != ctx->rank && (rc = scene_comm_wait_from(ctx, p, base + p, 1)) != SCENE_RT_OK)
            return rc < 0 ? rc : SCENE_RT_E_COMM;
    return SCENE_RT_OK;
}

#ifdef __cplusplus
}
#endif

#endif /* SCENE_COMM_H */
