//! Timeouts and injected faults. In their own test binary: a hung kernel
//! keeps spinning on a detached thread until the process exits.

mod common;

use common::programs::*;
use common::{Dev, tensor};
use scene_sim_runtime::*;

#[test]
fn hanging_kernel_times_out_and_device_turns_fatal() {
    let p = programs();
    let dev = Dev::open("aiv=1;aic=1;timeout_ms=300");
    let h = dev.register(&p.orch, "orch_hang", &p.all_incores());
    let buf = dev.malloc(64);
    let t = std::time::Instant::now();
    assert_eq!(dev.try_run(h, &[]), SCENE_RT_E_TIMEOUT);
    assert!(t.elapsed() >= std::time::Duration::from_millis(300));
    let msg = last_error_message();
    assert!(
        msg.contains("timeout_ms=300") && msg.contains("0 of 1 tasks"),
        "{msg}"
    );
    let mut a = 0;
    assert_eq!(scene_rt_malloc(dev.0, 64, &mut a), SCENE_RT_E_DEVICE_FATAL);
    assert!(
        last_error_message().contains("unusable"),
        "{}",
        last_error_message()
    );
    assert_eq!(dev.try_run(h, &[]), SCENE_RT_E_DEVICE_FATAL);
    assert_eq!(
        scene_rt_copy_to_device(dev.0, buf, [0u8; 4].as_ptr().cast(), 4),
        SCENE_RT_E_DEVICE_FATAL
    );
    // Other devices are unaffected.
    let other = Dev::open("aiv=1");
    let h2 = other.register(&p.orch, "orch_probe", &p.all_incores());
    let out = other.malloc(32);
    other.run(h2, &[tensor(SCENE_DIR_OUT, out, 32)]);
    assert_eq!(
        other.get::<u32>(out, 8),
        vec![SCENE_KERNEL_ABI_VERSION * 1_000_000 + 8_001; 8]
    );
}

#[test]
fn fault_hang_times_out() {
    let p = programs();
    let dev = Dev::open("fault=hang;timeout_ms=50");
    let h = dev.register(&p.orch, "orch_probe", &p.all_incores());
    assert_eq!(dev.try_run(h, &[]), SCENE_RT_E_TIMEOUT);
    assert!(
        last_error_message().contains("fault=hang"),
        "{}",
        last_error_message()
    );
    assert_eq!(dev.try_run(h, &[]), SCENE_RT_E_DEVICE_FATAL);
}

#[test]
fn fault_fatal_on_run() {
    let p = programs();
    let dev = Dev::open("fault=fatal_on_run:2");
    let h = dev.register(&p.orch, "orch_probe", &p.all_incores());
    let out = dev.malloc(32);
    dev.run(h, &[tensor(SCENE_DIR_OUT, out, 32)]);
    assert_eq!(
        dev.try_run(h, &[tensor(SCENE_DIR_OUT, out, 32)]),
        SCENE_RT_E_DEVICE_FATAL
    );
    assert!(
        last_error_message().contains("fatal_on_run:2"),
        "{}",
        last_error_message()
    );
    assert_eq!(
        dev.try_run(h, &[tensor(SCENE_DIR_OUT, out, 32)]),
        SCENE_RT_E_DEVICE_FATAL
    );
    assert_eq!(
        scene_rt_unregister_callable(dev.0, h),
        SCENE_RT_E_DEVICE_FATAL
    );
    let mut a = 0;
    assert_eq!(scene_rt_malloc(dev.0, 64, &mut a), SCENE_RT_E_DEVICE_FATAL);
}
