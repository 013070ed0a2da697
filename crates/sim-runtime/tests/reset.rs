//! `scene_rt_reset` (issue 28): an open device back to a fresh open's
//! state, so a worker that keeps its card open serves independent cases;
//! and `open_ms` / `close_ms`, a real runtime's start-up made visible.

mod common;

use std::time::{Duration, Instant};

use common::programs::*;
use common::{Dev, orch_so, tensor};
use scene_sim_runtime::*;

fn reset(dev: &Dev) -> i32 {
    scene_rt_reset(dev.0)
}

fn try_malloc(dev: &Dev, size: u64) -> (i32, u64) {
    let mut a = 0;
    let rc = scene_rt_malloc(dev.0, size, &mut a);
    (rc, a)
}

/// A leaked allocation of most of a 2 MiB arena: the next one of that size
/// does not fit until the reset frees it, and the memory handed out after
/// the reset reads as zeros, not as the leaked buffer's bytes.
#[test]
fn reset_frees_every_allocation_and_memory_reads_zero() {
    let dev = Dev::open("arena_mb=2");
    let size = 1536 * 1024;
    let leaked = dev.malloc(size);
    dev.put(leaked, &vec![0xa5u8; size as usize]);
    let (rc, _) = try_malloc(&dev, size);
    assert_eq!(rc, SCENE_RT_E_OOM, "the leak holds the arena");

    assert_eq!(reset(&dev), SCENE_RT_OK, "{}", last_error_message());
    let (rc, again) = try_malloc(&dev, size);
    assert_eq!(rc, SCENE_RT_OK, "{}", last_error_message());
    let bytes: Vec<u8> = dev.get(again, size as usize);
    assert!(bytes.iter().all(|&b| b == 0), "fresh memory reads as zeros");
    assert_eq!(
        scene_rt_free(dev.0, leaked),
        if leaked == again {
            SCENE_RT_OK
        } else {
            SCENE_RT_E_INVALID
        },
        "the leaked address is no live allocation of its own any more"
    );
}

#[test]
fn a_handle_from_before_the_reset_is_unknown() {
    let p = programs();
    let dev = Dev::open("");
    let h = dev.register(&p.orch, "orch_add_mul", &p.all_incores());
    assert_eq!(reset(&dev), SCENE_RT_OK, "{}", last_error_message());
    assert_eq!(scene_rt_unregister_callable(dev.0, h), SCENE_RT_E_INVALID);
    let n = 64u64;
    let out = dev.malloc(n * 4);
    assert_ne!(
        dev.try_run(
            h,
            &[
                tensor(SCENE_DIR_IN, out, n * 4),
                tensor(SCENE_DIR_IN, out, n * 4),
                tensor(SCENE_DIR_OUT, out, n * 4)
            ]
        ),
        SCENE_RT_OK
    );
}

/// Counts its runs in a global and fills the output with the count.
const COUNTING: &str = r#"
static uint32_t runs;
SCENE_ORCH_ENTRY(orch_count, ctx, args, nargs) {
    (void)nargs;
    runs++;
    SceneTaskArg t[2] = { SCENE_OUT(args[0]), SCENE_SCALAR_U64(runs) };
    return scene_orch_submit(ctx, 2, 1, t, 2);
}
"#;

/// The counting orchestration, its bytes made unique by `tag`: the
/// runtime shares a loaded library between devices of one process by
/// content, and tests run in parallel.
fn counting(dir: &std::path::Path, tag: &str) -> Vec<u8> {
    let src = format!("{COUNTING}\nconst char *scene_test_tag = \"{tag}\";\n");
    orch_so(dir, tag, &src)
}

fn run_counting(dev: &Dev, orch: &[u8]) -> u32 {
    let p = programs();
    let h = dev.register(orch, "orch_count", &p.all_incores());
    let out = dev.malloc(16);
    dev.run(h, &[tensor(SCENE_DIR_OUT, out, 16)]);
    dev.get::<u32>(out, 4)[0]
}

/// What a case leaves registered keeps its orchestration's globals; after
/// a reset the same bytes load afresh. The first half is the control: it
/// shows the test would see a leaked global.
#[test]
fn an_orchestration_global_starts_fresh_after_a_reset() {
    let dir = tempfile::tempdir().expect("tmp");
    let orch = counting(dir.path(), "global_fresh");
    let dev = Dev::open("");
    assert_eq!(run_counting(&dev, &orch), 1);
    // Still registered: the library, and its global, stay.
    assert_eq!(run_counting(&dev, &orch), 2, "control: the global leaks");
    assert_eq!(reset(&dev), SCENE_RT_OK, "{}", last_error_message());
    assert_eq!(
        run_counting(&dev, &orch),
        1,
        "after the reset it starts fresh"
    );
}

#[test]
fn injected_faults_count_runs_since_the_reset() {
    let dir = tempfile::tempdir().expect("tmp");
    let orch = counting(dir.path(), "faults_count");
    let dev = Dev::open("fault=fatal_on_run:2");
    assert_eq!(run_counting(&dev, &orch), 1);
    assert_eq!(reset(&dev), SCENE_RT_OK, "{}", last_error_message());
    // Run 1 of the new session, not run 2 of the device.
    assert_eq!(run_counting(&dev, &orch), 1);
}

#[test]
fn a_pending_trace_and_tracing_are_cleared() {
    let dir = tempfile::tempdir().expect("tmp");
    let orch = counting(dir.path(), "trace_cleared");
    let dev = Dev::open("");
    assert_eq!(
        scene_rt_trace_enable(dev.0, SCENE_RT_TRACE_TIMELINE),
        SCENE_RT_OK
    );
    run_counting(&dev, &orch);
    assert_eq!(reset(&dev), SCENE_RT_OK, "{}", last_error_message());
    let mut len = 0u64;
    assert_eq!(
        scene_rt_trace_take(dev.0, std::ptr::null_mut(), 0, &mut len),
        SCENE_RT_OK
    );
    assert_eq!(len, 0, "the pending record is gone");
    run_counting(&dev, &orch);
    assert_eq!(
        scene_rt_trace_take(dev.0, std::ptr::null_mut(), 0, &mut len),
        SCENE_RT_OK
    );
    assert_eq!(len, 0, "and tracing is off again");
}

#[test]
fn a_fatal_device_stays_unusable() {
    let dir = tempfile::tempdir().expect("tmp");
    let orch = counting(dir.path(), "fatal_stays");
    let dev = Dev::open("fault=fatal_on_run:1");
    let p = programs();
    let h = dev.register(&orch, "orch_count", &p.all_incores());
    let out = dev.malloc(16);
    assert_eq!(
        dev.try_run(h, &[tensor(SCENE_DIR_OUT, out, 16)]),
        SCENE_RT_E_DEVICE_FATAL
    );
    assert_eq!(reset(&dev), SCENE_RT_E_DEVICE_FATAL);
}

/// Lower bounds only: a loaded machine may make them slower, never faster.
#[test]
fn open_ms_and_close_ms_make_open_and_close_take_that_long() {
    let t = Instant::now();
    let dev = Dev::open("open_ms=300;close_ms=200");
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    let t = Instant::now();
    drop(dev);
    assert!(
        t.elapsed() >= Duration::from_millis(200),
        "{:?}",
        t.elapsed()
    );
}
