/* y = x + pad[last], one task: pad is the big buffer that only needs to
 * be on the device (see scene.toml). */
#include "scene_orch.h"

#define BLOCKS 4

SCENE_ORCH_ENTRY(device_memory_orch, ctx, args, nargs) {
    if (nargs != 3) {
        ctx->ops->fail(ctx, "device_memory_orch expects 3 arguments (pad, x, y)");
        return -1;
    }
    SceneTaskArg t[3] = {SCENE_IN(args[0]), SCENE_IN(args[1]), SCENE_OUT(args[2])};
    return scene_orch_submit(ctx, 0, BLOCKS, t, 3);
}
