/* One mixed task (producer in aic, consumer in aiv0 and aiv1), a block per
 * row of `seen`. */
#include "scene_orch.h"

SCENE_ORCH_ENTRY(pipe_state_orch, ctx, args, nargs) {
    if (nargs != 1 || !scene_orch_has_v4(ctx)) {
        scene_orch_fail(ctx, "pipe_state_orch expects (seen) and orchestration ABI v4");
        return SCENE_RT_E_INVALID;
    }
    SceneTaskArgV2 seen = scene_task_arg(ctx, args, 0, SCENE_DIR_OUT);
    return scene_orch_submit_mixed(ctx, scene_mixed(0, 1, 1), (uint32_t)seen.desc.shape[0], &seen, 1);
}
