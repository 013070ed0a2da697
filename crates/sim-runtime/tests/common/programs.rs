//! The kernels and orchestrations used by the tests, built once per test binary.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::{kernel_image, orch_so};

pub const ADD_F32: u32 = 0; // aiv: c = a + b
pub const MUL_F32: u32 = 1; // aic: c = a * b
pub const FILL: u32 = 2; // aiv: out = v
pub const ADDK: u32 = 3; // aiv: x += k
pub const COPY1: u32 = 4; // aic: out = in + 1
pub const MULK: u32 = 5; // aic: x *= k
pub const ADD_U32: u32 = 6; // aiv: out = a + b
pub const ACC: u32 = 7; // aic: acc += x
pub const PROBE: u32 = 8; // aiv: out[block_idx] = abi*1e6 + block_num*1e3 + num_args
pub const HANG: u32 = 9; // aiv: never returns

const KERNELS: &[(&str, &str)] = &[
    (
        "add_f32",
        "SCENE_KERNEL_ENTRY(ka) { const float *a = SCENE_ARG_PTR(ka, 0, float); const float *b = SCENE_ARG_PTR(ka, 1, float); float *c = SCENE_ARG_PTR(ka, 2, float); uint64_t n = SCENE_ARG_LEN(ka, 2, float); SCENE_FOR_BLOCK_RANGE(ka, n, i) { c[i] = a[i] + b[i]; } }",
    ),
    (
        "mul_f32",
        "SCENE_KERNEL_ENTRY(ka) { const float *a = SCENE_ARG_PTR(ka, 0, float); const float *b = SCENE_ARG_PTR(ka, 1, float); float *c = SCENE_ARG_PTR(ka, 2, float); uint64_t n = SCENE_ARG_LEN(ka, 2, float); SCENE_FOR_BLOCK_RANGE(ka, n, i) { c[i] = a[i] * b[i]; } }",
    ),
    (
        "fill",
        "SCENE_KERNEL_ENTRY(ka) { uint32_t *o = SCENE_ARG_PTR(ka, 0, uint32_t); uint32_t v = (uint32_t)SCENE_ARG_U64(ka, 1); uint64_t n = SCENE_ARG_LEN(ka, 0, uint32_t); SCENE_FOR_BLOCK_RANGE(ka, n, i) { o[i] = v + (uint32_t)(i & 0); } }",
    ),
    (
        "addk",
        "SCENE_KERNEL_ENTRY(ka) { uint32_t *x = SCENE_ARG_PTR(ka, 0, uint32_t); uint32_t k = (uint32_t)SCENE_ARG_U64(ka, 1); uint64_t n = SCENE_ARG_LEN(ka, 0, uint32_t); SCENE_FOR_BLOCK_RANGE(ka, n, i) { x[i] += k; } }",
    ),
    (
        "copy1",
        "SCENE_KERNEL_ENTRY(ka) { const uint32_t *s = SCENE_ARG_PTR(ka, 0, uint32_t); uint32_t *d = SCENE_ARG_PTR(ka, 1, uint32_t); uint64_t n = SCENE_ARG_LEN(ka, 1, uint32_t); SCENE_FOR_BLOCK_RANGE(ka, n, i) { d[i] = s[i] + 1; } }",
    ),
    (
        "mulk",
        "SCENE_KERNEL_ENTRY(ka) { uint32_t *x = SCENE_ARG_PTR(ka, 0, uint32_t); uint32_t k = (uint32_t)SCENE_ARG_U64(ka, 1); uint64_t n = SCENE_ARG_LEN(ka, 0, uint32_t); SCENE_FOR_BLOCK_RANGE(ka, n, i) { x[i] *= k; } }",
    ),
    (
        "add_u32",
        "SCENE_KERNEL_ENTRY(ka) { const uint32_t *a = SCENE_ARG_PTR(ka, 0, uint32_t); const uint32_t *b = SCENE_ARG_PTR(ka, 1, uint32_t); uint32_t *c = SCENE_ARG_PTR(ka, 2, uint32_t); uint64_t n = SCENE_ARG_LEN(ka, 2, uint32_t); SCENE_FOR_BLOCK_RANGE(ka, n, i) { c[i] = a[i] + b[i]; } }",
    ),
    (
        "acc",
        "SCENE_KERNEL_ENTRY(ka) { uint32_t *acc = SCENE_ARG_PTR(ka, 0, uint32_t); const uint32_t *x = SCENE_ARG_PTR(ka, 1, uint32_t); uint64_t n = SCENE_ARG_LEN(ka, 0, uint32_t); SCENE_FOR_BLOCK_RANGE(ka, n, i) { acc[i] += x[i]; } }",
    ),
    (
        "probe",
        "SCENE_KERNEL_ENTRY(ka) { uint32_t *o = SCENE_ARG_PTR(ka, 0, uint32_t); o[ka->block_idx] = ka->abi_version * 1000000u + ka->block_num * 1000u + ka->num_args; }",
    ),
    (
        "hang",
        "SCENE_KERNEL_ENTRY(ka) { (void)ka; while (1) { __asm__ volatile(\"\"); } }",
    ),
];

const ORCH: &str = r#"
#define SUBMIT(f, b, ...) do { SceneTaskArg t_[] = { __VA_ARGS__ }; int32_t rc_ = scene_orch_submit(ctx, (f), (b), t_, sizeof t_ / sizeof t_[0]); if (rc_) return rc_; } while (0)

/* args: a, b (in f32), out (out f32): out = (a + b) * b via an intermediate. */
SCENE_ORCH_ENTRY(orch_add_mul, ctx, args, nargs) {
    if (nargs != 3) { ctx->ops->fail(ctx, "orch_add_mul wants 3 args"); return -1; }
    uint64_t sz = args[0].size;
    uint64_t tmp = scene_orch_alloc(ctx, sz);
    if (!tmp) return -1;
    SUBMIT(0, 4, SCENE_IN(args[0]), SCENE_IN(args[1]), SCENE_OUT_BUF(tmp, sz));
    SUBMIT(1, 3, SCENE_IN_BUF(tmp, sz), SCENE_IN(args[1]), SCENE_OUT(args[2]));
    return 0;
}

/* args: buf (inout u32), acc (inout u32), R (scalar). RAW/WAR/WAW chain. */
SCENE_ORCH_ENTRY(orch_chain, ctx, args, nargs) {
    (void)nargs;
    uint64_t sz = args[0].size;
    uint32_t R = (uint32_t)args[2].value;
    uint64_t tmp = scene_orch_alloc(ctx, sz), out = scene_orch_alloc(ctx, sz);
    if (!tmp || !out) return -1;
    for (uint32_t r = 0; r < R; ++r) {
        SUBMIT(2, 3, SCENE_OUT(args[0]), SCENE_SCALAR_U64(r));               /* buf = r      (WAW, WAR) */
        SUBMIT(3, 2, SCENE_INOUT(args[0]), SCENE_SCALAR_U64(3));             /* buf = r+3    (RAW) */
        SUBMIT(4, 3, SCENE_IN(args[0]), SCENE_OUT_BUF(tmp, sz));             /* tmp = r+4    (RAW) */
        SUBMIT(2, 2, SCENE_OUT(args[0]), SCENE_SCALAR_U64(10));              /* buf = 10     (WAR) */
        SUBMIT(5, 3, SCENE_INOUT_BUF(tmp, sz), SCENE_SCALAR_U64(5));         /* tmp = 5r+20  */
        SUBMIT(6, 4, SCENE_IN(args[0]), SCENE_IN_BUF(tmp, sz), SCENE_OUT_BUF(out, sz)); /* out = 5r+30 */
        SUBMIT(7, 3, SCENE_INOUT(args[1]), SCENE_IN_BUF(out, sz));           /* acc += out   */
    }
    return 0;
}

/* Submits to func_id 42, which no callable registers; returns the status. */
SCENE_ORCH_ENTRY(orch_bad_func, ctx, args, nargs) {
    (void)nargs;
    SUBMIT(42, 1, SCENE_OUT(args[0]));
    return 0;
}

/* Same, but ignores the status and claims success. */
SCENE_ORCH_ENTRY(orch_bad_func_ignored, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArg t[1] = { SCENE_OUT(args[0]) };
    (void)scene_orch_submit(ctx, 42, 1, t, 1);
    return 0;
}

SCENE_ORCH_ENTRY(orch_fail, ctx, args, nargs) {
    (void)args; (void)nargs;
    ctx->ops->fail(ctx, "custom failure xyz");
    return 7;
}

/* args: out (u32[8]). */
SCENE_ORCH_ENTRY(orch_probe, ctx, args, nargs) {
    (void)nargs;
    SUBMIT(8, 8, SCENE_OUT(args[0]));
    return 0;
}

SCENE_ORCH_ENTRY(orch_hang, ctx, args, nargs) {
    (void)args; (void)nargs;
    SUBMIT(9, 1, SCENE_SCALAR_U64(0));
    return 0;
}

/* A task buffer 64 bytes past the end of args[0]'s allocation. */
SCENE_ORCH_ENTRY(orch_oob, ctx, args, nargs) {
    (void)nargs;
    SUBMIT(2, 1, SCENE_OUT_BUF(args[0].value, args[0].size + 64), SCENE_SCALAR_U64(1));
    return 0;
}

SCENE_ORCH_ENTRY(orch_too_many_args, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArg t[33];
    for (int i = 0; i < 33; ++i) t[i] = SCENE_IN(args[0]);
    return scene_orch_submit(ctx, 2, 1, t, 33);
}
"#;

pub struct Programs {
    pub kernels: HashMap<&'static str, Vec<u8>>,
    pub orch: Vec<u8>,
}

impl Programs {
    pub fn k(&self, name: &str) -> &[u8] {
        &self.kernels[name]
    }

    /// Every kernel with its func_id and core type.
    pub fn all_incores(&self) -> Vec<(u32, u32, &[u8])> {
        use scene_sim_runtime::{SCENE_CORE_AIC as C, SCENE_CORE_AIV as V};
        vec![
            (ADD_F32, V, self.k("add_f32")),
            (MUL_F32, C, self.k("mul_f32")),
            (FILL, V, self.k("fill")),
            (ADDK, V, self.k("addk")),
            (COPY1, C, self.k("copy1")),
            (MULK, C, self.k("mulk")),
            (ADD_U32, V, self.k("add_u32")),
            (ACC, C, self.k("acc")),
            (PROBE, V, self.k("probe")),
            (HANG, V, self.k("hang")),
        ]
    }
}

pub fn programs() -> &'static Programs {
    static P: OnceLock<Programs> = OnceLock::new();
    P.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let kernels = KERNELS
            .iter()
            .map(|&(n, src)| (n, kernel_image(dir.path(), n, src)))
            .collect();
        let orch = orch_so(dir.path(), "orch", ORCH);
        Programs { kernels, orch }
    })
}
