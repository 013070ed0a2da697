/*
 * Port of simpler's mixed_orch.cpp (tensormap_and_ringbuffer): per
 * iteration, in one scope, the five resource shapes of a cluster, each one
 * task over views of the iteration's 128x128-element tile of the outputs.
 * rt_submit_task(MixedKernels) is scene_orch_submit_mixed; rt_submit_aic_task /
 * rt_submit_aiv_task are plain submits.
 *
 * Arguments: [A, B, C, D, E, F, G, H, I, J, K, L, M, N, O].
 */
#include "scene_orch.h"

#define FUNC_MATMUL 0         /* aic: args 0..2 */
#define FUNC_ADD 1            /* aiv0 in a mixed task: args 3..5 */
#define FUNC_MUL 2            /* aiv1 in a mixed task: args 6..8 */
#define FUNC_ADD_STANDALONE 3 /* aiv: args 0..2 */
#define FUNC_MUL_STANDALONE 4 /* aiv1 of aiv0+aiv1: args 3..5 */
#define TILE_ELEMS (128u * 128u)
#define NONE SCENE_NO_KERNEL

SCENE_ORCH_ENTRY(mixed_orch, ctx, args, nargs) {
    if (nargs != 15 || !scene_orch_has_v4(ctx)) {
        scene_orch_fail(ctx, "mixed_orch expects 15 tensors and orchestration ABI v4 (mixed tasks)");
        return SCENE_RT_E_INVALID;
    }
    SceneTaskArgV2 in[15], out[15];
    for (uint32_t i = 0; i < 15; i++) {
        in[i] = scene_task_arg(ctx, args, i, SCENE_DIR_IN);
        out[i] = scene_task_arg(ctx, args, i, SCENE_DIR_OUT);
    }
    enum { A, B, C, D, E, F, G, H, I, J, K, L, M, N, O };
    uint64_t num_iters = out[C].desc.shape[0] / TILE_ELEMS;
    int32_t rc = SCENE_RT_OK;
    for (uint64_t i = 0; i < num_iters && rc == SCENE_RT_OK; i++) {
        SCENE_SCOPE(ctx) {
            uint64_t off[1] = {i * TILE_ELEMS}, shape[1] = {TILE_ELEMS};
#define VIEW(x) scene_task_view(out[x], off, shape)
            /* 1. aic+aiv0+aiv1: matmul + add + mul */
            SceneTaskArgV2 t1[9] = {in[A], in[B], VIEW(C), in[D], in[E], VIEW(F), in[G], in[H], VIEW(I)};
            if (rc == SCENE_RT_OK)
                rc = scene_orch_submit_mixed(ctx, scene_mixed(FUNC_MATMUL, FUNC_ADD, FUNC_MUL), 1, t1, 9);
            /* 2. aic alone: matmul */
            SceneTaskArgV2 t2[3] = {in[A], in[B], VIEW(J)};
            if (rc == SCENE_RT_OK) rc = scene_orch_submit_v2(ctx, FUNC_MATMUL, 1, t2, 3);
            /* 3. aiv alone: add */
            SceneTaskArgV2 t3[3] = {in[D], in[E], VIEW(K)};
            if (rc == SCENE_RT_OK) rc = scene_orch_submit_v2(ctx, FUNC_ADD_STANDALONE, 1, t3, 3);
            /* 4. aiv0+aiv1: add + mul */
            SceneTaskArgV2 t4[6] = {in[D], in[E], VIEW(L), in[G], in[H], VIEW(M)};
            if (rc == SCENE_RT_OK)
                rc = scene_orch_submit_mixed(
                    ctx, scene_mixed(NONE, FUNC_ADD_STANDALONE, FUNC_MUL_STANDALONE), 1, t4, 6);
            /* 5. aic+aiv0: matmul + add */
            SceneTaskArgV2 t5[6] = {in[A], in[B], VIEW(N), in[D], in[E], VIEW(O)};
            if (rc == SCENE_RT_OK)
                rc = scene_orch_submit_mixed(ctx, scene_mixed(FUNC_MATMUL, FUNC_ADD, NONE), 1, t5, 6);
#undef VIEW
        }
    }
    return rc;
}
