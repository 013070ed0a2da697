#include "scene_orch.h"

/* rows: vector tasks of 4, 16 and 7 blocks, then (when `mixed`) a mixed
 * task of 3 blocks: cube func 1, func 0 in both vector lanes. */
SCENE_ORCH_ENTRY(tail_orch, ctx, args, nargs) {
    if (nargs != 2) {
        ctx->ops->fail(ctx, "want 2 args: rows, mixed");
        return -1;
    }
    static const uint32_t tasks[3][2] = {{4, 0}, {16, 4}, {7, 20}};
    for (int i = 0; i < 3; i++) {
        SceneTaskArgV2 t[3] = {scene_task_arg(ctx, args, 0, SCENE_DIR_INOUT),
                               scene_task_scalar(tasks[i][1]), scene_task_scalar(1)};
        int32_t rc = scene_orch_submit_v2(ctx, 0, tasks[i][0], t, 3);
        if (rc) return rc;
    }
    if (args[1].value == 0) return 0;
    SceneTaskArgV2 m[3] = {scene_task_arg(ctx, args, 0, SCENE_DIR_INOUT), scene_task_scalar(27),
                           scene_task_scalar(3)};
    return scene_orch_submit_mixed(ctx, scene_mixed(1, 0, 0), 3, m, 3);
}
