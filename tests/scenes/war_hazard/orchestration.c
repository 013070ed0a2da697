/* task 0: y = x (reads x); task 1: x = 7 (writes x after task 0 read it). */
#include "scene_orch.h"

SCENE_ORCH_ENTRY(war_hazard_orch, ctx, args, nargs) {
    if (nargs != 2 || !scene_orch_has_v2(ctx)) {
        ctx->ops->fail(ctx, "war_hazard_orch expects (x, y) and orchestration ABI v2");
        return -1;
    }
    SceneTaskArgV2 x = scene_task_arg(ctx, args, 0, SCENE_DIR_IN);
    SceneTaskArgV2 y = scene_task_arg(ctx, args, 1, SCENE_DIR_OUT);
    SceneTaskArgV2 copy[2] = {x, y};
    int32_t rc = scene_orch_submit_v2(ctx, 0, 2, copy, 2);
    if (rc) return rc;
    SceneTaskArgV2 overwrite[1] = {scene_task_dir(x, SCENE_DIR_OUT)};
    return scene_orch_submit_v2(ctx, 1, 2, overwrite, 1);
}
