/* One task: y = rmsnorm(x) * weight over rows of d elements, blocks split rows. */
#include "scene_orch.h"

#define BLOCKS 4

SCENE_ORCH_ENTRY(rmsnorm_orch, ctx, args, nargs) {
    if (nargs != 5) {
        ctx->ops->fail(ctx, "rmsnorm_orch expects 5 arguments (x, weight, y, eps, d)");
        return -1;
    }
    uint64_t d = args[4].value;
    if (d == 0 || args[1].size != d * 2 || args[0].size % (d * 2) != 0 || args[2].size != args[0].size) {
        ctx->ops->fail(ctx, "rmsnorm_orch: tensor sizes do not match d");
        return -1;
    }
    SceneTaskArg t[5] = {SCENE_IN(args[0]), SCENE_IN(args[1]), SCENE_OUT(args[2]),
                         SCENE_SCALAR_U64(args[3].value), SCENE_SCALAR_U64(d)};
    return scene_orch_submit(ctx, 0, BLOCKS, t, 5);
}
