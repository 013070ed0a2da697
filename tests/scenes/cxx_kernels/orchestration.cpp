/*
 * C++ orchestration of vector_example:
 * f = (a + b + 1) * (a + b + 2) + (a + b) as five tasks:
 *   t0: s  = a + b          (add)
 *   t1: p1 = s + 1          (add_scalar)   depends on t0
 *   t2: p2 = s + 2          (add_scalar)   depends on t0
 *   t3: m  = p1 * p2        (mul)          depends on t1, t2
 *   t4: f  = m + s          (add)          depends on t3, t0
 */
#include "scene_orch.h"

enum Func : uint32_t { FUNC_ADD = 0, FUNC_ADD_SCALAR = 1, FUNC_MUL = 2 };
constexpr uint32_t BLOCKS = 8;

SCENE_ORCH_ENTRY(cxx_kernels_orch, ctx, args, nargs) {
    if (nargs != 3) {
        ctx->ops->fail(ctx, "cxx_kernels_orch expects 3 arguments (a, b, f)");
        return -1;
    }
    SceneOrchArg a = args[0], b = args[1], f = args[2];
    uint64_t bytes = f.size;
    uint64_t s = scene_orch_alloc(ctx, bytes);
    uint64_t p1 = scene_orch_alloc(ctx, bytes);
    uint64_t p2 = scene_orch_alloc(ctx, bytes);
    uint64_t m = scene_orch_alloc(ctx, bytes);
    if (!s || !p1 || !p2 || !m) {
        ctx->ops->fail(ctx, "cxx_kernels_orch: out of device memory");
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
