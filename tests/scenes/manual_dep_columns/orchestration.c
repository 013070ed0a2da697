/*
 * One task per column block of c: (a block IN, c block OUT), the c block
 * marked manual_dep when the `manual` scalar is 1. Nothing else orders
 * the tasks: with manual_dep they run at once, each on its own bytes.
 */
#include "scene_orch.h"

SCENE_ORCH_ENTRY(columns_orch, ctx, args, nargs) {
    if (nargs != 4 || !scene_orch_has_v2(ctx)) {
        ctx->ops->fail(ctx, "columns_orch expects (a, c, B, manual) and orchestration ABI v2");
        return -1;
    }
    SceneTaskArgV2 a = scene_task_arg(ctx, args, 0, SCENE_DIR_IN);
    SceneTaskArgV2 c = scene_task_arg(ctx, args, 1, SCENE_DIR_OUT);
    uint64_t rows = a.desc.shape[0], cols = a.desc.shape[1], b = args[2].value;
    int manual = args[3].value != 0;
    if (b == 0 || cols % b != 0) {
        ctx->ops->fail(ctx, "columns_orch: B must divide the columns");
        return -1;
    }
    for (uint64_t j = 0; j < cols / b; ++j) {
        uint64_t at[2] = {0, j * b}, shape[2] = {rows, b};
        SceneTaskArgV2 out = scene_task_view(c, at, shape);
        if (manual) out = scene_task_manual_dep(out);
        SceneTaskArgV2 t[2] = {scene_task_view(a, at, shape), out};
        int32_t rc = scene_orch_submit_v2(ctx, 0, 1, t, 2);
        if (rc) return rc;
    }
    return 0;
}
