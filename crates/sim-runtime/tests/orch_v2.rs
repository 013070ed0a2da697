//! Orchestration ABI v2 on the simulator, with real threads: metadata,
//! ordered reads and writes racing kernels, views that run concurrently
//! (measured on the emulated cores), scopes in bounded memory.

mod common;

use std::sync::OnceLock;

use common::{Built, Dev, scalar, tensor};
use scene_sim_runtime::*;

// Kernels by func_id (their index in KERNELS), all AIV:
// 0 slow_fill: out[i] = v, after spinning
// 1 slow_copy: d[i] = s[i], spinning before each element
// 2 meet: raise its own flag, wait (bounded) for the other task's flag
// 3 acc: acc[i] += x[i] (f32)
// 4 desc_probe: out = the view's rank, shape and strides as the kernel sees them

/// Iterations a kernel spins: long enough that an unordered read or write
/// would land while the task runs.
const SPIN: u64 = 20_000;
/// How long MEET waits for its partner (volatile loads): ~1-2 s, so a busy
/// machine still schedules both emulated cores within it.
const MEET_SPIN: u64 = 2_000_000_000;

const KERNELS: &[(&str, &str)] = &[
    (
        "slow_fill",
        "SCENE_KERNEL_ENTRY(ka) { volatile uint32_t *o = SCENE_ARG_PTR(ka, 0, volatile uint32_t); uint32_t v = (uint32_t)SCENE_ARG_U64(ka, 1); uint64_t spin = SCENE_ARG_U64(ka, 2); uint64_t n = SCENE_ARG_LEN(ka, 0, uint32_t); for (volatile uint64_t k = 0; k < spin; k++) {} SCENE_FOR_BLOCK_RANGE(ka, n, i) { o[i] = v; } }",
    ),
    (
        "slow_copy",
        "SCENE_KERNEL_ENTRY(ka) { volatile const uint32_t *s = SCENE_ARG_PTR(ka, 0, volatile const uint32_t); uint32_t *d = SCENE_ARG_PTR(ka, 1, uint32_t); uint64_t spin = SCENE_ARG_U64(ka, 2); uint64_t n = SCENE_ARG_LEN(ka, 1, uint32_t); SCENE_FOR_BLOCK_RANGE(ka, n, i) { for (volatile uint64_t k = 0; k < spin / 64; k++) {} d[i] = s[i]; } }",
    ),
    (
        "meet",
        "SCENE_KERNEL_ENTRY(ka) { volatile uint32_t *p = SCENE_ARG_PTR(ka, 0, volatile uint32_t); int64_t self = (int64_t)SCENE_ARG_U64(ka, 1); int64_t other = (int64_t)SCENE_ARG_U64(ka, 2); uint64_t spin = SCENE_ARG_U64(ka, 3); p[self] = 1; uint32_t met = 0; for (uint64_t k = 0; k < spin; k++) { if (p[other]) { met = 1; break; } } p[self + 1] = met; }",
    ),
    (
        "acc",
        "SCENE_KERNEL_ENTRY(ka) { float *acc = SCENE_ARG_PTR(ka, 0, float); const float *x = SCENE_ARG_PTR(ka, 1, float); uint64_t n = SCENE_ARG_LEN(ka, 0, float); SCENE_FOR_BLOCK_RANGE(ka, n, i) { acc[i] += x[i]; } }",
    ),
    (
        "desc_probe",
        "SCENE_KERNEL_ENTRY(ka) { const SceneTensorDesc *d = scene_arg_desc(ka, 0); uint64_t *o = SCENE_ARG_PTR(ka, 1, uint64_t); o[0] = d ? d->rank : 99; o[1] = d ? d->shape[0] : 0; o[2] = d ? d->shape[1] : 0; o[3] = d ? d->strides[0] : 0; o[4] = d ? d->strides[1] : 0; o[5] = d ? d->offset : 7; o[6] = *SCENE_AT2(ka, 0, const uint32_t, 1, 2); o[7] = ka->arg_sizes[0]; }",
    ),
];

const ORCH: &str = r#"
#include <stdio.h>
#include <string.h>
#define SUBMIT2(f, b, ...) do { SceneTaskArgV2 t_[] = { __VA_ARGS__ }; int32_t rc_ = scene_orch_submit_v2(ctx, (f), (b), t_, sizeof t_ / sizeof t_[0]); if (rc_) return rc_; } while (0)
#define CHECK(x) do { int32_t rc_ = (x); if (rc_) return rc_; } while (0)

/* args: buf (out u32 [N]), rounds. Each round a slow kernel writes r
 * everywhere and the orchestration reads the last element at once. */
SCENE_ORCH_ENTRY(orch_read_race, ctx, args, nargs) {
    (void)nargs;
    const SceneTensorDesc *d = scene_orch_desc(ctx, 0);
    SceneTaskArgV2 buf = scene_task_arg(ctx, args, 0, SCENE_DIR_OUT);
    uint32_t rounds = (uint32_t)args[1].value, stale = 0;
    uint64_t last[1] = {d->shape[0] - 1};
    for (uint32_t r = 1; r <= rounds; r++) {
        SUBMIT2(0, 4, buf, scene_task_scalar(r), scene_task_scalar(SPIN));
        uint32_t got = 0;
        CHECK(scene_orch_get(ctx, &buf, last, &got));
        if (got != r) stale++;
    }
    if (stale) { ctx->ops->fail(ctx, "a read saw data older than the task that writes it"); return -1; }
    return 0;
}

/* args: src (inout u32 [N]), dst (out u32 [N]), rounds. Each round: fill
 * src with r, a slow kernel copies src to dst, the orchestration at once
 * overwrites src; dst must still be r everywhere. */
SCENE_ORCH_ENTRY(orch_write_race, ctx, args, nargs) {
    (void)nargs;
    const SceneTensorDesc *d = scene_orch_desc(ctx, 1);
    SceneTaskArgV2 src = scene_task_arg(ctx, args, 0, SCENE_DIR_IN);
    SceneTaskArgV2 dst = scene_task_arg(ctx, args, 1, SCENE_DIR_OUT);
    uint32_t rounds = (uint32_t)args[2].value, torn = 0;
    uint64_t first[1] = {0}, last[1] = {d->shape[0] - 1};
    for (uint32_t r = 1; r <= rounds; r++) {
        CHECK(scene_orch_fill(ctx, src.value, 0, src.size, &r, 4));
        SUBMIT2(1, 4, src, dst, scene_task_scalar(SPIN));
        uint32_t next = r + 1000000u;
        CHECK(scene_orch_fill(ctx, src.value, 0, src.size, &next, 4));
        uint32_t a = 0, b = 0;
        CHECK(scene_orch_get(ctx, &dst, first, &a));
        CHECK(scene_orch_get(ctx, &dst, last, &b));
        if (a != r || b != r) torn++;
    }
    if (torn) { ctx->ops->fail(ctx, "a write changed what a reader task saw"); return -1; }
    return 0;
}

/* args: m (inout u32 [2, 64]), overlap (0: the two tasks get disjoint
 * rows, 1: the second task's view also covers the first row). */
SCENE_ORCH_ENTRY(orch_meet, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArgV2 m = scene_task_arg(ctx, args, 0, SCENE_DIR_INOUT);
    uint64_t row0[2] = {0, 0}, row1[2] = {1, 0}, one_row[2] = {1, 64}, two_rows[2] = {2, 64};
    SUBMIT2(2, 1, scene_task_view(m, row0, one_row), scene_task_scalar(0),
            scene_task_scalar(64), scene_task_scalar(MEET_SPIN));
    if (args[1].value == 0) {
        SUBMIT2(2, 1, scene_task_view(m, row1, one_row), scene_task_scalar(0),
                scene_task_scalar((uint64_t)(int64_t)-64), scene_task_scalar(MEET_SPIN));
    } else {
        SUBMIT2(2, 1, scene_task_view(m, row0, two_rows), scene_task_scalar(64),
                scene_task_scalar(0), scene_task_scalar(MEET_SPIN));
    }
    return 0;
}

/* args: acc (inout f32 [N]), iters, scoped. Each iteration allocates a
 * temporary, fills it with 1.0 and adds it to acc. */
SCENE_ORCH_ENTRY(orch_scope_loop, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArgV2 acc = scene_task_arg(ctx, args, 0, SCENE_DIR_INOUT);
    const SceneTensorDesc *d = scene_orch_desc(ctx, 0);
    uint64_t iters = args[1].value, scoped = args[2].value;
    float one = 1.0f;
    for (uint64_t i = 0; i < iters; i++) {
        if (scoped) CHECK(scene_orch_begin_scope(ctx));
        uint64_t tmp = scene_orch_alloc(ctx, acc.size);
        if (!tmp) return -1;
        CHECK(scene_orch_fill(ctx, tmp, 0, acc.size, &one, 4));
        SUBMIT2(3, 1, acc, scene_task_buf(SCENE_DIR_IN, tmp, SCENE_DTYPE_F32, 1, d->shape));
        if (scoped) CHECK(scene_orch_end_scope(ctx));
    }
    return 0;
}

/* args: x (in u32 [4, 8]), out (out u64 [8]). The kernel gets the view
 * x[1:3, 2:6] and reports what it sees. */
SCENE_ORCH_ENTRY(orch_desc, ctx, args, nargs) {
    (void)nargs;
    const SceneTensorDesc *x = scene_orch_desc(ctx, 0);
    if (!x || x->rank != 2 || x->shape[0] != 4 || x->shape[1] != 8 || x->dtype != SCENE_DTYPE_I32) {
        ctx->ops->fail(ctx, "scene_orch_desc does not describe x as i32 [4, 8]");
        return -1;
    }
    if (scene_orch_desc(ctx, 2) != 0) { ctx->ops->fail(ctx, "a scalar has a description"); return -1; }
    uint64_t off[2] = {1, 2}, shape[2] = {2, 4};
    SUBMIT2(4, 1, scene_task_view(scene_task_arg(ctx, args, 0, SCENE_DIR_IN), off, shape),
            scene_task_arg(ctx, args, 1, SCENE_DIR_OUT));
    return 0;
}

/* args: x (in u32 [4, 8]), out (out u64 [8]). The view x[1:3, 4:12]
 * leaves x's 8 columns (dimension 1) but stays inside x's 32 elements. */
SCENE_ORCH_ENTRY(orch_view_outside_parent, ctx, args, nargs) {
    (void)nargs;
    uint64_t off[2] = {1, 4}, shape[2] = {2, 8};
    SUBMIT2(4, 1, scene_task_view(scene_task_arg(ctx, args, 0, SCENE_DIR_IN), off, shape),
            scene_task_arg(ctx, args, 1, SCENE_DIR_OUT));
    return 0;
}

SCENE_ORCH_ENTRY(orch_scope_left_open, ctx, args, nargs) {
    (void)args; (void)nargs;
    CHECK(scene_orch_begin_scope(ctx));
    return 0;
}

SCENE_ORCH_ENTRY(orch_double_free, ctx, args, nargs) {
    (void)args; (void)nargs;
    uint64_t b = scene_orch_alloc(ctx, 256);
    CHECK(scene_orch_free(ctx, b));
    return scene_orch_free(ctx, b);
}

/* v3: statuses and the last error, told back through fail. */
SCENE_ORCH_ENTRY(orch_v3_statuses, ctx, args, nargs) {
    (void)args; (void)nargs;
    uint64_t small = 1, huge = 1;
    char msg[1024];
    int32_t ok = scene_orch_malloc(ctx, 256, &small);
    int32_t oom = scene_orch_malloc(ctx, (uint64_t)1 << 40, &huge);
    snprintf(msg, sizeof msg, "v%u ok=%d small=%s oom=%d huge=%llu why=[%s]",
             (unsigned)ctx->ops->abi_version, (int)ok, small ? "set" : "0", (int)oom,
             (unsigned long long)huge, scene_orch_last_error(ctx));
    scene_orch_fail(ctx, msg);
    return oom;
}

/* v5: comm_rank outside a communication domain: a status and a message,
 * not a failed run (this one returns 0 after asking). */
SCENE_ORCH_ENTRY(orch_v5_comm_rank, ctx, args, nargs) {
    (void)args; (void)nargs;
    uint32_t rank = 77, nranks = 77;
    int32_t rc = scene_orch_comm_rank(ctx, &rank, &nranks);
    if (rc != SCENE_RT_E_INVALID || rank != 77 || nranks != 77) return -100;
    if (!strstr(scene_orch_last_error(ctx), "not a rank of a communication domain")) return -101;
    if (ctx->ops->comm_rank(ctx, (uint32_t *)0, &nranks) != SCENE_RT_E_INVALID) return -102;
    return 0;
}

SCENE_ORCH_ENTRY(orch_use_after_free, ctx, args, nargs) {
    (void)nargs;
    uint64_t shape[1] = {64};
    uint64_t b = scene_orch_alloc(ctx, 256);
    CHECK(scene_orch_free(ctx, b));
    SUBMIT2(3, 1, scene_task_arg(ctx, args, 0, SCENE_DIR_INOUT),
            scene_task_buf(SCENE_DIR_IN, b, SCENE_DTYPE_F32, 1, shape));
    return 0;
}
"#;

fn programs() -> &'static Built {
    static P: OnceLock<Built> = OnceLock::new();
    P.get_or_init(|| {
        Built::new(
            KERNELS,
            "orch_v2",
            &format!("#define SPIN {SPIN}ull\n#define MEET_SPIN {MEET_SPIN}ull\n{ORCH}"),
        )
    })
}

fn open(opts: &str, symbol: &str) -> (Dev, u32) {
    let p = programs();
    let dev = Dev::open(opts);
    let h = dev.register(&p.orch, symbol, &p.aiv_incores());
    (dev, h)
}

fn desc(dtype: u32, shape: &[u64]) -> SceneTensorDesc {
    SceneTensorDesc::contiguous(dtype, shape)
}

fn run2(dev: &Dev, h: u32, args: &[SceneRunArg], descs: &[SceneTensorDesc]) -> i32 {
    scene_rt_run2(dev.0, h, args.as_ptr(), descs.as_ptr(), args.len() as u32)
}

const NONE: SceneTensorDesc = SceneTensorDesc {
    dtype: 0,
    rank: 0,
    offset: 0,
    shape: [0; 8],
    strides: [0; 8],
};

#[test]
fn a_read_racing_its_writer_always_sees_the_written_data() {
    let (dev, h) = open("aiv=2", "orch_read_race");
    let n = 4096u64;
    let buf = dev.malloc(n * 4);
    let rounds = 1000;
    let rc = run2(
        &dev,
        h,
        &[tensor(SCENE_DIR_OUT, buf, n * 4), scalar(rounds)],
        &[desc(SCENE_DTYPE_I32, &[n]), NONE],
    );
    assert_eq!(rc, SCENE_RT_OK, "{}", last_error_message());
    assert_eq!(
        dev.get::<u32>(buf, n as usize),
        vec![rounds as u32; n as usize]
    );
}

#[test]
fn a_write_racing_a_reader_never_changes_what_it_saw() {
    let (dev, h) = open("aiv=2", "orch_write_race");
    let n = 1024u64;
    let (src, dst) = (dev.malloc(n * 4), dev.malloc(n * 4));
    let rounds = 1000;
    let rc = run2(
        &dev,
        h,
        &[
            tensor(SCENE_DIR_INOUT, src, n * 4),
            tensor(SCENE_DIR_OUT, dst, n * 4),
            scalar(rounds),
        ],
        &[
            desc(SCENE_DTYPE_I32, &[n]),
            desc(SCENE_DTYPE_I32, &[n]),
            NONE,
        ],
    );
    assert_eq!(rc, SCENE_RT_OK, "{}", last_error_message());
    assert_eq!(
        dev.get::<u32>(dst, n as usize),
        vec![rounds as u32; n as usize]
    );
    assert_eq!(
        dev.get::<u32>(src, 1),
        vec![rounds as u32 + 1_000_000],
        "the last write landed"
    );
}

/// Runs MEET on two views of one [2, 64] tensor; returns whether each task
/// saw the other running.
fn meet(overlap: u64) -> (u32, u32) {
    let (dev, h) = open("aiv=2", "orch_meet");
    let m = dev.malloc(2 * 64 * 4);
    dev.put(m, &[0u32; 128]);
    let rc = run2(
        &dev,
        h,
        &[tensor(SCENE_DIR_INOUT, m, 2 * 64 * 4), scalar(overlap)],
        &[desc(SCENE_DTYPE_I32, &[2, 64]), NONE],
    );
    assert_eq!(rc, SCENE_RT_OK, "{}", last_error_message());
    let out: Vec<u32> = dev.get(m, 128);
    (out[1], out[65])
}

#[test]
fn disjoint_views_of_one_tensor_run_at_the_same_time() {
    // Each task raises its flag and waits for the other's: both see each
    // other only if they ran concurrently on the two emulated AIV cores.
    assert_eq!(meet(0), (1, 1), "disjoint row blocks were serialised");
    // Control: when the second view covers the first row, the tasks are
    // ordered, so the first waits in vain and only the second meets it.
    assert_eq!(meet(1), (0, 1), "overlapping views ran concurrently");
}

#[test]
fn kernels_see_the_view_metadata() {
    let (dev, h) = open("", "orch_desc");
    let x = dev.malloc(4 * 8 * 4);
    let data: Vec<u32> = (0..32).collect();
    dev.put(x, &data);
    let out = dev.malloc(8 * 8);
    let rc = run2(
        &dev,
        h,
        &[
            tensor(SCENE_DIR_IN, x, 128),
            tensor(SCENE_DIR_OUT, out, 64),
            scalar(0),
        ],
        &[
            desc(SCENE_DTYPE_I32, &[4, 8]),
            desc(SCENE_DTYPE_I64, &[8]),
            NONE,
        ],
    );
    assert_eq!(rc, SCENE_RT_OK, "{}", last_error_message());
    let seen: Vec<u64> = dev.get(out, 8);
    // rank 2, shape [2, 4], strides [8, 1], offset 0 (the pointer is moved
    // to element (1, 2) instead), x[1+1][2+2] = 20, span of 8 + 4 elements.
    assert_eq!(seen, vec![2, 2, 4, 8, 1, 0, 20, 12 * 4]);
}

#[test]
fn a_scoped_temporary_loop_runs_in_bounded_memory() {
    let n = 16 * 1024u64; // 64 KiB per temporary, 1 MiB of device memory
    let (dev, h) = open("arena_mb=1;aiv=2", "orch_scope_loop");
    let acc = dev.malloc(n * 4);
    dev.put(acc, &vec![0f32; n as usize]);
    let iters = 100_000u64;
    let rc = run2(
        &dev,
        h,
        &[
            tensor(SCENE_DIR_INOUT, acc, n * 4),
            scalar(iters),
            scalar(1),
        ],
        &[desc(SCENE_DTYPE_F32, &[n]), NONE, NONE],
    );
    assert_eq!(rc, SCENE_RT_OK, "{}", last_error_message());
    assert_eq!(
        dev.get::<f32>(acc, n as usize),
        vec![iters as f32; n as usize]
    );

    // The same loop without the scope keeps every temporary: out of memory.
    let rc = run2(
        &dev,
        h,
        &[
            tensor(SCENE_DIR_INOUT, acc, n * 4),
            scalar(iters),
            scalar(0),
        ],
        &[desc(SCENE_DTYPE_F32, &[n]), NONE, NONE],
    );
    assert_eq!(rc, SCENE_RT_E_OOM);
    let msg = last_error_message();
    assert!(msg.contains("device memory exhausted"), "{msg}");
}

#[test]
fn scope_and_free_misuse_fail_with_a_message() {
    let (dev, h) = open("", "orch_scope_left_open");
    assert_eq!(run2(&dev, h, &[], &[]), SCENE_RT_E_ORCH);
    let msg = last_error_message();
    assert!(msg.contains("1 memory scope(s) still open"), "{msg}");

    let (dev, h) = open("", "orch_double_free");
    assert_eq!(run2(&dev, h, &[], &[]), SCENE_RT_E_INVALID);
    let msg = last_error_message();
    assert!(
        msg.contains("freed buffer") && msg.contains("twice"),
        "{msg}"
    );

    let (dev, h) = open("", "orch_use_after_free");
    let acc = dev.malloc(256);
    assert_eq!(
        run2(
            &dev,
            h,
            &[tensor(SCENE_DIR_INOUT, acc, 256)],
            &[desc(SCENE_DTYPE_F32, &[64])]
        ),
        SCENE_RT_E_OUT_OF_BOUNDS
    );
    let msg = last_error_message();
    assert!(msg.contains("after it was freed"), "{msg}");
}

/// Orchestration ABI v3: `scene_orch_malloc` reports a full device as
/// SCENE_RT_E_OOM with the address 0, `scene_orch_last_error` has the
/// message (on the orchestration's thread), and the run fails with it.
#[test]
fn orchestration_v3_calls_report_statuses_and_the_last_error() {
    let (dev, h) = open("arena_mb=1", "orch_v3_statuses");
    assert_eq!(run2(&dev, h, &[], &[]), SCENE_RT_E_OOM);
    let msg = last_error_message();
    assert!(
        msg.contains(&format!(
            "v{SCENE_ORCH_ABI_VERSION} ok=0 small=set oom={SCENE_RT_E_OOM} huge=0 why=[orchestration alloc: "
        )) && msg.contains("device memory exhausted"),
        "{msg}"
    );
    const { assert!(SCENE_ORCH_ABI_VERSION >= 3) };
}

/// Orchestration ABI v5: `scene_orch_comm_rank` on a device that is not a
/// rank of a domain returns SCENE_RT_E_INVALID with a message and leaves
/// the run alone (level 3's rank is tested end to end by the scenes
/// package's allgather_window).
#[test]
fn comm_rank_outside_a_domain_is_a_status_not_a_failed_run() {
    let (dev, h) = open("", "orch_v5_comm_rank");
    assert_eq!(run2(&dev, h, &[], &[]), SCENE_RT_OK);
    const { assert!(SCENE_ORCH_ABI_VERSION >= 5) };
}

/// A view wider than its parent in one dimension is refused at submit,
/// naming the dimension, even though the bytes it spans lie in the buffer.
#[test]
fn a_view_outside_its_parent_shape_is_refused_naming_the_dimension() {
    let (dev, h) = open("", "orch_view_outside_parent");
    let x = dev.malloc(4 * 8 * 4);
    let out = dev.malloc(8 * 8);
    let rc = run2(
        &dev,
        h,
        &[
            tensor(SCENE_DIR_IN, x, 4 * 8 * 4),
            tensor(SCENE_DIR_OUT, out, 8 * 8),
        ],
        &[desc(SCENE_DTYPE_I32, &[4, 8]), desc(SCENE_DTYPE_I64, &[8])],
    );
    assert_eq!(rc, SCENE_RT_E_OUT_OF_BOUNDS);
    let msg = last_error_message();
    assert!(
        msg.contains("argument 0: dimension 1 of the view (offset 12 elements, shape [2, 8]) lies outside its parent's shape"),
        "{msg}"
    );
}
