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
 *         uint64_t tmp = scene_orch_alloc(ctx, args[0].size);
 *         SceneTaskArg t[3] = { SCENE_IN(args[0]), SCENE_IN(args[1]),
 *                               SCENE_OUT_BUF(tmp, args[0].size) };
 *         return scene_orch_submit(ctx, 0, 8, t, 3);
 *     }
 *
 * The orchestration calls the runtime only through `ctx->ops`, so the shared
 * object has no undefined symbols on the runtime.
 */
#ifndef SCENE_ORCH_H
#define SCENE_ORCH_H

#include <stdint.h>
#include "scene_runtime.h"

#define SCENE_ORCH_ABI_VERSION 1

typedef struct SceneOrchArg {
    uint32_t direction; /* SCENE_DIR_* */
    uint32_t reserved;
    uint64_t value;     /* device address or scalar bits */
    uint64_t size;      /* bytes (tensors), 0 (scalars) */
} SceneOrchArg;

typedef SceneOrchArg SceneTaskArg;

typedef struct SceneOrchCtx SceneOrchCtx;

typedef struct SceneOrchOps {
    uint32_t abi_version;
    /* Allocate `size` bytes of device memory live until the run ends; 0 on failure. */
    uint64_t (*alloc)(SceneOrchCtx *ctx, uint64_t size);
    /* Submit one task of `block_num` blocks to `func_id`. Returns a status. */
    int32_t (*submit)(SceneOrchCtx *ctx, uint32_t func_id, uint32_t block_num,
                      const SceneTaskArg *args, uint32_t num_args);
    /* Report an error message (shown in the run's error). */
    void (*fail)(SceneOrchCtx *ctx, const char *message);
} SceneOrchOps;

struct SceneOrchCtx {
    const SceneOrchOps *ops;
    void *runtime; /* opaque */
};

#define SCENE_ORCH_ENTRY(name, ctx, args, nargs)                                  \
    __attribute__((visibility("default"))) int32_t name(SceneOrchCtx *ctx,      \
                                                        const SceneOrchArg *args, \
                                                        uint32_t nargs)

static inline uint64_t scene_orch_alloc(SceneOrchCtx *ctx, uint64_t size) {
    return ctx->ops->alloc(ctx, size);
}
static inline int32_t scene_orch_submit(SceneOrchCtx *ctx, uint32_t func_id, uint32_t block_num,
                                        const SceneTaskArg *args, uint32_t num_args) {
    return ctx->ops->submit(ctx, func_id, block_num, args, num_args);
}

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

#endif /* SCENE_ORCH_H */
