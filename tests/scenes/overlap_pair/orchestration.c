/*
 * Two tasks of `meet`, on flags[0] and flags[1]: disjoint views, so
 * independent; the scalar tells each where its peer's flag is.
 */
#include "scene_orch.h"

SCENE_ORCH_ENTRY(overlap_pair_orch, ctx, args, nargs) {
    if (nargs != 1 || !scene_orch_has_v2(ctx)) {
        ctx->ops->fail(ctx, "overlap_pair_orch expects (flags) and orchestration ABI v2");
        return -1;
    }
    /* inout: uploaded (zeros) before every run, so --rounds starts each round clean */
    SceneTaskArgV2 flags = scene_task_arg(ctx, args, 0, SCENE_DIR_OUT);
    uint64_t one[1] = {1};
    for (uint64_t i = 0; i < 2; i++) {
        uint64_t at[1] = {i};
        SceneTaskArgV2 t[2] = {scene_task_view(flags, at, one),
                               scene_task_scalar(i == 0 ? 1 : (uint64_t)-1)};
        int32_t rc = scene_orch_submit_v2(ctx, 0, 1, t, 2);
        if (rc) return rc;
    }
    return 0;
}
