#include "scene_orch.h"

/* One vector task: widen = float(x) * 3, narrow = bf16(that + 1/3). */
SCENE_ORCH_ENTRY(bf16_orch, ctx, args, nargs) {
    if (nargs != 3) {
        ctx->ops->fail(ctx, "want 3 args: x, wide, narrow");
        return -1;
    }
    SceneTaskArgV2 t[3] = {scene_task_arg(ctx, args, 0, SCENE_DIR_IN),
                           scene_task_arg(ctx, args, 1, SCENE_DIR_OUT),
                           scene_task_arg(ctx, args, 2, SCENE_DIR_OUT)};
    return scene_orch_submit_v2(ctx, 0, 1, t, 3);
}
