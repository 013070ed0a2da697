/*
 * The replay orchestration of `scene replay` (crates/harness/src/replay.rs):
 * submits exactly one task, described by run argument 0, with views of the
 * buffers given as run arguments 1..num_buffers. Shipped with the harness,
 * compiled and cached like any orchestration.
 *
 * Run argument 0 (`in`) is an array of little-endian uint64 words:
 *
 *   [0] SCENE_REPLAY_MAGIC   [1] func_id   [2] block_num
 *   [3] num_args             [4] num_buffers
 *   (a mixed task: [0] SCENE_REPLAY_MAGIC_MIXED, then [5] [6] [7] the
 *   func_id of slots aic, aiv0, aiv1, all ones for none)
 *   then per task argument, SCENE_REPLAY_ARG_WORDS words:
 *   [0] direction (SCENE_DIR_*)
 *   [1] tensors: the buffer (run argument 1 + this); scalars: the bits
 *   [2] byte offset of the view's first element in that buffer
 *   [3] bytes of the view's span
 *   [4] dtype   [5] rank   [6..14) shape   [14..22) strides (elements)
 *
 * The kernel gets what it got when the task was recorded: the same
 * descriptors (offset 0 at the span's first byte) and span sizes.
 */
#include <stdint.h>

#include "scene_orch.h"

#define SCENE_REPLAY_MAGIC 0x3159414c50455253ull       /* "SREPLAY1" */
#define SCENE_REPLAY_MAGIC_MIXED 0x3259414c50455253ull /* "SREPLAY2" */
#define SCENE_REPLAY_HEADER_WORDS 5u
#define SCENE_REPLAY_SLOT_WORDS 3u
#define SCENE_REPLAY_ARG_WORDS 22u
#define SCENE_REPLAY_MAX_ARGS 32u /* SCENE_MAX_ARGS of scene_kernel.h */
#define SCENE_REPLAY_MAX_WORDS \
    (SCENE_REPLAY_HEADER_WORDS + SCENE_REPLAY_SLOT_WORDS + SCENE_REPLAY_MAX_ARGS * SCENE_REPLAY_ARG_WORDS)

int32_t scene_replay_orch(SceneOrchCtx *ctx, const SceneOrchArg *args, uint32_t num_args) {
    uint64_t w[SCENE_REPLAY_MAX_WORDS];
    if (!scene_orch_has_v2(ctx)) {
        ctx->ops->fail(ctx, "scene replay needs an orchestration ABI v2 runtime");
        return -1;
    }
    if (num_args < 1 || args[0].direction != SCENE_DIR_IN || args[0].size < 8 * SCENE_REPLAY_HEADER_WORDS ||
        args[0].size > sizeof w || args[0].size % 8 != 0) {
        ctx->ops->fail(ctx, "scene replay: run argument 0 is not a task description");
        return -1;
    }
    int32_t rc = scene_orch_read(ctx, args[0].value, 0, w, args[0].size);
    if (rc != 0) return rc;
    uint64_t words = args[0].size / 8;
    uint64_t n = w[3], nbuf = w[4];
    int mixed = w[0] == SCENE_REPLAY_MAGIC_MIXED;
    uint64_t header = SCENE_REPLAY_HEADER_WORDS + (mixed ? SCENE_REPLAY_SLOT_WORDS : 0);
    if ((w[0] != SCENE_REPLAY_MAGIC && !mixed) || n > SCENE_REPLAY_MAX_ARGS ||
        words != header + n * SCENE_REPLAY_ARG_WORDS || nbuf + 1 != num_args) {
        ctx->ops->fail(ctx, "scene replay: malformed task description");
        return -1;
    }
    if (mixed && !scene_orch_has_v4(ctx)) {
        ctx->ops->fail(ctx, "scene replay of a mixed task needs an orchestration ABI v4 runtime");
        return -1;
    }
    SceneTaskArgV2 t[SCENE_REPLAY_MAX_ARGS];
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t *a = &w[header + i * SCENE_REPLAY_ARG_WORDS];
        if (a[0] == SCENE_DIR_SCALAR) {
            t[i] = scene_task_scalar(a[1]);
            continue;
        }
        if (a[1] >= nbuf || a[5] > SCENE_MAX_RANK) {
            ctx->ops->fail(ctx, "scene replay: a task argument names no buffer");
            return -1;
        }
        SceneTaskArgV2 v = {0};
        v.direction = (uint32_t)a[0];
        v.value = args[1 + a[1]].value + a[2];
        v.size = a[3];
        v.desc.dtype = (uint32_t)a[4];
        v.desc.rank = (uint32_t)a[5];
        v.desc.offset = 0;
        for (uint32_t d = 0; d < SCENE_MAX_RANK; d++) {
            v.desc.shape[d] = a[6 + d];
            v.desc.strides[d] = a[14 + d];
        }
        t[i] = v;
    }
    if (mixed) {
        SceneMixedKernels k = scene_mixed((int32_t)w[5], (int32_t)w[6], (int32_t)w[7]);
        return scene_orch_submit_mixed(ctx, k, (uint32_t)w[2], t, (uint32_t)n);
    }
    return scene_orch_submit_v2(ctx, (uint32_t)w[1], (uint32_t)w[2], t, (uint32_t)n);
}
