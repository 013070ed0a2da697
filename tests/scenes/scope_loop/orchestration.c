/*
 * acc += 1.0, ITERS times, each time through a fresh temporary:
 *   scope { tmp = alloc; fill(tmp, 1.0); acc += tmp (kernel) }
 * The scope frees tmp once the kernel that reads it has finished.
 */
#include "scene_orch.h"

SCENE_ORCH_ENTRY(scope_loop_orch, ctx, args, nargs) {
    if (nargs != 2 || !scene_orch_has_v2(ctx)) {
        ctx->ops->fail(ctx, "scope_loop_orch expects (acc, iters) and orchestration ABI v2");
        return -1;
    }
    SceneTaskArgV2 acc = scene_task_arg(ctx, args, 0, SCENE_DIR_INOUT);
    const SceneTensorDesc *d = scene_orch_desc(ctx, 0);
    int64_t iters = (int64_t)args[1].value;
    float one = 1.0f;
    for (int64_t i = 0; i < iters; i++) {
        int32_t rc = 0;
        SCENE_SCOPE(ctx) {
            uint64_t tmp = scene_orch_alloc(ctx, acc.size);
            if (!tmp) {
                rc = -1;
            } else if ((rc = scene_orch_fill(ctx, tmp, 0, acc.size, &one, sizeof one)) == 0) {
                SceneTaskArgV2 t[2] = {acc, scene_task_buf(SCENE_DIR_IN, tmp, SCENE_DTYPE_F32, 1, d->shape)};
                rc = scene_orch_submit_v2(ctx, 0, 2, t, 2);
            }
        }
        if (rc) return rc;
    }
    return 0;
}
