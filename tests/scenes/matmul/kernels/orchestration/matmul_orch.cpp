/*
 * Matmul diamond orchestration (C++, as the original's matmul_orch.cpp):
 *
 *   F = exp(sqrt(log(A)) @ W1 + sqrt(log(A)) @ W2)
 *
 *       t0 (sqrt(log), AIV)
 *      /  \
 *    t1    t2   (matmul, AIC)
 *      \  /
 *       t3 (add+exp, AIV)
 *
 * The runtime orders the tasks by what they read and write (the original's
 * TensorMap): t1 and t2 wait for t0's b, t3 for t1's c and t2's d.
 * Intermediate b is half (the matmul's input); c and d are float.
 *
 * Args: [a (IN, half), w1 (IN, half), w2 (IN, half), f (OUT, float)].
 */
#include "scene_orch.h"

enum Func : uint32_t { FUNC_LOG_SQRT = 0, FUNC_MATMUL = 1, FUNC_ADD_EXP = 2 };

// Each kernel is one tile: one block per task, as the original.
constexpr uint32_t kBlocks = 1;

SCENE_ORCH_ENTRY(matmul_orch, ctx, args, nargs) {
    if (nargs != 4) {
        ctx->ops->fail(ctx, "matmul_orch expects 4 arguments (a, w1, w2, f)");
        return -1;
    }
    const SceneOrchArg a = args[0], w1 = args[1], w2 = args[2], f = args[3];
    const uint64_t size = a.size / sizeof(uint16_t);  // SIZE = a.shapes[0]
    const uint64_t b_bytes = size * sizeof(uint16_t);  // half
    const uint64_t cd_bytes = size * sizeof(float);    // float
    uint64_t b = scene_orch_alloc(ctx, b_bytes);
    uint64_t c = scene_orch_alloc(ctx, cd_bytes);
    uint64_t d = scene_orch_alloc(ctx, cd_bytes);
    if (!b || !c || !d) {
        ctx->ops->fail(ctx, "matmul_orch: out of device memory");
        return -1;
    }
    int32_t rc;
    // task0: b = sqrt(log(a))
    SceneTaskArg p0[2] = {SCENE_IN(a), SCENE_OUT_BUF(b, b_bytes)};
    if ((rc = scene_orch_submit(ctx, FUNC_LOG_SQRT, kBlocks, p0, 2)) != 0) return rc;
    // task1: c = b @ w1
    SceneTaskArg p1[3] = {SCENE_IN_BUF(b, b_bytes), SCENE_IN(w1), SCENE_OUT_BUF(c, cd_bytes)};
    if ((rc = scene_orch_submit(ctx, FUNC_MATMUL, kBlocks, p1, 3)) != 0) return rc;
    // task2: d = b @ w2
    SceneTaskArg p2[3] = {SCENE_IN_BUF(b, b_bytes), SCENE_IN(w2), SCENE_OUT_BUF(d, cd_bytes)};
    if ((rc = scene_orch_submit(ctx, FUNC_MATMUL, kBlocks, p2, 3)) != 0) return rc;
    // task3: f = exp(c + d)
    SceneTaskArg p3[3] = {SCENE_IN_BUF(c, cd_bytes), SCENE_IN_BUF(d, cd_bytes), SCENE_OUT(f)};
    if ((rc = scene_orch_submit(ctx, FUNC_ADD_EXP, kBlocks, p3, 3)) != 0) return rc;
    return 0;
}
