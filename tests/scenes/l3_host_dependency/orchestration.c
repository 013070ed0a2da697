/*
 * The two chip steps of l3_host_dependency, one orchestration function
 * each, both with the scene's signature (a, b, f, g, y); each rank runs
 * them on its own slices.
 *
 *   produce_f: f = (a + b + 1) * (a + b + 2) + (a + b), vector_example's
 *              five tasks (add, add_scalar x2, mul, add);
 *   consume_g: y = g * a, one task (mul), after the host step wrote g.
 */
#include "scene_orch.h"

enum { FUNC_ADD = 0, FUNC_ADD_SCALAR = 1, FUNC_MUL = 2 };
#define BLOCKS 4

SCENE_ORCH_ENTRY(produce_f, ctx, args, nargs) {
    if (nargs != 5) {
        ctx->ops->fail(ctx, "produce_f expects 5 arguments (a, b, f, g, y)");
        return -1;
    }
    SceneOrchArg a = args[0], b = args[1], f = args[2];
    uint64_t bytes = f.size;
    uint64_t s = scene_orch_alloc(ctx, bytes);
    uint64_t p1 = scene_orch_alloc(ctx, bytes);
    uint64_t p2 = scene_orch_alloc(ctx, bytes);
    uint64_t m = scene_orch_alloc(ctx, bytes);
    if (!s || !p1 || !p2 || !m) {
        ctx->ops->fail(ctx, "produce_f: out of device memory");
        return -1;
    }
    int32_t rc;
#define SUBMIT(func, t) \
    if ((rc = scene_orch_submit(ctx, (func), BLOCKS, (t), 3)) != 0) return rc
    SceneTaskArg t0[3] = {SCENE_IN(a), SCENE_IN(b), SCENE_OUT_BUF(s, bytes)};
    SUBMIT(FUNC_ADD, t0);
    SceneTaskArg t1[3] = {SCENE_IN_BUF(s, bytes), scene_scalar_f32(1.0f), SCENE_OUT_BUF(p1, bytes)};
    SUBMIT(FUNC_ADD_SCALAR, t1);
    SceneTaskArg t2[3] = {SCENE_IN_BUF(s, bytes), scene_scalar_f32(2.0f), SCENE_OUT_BUF(p2, bytes)};
    SUBMIT(FUNC_ADD_SCALAR, t2);
    SceneTaskArg t3[3] = {SCENE_IN_BUF(p1, bytes), SCENE_IN_BUF(p2, bytes), SCENE_OUT_BUF(m, bytes)};
    SUBMIT(FUNC_MUL, t3);
    SceneTaskArg t4[3] = {SCENE_IN_BUF(m, bytes), SCENE_IN_BUF(s, bytes), SCENE_OUT(f)};
    SUBMIT(FUNC_ADD, t4);
    return 0;
}

SCENE_ORCH_ENTRY(consume_g, ctx, args, nargs) {
    if (nargs != 5) {
        ctx->ops->fail(ctx, "consume_g expects 5 arguments (a, b, f, g, y)");
        return -1;
    }
    SceneTaskArg t[3] = {SCENE_IN(args[3]), SCENE_IN(args[0]), SCENE_OUT(args[4])};
    return scene_orch_submit(ctx, FUNC_MUL, BLOCKS, t, 3);
}
