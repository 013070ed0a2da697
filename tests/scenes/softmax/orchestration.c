/* Two independent row-softmax tasks: y = softmax(scale * x) in f32 and
 * y_f16 = softmax(scale * x_f16) in f16. Blocks split the rows. */
#include "scene_orch.h"

enum { FUNC_SOFTMAX_F32 = 0, FUNC_SOFTMAX_F16 = 1 };
#define BLOCKS 4

SCENE_ORCH_ENTRY(softmax_orch, ctx, args, nargs) {
    if (nargs != 6) {
        ctx->ops->fail(ctx, "softmax_orch expects 6 arguments (x, y, x_f16, y_f16, scale, cols)");
        return -1;
    }
    uint64_t scale_bits = args[4].value, cols = args[5].value;
    if (cols == 0 || args[0].size % (cols * 4) != 0 || args[2].size % (cols * 2) != 0) {
        ctx->ops->fail(ctx, "softmax_orch: tensor sizes are not whole rows of `cols`");
        return -1;
    }
    int32_t rc;
    SceneTaskArg t0[4] = {SCENE_IN(args[0]), SCENE_OUT(args[1]), SCENE_SCALAR_U64(scale_bits),
                          SCENE_SCALAR_U64(cols)};
    if ((rc = scene_orch_submit(ctx, FUNC_SOFTMAX_F32, BLOCKS, t0, 4)) != 0) return rc;
    SceneTaskArg t1[4] = {SCENE_IN(args[2]), SCENE_OUT(args[3]), SCENE_SCALAR_U64(scale_bits),
                          SCENE_SCALAR_U64(cols)};
    return scene_orch_submit(ctx, FUNC_SOFTMAX_F16, BLOCKS, t1, 4);
}
