/*
 * scene_orch.h - what an orchestration author writes against.
 *
 * An orchestration is a host shared object. Its entry function (named in
 * scene.toml) receives a context and the run's arguments in signature order,
 * allocates intermediates, and submits tasks to incore kernels by func_id.
 * The runtime derives task dependencies from argument directions over
 * overlapping buffers (read-after-write, write-after-read, write-after-write),
 * so the orchestration only states what each task reads and writes.
 *
 *     SCENE_ORCH_ENTRY(my_orch, ctx, args, nargs) {
 *         (void)nargs;
 *         uint64_t tmp;
 *         int32_t rc = scene_orch_malloc(ctx, args[0].size, &tmp);
 *         if (rc != SCENE_RT_OK) return rc;
 *         SceneTaskArg t[3] = { SCENE_IN(args[0]), SCENE_IN(args[1]),
 *                               SCENE_OUT_BUF(tmp, args[0].size) };
 *         return scene_orch_submit(ctx, 0, 8, t, 3);
 *     }
 *
 * The orchestration calls the runtime only through `ctx->ops`, so the shared
 * object has no undefined symbols on the runtime.
 *
 * Conventions: scene_abi.h. Every scene_orch_* call returns a status
 * (SCENE_RT_OK or SCENE_RT_E_*); a failed one also fails the run, and
 * scene_orch_last_error(ctx) is its message. scene_orch_desc is a query
 * (NULL: no metadata), scene_orch_fail reports. The helpers check the
 * runtime's version per feature (scene_orch_has_v2, scene_orch_has_v3):
 * what an older runtime lacks falls back or returns SCENE_RT_E_ABI.
 * Deprecated (kept, working): scene_orch_alloc (use scene_orch_malloc),
 * SceneTaskArgV2::reserved (use view_error).
 *
 * ABI v2 (`ctx->ops->abi_version >= 2`) adds, without changing v1:
 * - tensor metadata: `scene_orch_desc(ctx, i)` is run argument i's dtype,
 *   rank, shape and strides (NULL for scalars);
 * - task arguments with metadata and views (`SceneTaskArgV2`,
 *   `scene_task_arg`, `scene_task_view`, `scene_orch_submit_v2`): kernels
 *   receive each argument's view (base pointer at the view's first element,
 *   shape, strides); dependencies come from the bytes a view spans (its
 *   bounding range: two disjoint row blocks never serialise, two column
 *   blocks of one matrix conservatively do);
 * - data access from the orchestration: `scene_orch_read` waits for every
 *   submitted task that writes the range (only those) and copies it out;
 *   `scene_orch_write` waits for every in-flight task that reads or writes
 *   it, then copies in; later tasks see the value; `scene_orch_fill` gives
 *   a buffer an initial value;
 * - memory scopes: buffers allocated between `scene_orch_begin_scope` and
 *   `scene_orch_end_scope` are freed once every task using them finished
 *   (`SCENE_SCOPE(ctx) { ... }`); `scene_orch_free` frees one buffer the
 *   same way. An allocation that finds memory full waits for such frees.
 *   A scope left open, a double free, or a task using a freed buffer fails
 *   the run with a message.
 *
 *     SCENE_ORCH_ENTRY(rows, ctx, args, nargs) {
 *         (void)nargs;
 *         const SceneTensorDesc *x = scene_orch_desc(ctx, 0); // [M, N]
 *         for (uint64_t r = 0; r < x->shape[0]; r += 16) {
 *             uint64_t off[2] = {r, 0}, shape[2] = {16, x->shape[1]};
 *             SceneTaskArgV2 t[2] = {
 *                 scene_task_view(scene_task_arg(ctx, args, 0, SCENE_DIR_IN), off, shape),
 *                 scene_task_view(scene_task_arg(ctx, args, 1, SCENE_DIR_OUT), off, shape)};
 *             int32_t rc = scene_orch_submit_v2(ctx, 0, 1, t, 2);
 *             if (rc) return rc;
 *         }
 *         return 0;
 *     }
 *
 * ABI v3 (`ctx->ops->abi_version >= 3`) adds, without changing v2:
 * - `scene_orch_malloc(ctx, size, &addr)`: alloc with a status (v2's alloc
 *   said "failed" with address 0; on a v2 runtime the helper maps that to
 *   SCENE_RT_E_OOM);
 * - `scene_orch_last_error(ctx)`: the message of the last failed call on
 *   this thread ("" on a v2 runtime);
 * and, in the header alone (any runtime): `scene_task_view_checked`, a
 * view that leaves its parent refused at once with
 * SCENE_RT_E_OUT_OF_BOUNDS (scene_task_view marks it in `view_error` and
 * the submit fails), and `scene_orch_fail`.
 *
 *     SCENE_ORCH_ENTRY(halves, ctx, args, nargs) {
 *         (void)nargs;
 *         const SceneTensorDesc *x = scene_orch_desc(ctx, 0); // [N]
 *         if (!x) { scene_orch_fail(ctx, "argument 0 has no shape"); return SCENE_RT_E_INVALID; }
 *         uint64_t half = x->shape[0] / 2, tmp;
 *         int32_t rc = scene_orch_malloc(ctx, half * scene_dtype_size(x->dtype), &tmp);
 *         for (uint64_t h = 0; rc == SCENE_RT_OK && h < 2; h++) {
 *             uint64_t off[1] = {h * half}, shape[1] = {half};
 *             SceneTaskArgV2 in = scene_task_arg(ctx, args, 0, SCENE_DIR_IN), t[2];
 *             rc = scene_task_view_checked(&in, off, shape, &t[0]);
 *             t[1] = scene_task_buf(SCENE_DIR_OUT, tmp, x->dtype, 1, shape);
 *             if (rc == SCENE_RT_OK) rc = scene_orch_submit_v2(ctx, 0, 1, t, 2);
 *         }
 *         // A failed call fails the run; scene_orch_last_error(ctx) says why.
 *         return rc;
 *     }
 *
 * ABI v4 (`ctx->ops->abi_version >= 4`) adds, without changing v3, mixed
 * tasks: `scene_orch_submit_mixed(ctx, scene_mixed(aic, aiv0, aiv1), ...)`
 * submits one task whose every block runs a cube kernel and up to two
 * vector kernels together on one cluster, over one argument list (the
 * original's MixedKernels). It is one node of the task graph: its
 * dependencies come from the shared arguments, and it is done when every
 * kernel of every block is. Kernels tell their slot (scene_slot,
 * scene_sub_block_id) and may synchronise within a block through
 * cross-core flags (scene_cluster_signal / scene_cluster_wait,
 * scene_kernel.h).
 *
 *     SCENE_ORCH_ENTRY(mixed, ctx, args, nargs) {
 *         (void)nargs;
 *         SceneTaskArgV2 t[3] = {scene_task_arg(ctx, args, 0, SCENE_DIR_IN),
 *                                scene_task_arg(ctx, args, 1, SCENE_DIR_IN),
 *                                scene_task_arg(ctx, args, 2, SCENE_DIR_OUT)};
 *         // func 0 (aic) + func 1 in both vector slots, 4 blocks.
 *         return scene_orch_submit_mixed(ctx, scene_mixed(0, 1, 1), 4, t, 3);
 *     }
 *
 * ABI v5 adds `scene_orch_comm_rank(ctx, &rank, &nranks)`: a level-3
 * orchestration's rank in its group (docs/level3.md, the window as a
 * tensor).
 *
 * ABI v6 adds, without changing v5, what the original's orchestration API
 * needs (docs/simpler-orchestration.md; include/simpler/ builds it on
 * these):
 * - `scene_orch_submit_task(ctx, &task, &task_id)`: one submit with
 *   everything a task can carry: its kernels (a SceneMixedKernels; every
 *   slot SCENE_NO_KERNEL makes a dependency-only task that runs nothing),
 *   its block count and arguments, explicit dependencies on earlier tasks
 *   by id (on top of the ones its arguments imply), and a dispatch
 *   predicate: an element of device memory compared with a target when
 *   the task becomes ready; false, the task is skipped (it runs no kernel,
 *   its dependents are released as if it had run). `*task_id` is the new
 *   task's id, for later tasks' `deps`;
 * - `scene_orch_memory_window(ctx, &device_base, &host_base, &len)`: where
 *   device memory is mapped in the host (device address device_base + o is
 *   host address host_base + o for o < len), so an orchestration can hand
 *   host pointers to code that reads tensors directly (untracked: no
 *   waiting for the tasks writing them);
 * - `scene_orch_core_counts(ctx, &aic, &aiv)`: the cores of the device the
 *   run uses.
 */
#ifndef SCENE_ORCH_H
#define SCENE_ORCH_H

#include <stdint.h>
#include "scene_runtime.h"
#include "scene_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of SceneOrchOps; it only grows, by additions (scene_abi.h). */
#define SCENE_ORCH_ABI_VERSION 6

/* v4: a slot of SceneMixedKernels that runs no kernel. */
#define SCENE_NO_KERNEL -1

/* v4: the kernels of a mixed task (the original's MixedKernels): a func_id
 * per slot of one cluster, or SCENE_NO_KERNEL. `aic` must be a cube (aic)
 * kernel, `aiv0` and `aiv1` vector (aiv) kernels; at least one is set. */
typedef struct SceneMixedKernels {
    int32_t aic;
    int32_t aiv0;
    int32_t aiv1;
} SceneMixedKernels;

/* v6: dispatch predicate operators (the original's PredicateOp, same
 * order): the predicate element OP target. NONE: always run. */
#define SCENE_PRED_NONE 0
#define SCENE_PRED_EQ 1
#define SCENE_PRED_NE 2
#define SCENE_PRED_GT 3
#define SCENE_PRED_LT 4
#define SCENE_PRED_GE 5
#define SCENE_PRED_LE 6

/* v6: a task's dispatch predicate. When the task is ready (every task it
 * depends on finished), the runtime reads the `elem_size`-byte element at
 * byte `offset` of buffer `addr` as a signed integer (little-endian,
 * sign-extended) and compares it with `target`; false: the task is
 * skipped. The element's writer must be one
 * of the task's dependencies (explicit, or through an argument), or the
 * value read is whatever the memory held then. */
typedef struct ScenePredicate {
    uint32_t op;        /* SCENE_PRED_* */
    uint32_t elem_size; /* 1, 2, 4 or 8 (unused for NONE) */
    uint64_t addr;      /* device address of the buffer (0 for NONE) */
    uint64_t offset;    /* byte offset of the element in the buffer */
    int64_t target;
} ScenePredicate;

typedef struct SceneTaskArgV2 SceneTaskArgV2;

/* v6: one task for scene_orch_submit_task. */
typedef struct SceneSubmit {
    /* A func_id per slot or SCENE_NO_KERNEL; one slot set is a plain task,
     * several a mixed one, none a dependency-only task (no kernel runs;
     * block_num is then ignored). */
    SceneMixedKernels kernels;
    uint32_t block_num;
    uint32_t num_args;
    const SceneTaskArgV2 *args;
    /* Ids of earlier tasks of this run it runs after (finished ones are
     * fine); NULL when num_deps is 0. */
    const uint64_t *deps;
    uint32_t num_deps;
    uint32_t reserved; /* 0 */
    ScenePredicate predicate;
} SceneSubmit;

typedef struct SceneOrchArg {
    uint32_t direction; /* SCENE_DIR_* */
    uint32_t reserved;  /* 0 (padding) */
    uint64_t value;     /* device address or scalar bits */
    uint64_t size;      /* bytes (tensors), 0 (scalars) */
} SceneOrchArg;

typedef SceneOrchArg SceneTaskArg;

/* A v2 task argument: a buffer (device address and size in bytes) and the
 * view of it the kernel gets (`desc`), or a scalar (`value`, desc unused). */
struct SceneTaskArgV2 {
    uint32_t direction; /* SCENE_DIR_* */
    union {
        /* 0, or 1 + d: scene_task_view's dimension d left the parent; the
         * runtime then refuses the task with SCENE_RT_E_OUT_OF_BOUNDS. */
        uint32_t view_error;
        /* Deprecated: the old name of view_error (same storage). */
        SCENE_DEPRECATED("use view_error") uint32_t reserved;
    };
    uint64_t value; /* buffer device address or scalar bits */
    uint64_t size;  /* buffer bytes (tensors), 0 (scalars) */
    SceneTensorDesc desc;
};

typedef struct SceneOrchCtx SceneOrchCtx;

typedef struct SceneOrchOps {
    uint32_t abi_version;
    /* Deprecated (v3: malloc). Allocate `size` bytes of device memory live
     * until the run ends; 0 on failure. */
    uint64_t (*alloc)(SceneOrchCtx *ctx, uint64_t size);
    /* Submit one task of `block_num` blocks to `func_id`. Returns a status. */
    int32_t (*submit)(SceneOrchCtx *ctx, uint32_t func_id, uint32_t block_num,
                      const SceneTaskArg *args, uint32_t num_args);
    /* Report an error message (shown in the run's error); cannot fail. */
    void (*fail)(SceneOrchCtx *ctx, const char *message);
    /* ---- v2 (abi_version >= 2) ---- */
    /* Run argument `index`'s metadata; NULL for scalars or out of range. */
    const SceneTensorDesc *(*arg_desc)(SceneOrchCtx *ctx, uint32_t index);
    /* Submit with metadata and views. Returns a status. */
    int32_t (*submit_v2)(SceneOrchCtx *ctx, uint32_t func_id, uint32_t block_num,
                         const SceneTaskArgV2 *args, uint32_t num_args);
    /* Copy `size` bytes at byte `offset` of buffer `addr` to host memory,
     * once every submitted task writing them finished. */
    int32_t (*read)(SceneOrchCtx *ctx, uint64_t addr, uint64_t offset, void *dst, uint64_t size);
    /* Copy host memory into the buffer once every in-flight task reading or
     * writing the range finished; later tasks see it. */
    int32_t (*write)(SceneOrchCtx *ctx, uint64_t addr, uint64_t offset, const void *src,
                     uint64_t size);
    /* Like write, repeating `pattern` (pattern_size bytes) over the range. */
    int32_t (*fill)(SceneOrchCtx *ctx, uint64_t addr, uint64_t offset, uint64_t size,
                    const void *pattern, uint32_t pattern_size);
    /* Free an allocation once every task using it finished. */
    int32_t (*free)(SceneOrchCtx *ctx, uint64_t addr);
    int32_t (*begin_scope)(SceneOrchCtx *ctx);
    int32_t (*end_scope)(SceneOrchCtx *ctx);
    /* ---- v3 (abi_version >= 3) ---- */
    /* Allocate `size` bytes live until the run ends (or its scope ends, or
     * free) into `*out_addr` (0 on failure). Returns a status. */
    int32_t (*malloc)(SceneOrchCtx *ctx, uint64_t size, uint64_t *out_addr);
    /* Message of the last failed call on this thread ("" if none); never NULL. */
    const char *(*last_error)(SceneOrchCtx *ctx);
    /* ---- v4 (abi_version >= 4) ---- */
    /* Submit one mixed task of `block_num` blocks: every block runs the
     * set slots' kernels together on one cluster, all over the same
     * arguments; one node of the task graph. Returns a status. */
    int32_t (*submit_mixed)(SceneOrchCtx *ctx, const SceneMixedKernels *kernels,
                            uint32_t block_num, const SceneTaskArgV2 *args, uint32_t num_args);
    /* ---- v5 (abi_version >= 5) ---- */
    /* This run's rank and the group's size in its communication domain
     * (level 3), into `*rank` and `*nranks`. SCENE_RT_E_INVALID when the
     * device is not a rank of a domain (level 2); the run goes on. */
    int32_t (*comm_rank)(SceneOrchCtx *ctx, uint32_t *rank, uint32_t *nranks);
    /* ---- v6 (abi_version >= 6) ---- */
    /* Submit `*task` (see SceneSubmit); its id into `*task_id` (may be
     * NULL). Returns a status: SCENE_RT_E_INVALID for an unknown or later
     * dependency id, deps NULL with num_deps > 0, or a bad predicate;
     * otherwise what submit_mixed returns for the same kernels and
     * arguments (SCENE_RT_E_FUNC_ID for an unregistered func_id, ...). */
    int32_t (*submit_task)(SceneOrchCtx *ctx, const SceneSubmit *task, uint64_t *task_id);
    /* Device memory's host mapping: device address `*device_base` + o is
     * host address `*host_base` + o for o < `*len`. Returns a status. */
    int32_t (*memory_window)(SceneOrchCtx *ctx, uint64_t *device_base, uint64_t *host_base,
                             uint64_t *len);
    /* The run's device cores per type into `*aic`, `*aiv`. Returns a status. */
    int32_t (*core_counts)(SceneOrchCtx *ctx, uint32_t *aic, uint32_t *aiv);
} SceneOrchOps;

struct SceneOrchCtx {
    const SceneOrchOps *ops;
    void *runtime; /* opaque */
};

#define SCENE_ORCH_ENTRY(name, ctx, args, nargs)                                  \
    SCENE_EXTERN_C __attribute__((visibility("default"))) int32_t name(SceneOrchCtx *ctx,      \
                                                        const SceneOrchArg *args, \
                                                        uint32_t nargs)

static inline int scene_orch_has_v3(SceneOrchCtx *ctx) { return ctx->ops->abi_version >= 3; }
static inline int scene_orch_has_v4(SceneOrchCtx *ctx) { return ctx->ops->abi_version >= 4; }
static inline int scene_orch_has_v5(SceneOrchCtx *ctx) { return ctx->ops->abi_version >= 5; }
static inline int scene_orch_has_v6(SceneOrchCtx *ctx) { return ctx->ops->abi_version >= 6; }

/* v6 (SCENE_RT_E_ABI before): submit one task with explicit dependencies
 * and a dispatch predicate; `*task_id` (may be NULL) is its id. */
static inline int32_t scene_orch_submit_task(SceneOrchCtx *ctx, const SceneSubmit *task,
                                             uint64_t *task_id) {
    if (!scene_orch_has_v6(ctx)) return SCENE_RT_E_ABI;
    return ctx->ops->submit_task(ctx, task, task_id);
}

/* v6 (SCENE_RT_E_ABI before): device memory's host mapping. */
static inline int32_t scene_orch_memory_window(SceneOrchCtx *ctx, uint64_t *device_base,
                                               uint64_t *host_base, uint64_t *len) {
    if (!scene_orch_has_v6(ctx)) return SCENE_RT_E_ABI;
    return ctx->ops->memory_window(ctx, device_base, host_base, len);
}

/* v6 (SCENE_RT_E_ABI before): the run's cores per type. */
static inline int32_t scene_orch_core_counts(SceneOrchCtx *ctx, uint32_t *aic, uint32_t *aiv) {
    if (!scene_orch_has_v6(ctx)) return SCENE_RT_E_ABI;
    return ctx->ops->core_counts(ctx, aic, aiv);
}

/* This run's rank and group size (level 3: what kernels read from their
 * SceneCommCtx; an orchestration that views its own slot of a window
 * tensor needs it). SCENE_RT_E_ABI before v5, SCENE_RT_E_INVALID at level
 * 2 (no communication domain; the run is not failed). */
static inline int32_t scene_orch_comm_rank(SceneOrchCtx *ctx, uint32_t *rank, uint32_t *nranks) {
    if (!scene_orch_has_v5(ctx)) return SCENE_RT_E_ABI;
    return ctx->ops->comm_rank(ctx, rank, nranks);
}

/* The kernels of a mixed task: a func_id per slot, or SCENE_NO_KERNEL. */
static inline SceneMixedKernels scene_mixed(int32_t aic, int32_t aiv0, int32_t aiv1) {
    SceneMixedKernels k;
    k.aic = aic;
    k.aiv0 = aiv0;
    k.aiv1 = aiv1;
    return k;
}

/* Submit a mixed task (v4; SCENE_RT_E_ABI before): the cube kernel and up
 * to two vector kernels of `kernels` run each block together on one
 * cluster over the same `args` (the original's rt_submit_task with
 * MixedKernels); a kernel learns its slot from scene_slot(ka) and its
 * vector lane from scene_sub_block_id(ka). One slot set is a plain task. */
static inline int32_t scene_orch_submit_mixed(SceneOrchCtx *ctx, SceneMixedKernels kernels,
                                              uint32_t block_num, const SceneTaskArgV2 *args,
                                              uint32_t num_args) {
    if (!scene_orch_has_v4(ctx)) return SCENE_RT_E_ABI;
    return ctx->ops->submit_mixed(ctx, &kernels, block_num, args, num_args);
}

/* `size` bytes of device memory into `*out_addr` (0 on failure), live until
 * the run ends. Returns a status (SCENE_RT_E_OOM: memory is full). */
static inline int32_t scene_orch_malloc(SceneOrchCtx *ctx, uint64_t size, uint64_t *out_addr) {
    if (!out_addr) return SCENE_RT_E_INVALID;
    if (scene_orch_has_v3(ctx)) return ctx->ops->malloc(ctx, size, out_addr);
    *out_addr = ctx->ops->alloc(ctx, size);
    return *out_addr ? SCENE_RT_OK : SCENE_RT_E_OOM;
}

/* Deprecated: use scene_orch_malloc. The address, 0 on failure. */
SCENE_DEPRECATED("use scene_orch_malloc: it returns a status")
static inline uint64_t scene_orch_alloc(SceneOrchCtx *ctx, uint64_t size) {
    return ctx->ops->alloc(ctx, size);
}

/* The message of the last failed call on this thread ("" if none, and
 * always on a v2 runtime). Never NULL. */
static inline const char *scene_orch_last_error(SceneOrchCtx *ctx) {
    return scene_orch_has_v3(ctx) ? ctx->ops->last_error(ctx) : "";
}

/* Report an error message: the run fails with it. */
static inline void scene_orch_fail(SceneOrchCtx *ctx, const char *message) {
    ctx->ops->fail(ctx, message);
}
static inline int32_t scene_orch_submit(SceneOrchCtx *ctx, uint32_t func_id, uint32_t block_num,
                                        const SceneTaskArg *args, uint32_t num_args) {
    return ctx->ops->submit(ctx, func_id, block_num, args, num_args);
}

/* ---- v2 helpers ---- */

static inline int scene_orch_has_v2(SceneOrchCtx *ctx) { return ctx->ops->abi_version >= 2; }

static inline const SceneTensorDesc *scene_orch_desc(SceneOrchCtx *ctx, uint32_t index) {
    return scene_orch_has_v2(ctx) ? ctx->ops->arg_desc(ctx, index) : (const SceneTensorDesc *)0;
}

static inline int32_t scene_orch_submit_v2(SceneOrchCtx *ctx, uint32_t func_id,
                                           uint32_t block_num, const SceneTaskArgV2 *args,
                                           uint32_t num_args) {
    if (!scene_orch_has_v2(ctx)) return SCENE_RT_E_ABI;
    return ctx->ops->submit_v2(ctx, func_id, block_num, args, num_args);
}

/* Run argument `index` as a whole, with its metadata. */
static inline SceneTaskArgV2 scene_task_arg(SceneOrchCtx *ctx, const SceneOrchArg *args,
                                            uint32_t index, uint32_t direction) {
    SceneTaskArgV2 t;
    const SceneTensorDesc *d = scene_orch_desc(ctx, index);
    uint64_t bytes[1];
    t.direction = direction;
    t.view_error = 0;
    t.value = args[index].value;
    t.size = args[index].size;
    bytes[0] = args[index].size;
    t.desc = d ? *d : scene_desc_contiguous(SCENE_DTYPE_BYTES, 1, bytes);
    return t;
}

/* A buffer the orchestration allocated, described as a contiguous tensor. */
/* Manual dependency (the original runtime's `manual_dep`): OR'd into a v2
 * tensor argument's direction. The runtime neither orders this access
 * after earlier ones nor orders later ones after it, except that it still
 * waits for the tasks that wrote those bytes through ordinary (tracked)
 * arguments: the tensor's producers. The orchestration orders what else
 * it needs (a scope, a read, another task's tracked argument). Two
 * unordered tasks whose manual accesses overlap, one of them writing,
 * fail the run with a data-race error naming both. */
#define SCENE_DIR_MANUAL_DEP 0x100u

static inline SceneTaskArgV2 scene_task_manual_dep(SceneTaskArgV2 a) {
    a.direction |= SCENE_DIR_MANUAL_DEP;
    return a;
}

static inline SceneTaskArgV2 scene_task_buf(uint32_t direction, uint64_t addr, uint32_t dtype,
                                            uint32_t rank, const uint64_t *shape) {
    SceneTaskArgV2 t;
    t.direction = direction;
    t.view_error = 0;
    t.value = addr;
    t.desc = scene_desc_contiguous(dtype, rank, shape);
    t.size = scene_desc_numel(&t.desc) * scene_dtype_size(dtype);
    return t;
}

/* A view of a task argument: element `offsets` becomes (0, ...), `shape`
 * elements per dimension, same strides. A view that leaves its parent in
 * some dimension d (offsets[d] + shape[d] > the parent's shape[d], even if
 * it stays inside the buffer) is marked (`view_error` = 1 + d, the first
 * such d) and its submit fails naming the dimension; an argument marked
 * already stays so. For the failure at once, as a status, use
 * scene_task_view_checked. */
static inline SceneTaskArgV2 scene_task_view(SceneTaskArgV2 t, const uint64_t *offsets,
                                             const uint64_t *shape) {
    for (uint32_t i = 0; i < t.desc.rank && i < SCENE_MAX_RANK && t.view_error == 0; i++) {
        if (offsets[i] > t.desc.shape[i] || shape[i] > t.desc.shape[i] - offsets[i])
            t.view_error = 1 + i;
    }
    t.desc = scene_desc_view(&t.desc, offsets, shape);
    return t;
}

/* scene_task_view with a status: SCENE_RT_E_OUT_OF_BOUNDS (and `*out`
 * untouched) when the view would leave `*t` (or `*t` is marked already),
 * SCENE_RT_E_INVALID for a NULL pointer. */
static inline int32_t scene_task_view_checked(const SceneTaskArgV2 *t, const uint64_t *offsets,
                                              const uint64_t *shape, SceneTaskArgV2 *out) {
    SceneTaskArgV2 v;
    if (!t || !offsets || !shape || !out) return SCENE_RT_E_INVALID;
    v = scene_task_view(*t, offsets, shape);
    if (v.view_error != 0) return SCENE_RT_E_OUT_OF_BOUNDS;
    *out = v;
    return SCENE_RT_OK;
}

/* Same argument, another direction. */
static inline SceneTaskArgV2 scene_task_dir(SceneTaskArgV2 t, uint32_t direction) {
    t.direction = direction;
    return t;
}

static inline SceneTaskArgV2 scene_task_scalar(uint64_t bits) {
    SceneTaskArgV2 t;
    uint64_t none[1] = {0};
    t.direction = SCENE_DIR_SCALAR;
    t.view_error = 0;
    t.value = bits;
    t.size = 0;
    t.desc = scene_desc_contiguous(SCENE_DTYPE_BYTES, 0, none);
    return t;
}

static inline SceneTaskArgV2 scene_task_scalar_f32(float f) {
    union { uint32_t u; float f; } v;
    v.f = f;
    return scene_task_scalar((uint64_t)v.u);
}

static inline int32_t scene_orch_read(SceneOrchCtx *ctx, uint64_t addr, uint64_t offset,
                                      void *dst, uint64_t size) {
    if (!scene_orch_has_v2(ctx)) return SCENE_RT_E_ABI;
    return ctx->ops->read(ctx, addr, offset, dst, size);
}

static inline int32_t scene_orch_write(SceneOrchCtx *ctx, uint64_t addr, uint64_t offset,
                                       const void *src, uint64_t size) {
    if (!scene_orch_has_v2(ctx)) return SCENE_RT_E_ABI;
    return ctx->ops->write(ctx, addr, offset, src, size);
}

static inline int32_t scene_orch_fill(SceneOrchCtx *ctx, uint64_t addr, uint64_t offset,
                                      uint64_t size, const void *pattern, uint32_t pattern_size) {
    if (!scene_orch_has_v2(ctx)) return SCENE_RT_E_ABI;
    return ctx->ops->fill(ctx, addr, offset, size, pattern, pattern_size);
}

/* Read / write the element at `idx` of a task argument's view. */
static inline int32_t scene_orch_get(SceneOrchCtx *ctx, const SceneTaskArgV2 *t,
                                     const uint64_t *idx, void *out) {
    uint32_t es = scene_dtype_size(t->desc.dtype);
    return scene_orch_read(ctx, t->value, scene_desc_offset(&t->desc, idx) * es, out, es);
}

static inline int32_t scene_orch_set(SceneOrchCtx *ctx, const SceneTaskArgV2 *t,
                                     const uint64_t *idx, const void *value) {
    uint32_t es = scene_dtype_size(t->desc.dtype);
    return scene_orch_write(ctx, t->value, scene_desc_offset(&t->desc, idx) * es, value, es);
}

static inline int32_t scene_orch_free(SceneOrchCtx *ctx, uint64_t addr) {
    if (!scene_orch_has_v2(ctx)) return SCENE_RT_E_ABI;
    return ctx->ops->free(ctx, addr);
}

static inline int32_t scene_orch_begin_scope(SceneOrchCtx *ctx) {
    if (!scene_orch_has_v2(ctx)) return SCENE_RT_E_ABI;
    return ctx->ops->begin_scope(ctx);
}

static inline int32_t scene_orch_end_scope(SceneOrchCtx *ctx) {
    if (!scene_orch_has_v2(ctx)) return SCENE_RT_E_ABI;
    return ctx->ops->end_scope(ctx);
}

/* SCENE_SCOPE(ctx) { ... }: a memory scope around a block (do not leave
 * the block with `return` or `break`; the scope would stay open). */
#define SCENE_SCOPE(ctx)                                                          \
    for (int scene_scope_once_ = (scene_orch_begin_scope(ctx), 1); scene_scope_once_; \
         scene_scope_once_ = (scene_orch_end_scope(ctx), 0))

#define SCENE_IN(a) ((SceneTaskArg){SCENE_DIR_IN, 0, (a).value, (a).size})
#define SCENE_OUT(a) ((SceneTaskArg){SCENE_DIR_OUT, 0, (a).value, (a).size})
#define SCENE_INOUT(a) ((SceneTaskArg){SCENE_DIR_INOUT, 0, (a).value, (a).size})
#define SCENE_IN_BUF(addr, sz) ((SceneTaskArg){SCENE_DIR_IN, 0, (addr), (sz)})
#define SCENE_OUT_BUF(addr, sz) ((SceneTaskArg){SCENE_DIR_OUT, 0, (addr), (sz)})
#define SCENE_INOUT_BUF(addr, sz) ((SceneTaskArg){SCENE_DIR_INOUT, 0, (addr), (sz)})
#define SCENE_SCALAR_U64(v) ((SceneTaskArg){SCENE_DIR_SCALAR, 0, (uint64_t)(v), 0})
static inline SceneTaskArg scene_scalar_f32(float f) {
    union { uint32_t u; float f; } v;
    v.f = f;
    return (SceneTaskArg){SCENE_DIR_SCALAR, 0, (uint64_t)v.u, 0};
}

#ifdef __cplusplus
}
#endif

#endif /* SCENE_ORCH_H */
