/*
 * Two independent tasks: c_bf16 = a_bf16 @ b_bf16 and c_f16 = a_f16 @ b_f16.
 * Each task runs BLOCKS blocks that share the output tiles between them.
 */
#include "scene_orch.h"

enum { FUNC_GEMM_BF16 = 0, FUNC_GEMM_F16 = 1 };
#define BLOCKS 4

SCENE_ORCH_ENTRY(gemm_orch, ctx, args, nargs) {
    if (nargs != 9) {
        ctx->ops->fail(ctx, "gemm_orch expects 9 arguments (a_bf16, b_bf16, c_bf16, a_f16, b_f16, c_f16, m, k, n)");
        return -1;
    }
    uint64_t m = args[6].value, k = args[7].value, n = args[8].value;
    if (args[2].size != m * n * 4 || args[0].size != m * k * 2 || args[1].size != k * n * 2) {
        ctx->ops->fail(ctx, "gemm_orch: tensor sizes do not match m, k, n");
        return -1;
    }
    int32_t rc;
    SceneTaskArg t0[6] = {SCENE_IN(args[0]), SCENE_IN(args[1]), SCENE_OUT(args[2]),
                          SCENE_SCALAR_U64(m), SCENE_SCALAR_U64(k), SCENE_SCALAR_U64(n)};
    if ((rc = scene_orch_submit(ctx, FUNC_GEMM_BF16, BLOCKS, t0, 6)) != 0) return rc;
    SceneTaskArg t1[6] = {SCENE_IN(args[3]), SCENE_IN(args[4]), SCENE_OUT(args[5]),
                          SCENE_SCALAR_U64(m), SCENE_SCALAR_U64(k), SCENE_SCALAR_U64(n)};
    return scene_orch_submit(ctx, FUNC_GEMM_F16, BLOCKS, t1, 6);
}
