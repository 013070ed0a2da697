/* One task of one block: the names kernel fills `seen`. */
#include "scene_orch.h"

SCENE_ORCH_ENTRY(names_orch, ctx, args, nargs) {
    if (nargs != 1) {
        scene_orch_fail(ctx, "names_orch expects (seen)");
        return SCENE_RT_E_INVALID;
    }
    SceneTaskArg t[1] = {SCENE_OUT(args[0])};
    return scene_orch_submit(ctx, 0, 1, t, 1);
}
