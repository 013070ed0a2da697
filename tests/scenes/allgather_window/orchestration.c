/*
 * allgather over a window that is a tensor argument (`[comm] window_tensor
 * = "scratch"`): args are x [C] (in), scratch [nranks * C] (inout: this
 * rank's window) and y [nranks * C] (out).
 *
 *   task 0 (whoami): writes this rank's index into a 4-byte buffer, which
 *     the orchestration reads back (the rank is known to kernels, through
 *     their SceneCommCtx, not to the orchestration);
 *   task 1 (stage):  x -> the view scratch[rank * C, +C): the rank's slot;
 *   task 2 (gather): the whole of scratch (in) -> y (out). It reads what
 *     task 1 wrote, so the runtime runs it after task 1 (RAW on `scratch`),
 *     with no barrier in the orchestration; the kernel then barriers with
 *     its peers and reads their slots from their windows.
 */
#include "scene_orch.h"

SCENE_ORCH_ENTRY(allgather_window_orch, ctx, args, nargs) {
    if (nargs != 3) {
        scene_orch_fail(ctx, "allgather_window_orch expects (x, scratch, y)");
        return SCENE_RT_E_INVALID;
    }
    const SceneTensorDesc *xd = scene_orch_desc(ctx, 0);
    const SceneTensorDesc *wd = scene_orch_desc(ctx, 1);
    if (!xd || !wd || xd->rank != 1 || wd->rank != 1 || xd->shape[0] == 0 ||
        wd->shape[0] % xd->shape[0] != 0) {
        scene_orch_fail(ctx, "allgather_window_orch: x is [C], scratch [nranks * C]");
        return SCENE_RT_E_INVALID;
    }
    uint64_t c = xd->shape[0];
    uint64_t slots = wd->shape[0] / c;
    int32_t rc;

    uint64_t rank_buf = 0;
    if ((rc = scene_orch_malloc(ctx, sizeof(int32_t), &rank_buf)) != SCENE_RT_OK) return rc;
    uint64_t one[1] = {1};
    SceneTaskArgV2 who = scene_task_buf(SCENE_DIR_OUT, rank_buf, SCENE_DTYPE_I32, 1, one);
    if ((rc = scene_orch_submit_v2(ctx, 0, 1, &who, 1)) != SCENE_RT_OK) return rc;
    int32_t rank = -1;
    if ((rc = scene_orch_read(ctx, rank_buf, 0, &rank, sizeof rank)) != SCENE_RT_OK) return rc;
    if (rank < 0 || (uint64_t)rank >= slots) {
        scene_orch_fail(ctx, "allgather_window_orch: the rank has no slot in the window");
        return SCENE_RT_E_INVALID;
    }

    uint64_t off[1] = {(uint64_t)rank * c};
    uint64_t len[1] = {c};
    SceneTaskArgV2 stage[2] = {
        scene_task_arg(ctx, args, 0, SCENE_DIR_IN),
        scene_task_view(scene_task_arg(ctx, args, 1, SCENE_DIR_OUT), off, len),
    };
    if ((rc = scene_orch_submit_v2(ctx, 1, 1, stage, 2)) != SCENE_RT_OK) return rc;

    SceneTaskArgV2 gather[2] = {
        scene_task_arg(ctx, args, 1, SCENE_DIR_IN),
        scene_task_arg(ctx, args, 2, SCENE_DIR_OUT),
    };
    return scene_orch_submit_v2(ctx, 2, 1, gather, 2);
}
