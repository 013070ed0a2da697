/* Sets its flag (argument 0, one i32), then waits until the peer's flag
 * (argument 1 elements away: outside this task's view, in the same
 * buffer) is set; gives up after about 2^31 polls and marks its flag 2. */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    int32_t *mine = SCENE_ARG_PTR(ka, 0, int32_t);
    int64_t peer = SCENE_ARG_I64(ka, 1);
    __atomic_store_n(mine, 1, __ATOMIC_RELEASE);
    for (uint64_t i = 0; i < (1ull << 31); i++) {
        if (__atomic_load_n(mine + peer, __ATOMIC_ACQUIRE) != 0) return;
    }
    __atomic_store_n(mine, 2, __ATOMIC_RELEASE);
}
