/*
 * One task: y = rmsnorm(x) * weight over rows of d elements, blocks split
 * rows. The kernel is picked by x's dtype (the case's `dtype` param): one
 * image per element type, func_id 0 bf16, 1 f16, 2 f32.
 */
#include "scene_orch.h"

#define BLOCKS 4

SCENE_ORCH_ENTRY(rmsnorm_orch, ctx, args, nargs) {
    if (nargs != 5) {
        ctx->ops->fail(ctx, "rmsnorm_orch expects 5 arguments (x, weight, y, eps, d)");
        return -1;
    }
    const SceneTensorDesc *x = scene_orch_desc(ctx, 0);
    if (!x) {
        ctx->ops->fail(ctx, "rmsnorm_orch needs a v2 runtime (argument dtypes)");
        return -1;
    }
    uint32_t func;
    switch (x->dtype) {
    case SCENE_DTYPE_BF16: func = 0; break;
    case SCENE_DTYPE_F16: func = 1; break;
    case SCENE_DTYPE_F32: func = 2; break;
    default:
        ctx->ops->fail(ctx, "rmsnorm_orch: x must be bf16, f16 or f32");
        return -1;
    }
    uint64_t es = scene_dtype_size(x->dtype);
    uint64_t d = args[4].value;
    if (d == 0 || args[1].size != d * es || args[0].size % (d * es) != 0 ||
        args[2].size != args[0].size) {
        ctx->ops->fail(ctx, "rmsnorm_orch: tensor sizes do not match d");
        return -1;
    }
    SceneTaskArg t[5] = {SCENE_IN(args[0]), SCENE_IN(args[1]), SCENE_OUT(args[2]),
                         SCENE_SCALAR_U64(args[3].value), SCENE_SCALAR_U64(d)};
    return scene_orch_submit(ctx, func, BLOCKS, t, 5);
}
