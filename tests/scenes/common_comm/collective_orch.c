/*
 * The orchestration of every collective scene (level 3): one AIV task of
 * one block per rank over its input slice and output slice, plus the
 * scene's scalars; the kernel gets the rank's communication context from
 * the runtime (scene_comm_ctx), as simpler's chip callables get theirs.
 */
#include "scene_orch.h"

SCENE_ORCH_ENTRY(collective_orch, ctx, args, nargs) {
    if (nargs < 2 || nargs > 4) {
        ctx->ops->fail(ctx, "collective_orch expects (in, out[, scalar...])");
        return -1;
    }
    SceneTaskArg t[4];
    t[0] = SCENE_IN(args[0]);
    t[1] = SCENE_OUT(args[1]);
    for (uint32_t i = 2; i < nargs; ++i) t[i] = args[i];
    return scene_orch_submit(ctx, 0, 1, t, nargs);
}
