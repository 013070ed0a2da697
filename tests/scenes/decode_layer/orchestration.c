/*
 * One transformer decoder step for a single token (batch 1), as a task
 * graph over 39 incore kernels (15 cube, 24 vector):
 *
 *   ss1 = sum(x^2); xn = x * rsqrt(ss1/H + eps) * attn_norm_w      (2 AIV)
 *   q, k, v = xn @ wq, xn @ wk, xn @ wv                            (3 AIC)
 *   cs = rope table(pos); q_rot, k_rot = rope(q), rope(k)          (3 AIV)
 *   k_cache[pos] = k_rot; v_cache[pos] = v                         (2 AIV)
 *   per head h = 0..3 (T = pos + 1 cache rows):
 *     s_h = q_rot_h . K_h^T / sqrt(hd)                             (AIC)
 *     m_h = max(s_h); e_h = exp(s_h - m_h), z_h = sum(e_h);
 *     p_h = e_h / z_h                                              (3 AIV)
 *     attn_h = p_h @ V_h                                           (AIC)
 *   h1 = x + attn @ wo                                             (AIC + AIV)
 *   ss2 = sum(h1^2); hn = h1 * rsqrt(ss2/H + eps) * ffn_norm_w     (2 AIV)
 *   g, u = hn @ w_gate, hn @ w_up                                  (2 AIC)
 *   a = silu(g) * u                                                (AIV)
 *   y = h1 + a @ w_down                                            (AIC + AIV)
 *
 * Per-head tasks write their own slices of shared scratch buffers, so the
 * heads run side by side; the runtime orders everything else from the
 * buffers each task reads and writes.
 */
#include "scene_orch.h"

enum {
    FUNC_ATTN_SUMSQ = 0,
    FUNC_ATTN_NORM = 1,
    FUNC_Q_PROJ = 2,
    FUNC_K_PROJ = 3,
    FUNC_V_PROJ = 4,
    FUNC_ROPE_TABLE = 5,
    FUNC_ROPE_Q = 6,
    FUNC_ROPE_K = 7,
    FUNC_APPEND_K = 8,
    FUNC_APPEND_V = 9,
    FUNC_QK0 = 10,        /* + head */
    FUNC_MAX0 = 14,       /* + head */
    FUNC_EXP_SUM0 = 18,   /* + head */
    FUNC_NORMALIZE0 = 22, /* + head */
    FUNC_PV0 = 26,        /* + head */
    FUNC_O_PROJ = 30,
    FUNC_RESID_ATTN = 31,
    FUNC_FFN_SUMSQ = 32,
    FUNC_FFN_NORM = 33,
    FUNC_GATE_PROJ = 34,
    FUNC_UP_PROJ = 35,
    FUNC_SILU_MUL = 36,
    FUNC_DOWN_PROJ = 37,
    FUNC_RESID_FFN = 38,
};

#define HEADS 4 /* the per-head kernels are built for heads 0..3 */
#define VEC_BLOCKS 4
#define CUBE_BLOCKS 2

enum {
    A_X, A_ATTN_NORM_W, A_WQ, A_WK, A_WV, A_WO, A_K_CACHE, A_V_CACHE,
    A_FFN_NORM_W, A_W_GATE, A_W_UP, A_W_DOWN, A_Y, A_POS, A_N_HEADS, A_EPS, A_COUNT
};

SCENE_ORCH_ENTRY(decode_layer_orch, ctx, args, nargs) {
    if (nargs != A_COUNT) {
        ctx->ops->fail(ctx, "decode_layer_orch expects 16 arguments (13 tensors, pos, n_heads, eps)");
        return -1;
    }
    const uint64_t F4 = sizeof(float);
    uint64_t hid = args[A_X].size / F4;
    uint64_t pos = args[A_POS].value;
    uint64_t nh = args[A_N_HEADS].value;
    uint64_t eps_bits = args[A_EPS].value;
    if (nh != HEADS || hid == 0 || hid % nh != 0 || (hid / nh) % 2 != 0) {
        ctx->ops->fail(ctx, "decode_layer_orch: needs n_heads == 4 and an even head_dim");
        return -1;
    }
    uint64_t hd = hid / nh;
    uint64_t cache_rows = args[A_K_CACHE].size / (hid * F4);
    uint64_t ffn = args[A_W_GATE].size / (hid * F4);
    if (pos >= cache_rows || args[A_V_CACHE].size != args[A_K_CACHE].size || ffn == 0 ||
        args[A_WQ].size != hid * hid * F4 || args[A_W_DOWN].size != ffn * hid * F4) {
        ctx->ops->fail(ctx, "decode_layer_orch: tensor sizes disagree (or pos is past the cache)");
        return -1;
    }
    uint64_t tn = pos + 1; /* cache rows attended to, this token included */

    /* Scratch. */
    uint64_t hb = hid * F4, fb = ffn * F4;
    uint64_t ss1 = scene_orch_alloc(ctx, F4), xn = scene_orch_alloc(ctx, hb);
    uint64_t q = scene_orch_alloc(ctx, hb), k = scene_orch_alloc(ctx, hb), v = scene_orch_alloc(ctx, hb);
    uint64_t cs = scene_orch_alloc(ctx, hd * F4);
    uint64_t q_rot = scene_orch_alloc(ctx, hb), k_rot = scene_orch_alloc(ctx, hb);
    uint64_t scores = scene_orch_alloc(ctx, nh * tn * F4), mx = scene_orch_alloc(ctx, nh * F4);
    uint64_t ex = scene_orch_alloc(ctx, nh * tn * F4), sums = scene_orch_alloc(ctx, nh * F4);
    uint64_t probs = scene_orch_alloc(ctx, nh * tn * F4), attn = scene_orch_alloc(ctx, hb);
    uint64_t attn_o = scene_orch_alloc(ctx, hb), h1 = scene_orch_alloc(ctx, hb);
    uint64_t ss2 = scene_orch_alloc(ctx, F4), hn = scene_orch_alloc(ctx, hb);
    uint64_t g = scene_orch_alloc(ctx, fb), u = scene_orch_alloc(ctx, fb), act = scene_orch_alloc(ctx, fb);
    uint64_t down = scene_orch_alloc(ctx, hb);
    if (!ss1 || !xn || !q || !k || !v || !cs || !q_rot || !k_rot || !scores || !mx || !ex || !sums ||
        !probs || !attn || !attn_o || !h1 || !ss2 || !hn || !g || !u || !act || !down) {
        ctx->ops->fail(ctx, "decode_layer_orch: out of device memory");
        return -1;
    }

    int32_t rc;
#define SUBMIT(func, blocks, ...)                                                          \
    do {                                                                                   \
        SceneTaskArg t_[] = {__VA_ARGS__};                                                 \
        if ((rc = scene_orch_submit(ctx, (func), (blocks), t_,                             \
                                    (uint32_t)(sizeof(t_) / sizeof(t_[0])))) != 0)         \
            return rc;                                                                     \
    } while (0)

    /* Attention-input RMSNorm. */
    SUBMIT(FUNC_ATTN_SUMSQ, 1, SCENE_IN(args[A_X]), SCENE_OUT_BUF(ss1, F4));
    SUBMIT(FUNC_ATTN_NORM, VEC_BLOCKS, SCENE_IN(args[A_X]), SCENE_IN_BUF(ss1, F4),
           SCENE_IN(args[A_ATTN_NORM_W]), SCENE_OUT_BUF(xn, hb), SCENE_SCALAR_U64(eps_bits));

    /* Q/K/V projections. */
    SUBMIT(FUNC_Q_PROJ, CUBE_BLOCKS, SCENE_IN_BUF(xn, hb), SCENE_IN(args[A_WQ]), SCENE_OUT_BUF(q, hb));
    SUBMIT(FUNC_K_PROJ, CUBE_BLOCKS, SCENE_IN_BUF(xn, hb), SCENE_IN(args[A_WK]), SCENE_OUT_BUF(k, hb));
    SUBMIT(FUNC_V_PROJ, CUBE_BLOCKS, SCENE_IN_BUF(xn, hb), SCENE_IN(args[A_WV]), SCENE_OUT_BUF(v, hb));

    /* Rotary embedding. */
    SUBMIT(FUNC_ROPE_TABLE, 2, SCENE_OUT_BUF(cs, hd * F4), SCENE_SCALAR_U64(pos), SCENE_SCALAR_U64(hd));
    SUBMIT(FUNC_ROPE_Q, VEC_BLOCKS, SCENE_IN_BUF(q, hb), SCENE_IN_BUF(cs, hd * F4), SCENE_OUT_BUF(q_rot, hb),
           SCENE_SCALAR_U64(hd));
    SUBMIT(FUNC_ROPE_K, VEC_BLOCKS, SCENE_IN_BUF(k, hb), SCENE_IN_BUF(cs, hd * F4), SCENE_OUT_BUF(k_rot, hb),
           SCENE_SCALAR_U64(hd));

    /* KV cache append. */
    SUBMIT(FUNC_APPEND_K, VEC_BLOCKS, SCENE_IN_BUF(k_rot, hb), SCENE_INOUT(args[A_K_CACHE]), SCENE_SCALAR_U64(pos));
    SUBMIT(FUNC_APPEND_V, VEC_BLOCKS, SCENE_IN_BUF(v, hb), SCENE_INOUT(args[A_V_CACHE]), SCENE_SCALAR_U64(pos));

    /* Attention, head by head. */
    uint64_t row = tn * F4;
    for (uint32_t h = 0; h < HEADS; ++h) {
        SUBMIT(FUNC_QK0 + h, CUBE_BLOCKS, SCENE_IN_BUF(q_rot, hb), SCENE_IN(args[A_K_CACHE]),
               SCENE_OUT_BUF(scores + h * row, row), SCENE_SCALAR_U64(hd), SCENE_SCALAR_U64(tn));
    }
    for (uint32_t h = 0; h < HEADS; ++h) {
        SUBMIT(FUNC_MAX0 + h, 1, SCENE_IN_BUF(scores, nh * row), SCENE_OUT_BUF(mx + h * F4, F4),
               SCENE_SCALAR_U64(tn));
        SUBMIT(FUNC_EXP_SUM0 + h, 1, SCENE_IN_BUF(scores, nh * row), SCENE_IN_BUF(mx, nh * F4),
               SCENE_OUT_BUF(ex + h * row, row), SCENE_OUT_BUF(sums + h * F4, F4), SCENE_SCALAR_U64(tn));
        SUBMIT(FUNC_NORMALIZE0 + h, VEC_BLOCKS, SCENE_IN_BUF(ex, nh * row), SCENE_IN_BUF(sums, nh * F4),
               SCENE_OUT_BUF(probs + h * row, row), SCENE_SCALAR_U64(tn));
    }
    for (uint32_t h = 0; h < HEADS; ++h) {
        SUBMIT(FUNC_PV0 + h, CUBE_BLOCKS, SCENE_IN_BUF(probs, nh * row), SCENE_IN(args[A_V_CACHE]),
               SCENE_OUT_BUF(attn + h * hd * F4, hd * F4), SCENE_SCALAR_U64(tn), SCENE_SCALAR_U64(hd),
               SCENE_SCALAR_U64(nh));
    }

    /* Output projection + residual. */
    SUBMIT(FUNC_O_PROJ, CUBE_BLOCKS, SCENE_IN_BUF(attn, hb), SCENE_IN(args[A_WO]), SCENE_OUT_BUF(attn_o, hb));
    SUBMIT(FUNC_RESID_ATTN, VEC_BLOCKS, SCENE_IN(args[A_X]), SCENE_IN_BUF(attn_o, hb), SCENE_OUT_BUF(h1, hb));

    /* FFN-input RMSNorm. */
    SUBMIT(FUNC_FFN_SUMSQ, 1, SCENE_IN_BUF(h1, hb), SCENE_OUT_BUF(ss2, F4));
    SUBMIT(FUNC_FFN_NORM, VEC_BLOCKS, SCENE_IN_BUF(h1, hb), SCENE_IN_BUF(ss2, F4),
           SCENE_IN(args[A_FFN_NORM_W]), SCENE_OUT_BUF(hn, hb), SCENE_SCALAR_U64(eps_bits));

    /* SwiGLU MLP + residual. */
    SUBMIT(FUNC_GATE_PROJ, CUBE_BLOCKS, SCENE_IN_BUF(hn, hb), SCENE_IN(args[A_W_GATE]), SCENE_OUT_BUF(g, fb));
    SUBMIT(FUNC_UP_PROJ, CUBE_BLOCKS, SCENE_IN_BUF(hn, hb), SCENE_IN(args[A_W_UP]), SCENE_OUT_BUF(u, fb));
    SUBMIT(FUNC_SILU_MUL, VEC_BLOCKS, SCENE_IN_BUF(g, fb), SCENE_IN_BUF(u, fb), SCENE_OUT_BUF(act, fb));
    SUBMIT(FUNC_DOWN_PROJ, CUBE_BLOCKS, SCENE_IN_BUF(act, fb), SCENE_IN(args[A_W_DOWN]), SCENE_OUT_BUF(down, hb));
    SUBMIT(FUNC_RESID_FFN, VEC_BLOCKS, SCENE_IN_BUF(h1, hb), SCENE_IN_BUF(down, hb), SCENE_OUT(args[A_Y]));
#undef SUBMIT
    return 0;
}
