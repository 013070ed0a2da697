/*
 * arg 0: out [1] i32 <- this rank's index (from the communication context).
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const SceneCommCtx *c = scene_comm_ctx(ka);
    if (!c) return;
    *SCENE_ARG_PTR(ka, 0, int32_t) = (int32_t)c->rank;
}
