/*
 * One task per rank: y = x @ w on this rank's shards. The ranks never
 * touch each other's data, so the group has a window of 0 bytes.
 */
#include "scene_orch.h"

SCENE_ORCH_ENTRY(rank_local_orch, ctx, args, nargs) {
    if (nargs != 6) {
        ctx->ops->fail(ctx, "rank_local_orch expects (x, w, y, M, K, N)");
        return -1;
    }
    SceneTaskArg t[6] = {SCENE_IN(args[0]), SCENE_IN(args[1]), SCENE_OUT(args[2]),
                         args[3], args[4], args[5]};
    return scene_orch_submit(ctx, 0, 1, t, 6);
}
