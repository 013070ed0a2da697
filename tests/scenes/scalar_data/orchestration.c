/*
 * scalar_data: an orchestration that reads and writes tensor data itself,
 * between task submissions, and relies on the runtime to order each access
 * against the tasks around it (orchestration ABI v2). The steps, in order,
 * each landing one value in check[0..8]:
 *
 *   1      c = a + b (kernel_add) into a buffer the orchestration allocated
 *   2, 3   read c[0], c[100]: each read waits for c's producer
 *                                                 check[0] = 2, check[1] = 102
 *   4, 5   s = one f32 given the initial value 77 (fill); read s[0]
 *                                                 check[2] = 77
 *   6, 7   noop(s inout); read s[0]: waits for the noop, which kept it
 *                                                 check[3] = 77
 *   8      arithmetic on values read back: c[0] + s[0]
 *                                                 check[4] = 79
 *   9      write s[0] = 42, read it back          check[5] = 42
 *   10     write d[0] = 10 into a fresh buffer, then e = d + a (kernel_add)
 *          must see it (orchestration -> kernel RAW); read e[0]
 *                                                 check[6] = 12
 *   11     a kernel_add reads c; the write c[0] = 88 right after it must
 *          wait for that reader (WAR) and c's producer (WAW); read c[0]
 *                                                 check[7] = 88
 *   12     noop(b out); the write b[0] = 55 must wait for it; read b[0]
 *                                                 check[8] = 55
 *          then write b's original b[0] = 0 back
 *   13     result = a + b (kernel_add)
 *
 * Every check slot is written with scene_orch_set on the run argument
 * `check` (whose device address is args[3].value). Intermediates are given
 * back with scene_orch_free or a scope once the steps that use them are done.
 */
#include <stdio.h>

#include "scene_orch.h"

enum { FUNC_ADD = 0, FUNC_NOOP = 1 };
enum { ARG_A = 0, ARG_B = 1, ARG_RESULT = 2, ARG_CHECK = 3, NUM_ARGS = 4 };
#define CHECK_SLOTS 9
#define BLOCKS 4

/* Reports which step's call failed, with its status; returns the status.
 * (A call the runtime refused has recorded its own message, which is the
 * one the run shows.) */
static int32_t step_failed(SceneOrchCtx *ctx, int step, const char *call, int32_t rc) {
    char msg[256];
    snprintf(msg, sizeof msg, "scalar_data_orch step %d: %s returned %d", step, call, (int)rc);
    ctx->ops->fail(ctx, msg);
    return rc ? rc : -1;
}

#define TRY(step, call)                                                  \
    do {                                                                 \
        int32_t rc_ = (call);                                            \
        if (rc_ != 0) return step_failed(ctx, (step), #call, rc_);       \
    } while (0)

/* A device address the orchestration allocated, or a failed step. */
#define ALLOC(step, var, bytes)                                                    \
    uint64_t var = scene_orch_alloc(ctx, (bytes));                                 \
    if (!var) return step_failed(ctx, (step), "scene_orch_alloc(" #var ")", -1)

static int32_t submit3(SceneOrchCtx *ctx, uint32_t func_id, SceneTaskArgV2 x, SceneTaskArgV2 y,
                       SceneTaskArgV2 out) {
    SceneTaskArgV2 t[3] = {x, y, out};
    return scene_orch_submit_v2(ctx, func_id, BLOCKS, t, 3);
}

static int32_t submit1(SceneOrchCtx *ctx, uint32_t func_id, SceneTaskArgV2 x) {
    return scene_orch_submit_v2(ctx, func_id, 1, &x, 1);
}

SCENE_ORCH_ENTRY(scalar_data_orch, ctx, args, nargs) {
    if (!scene_orch_has_v2(ctx)) {
        ctx->ops->fail(ctx, "scalar_data_orch needs orchestration ABI v2 (read/write/fill)");
        return SCENE_RT_E_ABI;
    }
    if (nargs != NUM_ARGS) {
        ctx->ops->fail(ctx, "scalar_data_orch expects 4 arguments (a, b, result, check)");
        return -1;
    }
    /* Metadata: the shapes come with the run arguments. */
    const SceneTensorDesc *da = scene_orch_desc(ctx, ARG_A);
    const SceneTensorDesc *dcheck = scene_orch_desc(ctx, ARG_CHECK);
    if (!da || !dcheck || da->dtype != SCENE_DTYPE_F32 || da->rank != 1 ||
        dcheck->dtype != SCENE_DTYPE_F32 || dcheck->rank != 1 ||
        dcheck->shape[0] != CHECK_SLOTS) {
        ctx->ops->fail(ctx, "scalar_data_orch: a must be a rank-1 f32 tensor and check nine f32 "
                            "(scene_orch_desc gave something else)");
        return -1;
    }
    const uint64_t size = da->shape[0];
    const uint64_t bytes = size * sizeof(float);
    if (size <= 100 || args[ARG_B].size != bytes || args[ARG_RESULT].size != bytes) {
        ctx->ops->fail(ctx, "scalar_data_orch: a, b and result must be f32 tensors of one "
                            "size above 100 elements");
        return -1;
    }
    const uint64_t one = 1;

    SceneTaskArgV2 a = scene_task_arg(ctx, args, ARG_A, SCENE_DIR_IN);
    SceneTaskArgV2 b = scene_task_arg(ctx, args, ARG_B, SCENE_DIR_IN);
    SceneTaskArgV2 check = scene_task_arg(ctx, args, ARG_CHECK, SCENE_DIR_OUT);
    uint64_t idx[1] = {0};
    uint64_t slot[1] = {0};

    /* Step 1: c = a + b, c allocated by the orchestration. */
    ALLOC(1, c_addr, bytes);
    SceneTaskArgV2 c = scene_task_buf(SCENE_DIR_OUT, c_addr, SCENE_DTYPE_F32, 1, &size);
    TRY(1, submit3(ctx, FUNC_ADD, a, b, c));

    /* Step 2: c[0] (waits for step 1's task). */
    float c0 = 0.0f;
    idx[0] = 0;
    TRY(2, scene_orch_get(ctx, &c, idx, &c0));
    slot[0] = 0;
    TRY(2, scene_orch_set(ctx, &check, slot, &c0));

    /* Step 3: c[100], an element at a nonzero offset. */
    float c100 = 0.0f;
    idx[0] = 100;
    TRY(3, scene_orch_get(ctx, &c, idx, &c100));
    slot[0] = 1;
    TRY(3, scene_orch_set(ctx, &check, slot, &c100));

    /* Step 4: a one-element tensor with the initial value 77. */
    ALLOC(4, s_addr, sizeof(float));
    SceneTaskArgV2 s = scene_task_buf(SCENE_DIR_INOUT, s_addr, SCENE_DTYPE_F32, 1, &one);
    const float s_init = 77.0f;
    TRY(4, scene_orch_fill(ctx, s_addr, 0, sizeof(float), &s_init, sizeof s_init));

    /* Step 5: the initial value reads back. */
    float s0 = 0.0f;
    idx[0] = 0;
    TRY(5, scene_orch_get(ctx, &s, idx, &s0));
    slot[0] = 2;
    TRY(5, scene_orch_set(ctx, &check, slot, &s0));

    /* Step 6: a task that uses s as inout without touching it. */
    TRY(6, submit1(ctx, FUNC_NOOP, s));

    /* Step 7: reading s waits for that task; the value survived. */
    float s1 = 0.0f;
    TRY(7, scene_orch_get(ctx, &s, idx, &s1));
    slot[0] = 3;
    TRY(7, scene_orch_set(ctx, &check, slot, &s1));

    /* Step 8: arithmetic in the orchestration on values it read. */
    float combined = c0 + s0;
    slot[0] = 4;
    TRY(8, scene_orch_set(ctx, &check, slot, &combined));

    /* Step 9: write then read the same element. */
    const float s_new = 42.0f;
    TRY(9, scene_orch_set(ctx, &s, idx, &s_new));
    float s2 = 0.0f;
    TRY(9, scene_orch_get(ctx, &s, idx, &s2));
    slot[0] = 5;
    TRY(9, scene_orch_set(ctx, &check, slot, &s2));
    TRY(9, scene_orch_free(ctx, s_addr));

    /* Step 10: a kernel reads what the orchestration wrote. */
    ALLOC(10, d_addr, bytes);
    ALLOC(10, e_addr, bytes);
    SceneTaskArgV2 d = scene_task_buf(SCENE_DIR_IN, d_addr, SCENE_DTYPE_F32, 1, &size);
    SceneTaskArgV2 e = scene_task_buf(SCENE_DIR_OUT, e_addr, SCENE_DTYPE_F32, 1, &size);
    const float d0 = 10.0f;
    TRY(10, scene_orch_set(ctx, &d, idx, &d0));
    TRY(10, submit3(ctx, FUNC_ADD, d, a, e));
    float e0 = 0.0f;
    TRY(10, scene_orch_get(ctx, &e, idx, &e0));
    slot[0] = 6;
    TRY(10, scene_orch_set(ctx, &check, slot, &e0));
    TRY(10, scene_orch_free(ctx, d_addr));
    TRY(10, scene_orch_free(ctx, e_addr));

    /* Step 11: a kernel reads c (its output lives in a scope, freed when
     * that task is done); the write right after it waits for the reader
     * (WAR) and for c's producer (WAW), with no read in between. */
    int32_t rc = 0;
    SCENE_SCOPE(ctx) {
        uint64_t g_addr = scene_orch_alloc(ctx, bytes);
        SceneTaskArgV2 g = scene_task_buf(SCENE_DIR_OUT, g_addr, SCENE_DTYPE_F32, 1, &size);
        rc = g_addr ? submit3(ctx, FUNC_ADD, scene_task_dir(c, SCENE_DIR_IN), b, g) : -1;
    }
    if (rc != 0) return step_failed(ctx, 11, "scene_orch_alloc + submit of the reader of c", rc);
    const float c_new = 88.0f;
    TRY(11, scene_orch_set(ctx, &c, idx, &c_new));
    float c_back = 0.0f;
    TRY(11, scene_orch_get(ctx, &c, idx, &c_back));
    slot[0] = 7;
    TRY(11, scene_orch_set(ctx, &check, slot, &c_back));
    TRY(11, scene_orch_free(ctx, c_addr));

    /* Step 12: a task writes b (the noop: it touches nothing); the write
     * after it waits for it. b[0] is restored for step 13. */
    TRY(12, submit1(ctx, FUNC_NOOP, scene_task_dir(b, SCENE_DIR_OUT)));
    const float b_new = 55.0f;
    TRY(12, scene_orch_set(ctx, &b, idx, &b_new));
    float b_back = 0.0f;
    TRY(12, scene_orch_get(ctx, &b, idx, &b_back));
    slot[0] = 8;
    TRY(12, scene_orch_set(ctx, &check, slot, &b_back));
    const float b_orig = 0.0f;
    TRY(12, scene_orch_set(ctx, &b, idx, &b_orig));

    /* Step 13: result = a + b. */
    TRY(13, submit3(ctx, FUNC_ADD, a, b,
                    scene_task_arg(ctx, args, ARG_RESULT, SCENE_DIR_OUT)));
    return 0;
}
