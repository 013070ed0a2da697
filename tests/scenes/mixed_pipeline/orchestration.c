/*
 * One mixed task of M / TM blocks: cube kernel matmul_tile (func 0) and
 * bias_relu (func 1) in one or both vector slots, over
 * (x, w, bias, workspace, y, TM); the workspace holds x @ w between the
 * cube and the vector kernels of each block.
 */
#include "scene_orch.h"

SCENE_ORCH_ENTRY(mixed_pipeline_orch, ctx, args, nargs) {
    if (nargs != 6 || !scene_orch_has_v4(ctx)) {
        scene_orch_fail(ctx, "mixed_pipeline_orch expects (x, w, bias, y, TM, lanes) and orchestration ABI v4");
        return SCENE_RT_E_INVALID;
    }
    SceneTaskArgV2 y = scene_task_arg(ctx, args, 3, SCENE_DIR_OUT);
    uint64_t rows = y.desc.shape[0], tm = args[4].value, lanes = args[5].value;
    if (tm == 0 || rows % tm != 0 || (lanes != 1 && lanes != 2) || tm % lanes != 0) {
        scene_orch_fail(ctx, "mixed_pipeline_orch: TM must divide M, lanes be 1 or 2 and divide TM");
        return SCENE_RT_E_INVALID;
    }
    uint64_t ws;
    int32_t rc = scene_orch_malloc(ctx, y.size, &ws);
    if (rc != SCENE_RT_OK) return rc;
    SceneTaskArgV2 t[6] = {
        scene_task_arg(ctx, args, 0, SCENE_DIR_IN),
        scene_task_arg(ctx, args, 1, SCENE_DIR_IN),
        scene_task_arg(ctx, args, 2, SCENE_DIR_IN),
        scene_task_buf(SCENE_DIR_INOUT, ws, SCENE_DTYPE_F32, 2, y.desc.shape),
        y,
        scene_task_scalar(tm),
    };
    SceneMixedKernels k = scene_mixed(0, 1, lanes == 2 ? 1 : SCENE_NO_KERNEL);
    return scene_orch_submit_mixed(ctx, k, (uint32_t)(rows / tm), t, 6);
}
