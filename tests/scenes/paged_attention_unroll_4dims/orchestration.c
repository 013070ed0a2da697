/*
 * Paged attention with 4-d query / out and groups of up to N_UNROLL blocks
 * (port of simpler's tests/st/a2a3/tensormap_and_ringbuffer/
 * paged_attention_unroll_4dims paged_attention_orch.cpp) on orchestration
 * ABI v2.
 *
 * Run arguments: query [batch, 1, num_heads, head_dim] bf16, key_cache and
 * value_cache [total_blocks, block_size, kv_head_num = 1, head_dim] bf16,
 * block_table [batch, max_blocks] i32, context_lens [batch] i32,
 * out [batch, 1, num_heads, head_dim] f32, scale (f32 scalar).
 *
 * As in the original: the orchestration reads context_lens[b] (only that:
 * the QK and PV kernels read the block table themselves); each
 * (batch, q tile) is one memory scope holding the accumulators and every
 * group's temporaries; per group of n_blocks blocks, four tasks: QK
 * (4-d q tile view, whole key cache, the group's [1, n_blocks] view of the
 * block table) -> two-pass softmax -> split-K PV -> online update into the
 * q tile's 4-d view of out. The original passes the whole block table plus
 * an offset scalar; here the view carries the offset.
 */
#include "scene_orch.h"

#define N_UNROLL 64

#define FUNC_QK_MATMUL 0
#define FUNC_SOFTMAX_PREPARE 1
#define FUNC_PV_MATMUL 2
#define FUNC_ONLINE_UPDATE 3

typedef struct Pa {
    SceneOrchCtx *ctx;
    SceneTaskArgV2 query, key_cache, value_cache, block_table, out;
    uint32_t dtype;
    uint64_t block_size, head_dim, scale_bits;
} Pa;

static int32_t fail(SceneOrchCtx *ctx, const char *msg) {
    ctx->ops->fail(ctx, msg);
    return SCENE_RT_E_INVALID;
}

/* One (batch, q tile); runs inside the caller's scope. */
static int32_t submit_tile(const Pa *pa, uint64_t b, uint64_t q_off, uint64_t q_tile,
                           uint64_t cur_seq) {
    SceneOrchCtx *ctx = pa->ctx;
    int32_t rc;
    uint64_t bn_this_batch = (cur_seq + pa->block_size - 1) / pa->block_size;
    uint64_t view_off[4] = {b, 0, q_off, 0};
    uint64_t tile4d[4] = {1, 1, q_tile, pa->head_dim};
    uint64_t scalar3d[3] = {1, 1, q_tile};
    SceneTaskArgV2 qi = scene_task_view(pa->query, view_off, tile4d);
    SceneTaskArgV2 out_view =
        scene_task_dir(scene_task_view(pa->out, view_off, tile4d), SCENE_DIR_INOUT);

    uint64_t oi = scene_orch_alloc(ctx, q_tile * pa->head_dim * 4);
    uint64_t li_update = scene_orch_alloc(ctx, q_tile * 4);
    uint64_t mi_update = scene_orch_alloc(ctx, q_tile * 4);
    if (!oi || !li_update || !mi_update)
        return fail(ctx, "paged_attention_unroll_orch: out of device memory");
    SceneTaskArgV2 oi_t = scene_task_buf(SCENE_DIR_INOUT, oi, SCENE_DTYPE_F32, 4, tile4d);
    SceneTaskArgV2 li_t = scene_task_buf(SCENE_DIR_INOUT, li_update, SCENE_DTYPE_F32, 3, scalar3d);
    SceneTaskArgV2 mi_t = scene_task_buf(SCENE_DIR_INOUT, mi_update, SCENE_DTYPE_F32, 3, scalar3d);

    for (uint64_t bn = 0; bn < bn_this_batch; bn += N_UNROLL) {
        uint64_t n_blocks = bn_this_batch - bn < N_UNROLL ? bn_this_batch - bn : N_UNROLL;
        uint64_t last_block_seq_start = (bn + n_blocks - 1) * pa->block_size;
        uint64_t rest = cur_seq - last_block_seq_start;
        uint64_t valid_len_last = rest < pa->block_size ? rest : pa->block_size;

        uint64_t bt_off[2] = {b, bn}, bt_shape[2] = {1, n_blocks};
        SceneTaskArgV2 bt = scene_task_view(pa->block_table, bt_off, bt_shape);

        uint64_t buf4d[4] = {1, 1, q_tile, n_blocks * pa->block_size};
        uint64_t sij = scene_orch_alloc(ctx, q_tile * n_blocks * pa->block_size * 4);
        uint64_t pij = scene_orch_alloc(ctx, q_tile * n_blocks * pa->block_size * 2);
        uint64_t mi = scene_orch_alloc(ctx, q_tile * 4);
        uint64_t li = scene_orch_alloc(ctx, q_tile * 4);
        uint64_t oi_new = scene_orch_alloc(ctx, q_tile * pa->head_dim * 4);
        if (!sij || !pij || !mi || !li || !oi_new)
            return fail(ctx, "paged_attention_unroll_orch: out of device memory");
        SceneTaskArgV2 sij_t = scene_task_buf(SCENE_DIR_OUT, sij, SCENE_DTYPE_F32, 4, buf4d);
        SceneTaskArgV2 pij_t = scene_task_buf(SCENE_DIR_OUT, pij, pa->dtype, 4, buf4d);
        SceneTaskArgV2 mi_o = scene_task_buf(SCENE_DIR_OUT, mi, SCENE_DTYPE_F32, 3, scalar3d);
        SceneTaskArgV2 li_o = scene_task_buf(SCENE_DIR_OUT, li, SCENE_DTYPE_F32, 3, scalar3d);
        SceneTaskArgV2 oi_new_t = scene_task_buf(SCENE_DIR_OUT, oi_new, SCENE_DTYPE_F32, 4, tile4d);

        SceneTaskArgV2 qk[5] = {qi, pa->key_cache, bt, sij_t, scene_task_scalar(n_blocks)};
        if ((rc = scene_orch_submit_v2(ctx, FUNC_QK_MATMUL, 1, qk, 5)) != 0) return rc;

        SceneTaskArgV2 sf[7] = {scene_task_dir(sij_t, SCENE_DIR_IN), pij_t, mi_o, li_o,
                                scene_task_scalar(pa->scale_bits), scene_task_scalar(n_blocks),
                                scene_task_scalar(valid_len_last)};
        if ((rc = scene_orch_submit_v2(ctx, FUNC_SOFTMAX_PREPARE, 1, sf, 7)) != 0) return rc;

        SceneTaskArgV2 pv[5] = {scene_task_dir(pij_t, SCENE_DIR_IN), pa->value_cache, bt,
                                oi_new_t, scene_task_scalar(n_blocks)};
        if ((rc = scene_orch_submit_v2(ctx, FUNC_PV_MATMUL, 1, pv, 5)) != 0) return rc;

        SceneTaskArgV2 up[9] = {scene_task_dir(mi_o, SCENE_DIR_IN),
                                scene_task_dir(li_o, SCENE_DIR_IN),
                                scene_task_dir(oi_new_t, SCENE_DIR_IN),
                                mi_t,
                                li_t,
                                oi_t,
                                out_view,
                                scene_task_scalar(bn == 0),
                                scene_task_scalar(bn + n_blocks >= bn_this_batch)};
        if ((rc = scene_orch_submit_v2(ctx, FUNC_ONLINE_UPDATE, 1, up, 9)) != 0) return rc;
    }
    return 0;
}

SCENE_ORCH_ENTRY(paged_attention_unroll_orch, ctx, args, nargs) {
    if (!scene_orch_has_v2(ctx))
        return fail(ctx, "paged_attention_unroll_orch needs orchestration ABI v2");
    if (nargs != 7)
        return fail(ctx, "paged_attention_unroll_orch expects 7 arguments (query, key_cache, "
                         "value_cache, block_table, context_lens, out, scale)");
    const SceneTensorDesc *q = scene_orch_desc(ctx, 0), *kc = scene_orch_desc(ctx, 1),
                          *bt = scene_orch_desc(ctx, 3), *cl = scene_orch_desc(ctx, 4);
    if (!q || !kc || !bt || !cl || q->rank != 4 || kc->rank != 4 || bt->rank != 2 ||
        cl->rank != 1 || bt->dtype != SCENE_DTYPE_I32 || cl->dtype != SCENE_DTYPE_I32)
        return fail(ctx, "paged_attention_unroll_orch: unexpected argument ranks or dtypes");
    /* query: [batch, seq_len = 1, num_heads, head_dim] */
    uint64_t batch = q->shape[0], num_heads = q->shape[2], head_dim = q->shape[3];
    if (q->shape[1] != 1 || kc->shape[2] != 1 || kc->shape[3] != head_dim ||
        bt->shape[0] != batch || cl->shape[0] != batch)
        return fail(ctx, "paged_attention_unroll_orch: shapes do not agree (seq_len and "
                         "kv_head_num must be 1)");
    Pa pa;
    pa.ctx = ctx;
    pa.dtype = q->dtype;
    pa.block_size = kc->shape[1];
    pa.head_dim = head_dim;
    pa.scale_bits = args[6].value;
    uint64_t block_num = bt->shape[1];
    uint64_t q_tile = num_heads < 128 ? num_heads : 128;
    uint64_t q_loop = (num_heads + q_tile - 1) / q_tile;

    /* The 4-d tensors as they are (the original: "external 4D tensors
     * inherit shape/dtype from TaskArg"). */
    pa.query = scene_task_arg(ctx, args, 0, SCENE_DIR_IN);
    pa.key_cache = scene_task_arg(ctx, args, 1, SCENE_DIR_IN);
    pa.value_cache = scene_task_arg(ctx, args, 2, SCENE_DIR_IN);
    pa.block_table = scene_task_arg(ctx, args, 3, SCENE_DIR_IN);
    pa.out = scene_task_arg(ctx, args, 5, SCENE_DIR_OUT);

    for (uint64_t b = 0; b < batch; b++) {
        int32_t seq;
        int32_t rc = scene_orch_read(ctx, args[4].value, b * sizeof(int32_t), &seq, sizeof seq);
        if (rc != 0) return rc;
        if (seq < 0 || (uint64_t)seq > block_num * pa.block_size)
            return fail(ctx, "paged_attention_unroll_orch: context_lens entry out of range");
        for (uint64_t q_idx = 0; q_idx < q_loop && rc == 0; q_idx++) {
            uint64_t q_off = q_idx * q_tile;
            uint64_t rows = num_heads - q_off < q_tile ? num_heads - q_off : q_tile;
            SCENE_SCOPE(ctx) {
                rc = submit_tile(&pa, b, q_off, rows, (uint64_t)seq);
            }
        }
        if (rc != 0) return rc;
    }
    return 0;
}
