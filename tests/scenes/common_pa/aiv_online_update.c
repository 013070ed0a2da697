/*
 * Online softmax update + normalize (AIV), shared by paged_attention and
 * paged_attention_unroll_4dims: simpler's aiv_online_update.cpp is the same
 * math in both tests (only the views' rank differs), so one source serves
 * both. Plain C over the views instead of PTO tiles.
 *
 * Arguments (views, f32):
 *   0 mij    [..., M]      this block's (or group's) row max      in
 *   1 lij    [..., M]      its row sum of exp                     in
 *   2 oi_new [..., M, N]   its unnormalised P @ V                 in
 *   3 mi     [..., M]      running max                            inout
 *   4 li     [..., M]      running sum                            inout
 *   5 oi     [..., M, N]   running unnormalised output            inout
 *   6 dst    [..., M, N]   the output tile (written when is_last) inout
 *   7 is_first, 8 is_last (scalars)
 * Leading dimensions ("...") are 1: rank 1/2 in the host_build_graph port,
 * rank 3/4 in the 4-d port.
 *
 *   first:  mi = mij, li = lij, oi = oi_new; last: dst = oi_new / lij
 *   else:   mi' = max(mi, mij), a = exp(mi - mi'), b = exp(mij - mi'),
 *           li' = a*li + b*lij, oi' = a*oi + b*oi_new;
 *           last: dst = oi' / li' (mi, li persisted), else mi, li, oi persisted
 */
#include "scene_kernel.h"

/* Element m of a vector view / (m, n) of a matrix view, over the last dims. */
#define VEC(i, m) \
    (SCENE_ARG_PTR(ka, i, float) + (m) * SCENE_ARG_STRIDE(ka, i, ka->descs[i].rank - 1))
#define MAT(i, m, n)                                                          \
    (SCENE_ARG_PTR(ka, i, float) + (m) * SCENE_ARG_STRIDE(ka, i, ka->descs[i].rank - 2) + \
     (n) * SCENE_ARG_STRIDE(ka, i, ka->descs[i].rank - 1))
#define LAST(i, k) SCENE_ARG_DIM(ka, i, ka->descs[i].rank - (k))

static int leading_ones(const SceneTensorDesc *d, uint32_t keep) {
    if (d->rank < keep) return 0;
    for (uint32_t i = 0; i + keep < d->rank; i++)
        if (d->shape[i] != 1) return 0;
    return 1;
}

SCENE_KERNEL_ENTRY(ka) {
    if (!scene_arg_desc(ka, 0) || ka->num_args != 9) __builtin_trap();
    uint64_t M = LAST(0, 1), N = LAST(2, 1);
    for (uint32_t i = 0; i < 7; i++) {
        uint32_t keep = (i == 2 || i == 5 || i == 6) ? 2 : 1;
        if (!leading_ones(&ka->descs[i], keep) || ka->descs[i].dtype != SCENE_DTYPE_F32)
            __builtin_trap();
        if (LAST(i, keep) != M || (keep == 2 && LAST(i, 1) != N)) __builtin_trap();
    }
    uint64_t is_first = SCENE_ARG_U64(ka, 7), is_last = SCENE_ARG_U64(ka, 8);

    for (uint64_t m = 0; m < M; m++) {
        float mij = *VEC(0, m), lij = *VEC(1, m);
        if (is_first) {
            *VEC(3, m) = mij;
            *VEC(4, m) = lij;
            for (uint64_t n = 0; n < N; n++) *MAT(5, m, n) = *MAT(2, m, n);
            if (is_last)
                for (uint64_t n = 0; n < N; n++) *MAT(6, m, n) = *MAT(2, m, n) / lij;
            continue;
        }
        float mi = *VEC(3, m), li = *VEC(4, m);
        float mi_new = mi > mij ? mi : mij;
        float alpha = scene_expf(mi - mi_new);
        float beta = scene_expf(mij - mi_new);
        float li_new = alpha * li + beta * lij;
        *VEC(3, m) = mi_new;
        *VEC(4, m) = li_new;
        for (uint64_t n = 0; n < N; n++) {
            float o = alpha * *MAT(5, m, n) + beta * *MAT(2, m, n);
            if (is_last)
                *MAT(6, m, n) = o / li_new;
            else
                *MAT(5, m, n) = o;
        }
    }
}
