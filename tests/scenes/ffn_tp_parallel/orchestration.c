/*
 * Tensor-parallel FFN, two dependent stages per rank (simpler:
 * examples/workers/l3/ffn_tp_parallel):
 *   stage 1 (AIC, func 0): partial = x_shard @ w_shard
 *   stage 2 (AIV, func 1): y = sum over ranks of partial
 * `partial` is stage 1's output and stage 2's input: the runtime orders the
 * two tasks from that alone; no barrier in the orchestration.
 */
#include "scene_orch.h"

SCENE_ORCH_ENTRY(ffn_tp_orch, ctx, args, nargs) {
    if (nargs != 6) {
        ctx->ops->fail(ctx, "ffn_tp_orch expects (x, w, y, M, K, N)");
        return -1;
    }
    SceneOrchArg x = args[0], w = args[1], y = args[2];
    uint64_t bytes = y.size;
    uint64_t partial = scene_orch_alloc(ctx, bytes);
    if (!partial) {
        ctx->ops->fail(ctx, "ffn_tp_orch: out of device memory");
        return -1;
    }
    int32_t rc;
    SceneTaskArg t0[6] = {SCENE_IN(x), SCENE_IN(w), SCENE_OUT_BUF(partial, bytes),
                          args[3], args[4], args[5]};
    if ((rc = scene_orch_submit(ctx, 0, 1, t0, 6)) != 0) return rc;
    SceneTaskArg t1[2] = {SCENE_IN_BUF(partial, bytes), SCENE_OUT(y)};
    return scene_orch_submit(ctx, 1, 1, t1, 2);
}
