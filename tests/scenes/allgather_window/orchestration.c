/*
 * allgather over a window that is a tensor argument (`[comm] window_tensor
 * = "scratch"`): args are x [C] (in), scratch [nranks * C] (inout: this
 * rank's window) and y [nranks * C] (out).
 *
 *   task 0 (stage):  x -> the view scratch[rank * C, +C): the rank's slot
 *     (the rank from scene_orch_comm_rank);
 *   task 1 (gather): the whole of scratch (in) -> y (out). It reads what
 *     task 0 wrote, so the runtime runs it after task 0 (RAW on `scratch`),
 *     with no barrier in the orchestration; the kernel then barriers with
 *     its peers and reads their slots from their windows.
 */
#include "scene_orch.h"

SCENE_ORCH_ENTRY(allgather_window_orch, ctx, args, nargs) {
    if (nargs != 3) {
        scene_orch_fail(ctx, "allgather_window_orch expects (x, scratch, y)");
        return SCENE_RT_E_INVALID;
    }
    uint32_t rank = 0, nranks = 0;
    int32_t rc = scene_orch_comm_rank(ctx, &rank, &nranks);
    if (rc != SCENE_RT_OK) return rc;
    const SceneTensorDesc *xd = scene_orch_desc(ctx, 0);
    const SceneTensorDesc *wd = scene_orch_desc(ctx, 1);
    if (!xd || !wd || xd->rank != 1 || wd->rank != 1 || wd->shape[0] != nranks * xd->shape[0]) {
        scene_orch_fail(ctx, "allgather_window_orch: x is [C], scratch [nranks * C]");
        return SCENE_RT_E_INVALID;
    }
    uint64_t c = xd->shape[0];

    uint64_t off[1] = {(uint64_t)rank * c};
    uint64_t len[1] = {c};
    SceneTaskArgV2 stage[2] = {
        scene_task_arg(ctx, args, 0, SCENE_DIR_IN),
        scene_task_view(scene_task_arg(ctx, args, 1, SCENE_DIR_OUT), off, len),
    };
    if ((rc = scene_orch_submit_v2(ctx, 0, 1, stage, 2)) != SCENE_RT_OK) return rc;

    SceneTaskArgV2 gather[2] = {
        scene_task_arg(ctx, args, 1, SCENE_DIR_IN),
        scene_task_arg(ctx, args, 2, SCENE_DIR_OUT),
    };
    return scene_orch_submit_v2(ctx, 1, 1, gather, 2);
}
