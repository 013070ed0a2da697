//! Orchestration ABI v6 on the simulator, with real threads and real C
//! orchestrations: `submit_task`'s explicit dependencies, dependency-only
//! (dummy) tasks and dispatch predicates; `memory_window`; `core_counts`.
//!
//! Ordering is proven by data, never by sleeping: a slow producer writes
//! a buffer, and a consumer that shares no tracked buffer with it reads
//! that buffer through its host address (`memory_window`, an untracked
//! scalar), so only the explicit dependency can order the two. A missing
//! edge lets the consumer run on the second emulated core while the
//! producer still spins, and it copies the old value.

mod common;

use std::ffi::CString;
use std::sync::OnceLock;

use common::{Built, Dev, scalar, tensor};
use scene_sim_runtime::*;

// Kernels by func_id, all AIV but SLOT_MARK_AIC.
const SLOW_FILL: u32 = 0; // out[i] = v after spinning `spin` iterations
const COPY_PTR: u32 = 1; // d[i] = ((u32 *)host pointer)[i]
const COPY1: u32 = 2; // d[i] = s[i] + 1
const ADD_PTR: u32 = 3; // c[i] = a[i] + b[i], a and b host pointers
const GATE: u32 = 4; // wait until *(u32 *)host pointer != 0, then out[0] = 1
const FILL: u32 = 5; // out[i] = v
const STORE_PTR: u32 = 6; // *(u32 *)host pointer = v
const SLOT_MARK_AIV: u32 = 7; // out[slot] = 100 + slot
const SLOT_MARK_AIC: u32 = 8; // the same image, as a cube kernel

/// Iterations the slow producer spins: milliseconds, so an unordered
/// consumer on the other core would copy the old value.
const SPIN: u64 = 50_000_000;

const KERNELS: &[(&str, &str)] = &[
    (
        "slow_fill",
        "SCENE_KERNEL_ENTRY(ka) { volatile uint32_t *o = SCENE_ARG_PTR(ka, 0, volatile uint32_t); uint32_t v = (uint32_t)SCENE_ARG_U64(ka, 1); uint64_t spin = SCENE_ARG_U64(ka, 2); uint64_t n = SCENE_ARG_LEN(ka, 0, uint32_t); for (volatile uint64_t k = 0; k < spin; k++) {} SCENE_FOR_BLOCK_RANGE(ka, n, i) { o[i] = v; } }",
    ),
    (
        "copy_ptr",
        "SCENE_KERNEL_ENTRY(ka) { uint32_t *d = SCENE_ARG_PTR(ka, 0, uint32_t); const volatile uint32_t *s = (const volatile uint32_t *)(uintptr_t)SCENE_ARG_U64(ka, 1); uint64_t n = SCENE_ARG_LEN(ka, 0, uint32_t); SCENE_FOR_BLOCK_RANGE(ka, n, i) { d[i] = s[i]; } }",
    ),
    (
        "copy1",
        "SCENE_KERNEL_ENTRY(ka) { const uint32_t *s = SCENE_ARG_PTR(ka, 0, uint32_t); uint32_t *d = SCENE_ARG_PTR(ka, 1, uint32_t); uint64_t n = SCENE_ARG_LEN(ka, 1, uint32_t); SCENE_FOR_BLOCK_RANGE(ka, n, i) { d[i] = s[i] + 1; } }",
    ),
    (
        "add_ptr",
        "SCENE_KERNEL_ENTRY(ka) { uint32_t *c = SCENE_ARG_PTR(ka, 0, uint32_t); const volatile uint32_t *a = (const volatile uint32_t *)(uintptr_t)SCENE_ARG_U64(ka, 1); const volatile uint32_t *b = (const volatile uint32_t *)(uintptr_t)SCENE_ARG_U64(ka, 2); uint64_t n = SCENE_ARG_LEN(ka, 0, uint32_t); SCENE_FOR_BLOCK_RANGE(ka, n, i) { c[i] = a[i] + b[i]; } }",
    ),
    (
        "gate",
        "SCENE_KERNEL_ENTRY(ka) { const volatile uint32_t *g = (const volatile uint32_t *)(uintptr_t)SCENE_ARG_U64(ka, 0); uint32_t *o = SCENE_ARG_PTR(ka, 1, uint32_t); while (g[0] == 0) {} o[0] = 1; }",
    ),
    (
        "fill",
        "SCENE_KERNEL_ENTRY(ka) { uint32_t *o = SCENE_ARG_PTR(ka, 0, uint32_t); uint32_t v = (uint32_t)SCENE_ARG_U64(ka, 1); uint64_t n = SCENE_ARG_LEN(ka, 0, uint32_t); SCENE_FOR_BLOCK_RANGE(ka, n, i) { o[i] = v; } }",
    ),
    (
        "store_ptr",
        "SCENE_KERNEL_ENTRY(ka) { volatile uint32_t *p = (volatile uint32_t *)(uintptr_t)SCENE_ARG_U64(ka, 0); p[0] = (uint32_t)SCENE_ARG_U64(ka, 1); }",
    ),
    (
        "slot_mark",
        "SCENE_KERNEL_ENTRY(ka) { uint32_t *o = SCENE_ARG_PTR(ka, 0, uint32_t); uint32_t s = scene_slot(ka); o[s] = 100u + s; }",
    ),
];

const ORCH: &str = r#"
#include <stdio.h>
#include <string.h>
#define CHECK(x) do { int32_t rc_ = (x); if (rc_) return rc_; } while (0)

/* Kernels: K_<NAME>, the func_ids of the test's constants. */

/* A task of one aiv kernel (slot aiv0), or with func_id SCENE_NO_KERNEL a
 * dependency-only one; no deps, no predicate. */
static SceneSubmit task_of(int32_t func_id, const SceneTaskArgV2 *args, uint32_t n) {
    SceneSubmit t;
    memset(&t, 0, sizeof t);
    t.kernels = scene_mixed(SCENE_NO_KERNEL, func_id, SCENE_NO_KERNEL);
    t.block_num = 1;
    t.num_args = n;
    t.args = args;
    return t;
}

/* The host address of device address `dev` (0 if the window is unknown). */
static uint64_t host_of(SceneOrchCtx *ctx, uint64_t dev) {
    uint64_t db = 0, hb = 0, len = 0;
    if (scene_orch_memory_window(ctx, &db, &hb, &len) != SCENE_RT_OK) return 0;
    if (dev < db || dev - db >= len) return 0;
    return hb + (dev - db);
}

/* args: x (u32 [N]), y (u32 [N]), v, mode. Task 0 (submit_v2) zeroes y;
 * task 1 (A) slowly fills x with v; task 2 (B) copies x into y through
 * x's host address, after A only by its explicit dependency.
 * mode 1: B names task 7; mode 2: deps NULL with num_deps 1; mode 3: A
 * twice in deps and a NULL task_id (fine); mode 4: A has finished when B
 * is submitted (the read waits for it): B does not wait for it again. */
SCENE_ORCH_ENTRY(orch_explicit, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArgV2 x = scene_task_arg(ctx, args, 0, SCENE_DIR_OUT);
    SceneTaskArgV2 y = scene_task_arg(ctx, args, 1, SCENE_DIR_OUT);
    uint64_t v = args[2].value, mode = args[3].value, a = 99, b = 99;
    SceneTaskArgV2 zero[2] = {y, scene_task_scalar(0)};
    CHECK(scene_orch_submit_v2(ctx, K_FILL, 1, zero, 2));
    SceneTaskArgV2 ta[3] = {x, scene_task_scalar(v), scene_task_scalar(SPIN)};
    SceneSubmit t = task_of(K_SLOW_FILL, ta, 3);
    CHECK(scene_orch_submit_task(ctx, &t, &a));
    if (a != 1) { scene_orch_fail(ctx, "the first submit_task is not task 1"); return -100; }
    SceneTaskArgV2 tb[2] = {y, scene_task_scalar(host_of(ctx, x.value))};
    uint64_t deps[2] = {a, a};
    t = task_of(K_COPY_PTR, tb, 2);
    t.deps = deps;
    t.num_deps = 1;
    if (mode == 1) deps[0] = 7;
    if (mode == 2) t.deps = 0;
    if (mode == 3) { t.num_deps = 2; return scene_orch_submit_task(ctx, &t, 0); }
    if (mode == 4) { uint32_t got; CHECK(scene_orch_read(ctx, x.value, 0, &got, 4)); }
    CHECK(scene_orch_submit_task(ctx, &t, &b));
    if (b != 2) { scene_orch_fail(ctx, "the second submit_task is not task 2"); return -101; }
    return 0;
}

/* args: x, y, z (u32 [N]), vx, vy. P1 and P2 slowly fill x and y; D, a
 * dependency-only task, waits for both; C adds x and y into z through
 * their host addresses, after D alone. */
SCENE_ORCH_ENTRY(orch_join, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArgV2 x = scene_task_arg(ctx, args, 0, SCENE_DIR_OUT);
    SceneTaskArgV2 y = scene_task_arg(ctx, args, 1, SCENE_DIR_OUT);
    SceneTaskArgV2 z = scene_task_arg(ctx, args, 2, SCENE_DIR_OUT);
    uint64_t p[2], d;
    SceneTaskArgV2 t1[3] = {x, scene_task_scalar(args[3].value), scene_task_scalar(SPIN)};
    SceneTaskArgV2 t2[3] = {y, scene_task_scalar(args[4].value), scene_task_scalar(SPIN)};
    SceneSubmit t = task_of(K_SLOW_FILL, t1, 3);
    CHECK(scene_orch_submit_task(ctx, &t, &p[0]));
    t = task_of(K_SLOW_FILL, t2, 3);
    CHECK(scene_orch_submit_task(ctx, &t, &p[1]));
    t = task_of(SCENE_NO_KERNEL, 0, 0);
    t.block_num = 0; /* ignored for a dependency-only task */
    t.deps = p;
    t.num_deps = 2;
    CHECK(scene_orch_submit_task(ctx, &t, &d));
    SceneTaskArgV2 tc[3] = {z, scene_task_scalar(host_of(ctx, x.value)),
                            scene_task_scalar(host_of(ctx, y.value))};
    t = task_of(K_ADD_PTR, tc, 3);
    t.deps = &d;
    t.num_deps = 1;
    return scene_orch_submit_task(ctx, &t, 0);
}

/* args: x, y (u32 [N]), v, dir. P slowly fills x (tracked); D, a
 * dependency-only task, takes x in direction `dir` (IN, or INOUT), so it
 * follows P like any task would; C copies x into y through its host
 * address, after D alone. */
SCENE_ORCH_ENTRY(orch_dummy_args, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArgV2 x = scene_task_arg(ctx, args, 0, SCENE_DIR_OUT);
    SceneTaskArgV2 y = scene_task_arg(ctx, args, 1, SCENE_DIR_OUT);
    uint64_t d;
    SceneTaskArgV2 tp[3] = {x, scene_task_scalar(args[2].value), scene_task_scalar(SPIN)};
    SceneSubmit t = task_of(K_SLOW_FILL, tp, 3);
    CHECK(scene_orch_submit_task(ctx, &t, 0));
    SceneTaskArgV2 td[1] = {scene_task_dir(x, (uint32_t)args[3].value)};
    t = task_of(SCENE_NO_KERNEL, td, 1);
    CHECK(scene_orch_submit_task(ctx, &t, &d));
    SceneTaskArgV2 tc[2] = {y, scene_task_scalar(host_of(ctx, x.value))};
    t = task_of(K_COPY_PTR, tc, 2);
    t.deps = &d;
    t.num_deps = 1;
    return scene_orch_submit_task(ctx, &t, 0);
}

/* args: x, y (u32 [N]), v, with_dep. A slowly fills x through a
 * manual_dep argument (untracked); B copies x into y, x again manual_dep:
 * only B's explicit dependency on A (with_dep) orders the two. */
SCENE_ORCH_ENTRY(orch_manual, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArgV2 x = scene_task_arg(ctx, args, 0, SCENE_DIR_OUT);
    SceneTaskArgV2 y = scene_task_arg(ctx, args, 1, SCENE_DIR_OUT);
    uint64_t a;
    SceneTaskArgV2 ta[3] = {scene_task_manual_dep(x), scene_task_scalar(args[2].value),
                            scene_task_scalar(SPIN)};
    SceneSubmit t = task_of(K_SLOW_FILL, ta, 3);
    CHECK(scene_orch_submit_task(ctx, &t, &a));
    SceneTaskArgV2 tb[2] = {scene_task_manual_dep(scene_task_dir(x, SCENE_DIR_IN)), y};
    t = task_of(K_COPY1, tb, 2);
    if (args[3].value) { t.deps = &a; t.num_deps = 1; }
    return scene_orch_submit_task(ctx, &t, 0);
}

/* args: flag (i32 [1]), out (u32 [N]), out2 (u32 [N]), target. P fills
 * out with 1 if flag[0] == target; C, a plain task, writes out + 1 into
 * out2 after P (tracked), whether P ran or was skipped. */
SCENE_ORCH_ENTRY(orch_pred_consumer, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArgV2 out = scene_task_arg(ctx, args, 1, SCENE_DIR_OUT);
    SceneTaskArgV2 out2 = scene_task_arg(ctx, args, 2, SCENE_DIR_OUT);
    SceneTaskArgV2 tp[2] = {out, scene_task_scalar(1)};
    SceneSubmit t = task_of(K_FILL, tp, 2);
    t.predicate.op = SCENE_PRED_EQ;
    t.predicate.elem_size = 4;
    t.predicate.addr = args[0].value;
    t.predicate.target = (int64_t)args[3].value;
    CHECK(scene_orch_submit_task(ctx, &t, 0));
    SceneTaskArgV2 tc[2] = {scene_task_dir(out, SCENE_DIR_IN), out2};
    t = task_of(K_COPY1, tc, 2);
    return scene_orch_submit_task(ctx, &t, 0);
}

/* args: flag (u32 [1]), out (u32 [N]), k, target. A slowly writes k into
 * flag; B fills out with 1 if flag[0] == target, after A by an explicit
 * dependency (the predicate is read when B is ready). */
SCENE_ORCH_ENTRY(orch_pred_producer, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArgV2 flag = scene_task_arg(ctx, args, 0, SCENE_DIR_OUT);
    SceneTaskArgV2 out = scene_task_arg(ctx, args, 1, SCENE_DIR_OUT);
    uint64_t a;
    SceneTaskArgV2 ta[3] = {flag, scene_task_scalar(args[2].value), scene_task_scalar(SPIN)};
    SceneSubmit t = task_of(K_SLOW_FILL, ta, 3);
    CHECK(scene_orch_submit_task(ctx, &t, &a));
    SceneTaskArgV2 tb[2] = {out, scene_task_scalar(1)};
    t = task_of(K_FILL, tb, 2);
    t.deps = &a;
    t.num_deps = 1;
    t.predicate.op = SCENE_PRED_EQ;
    t.predicate.elem_size = 4;
    t.predicate.addr = flag.value;
    t.predicate.target = (int64_t)args[3].value;
    return scene_orch_submit_task(ctx, &t, 0);
}

/* args: elems (bytes), table (i64 [n][4]: op, elem_size, offset, target),
 * out (u32 [n]), n. Task i fills out[i] with 1 when its predicate on
 * elems holds. */
SCENE_ORCH_ENTRY(orch_pred_table, ctx, args, nargs) {
    (void)nargs;
    uint64_t n = args[3].value;
    int64_t row[4];
    uint64_t one[1] = {1}, shape[1] = {n};
    SceneTaskArgV2 out = scene_task_buf(SCENE_DIR_OUT, args[2].value, SCENE_DTYPE_I32, 1, shape);
    for (uint64_t i = 0; i < n; i++) {
        CHECK(scene_orch_read(ctx, args[1].value, i * sizeof row, row, sizeof row));
        uint64_t at[1] = {i};
        SceneTaskArgV2 tt[2] = {scene_task_view(out, at, one), scene_task_scalar(1)};
        SceneSubmit t = task_of(K_FILL, tt, 2);
        t.predicate.op = (uint32_t)row[0];
        t.predicate.elem_size = (uint32_t)row[1];
        t.predicate.addr = row[0] == SCENE_PRED_NONE ? 0 : args[0].value;
        t.predicate.offset = (uint64_t)row[2];
        t.predicate.target = row[3];
        CHECK(scene_orch_submit_task(ctx, &t, 0));
    }
    return 0;
}

/* args: flag (i32 [1]), out (u32 [N]), mode. A predicate the runtime
 * refuses: 0 elem_size 3, 1 an address outside every allocation, 2 an
 * unknown op, 3 an element past the end of flag. */
SCENE_ORCH_ENTRY(orch_pred_bad, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArgV2 tt[2] = {scene_task_arg(ctx, args, 1, SCENE_DIR_OUT), scene_task_scalar(1)};
    SceneSubmit t = task_of(K_FILL, tt, 2);
    t.predicate.op = SCENE_PRED_EQ;
    t.predicate.elem_size = 4;
    t.predicate.addr = args[0].value;
    switch (args[2].value) {
    case 0: t.predicate.elem_size = 3; break;
    case 1: t.predicate.addr = 0x1234; break;
    case 2: t.predicate.op = 9; break;
    default: t.predicate.offset = 2; break;
    }
    return scene_orch_submit_task(ctx, &t, 0);
}

/* args: g (u32 [1], 0), out (u32 [1]), z (u32 [1]), w (u32 [1]), n.
 * G waits for g != 0 (read through its host address) and writes out;
 * then a chain of n tasks, each after the previous: dependency-only ones
 * and ones whose predicate (g == 12345) is false, which would store 999
 * into w; C copies out into z through its host address after the last.
 * Only then does the orchestration open the gate, so the whole chain
 * completes at once when G finishes. */
SCENE_ORCH_ENTRY(orch_chain, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArgV2 out = scene_task_arg(ctx, args, 1, SCENE_DIR_OUT);
    SceneTaskArgV2 z = scene_task_arg(ctx, args, 2, SCENE_DIR_OUT);
    uint64_t gate = host_of(ctx, args[0].value), prev;
    if (!gate) return -100;
    SceneTaskArgV2 tg[2] = {scene_task_scalar(gate), out};
    SceneSubmit t = task_of(K_GATE, tg, 2);
    CHECK(scene_orch_submit_task(ctx, &t, &prev));
    SceneTaskArgV2 ts[2] = {scene_task_scalar(host_of(ctx, args[3].value)), scene_task_scalar(999)};
    for (uint64_t i = 0; i < args[4].value; i++) {
        t = i % 2 ? task_of(K_STORE_PTR, ts, 2) : task_of(SCENE_NO_KERNEL, 0, 0);
        if (i % 2) {
            t.predicate.op = SCENE_PRED_EQ;
            t.predicate.elem_size = 4;
            t.predicate.addr = args[0].value;
            t.predicate.target = 12345;
        }
        t.deps = &prev;
        t.num_deps = 1;
        CHECK(scene_orch_submit_task(ctx, &t, &prev));
    }
    SceneTaskArgV2 tc[2] = {z, scene_task_scalar(host_of(ctx, out.value))};
    t = task_of(K_COPY_PTR, tc, 2);
    t.deps = &prev;
    t.num_deps = 1;
    CHECK(scene_orch_submit_task(ctx, &t, 0));
    *(volatile uint32_t *)(uintptr_t)gate = 1;
    return 0;
}

/* args: x (u64 [1]), out (u64 [6]): the window's device base and length,
 * x[0] read through the window, the core counts, the ABI version. */
SCENE_ORCH_ENTRY(orch_window, ctx, args, nargs) {
    (void)nargs;
    uint64_t db = 0, hb = 0, len = 0;
    uint32_t aic = 0, aiv = 0;
    CHECK(scene_orch_memory_window(ctx, &db, &hb, &len));
    CHECK(scene_orch_core_counts(ctx, &aic, &aiv));
    uint64_t o[6] = {db, len, *(const uint64_t *)(uintptr_t)(hb + (args[0].value - db)),
                     aic, aiv, ctx->ops->abi_version};
    return scene_orch_write(ctx, args[1].value, 0, o, sizeof o);
}

/* args: out (u32 [3]), y (u32 [N]). A mixed submit_task (aic + aiv0), a
 * plain one, a dependency-only one after both, and one skipped. */
SCENE_ORCH_ENTRY(orch_kinds, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArgV2 out = scene_task_arg(ctx, args, 0, SCENE_DIR_OUT);
    SceneTaskArgV2 y = scene_task_arg(ctx, args, 1, SCENE_DIR_OUT);
    uint64_t ids[2];
    SceneTaskArgV2 tm[1] = {out};
    SceneSubmit t = task_of(K_SLOT_MARK_AIV, tm, 1);
    t.kernels.aic = K_SLOT_MARK_AIC;
    CHECK(scene_orch_submit_task(ctx, &t, &ids[0]));
    SceneTaskArgV2 tp[2] = {y, scene_task_scalar(5)};
    t = task_of(K_FILL, tp, 2);
    CHECK(scene_orch_submit_task(ctx, &t, &ids[1]));
    t = task_of(SCENE_NO_KERNEL, 0, 0);
    t.deps = ids;
    t.num_deps = 2;
    CHECK(scene_orch_submit_task(ctx, &t, 0));
    SceneTaskArgV2 ts[2] = {y, scene_task_scalar(6)};
    t = task_of(K_FILL, ts, 2);
    t.predicate.op = SCENE_PRED_LT;
    t.predicate.elem_size = 4;
    t.predicate.addr = y.value;
    t.predicate.target = 0;
    return scene_orch_submit_task(ctx, &t, 0);
}
"#;

fn programs() -> &'static Built {
    static P: OnceLock<Built> = OnceLock::new();
    P.get_or_init(|| {
        // The kernels' func_ids as `K_<NAME>`, from the constants above.
        let ids = [
            ("SLOW_FILL", SLOW_FILL),
            ("COPY_PTR", COPY_PTR),
            ("COPY1", COPY1),
            ("ADD_PTR", ADD_PTR),
            ("GATE", GATE),
            ("FILL", FILL),
            ("STORE_PTR", STORE_PTR),
            ("SLOT_MARK_AIV", SLOT_MARK_AIV),
            ("SLOT_MARK_AIC", SLOT_MARK_AIC),
        ];
        let defines: String = ids
            .iter()
            .map(|(name, id)| format!("#define K_{name} {id}\n"))
            .collect();
        Built::new(
            KERNELS,
            "orch_v6",
            &format!("#define SPIN {SPIN}ull\n{defines}{ORCH}"),
        )
    })
}

/// A device with `opts` and the callable of `symbol` (every kernel AIV,
/// and `slot_mark` once more as the AIC kernel `SLOT_MARK_AIC`).
fn open(opts: &str, symbol: &str) -> (Dev, u32) {
    let p = programs();
    let dev = Dev::open(opts);
    let mut incores = p.aiv_incores();
    incores.push((
        SLOT_MARK_AIC,
        SCENE_CORE_AIC,
        p.kernels[SLOT_MARK_AIV as usize].as_slice(),
    ));
    let h = dev.register(&p.orch, symbol, &incores);
    (dev, h)
}

/// A zeroed u32 buffer of `n` elements, and its run argument.
fn buf(dev: &Dev, dir: u32, n: usize, init: u32) -> (u64, SceneRunArg) {
    let a = dev.malloc(n as u64 * 4);
    dev.put(a, &vec![init; n]);
    (a, tensor(dir, a, n as u64 * 4))
}

const N: usize = 256;

#[test]
fn explicit_deps_order_tasks_that_share_no_buffer() {
    let (dev, h) = open("aiv=2;timeout_ms=30000", "orch_explicit");
    for v in [7u32, 8] {
        let (_, x) = buf(&dev, SCENE_DIR_OUT, N, 0);
        let (y, ya) = buf(&dev, SCENE_DIR_OUT, N, 1);
        dev.run(h, &[x, ya, scalar(u64::from(v)), scalar(0)]);
        assert_eq!(dev.get::<u32>(y, N), vec![v; N], "B ran before A finished");
    }
    // A dependency named twice is one, and task_id may be NULL; a finished
    // dependency only orders (a wait for it would never end: the deadline
    // fails the run).
    for mode in [3, 4] {
        let (_, x) = buf(&dev, SCENE_DIR_OUT, N, 0);
        let (y, ya) = buf(&dev, SCENE_DIR_OUT, N, 1);
        dev.run(h, &[x, ya, scalar(9), scalar(mode)]);
        assert_eq!(dev.get::<u32>(y, N), vec![9; N], "mode {mode}");
    }
}

#[test]
fn a_dependency_on_a_task_not_submitted_yet_is_refused_naming_it() {
    let (dev, h) = open("aiv=2", "orch_explicit");
    let (_, x) = buf(&dev, SCENE_DIR_OUT, N, 0);
    let (_, y) = buf(&dev, SCENE_DIR_OUT, N, 0);
    assert_eq!(
        dev.try_run(h, &[x, y, scalar(1), scalar(1)]),
        SCENE_RT_E_INVALID
    );
    let msg = last_error_message();
    assert!(
        msg.contains("submit_task: task 2 (task func_id 1): deps[0] is task id 7, but only tasks 0 to 1 were submitted before it"),
        "{msg}"
    );
    assert_eq!(
        dev.try_run(h, &[x, y, scalar(1), scalar(2)]),
        SCENE_RT_E_INVALID
    );
    let msg = last_error_message();
    assert!(
        msg.contains("submit_task to func_id 1: deps is NULL but num_deps is 1"),
        "{msg}"
    );
}

#[test]
fn a_dependency_only_task_joins_two_producers() {
    let (dev, h) = open("aiv=2", "orch_join");
    let (_, x) = buf(&dev, SCENE_DIR_OUT, N, 0);
    let (_, y) = buf(&dev, SCENE_DIR_OUT, N, 0);
    let (z, za) = buf(&dev, SCENE_DIR_OUT, N, 0);
    dev.run(h, &[x, y, za, scalar(30), scalar(12)]);
    assert_eq!(dev.get::<u32>(z, N), vec![42; N]);
}

#[test]
fn a_dependency_only_task_with_tensor_arguments_orders_like_any_task() {
    let (dev, h) = open("aiv=2", "orch_dummy_args");
    for dir in [SCENE_DIR_IN, SCENE_DIR_INOUT] {
        let (_, x) = buf(&dev, SCENE_DIR_OUT, N, 0);
        let (y, ya) = buf(&dev, SCENE_DIR_OUT, N, 1);
        dev.run(h, &[x, ya, scalar(5), scalar(u64::from(dir))]);
        assert_eq!(dev.get::<u32>(y, N), vec![5; N], "direction {dir}");
    }
}

#[test]
fn an_explicit_dependency_orders_manual_dep_accesses() {
    // Without the race check, the dependency alone orders the copy.
    let (dev, h) = open("aiv=2", "orch_manual");
    let (_, x) = buf(&dev, SCENE_DIR_OUT, N, 0);
    let (y, ya) = buf(&dev, SCENE_DIR_OUT, N, 0);
    dev.run(h, &[x, ya, scalar(3), scalar(1)]);
    assert_eq!(dev.get::<u32>(y, N), vec![4; N]);

    // The race check knows it: with it, the same graph is accepted ...
    let (dev, h) = open("aiv=2;race_check=1", "orch_manual");
    let (_, x) = buf(&dev, SCENE_DIR_OUT, N, 0);
    let (y, ya) = buf(&dev, SCENE_DIR_OUT, N, 0);
    dev.run(h, &[x, ya, scalar(3), scalar(1)]);
    assert_eq!(dev.get::<u32>(y, N), vec![4; N]);
    // ... and without the dependency it is a data race.
    assert_eq!(
        dev.try_run(h, &[x, ya, scalar(3), scalar(0)]),
        SCENE_RT_E_INVALID
    );
    let msg = last_error_message();
    assert!(
        msg.contains("data race: task 1 (func_id 2, argument 0) reads")
            && msg.contains("that task 0 (func_id 0, argument 0) writes"),
        "{msg}"
    );
}

#[test]
fn a_false_predicate_skips_the_task_and_its_consumer_still_runs() {
    let (dev, h) = open("aiv=2", "orch_pred_consumer");
    let flag = dev.malloc(4);
    dev.put(flag, &[-5i32]);
    for (target, out_want, out2_want) in [(-5i64, 1u32, 2u32), (5, 7, 8)] {
        let (out, outa) = buf(&dev, SCENE_DIR_OUT, N, 7);
        let (out2, out2a) = buf(&dev, SCENE_DIR_OUT, N, 0);
        dev.run(
            h,
            &[
                tensor(SCENE_DIR_IN, flag, 4),
                outa,
                out2a,
                scalar(target as u64),
            ],
        );
        assert_eq!(dev.get::<u32>(out, N), vec![out_want; N], "target {target}");
        assert_eq!(
            dev.get::<u32>(out2, N),
            vec![out2_want; N],
            "target {target}"
        );
    }
}

#[test]
fn a_predicate_reads_what_its_explicit_dependency_wrote() {
    let (dev, h) = open("aiv=2", "orch_pred_producer");
    for (k, target, want) in [(11u64, 11u64, 1u32), (11, 0, 7)] {
        let (_, flag) = buf(&dev, SCENE_DIR_OUT, 1, 0);
        let (out, outa) = buf(&dev, SCENE_DIR_OUT, N, 7);
        dev.run(h, &[flag, outa, scalar(k), scalar(target)]);
        assert_eq!(
            dev.get::<u32>(out, N),
            vec![want; N],
            "flag {k}, target {target}"
        );
    }
}

/// The test's own reading of a predicate, independent of the runtime's.
fn holds(op: u32, value: i64, target: i64) -> bool {
    match op {
        SCENE_PRED_NONE => true,
        SCENE_PRED_EQ => value == target,
        SCENE_PRED_NE => value != target,
        SCENE_PRED_GT => value > target,
        SCENE_PRED_LT => value < target,
        SCENE_PRED_GE => value >= target,
        SCENE_PRED_LE => value <= target,
        _ => unreachable!(),
    }
}

#[test]
fn every_predicate_operator_compares_sign_extended_elements() {
    // Negative elements of every size: an i32 at 0, an i8 at 4, an i16 at
    // 6, an i64 at 8 (little-endian, as the runtime reads them).
    let elems: [(u32, u64, i64); 4] = [(4, 0, -5), (1, 4, -3), (2, 6, -300), (8, 8, -(1 << 40))];
    let mut bytes = [0u8; 16];
    bytes[0..4].copy_from_slice(&(-5i32).to_le_bytes());
    bytes[4] = (-3i8) as u8;
    bytes[6..8].copy_from_slice(&(-300i16).to_le_bytes());
    bytes[8..16].copy_from_slice(&(-(1i64 << 40)).to_le_bytes());
    let mut table: Vec<[i64; 4]> = vec![[i64::from(SCENE_PRED_NONE), 3, 99, 0]];
    for &(size, off, value) in &elems {
        for op in SCENE_PRED_EQ..=SCENE_PRED_LE {
            for target in [value - 1, value, value + 1] {
                table.push([i64::from(op), i64::from(size), off as i64, target]);
            }
        }
    }
    let want: Vec<u32> = table
        .iter()
        .map(|r| {
            let value = elems.iter().find(|e| e.1 == r[2] as u64).map_or(0, |e| e.2);
            u32::from(holds(r[0] as u32, value, r[3]))
        })
        .collect();
    // Each operator has a true and a false case for 4- and 1-byte elements.
    for op in SCENE_PRED_EQ..=SCENE_PRED_LE {
        for size in [4, 1] {
            let cases: Vec<u32> = (0..table.len())
                .filter(|&i| table[i][0] == i64::from(op) && table[i][1] == size)
                .map(|i| want[i])
                .collect();
            assert!(
                cases.contains(&0) && cases.contains(&1),
                "op {op} size {size}"
            );
        }
    }

    let (dev, h) = open("aiv=2", "orch_pred_table");
    let e = dev.malloc(16);
    dev.put(e, &bytes);
    let flat: Vec<i64> = table.iter().flatten().copied().collect();
    let t = dev.malloc(flat.len() as u64 * 8);
    dev.put(t, &flat);
    let (out, outa) = buf(&dev, SCENE_DIR_OUT, table.len(), 0);
    dev.run(
        h,
        &[
            tensor(SCENE_DIR_IN, e, 16),
            tensor(SCENE_DIR_IN, t, flat.len() as u64 * 8),
            outa,
            scalar(table.len() as u64),
        ],
    );
    let got: Vec<u32> = dev.get(out, table.len());
    for (i, r) in table.iter().enumerate() {
        assert_eq!(
            got[i], want[i],
            "op {} size {} offset {} target {}",
            r[0], r[1], r[2], r[3]
        );
    }
}

#[test]
fn a_bad_predicate_is_refused_with_a_message() {
    let (dev, h) = open("", "orch_pred_bad");
    let flag = dev.malloc(4);
    let (_, out) = buf(&dev, SCENE_DIR_OUT, N, 0);
    let cases = [
        "submit_task: task 0 (task func_id 5): predicate elem_size 3 is not 1, 2, 4 or 8 bytes",
        "submit_task: task 0 (task func_id 5): predicate element (4 bytes at byte 0 of buffer 0x1234): device range [0x1234, +4) is outside the device arena",
        "submit_task: task 0 (task func_id 5): predicate op 9 is not a SCENE_PRED_* operator",
        "runs past the end of the allocation",
    ];
    for (mode, want) in cases.iter().enumerate() {
        let rc = dev.try_run(
            h,
            &[tensor(SCENE_DIR_IN, flag, 4), out, scalar(mode as u64)],
        );
        assert_eq!(rc, SCENE_RT_E_INVALID, "mode {mode}");
        let msg = last_error_message();
        assert!(msg.contains(want), "mode {mode}: {msg}");
    }
}

#[test]
fn a_long_chain_of_tasks_that_run_nothing_completes_at_once() {
    let (dev, h) = open("aiv=2;timeout_ms=60000", "orch_chain");
    let (_, g) = buf(&dev, SCENE_DIR_IN, 1, 0);
    let (_, out) = buf(&dev, SCENE_DIR_OUT, 1, 0);
    let (z, za) = buf(&dev, SCENE_DIR_OUT, 1, 0);
    let (w, wa) = buf(&dev, SCENE_DIR_IN, 1, 7);
    dev.run(h, &[g, out, za, wa, scalar(100_000)]);
    assert_eq!(dev.get::<u32>(z, 1), vec![1], "C ran before the chain");
    assert_eq!(dev.get::<u32>(w, 1), vec![7], "a skipped task ran");
}

#[test]
fn the_window_maps_device_memory_and_core_counts_are_the_devices() {
    let (dev, h) = open("aic=3;aiv=5;arena_mb=1", "orch_window");
    let x = dev.malloc(8);
    dev.put(x, &[0x1122_3344_5566_7788u64]);
    let out = dev.malloc(6 * 8);
    dev.run(
        h,
        &[
            tensor(SCENE_DIR_IN, x, 8),
            tensor(SCENE_DIR_OUT, out, 6 * 8),
        ],
    );
    let o: Vec<u64> = dev.get(out, 6);
    assert_eq!(o[0], DEVICE_BASE);
    assert!(o[1] >= 1 << 20 && x + 8 - DEVICE_BASE <= o[1], "{o:x?}");
    assert_eq!(o[2], 0x1122_3344_5566_7788, "read through the window");
    assert_eq!(&o[3..5], &[3, 5]);
    assert_eq!(o[5], 6, "abi_version");
    assert_eq!(SCENE_ORCH_ABI_VERSION, 6);
}

/// A mixed and a plain `submit_task` run their kernels; the trace shows
/// the dependency-only task, the skipped one and the explicit edges; the
/// args dump records only tasks that ran a kernel.
#[test]
fn traces_and_args_dumps_show_dependency_only_and_skipped_tasks() {
    let (dev, h) = open("aic=1;aiv=2", "orch_kinds");
    let dir = tempfile::tempdir().unwrap();
    let args_dir = dir.path().join("args");
    assert_eq!(
        scene_rt_trace_enable(dev.0, SCENE_RT_TRACE_TIMELINE | SCENE_RT_TRACE_DEPS),
        SCENE_RT_OK
    );
    let c = CString::new(args_dir.to_str().unwrap()).unwrap();
    assert_eq!(scene_rt_args_record(dev.0, c.as_ptr()), SCENE_RT_OK);
    let (out, outa) = buf(&dev, SCENE_DIR_OUT, 3, 0);
    let (y, ya) = buf(&dev, SCENE_DIR_OUT, N, 0);
    dev.run(h, &[outa, ya]);
    assert_eq!(dev.get::<u32>(out, 3), vec![100, 101, 0], "aic + aiv0");
    assert_eq!(dev.get::<u32>(y, N), vec![5; N], "the skipped task wrote y");

    let mut len = 0;
    assert_eq!(
        scene_rt_trace_take(dev.0, std::ptr::null_mut(), 0, &mut len),
        SCENE_RT_OK
    );
    let mut text = vec![0u8; len as usize];
    assert_eq!(
        scene_rt_trace_take(dev.0, text.as_mut_ptr().cast(), len, &mut len),
        SCENE_RT_OK
    );
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("\"skipped\":1,\"tasks\""), "{text}");
    assert!(
        text.contains("{\"id\":2,\"func_id\":4294967295,\"core\":\"none\",\"block_num\":0,")
            && text.contains("\"dummy\":true,\"explicit_deps\":[{\"task\":0,"),
        "{text}"
    );
    assert!(
        text.contains("\"skipped\":true,\"predicate_value\":5,"),
        "{text}"
    );
    // Blocks ran for the mixed task (two kernels) and the plain one only.
    assert_eq!(text.matches("\"block\":").count(), 3, "{text}");

    for (task, recorded) in [(0, true), (1, true), (2, false), (3, false)] {
        assert_eq!(
            args_dir.join(format!("task{task}.json")).exists(),
            recorded,
            "task {task}"
        );
    }
}
