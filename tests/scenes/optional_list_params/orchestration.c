/*
 * y = x + offset over a [rows, block_size] f32 tensor, one block per row.
 * `rows` is the scene's derived `total_blocks`, passed as a scalar: it must
 * be the first dimension of x, so a scalar and a shape computed from the
 * same expression cannot disagree unnoticed.
 */
#include "scene_orch.h"

enum { FUNC_ADD_SCALAR = 0 };

SCENE_ORCH_ENTRY(optional_list_params_orch, ctx, args, nargs) {
    if (nargs != 4) {
        ctx->ops->fail(ctx, "optional_list_params_orch expects 4 arguments (x, y, offset, rows)");
        return -1;
    }
    uint64_t offset_bits = args[2].value, rows = args[3].value;
    const SceneTensorDesc *x = scene_orch_desc(ctx, 0);
    if (!x || x->rank != 2 || x->shape[0] != rows || rows == 0) {
        ctx->ops->fail(ctx, "optional_list_params_orch: `rows` is not x's first dimension");
        return -1;
    }
    SceneTaskArg t[3] = {SCENE_IN(args[0]), SCENE_SCALAR_U64(offset_bits), SCENE_OUT(args[1])};
    return scene_orch_submit(ctx, FUNC_ADD_SCALAR, (uint32_t)rows, t, 3);
}
