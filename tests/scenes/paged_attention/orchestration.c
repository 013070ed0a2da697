/*
 * Paged attention, host_build_graph structure (port of simpler's
 * tests/st/a2a3/host_build_graph/paged_attention paged_attention_orch.cpp)
 * on orchestration ABI v2.
 *
 * Run arguments: query [batch, num_heads, head_dim] bf16, key_cache and
 * value_cache [total_blocks, block_size, kv_head_num = 1, head_dim] bf16,
 * block_table [batch, max_blocks] i32, context_lens [batch] i32,
 * out [batch, num_heads, head_dim] f32, scale (f32 scalar).
 *
 * As in the original: the caches, query and out are seen as 2-d
 * ([total_blocks*block_size, head_dim], [batch*num_heads, head_dim]); for
 * every batch the orchestration reads context_lens[b] from device memory,
 * and for every block of it block_table[b][bn]; each (batch, q tile) is a
 * memory scope holding the running accumulators (oi, li, mi), each block an
 * inner scope holding its temporaries (sij, pij, mij, lij, oi_new), freed
 * as soon as the block's four tasks finished. Per block: QK (qi, key block
 * rows 0..valid_len) -> SF (the [q_tile, valid_len] view of sij) -> PV
 * (value block rows 0..valid_len) -> UP (into the q tile's view of out).
 */
#include "scene_orch.h"

#define FUNC_QK_MATMUL 0
#define FUNC_SOFTMAX_PREPARE 1
#define FUNC_PV_MATMUL 2
#define FUNC_ONLINE_UPDATE 3

typedef struct Pa {
    SceneOrchCtx *ctx;
    SceneTaskArgV2 query, key_cache, value_cache, block_table, out;
    uint32_t dtype;
    uint64_t block_size, head_dim, total_blocks, scale_bits;
} Pa;

static int32_t fail(SceneOrchCtx *ctx, const char *msg) {
    ctx->ops->fail(ctx, msg);
    return SCENE_RT_E_INVALID;
}

/* One block of one (batch, q tile): four tasks in an inner scope. */
static int32_t submit_block(const Pa *pa, SceneTaskArgV2 qi, SceneTaskArgV2 out_view,
                            const SceneTaskArgV2 acc[3], uint64_t q_tile, uint64_t b,
                            uint64_t bn, uint64_t cur_seq, uint64_t bn_this_batch) {
    SceneOrchCtx *ctx = pa->ctx;
    int32_t rc;
    int32_t blk;
    uint64_t bt_idx[2] = {b, bn};
    if ((rc = scene_orch_get(ctx, &pa->block_table, bt_idx, &blk)) != 0) return rc;
    if (blk < 0 || (uint64_t)blk >= pa->total_blocks)
        return fail(ctx, "paged_attention_orch: block_table entry out of range");
    uint64_t rest = cur_seq - bn * pa->block_size;
    uint64_t valid_len = rest < pa->block_size ? rest : pa->block_size;

    /* The valid rows of the key / value block the block table selects. */
    uint64_t kv_off[2] = {(uint64_t)blk * pa->block_size, 0};
    uint64_t kv_shape[2] = {valid_len, pa->head_dim};
    SceneTaskArgV2 kj = scene_task_view(pa->key_cache, kv_off, kv_shape);
    SceneTaskArgV2 vj = scene_task_view(pa->value_cache, kv_off, kv_shape);

    uint64_t zero[2] = {0, 0};
    uint64_t sij_shape[2] = {q_tile, pa->block_size};
    uint64_t valid_shape[2] = {q_tile, valid_len};
    uint64_t vec_shape[1] = {q_tile};
    uint64_t tile_shape[2] = {q_tile, pa->head_dim};
    uint64_t sij = scene_orch_alloc(ctx, q_tile * pa->block_size * 4);
    uint64_t pij = scene_orch_alloc(ctx, q_tile * pa->block_size * 2);
    uint64_t mij = scene_orch_alloc(ctx, q_tile * 4);
    uint64_t lij = scene_orch_alloc(ctx, q_tile * 4);
    uint64_t oi_new = scene_orch_alloc(ctx, q_tile * pa->head_dim * 4);
    if (!sij || !pij || !mij || !lij || !oi_new)
        return fail(ctx, "paged_attention_orch: out of device memory");
    SceneTaskArgV2 sij_valid = scene_task_view(
        scene_task_buf(SCENE_DIR_OUT, sij, SCENE_DTYPE_F32, 2, sij_shape), zero, valid_shape);
    SceneTaskArgV2 pij_valid = scene_task_view(
        scene_task_buf(SCENE_DIR_OUT, pij, pa->dtype, 2, sij_shape), zero, valid_shape);
    SceneTaskArgV2 mij_t = scene_task_buf(SCENE_DIR_OUT, mij, SCENE_DTYPE_F32, 1, vec_shape);
    SceneTaskArgV2 lij_t = scene_task_buf(SCENE_DIR_OUT, lij, SCENE_DTYPE_F32, 1, vec_shape);
    SceneTaskArgV2 oi_new_t = scene_task_buf(SCENE_DIR_OUT, oi_new, SCENE_DTYPE_F32, 2, tile_shape);

    SceneTaskArgV2 qk[3] = {qi, kj, sij_valid};
    if ((rc = scene_orch_submit_v2(ctx, FUNC_QK_MATMUL, 1, qk, 3)) != 0) return rc;

    SceneTaskArgV2 sf[5] = {scene_task_dir(sij_valid, SCENE_DIR_IN), pij_valid, mij_t, lij_t,
                            scene_task_scalar(pa->scale_bits)};
    if ((rc = scene_orch_submit_v2(ctx, FUNC_SOFTMAX_PREPARE, 1, sf, 5)) != 0) return rc;

    SceneTaskArgV2 pv[3] = {scene_task_dir(pij_valid, SCENE_DIR_IN), vj, oi_new_t};
    if ((rc = scene_orch_submit_v2(ctx, FUNC_PV_MATMUL, 1, pv, 3)) != 0) return rc;

    SceneTaskArgV2 up[9] = {scene_task_dir(mij_t, SCENE_DIR_IN),
                            scene_task_dir(lij_t, SCENE_DIR_IN),
                            scene_task_dir(oi_new_t, SCENE_DIR_IN),
                            acc[0],
                            acc[1],
                            acc[2],
                            out_view,
                            scene_task_scalar(bn == 0),
                            scene_task_scalar(bn == bn_this_batch - 1)};
    return scene_orch_submit_v2(ctx, FUNC_ONLINE_UPDATE, 1, up, 9);
}

/* One (batch, q tile): accumulators in the caller's scope, blocks in their own. */
static int32_t submit_tile(const Pa *pa, uint64_t b, uint64_t row0, uint64_t q_tile,
                           uint64_t cur_seq) {
    SceneOrchCtx *ctx = pa->ctx;
    uint64_t bn_this_batch = (cur_seq + pa->block_size - 1) / pa->block_size;
    uint64_t off[2] = {row0, 0}, tile_shape[2] = {q_tile, pa->head_dim}, vec_shape[1] = {q_tile};
    SceneTaskArgV2 qi = scene_task_view(pa->query, off, tile_shape);
    SceneTaskArgV2 out_view = scene_task_dir(scene_task_view(pa->out, off, tile_shape),
                                             SCENE_DIR_INOUT);
    uint64_t mi = scene_orch_alloc(ctx, q_tile * 4);
    uint64_t li = scene_orch_alloc(ctx, q_tile * 4);
    uint64_t oi = scene_orch_alloc(ctx, q_tile * pa->head_dim * 4);
    if (!mi || !li || !oi) return fail(ctx, "paged_attention_orch: out of device memory");
    SceneTaskArgV2 acc[3] = {
        scene_task_buf(SCENE_DIR_INOUT, mi, SCENE_DTYPE_F32, 1, vec_shape),
        scene_task_buf(SCENE_DIR_INOUT, li, SCENE_DTYPE_F32, 1, vec_shape),
        scene_task_buf(SCENE_DIR_INOUT, oi, SCENE_DTYPE_F32, 2, tile_shape)};
    int32_t rc = 0;
    for (uint64_t bn = 0; bn < bn_this_batch && rc == 0; bn++) {
        SCENE_SCOPE(ctx) {
            rc = submit_block(pa, qi, out_view, acc, q_tile, b, bn, cur_seq, bn_this_batch);
        }
    }
    return rc;
}

SCENE_ORCH_ENTRY(paged_attention_orch, ctx, args, nargs) {
    if (!scene_orch_has_v2(ctx)) return fail(ctx, "paged_attention_orch needs orchestration ABI v2");
    if (nargs != 7)
        return fail(ctx, "paged_attention_orch expects 7 arguments (query, key_cache, value_cache, "
                         "block_table, context_lens, out, scale)");
    const SceneTensorDesc *q = scene_orch_desc(ctx, 0), *kc = scene_orch_desc(ctx, 1),
                          *bt = scene_orch_desc(ctx, 3), *cl = scene_orch_desc(ctx, 4);
    if (!q || !kc || !bt || !cl || q->rank != 3 || kc->rank != 4 || bt->rank != 2 ||
        cl->rank != 1 || bt->dtype != SCENE_DTYPE_I32 || cl->dtype != SCENE_DTYPE_I32)
        return fail(ctx, "paged_attention_orch: unexpected argument ranks or dtypes");
    uint64_t batch = q->shape[0], num_heads = q->shape[1], head_dim = q->shape[2];
    if (kc->shape[2] != 1 || kc->shape[3] != head_dim || bt->shape[0] != batch ||
        cl->shape[0] != batch)
        return fail(ctx, "paged_attention_orch: shapes do not agree (kv_head_num must be 1)");

    Pa pa;
    pa.ctx = ctx;
    pa.dtype = q->dtype;
    pa.block_size = kc->shape[1];
    pa.head_dim = head_dim;
    pa.total_blocks = kc->shape[0];
    pa.scale_bits = args[6].value;
    uint64_t block_num = bt->shape[1];
    uint64_t q_tile = num_heads < 128 ? num_heads : 128;
    uint64_t q_loop = (num_heads + q_tile - 1) / q_tile;

    /* 2-d reshapes, as the original's make_tensor_external. */
    uint64_t rows_q[2] = {batch * num_heads, head_dim};
    uint64_t rows_kv[2] = {pa.total_blocks * pa.block_size, head_dim};
    pa.query = scene_task_arg(ctx, args, 0, SCENE_DIR_IN);
    pa.query.desc = scene_desc_contiguous(pa.dtype, 2, rows_q);
    pa.key_cache = scene_task_arg(ctx, args, 1, SCENE_DIR_IN);
    pa.key_cache.desc = scene_desc_contiguous(pa.dtype, 2, rows_kv);
    pa.value_cache = scene_task_arg(ctx, args, 2, SCENE_DIR_IN);
    pa.value_cache.desc = scene_desc_contiguous(pa.dtype, 2, rows_kv);
    pa.block_table = scene_task_arg(ctx, args, 3, SCENE_DIR_IN);
    pa.out = scene_task_arg(ctx, args, 5, SCENE_DIR_OUT);
    pa.out.desc = scene_desc_contiguous(SCENE_DTYPE_F32, 2, rows_q);
    SceneTaskArgV2 context_lens = scene_task_arg(ctx, args, 4, SCENE_DIR_IN);

    for (uint64_t b = 0; b < batch; b++) {
        int32_t seq;
        uint64_t cl_idx[1] = {b};
        int32_t rc = scene_orch_get(ctx, &context_lens, cl_idx, &seq);
        if (rc != 0) return rc;
        if (seq < 0 || (uint64_t)seq > block_num * pa.block_size)
            return fail(ctx, "paged_attention_orch: context_lens entry out of range");
        uint64_t cur_seq = (uint64_t)seq;
        for (uint64_t q_idx = 0; q_idx < q_loop && rc == 0; q_idx++) {
            uint64_t rows = num_heads - q_idx * q_tile < q_tile ? num_heads - q_idx * q_tile : q_tile;
            SCENE_SCOPE(ctx) {
                rc = submit_tile(&pa, b, b * num_heads + q_idx * q_tile, rows, cur_seq);
            }
        }
        if (rc != 0) return rc;
    }
    return 0;
}
