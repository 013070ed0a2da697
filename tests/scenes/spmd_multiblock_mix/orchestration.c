/*
 * Port of simpler's spmd_multiblock_mix_orch.cpp: five mixed tasks
 * (aic + aiv0 + aiv1), block_num 2, 8, 12, 24, 48, each over the whole
 * output (inout) and its first cache line (a scalar).
 */
#include "scene_orch.h"

#define FUNC_SPMD_MIX_AIC 0
#define FUNC_SPMD_MIX_AIV0 1
#define FUNC_SPMD_MIX_AIV1 2

static int32_t submit_spmd_mix(SceneOrchCtx *ctx, const SceneOrchArg *args, uint32_t block_num,
                               int64_t base_cl) {
    SceneTaskArgV2 t[2] = {scene_task_arg(ctx, args, 0, SCENE_DIR_INOUT),
                           scene_task_scalar((uint64_t)base_cl)};
    return scene_orch_submit_mixed(
        ctx, scene_mixed(FUNC_SPMD_MIX_AIC, FUNC_SPMD_MIX_AIV0, FUNC_SPMD_MIX_AIV1), block_num, t, 2);
}

SCENE_ORCH_ENTRY(spmd_multiblock_mix_orch, ctx, args, nargs) {
    if (nargs != 1 || !scene_orch_has_v4(ctx)) {
        scene_orch_fail(ctx, "spmd_multiblock_mix_orch expects (output) and orchestration ABI v4");
        return SCENE_RT_E_INVALID;
    }
    static const uint32_t blocks[5] = {2, 8, 12, 24, 48};
    static const int64_t base[5] = {0, 6, 30, 66, 138};
    for (int i = 0; i < 5; i++) {
        int32_t rc = submit_spmd_mix(ctx, args, blocks[i], base[i]);
        if (rc != SCENE_RT_OK) return rc;
    }
    return SCENE_RT_OK;
}
