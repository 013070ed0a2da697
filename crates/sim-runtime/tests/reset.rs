//! `scene_rt_reset` (optional ABI, issue 28) and the `open_ms` / `close_ms`
//! options: one open device serving case after case must start each one
//! clean, and the simulator can make open/close cost what a real
//! runtime's start-up does.

mod common;

use std::ffi::CString;
use std::time::{Duration, Instant};

use common::programs::*;
use common::{Dev, orch_so, tensor};
use scene_sim_runtime::*;

/// An orchestration with a global: each run adds one to it and writes it
/// into its output `args[0]` (4 bytes). `tag` makes the bytes unique to a
/// test, so no other test of this binary (they run in parallel) shares the
/// loaded library through the runtime's by-content cache.
fn counting_orch(tag: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    orch_so(
        dir.path(),
        "count",
        &format!(
            r#"const char *scene_test_tag = "{tag}";
static uint32_t calls;
SCENE_ORCH_ENTRY(orch_count, ctx, args, nargs) {{
    (void)nargs;
    calls += 1;
    return scene_orch_write(ctx, args[0].value, 0, &calls, sizeof calls);
}}
"#
        ),
    )
}

/// Runs `orch_count` (handle `h`) and returns what it wrote.
fn count(dev: &Dev, h: u32) -> u32 {
    let out = dev.malloc(4);
    dev.run(h, &[tensor(SCENE_DIR_OUT, out, 4)]);
    let v = dev.get::<u32>(out, 1)[0];
    assert_eq!(scene_rt_free(dev.0, out), SCENE_RT_OK);
    v
}

fn reset(dev: &Dev) {
    assert_eq!(
        scene_rt_reset(dev.0),
        SCENE_RT_OK,
        "reset: {}",
        last_error_message()
    );
}

#[test]
fn reset_frees_leaked_memory_and_it_reads_as_zero() {
    let dev = Dev::open("arena_mb=2;aic=1;aiv=1");
    let size = 3 << 19; // 1.5 MiB of the 2 MiB arena
    // A case that leaks: its buffer is never freed.
    let leaked = dev.malloc(size);
    dev.put(leaked, &vec![0xA5u8; size as usize]);
    let mut a = 0;
    assert_eq!(scene_rt_malloc(dev.0, size, &mut a), SCENE_RT_E_OOM);
    assert!(
        last_error_message().contains("exhausted"),
        "{}",
        last_error_message()
    );
    reset(&dev);
    // The leaked buffer is gone ...
    let mut b = [0u8; 4];
    assert_eq!(
        scene_rt_copy_from_device(dev.0, b.as_mut_ptr().cast(), leaked, 4),
        SCENE_RT_E_OUT_OF_BOUNDS
    );
    // ... and its memory serves the next case, zeroed.
    let fresh = dev.malloc(size);
    assert!(
        dev.get::<u8>(fresh, size as usize).iter().all(|&x| x == 0),
        "memory of a reset device must read as zero"
    );
}

#[test]
fn callables_from_before_a_reset_are_unknown_after_it() {
    let p = programs();
    let dev = Dev::open("aic=1;aiv=1");
    let h = dev.register(&p.orch, "orch_probe", &p.all_incores());
    let out = dev.malloc(32);
    dev.run(h, &[tensor(SCENE_DIR_OUT, out, 32)]);
    reset(&dev);
    let out = dev.malloc(32);
    assert_eq!(
        dev.try_run(h, &[tensor(SCENE_DIR_OUT, out, 32)]),
        SCENE_RT_E_INVALID
    );
    assert!(
        last_error_message().contains(&format!("unknown callable handle {h}")),
        "{}",
        last_error_message()
    );
    assert_eq!(scene_rt_unregister_callable(dev.0, h), SCENE_RT_E_INVALID);
    // Registering again works; the stale handle is not handed out again.
    let h2 = dev.register(&p.orch, "orch_probe", &p.all_incores());
    assert_ne!(h2, h);
    dev.run(h2, &[tensor(SCENE_DIR_OUT, out, 32)]);
    assert_eq!(
        dev.get::<u32>(out, 8),
        vec![SCENE_KERNEL_ABI_VERSION * 1_000_000 + 8_001; 8]
    );
}

#[test]
fn an_orchestration_registered_after_a_reset_starts_with_fresh_globals() {
    let orch = counting_orch("fresh-after-reset");
    let dev = Dev::open("aic=1;aiv=1");
    let h = dev.register(&orch, "orch_count", &[]);
    assert_eq!(count(&dev, h), 1);
    assert_eq!(count(&dev, h), 2, "the global persists across runs");
    reset(&dev);
    let h = dev.register(&orch, "orch_count", &[]);
    assert_eq!(count(&dev, h), 1, "the reset released the loaded library");
}

/// The control of the test above: without a reset the same bytes share one
/// loaded library, and its global, so that test can fail.
#[test]
fn without_a_reset_the_same_orchestration_keeps_its_globals() {
    let orch = counting_orch("shared-without-reset");
    let dev = Dev::open("aic=1;aiv=1");
    let h1 = dev.register(&orch, "orch_count", &[]);
    assert_eq!(count(&dev, h1), 1);
    let h2 = dev.register(&orch, "orch_count", &[]);
    assert_eq!(count(&dev, h2), 2);
}

#[test]
fn the_fault_run_counter_restarts_at_reset() {
    let p = programs();
    let dev = Dev::open("aic=1;aiv=1;fault=fatal_on_run:2");
    let h = dev.register(&p.orch, "orch_probe", &p.all_incores());
    let out = dev.malloc(32);
    dev.run(h, &[tensor(SCENE_DIR_OUT, out, 32)]);
    reset(&dev);
    let h = dev.register(&p.orch, "orch_probe", &p.all_incores());
    let out = dev.malloc(32);
    // Run 1 since the reset, not run 2 since open.
    dev.run(h, &[tensor(SCENE_DIR_OUT, out, 32)]);
    // The fault still applies, counted from the reset.
    assert_eq!(
        dev.try_run(h, &[tensor(SCENE_DIR_OUT, out, 32)]),
        SCENE_RT_E_DEVICE_FATAL
    );
    assert!(
        last_error_message().contains("run #2"),
        "{}",
        last_error_message()
    );
    // A fatal device stays fatal: reset does not revive it.
    assert_eq!(scene_rt_reset(dev.0), SCENE_RT_E_DEVICE_FATAL);
}

#[test]
fn reset_switches_tracing_and_args_recording_off() {
    let p = programs();
    let dir = tempfile::tempdir().unwrap();
    let args_dir = dir.path().join("args");
    let dev = Dev::open("aic=1;aiv=1");
    let h = dev.register(&p.orch, "orch_probe", &p.all_incores());
    let out = dev.malloc(32);
    assert_eq!(
        scene_rt_trace_enable(dev.0, SCENE_RT_TRACE_TIMELINE),
        SCENE_RT_OK
    );
    let c = CString::new(args_dir.to_str().unwrap()).unwrap();
    assert_eq!(scene_rt_args_record(dev.0, c.as_ptr()), SCENE_RT_OK);
    dev.run(h, &[tensor(SCENE_DIR_OUT, out, 32)]);
    let trace_len = |dev: &Dev| {
        let mut len = 0;
        assert_eq!(
            scene_rt_trace_take(dev.0, std::ptr::null_mut(), 0, &mut len),
            SCENE_RT_OK
        );
        len
    };
    assert!(trace_len(&dev) > 0, "the run before the reset was traced");
    assert!(args_dir.join("task0.json").exists());
    std::fs::remove_dir_all(&args_dir).unwrap();

    reset(&dev);
    assert_eq!(trace_len(&dev), 0, "the pending record is dropped");
    let h = dev.register(&p.orch, "orch_probe", &p.all_incores());
    let out = dev.malloc(32);
    dev.run(h, &[tensor(SCENE_DIR_OUT, out, 32)]);
    assert_eq!(trace_len(&dev), 0, "tracing is off after a reset");
    assert!(!args_dir.exists(), "args recording is off after a reset");
}

#[test]
fn a_rank_of_a_live_domain_is_not_reset() {
    let a = Dev::open("aic=1;aiv=1");
    let b = Dev::open("aic=1;aiv=1");
    let devs = [a.0, b.0];
    let mut comm = std::ptr::null_mut();
    assert_eq!(
        scene_rt_comm_create(devs.as_ptr(), 2, 64, std::ptr::null(), &mut comm),
        SCENE_RT_OK,
        "{}",
        last_error_message()
    );
    let buf = a.malloc(64);
    assert_eq!(scene_rt_reset(a.0), SCENE_RT_E_INVALID);
    assert!(
        last_error_message().contains("destroy the communication domain first"),
        "{}",
        last_error_message()
    );
    // Refused means untouched.
    a.put(buf, &[1u8; 64]);
    assert_eq!(scene_rt_comm_destroy(comm), SCENE_RT_OK);
    reset(&a);
    let mut x = [0u8; 1];
    assert_eq!(
        scene_rt_copy_from_device(a.0, x.as_mut_ptr().cast(), buf, 1),
        SCENE_RT_E_OUT_OF_BOUNDS
    );
}

#[test]
fn reset_checks_its_handle() {
    assert_eq!(scene_rt_reset(std::ptr::null_mut()), SCENE_RT_E_INVALID);
    let dev = Dev::open("aic=1;aiv=1");
    let stale = dev.0;
    drop(dev);
    assert_eq!(scene_rt_reset(stale), SCENE_RT_E_NO_DEVICE);
}

#[test]
fn open_ms_and_close_ms_slow_open_and_close_down() {
    let opts = CString::new("aic=1;aiv=1;open_ms=300;close_ms=300").unwrap();
    let mut d = std::ptr::null_mut();
    let t = Instant::now();
    assert_eq!(
        scene_rt_open(0, opts.as_ptr(), &mut d),
        SCENE_RT_OK,
        "{}",
        last_error_message()
    );
    let open = t.elapsed();
    assert!(open >= Duration::from_millis(300), "open took {open:?}");
    let t = Instant::now();
    assert_eq!(scene_rt_close(d), SCENE_RT_OK, "{}", last_error_message());
    let close = t.elapsed();
    assert!(close >= Duration::from_millis(300), "close took {close:?}");

    let bad = CString::new("open_ms=600001").unwrap();
    assert_eq!(scene_rt_open(0, bad.as_ptr(), &mut d), SCENE_RT_E_INVALID);
    assert!(
        last_error_message().contains("more than the maximum 600000"),
        "{}",
        last_error_message()
    );
}
