//! End-to-end tests of the C ABI with real incore images and orchestrations.

mod common;

use common::programs::*;
use common::{Dev, scalar, tensor};
use scene_sim_runtime::*;

fn f32s(n: usize, f: impl Fn(usize) -> f32) -> Vec<f32> {
    (0..n).map(f).collect()
}

#[test]
fn abi_version_and_last_error() {
    assert_eq!(scene_rt_abi_version(), SCENE_RUNTIME_ABI_VERSION);
    assert!(!scene_rt_last_error().is_null());
    let rc = scene_rt_malloc(std::ptr::null_mut(), 64, &mut 0);
    assert_eq!(rc, SCENE_RT_E_INVALID);
    assert!(!scene_rt_last_error().is_null());
    assert!(
        last_error_message().contains("NULL"),
        "{}",
        last_error_message()
    );
}

fn add_mul(dev: &Dev, h: u32, n: usize) {
    let bytes = (n * 4) as u64;
    let a = f32s(n, |i| i as f32);
    let b = f32s(n, |i| 0.5 + (i % 7) as f32);
    let (da, db, dout) = (dev.malloc(bytes), dev.malloc(bytes), dev.malloc(bytes));
    dev.put(da, &a);
    dev.put(db, &b);
    dev.run(
        h,
        &[
            tensor(SCENE_DIR_IN, da, bytes),
            tensor(SCENE_DIR_IN, db, bytes),
            tensor(SCENE_DIR_OUT, dout, bytes),
        ],
    );
    let out: Vec<f32> = dev.get(dout, n);
    for i in 0..n {
        assert_eq!(out[i], (a[i] + b[i]) * b[i], "element {i}");
    }
    for x in [da, db, dout] {
        assert_eq!(scene_rt_free(dev.0, x), SCENE_RT_OK);
    }
}

#[test]
fn add_then_mul_and_intermediates_are_freed() {
    let p = programs();
    // 1 MiB arena, 4 x 192 KiB per run: leaking the intermediate would run out by run 3.
    let dev = Dev::open("arena_mb=1;aic=1;aiv=2");
    let h = dev.register(&p.orch, "orch_add_mul", &p.all_incores());
    for _ in 0..8 {
        add_mul(&dev, h, 48 * 1024);
    }
}

#[test]
fn dependency_chain_is_sequential_with_many_core_threads() {
    let p = programs();
    let dev = Dev::open("platform=a5sim;aic=3;aiv=3");
    let h = dev.register(&p.orch, "orch_chain", &p.all_incores());
    let n = 3000usize;
    let bytes = (n * 4) as u64;
    let (buf, acc) = (dev.malloc(bytes), dev.malloc(bytes));
    let rounds = 25u32;
    let expect_acc: u32 = (0..rounds).map(|r| 5 * r + 30).sum();
    for _ in 0..4 {
        dev.put(buf, &vec![7u32; n]);
        dev.put(acc, &vec![0u32; n]);
        dev.run(
            h,
            &[
                tensor(SCENE_DIR_INOUT, buf, bytes),
                tensor(SCENE_DIR_INOUT, acc, bytes),
                scalar(u64::from(rounds)),
            ],
        );
        assert_eq!(dev.get::<u32>(buf, n), vec![10u32; n]);
        assert_eq!(dev.get::<u32>(acc, n), vec![expect_acc; n]);
    }
}

#[test]
fn same_image_at_two_addresses_gives_identical_results() {
    let p = programs();
    let dev = Dev::open("");
    let h1 = dev.register(&p.orch, "orch_add_mul", &p.all_incores());
    let h2 = dev.register(&p.orch, "orch_add_mul", &p.all_incores());
    let (a1, a2) = (
        debug_image_addr(dev.0, h1, ADD_F32),
        debug_image_addr(dev.0, h2, ADD_F32),
    );
    assert!(a1 != 0 && a2 != 0 && a1 != a2, "{a1:#x} {a2:#x}");
    let dev2 = Dev::open("aic=1;aiv=1");
    let h3 = dev2.register(&p.orch, "orch_add_mul", &p.all_incores());
    assert!(![a1, a2].contains(&debug_image_addr(dev2.0, h3, ADD_F32)));

    let n = 1000;
    let bytes = (n * 4) as u64;
    let run = |dev: &Dev, h: u32| -> Vec<u32> {
        let a = f32s(n, |i| (i as f32).sqrt());
        let b = f32s(n, |i| 1.0 / (1.0 + i as f32));
        let (da, db, dout) = (dev.malloc(bytes), dev.malloc(bytes), dev.malloc(bytes));
        dev.put(da, &a);
        dev.put(db, &b);
        dev.run(
            h,
            &[
                tensor(SCENE_DIR_IN, da, bytes),
                tensor(SCENE_DIR_IN, db, bytes),
                tensor(SCENE_DIR_OUT, dout, bytes),
            ],
        );
        dev.get::<f32>(dout, n)
            .iter()
            .map(|x| x.to_bits())
            .collect()
    };
    let r1 = run(&dev, h1);
    assert_eq!(r1, run(&dev, h2));
    assert_eq!(r1, run(&dev2, h3));
    assert!(r1.iter().any(|&x| x != 0));
}

#[test]
fn kernel_sees_block_index_count_and_abi() {
    let p = programs();
    let dev = Dev::open("aiv=3");
    let h = dev.register(&p.orch, "orch_probe", &p.all_incores());
    let out = dev.malloc(8 * 4);
    dev.put(out, &[0u32; 8]);
    dev.run(h, &[tensor(SCENE_DIR_OUT, out, 32)]);
    assert_eq!(
        dev.get::<u32>(out, 8),
        vec![SCENE_KERNEL_ABI_VERSION * 1_000_000 + 8_001; 8]
    );
}

#[test]
fn unknown_func_id_is_reported() {
    let p = programs();
    let dev = Dev::open("");
    let buf = dev.malloc(64);
    for sym in ["orch_bad_func", "orch_bad_func_ignored"] {
        let h = dev.register(&p.orch, sym, &p.all_incores());
        let rc = dev.try_run(h, &[tensor(SCENE_DIR_OUT, buf, 64)]);
        assert_eq!(rc, SCENE_RT_E_FUNC_ID, "{sym}");
        let msg = last_error_message();
        assert!(msg.contains("func_id 42"), "{msg}");
    }
    // The device still works afterwards.
    let h = dev.register(&p.orch, "orch_probe", &p.all_incores());
    dev.run(h, &[tensor(SCENE_DIR_OUT, buf, 32)]);
}

#[test]
fn core_type_the_platform_lacks() {
    let p = programs();
    let dev = Dev::open("aic=0;aiv=2");
    let h = dev.register(&p.orch, "orch_add_mul", &p.all_incores());
    let b = dev.malloc(256);
    let rc = dev.try_run(
        h,
        &[
            tensor(SCENE_DIR_IN, b, 256),
            tensor(SCENE_DIR_IN, b, 256),
            tensor(SCENE_DIR_OUT, b, 256),
        ],
    );
    assert_eq!(rc, SCENE_RT_E_CORE_TYPE);
    let msg = last_error_message();
    assert!(msg.contains("aic") && msg.contains("func_id 1"), "{msg}");

    // Descriptor validation at register time.
    let img = p.k("fill");
    let (rc, _) = dev.try_register(&p.orch, "orch_probe", &[(0, 5, img)]);
    assert_eq!(rc, SCENE_RT_E_CORE_TYPE, "{}", last_error_message());
    let (rc, _) = dev.try_register(&p.orch, "orch_probe", &[(64, 0, img)]);
    assert_eq!(rc, SCENE_RT_E_FUNC_ID, "{}", last_error_message());
    let (rc, _) = dev.try_register(&p.orch, "orch_probe", &[(3, 1, img), (3, 1, img)]);
    assert_eq!(rc, SCENE_RT_E_FUNC_ID);
    assert!(
        last_error_message().contains("twice"),
        "{}",
        last_error_message()
    );
}

#[test]
fn memory_bounds_are_checked() {
    let dev = Dev::open("arena_mb=1");
    let a = dev.malloc(100);
    let data = [1u8; 256];
    let mut back = [0u8; 256];
    // Past the allocation (but inside the 64-byte granule).
    assert_eq!(
        scene_rt_copy_to_device(dev.0, a, data.as_ptr().cast(), 101),
        SCENE_RT_E_OUT_OF_BOUNDS
    );
    assert!(
        last_error_message().contains("allocation"),
        "{}",
        last_error_message()
    );
    assert_eq!(
        scene_rt_copy_from_device(dev.0, back.as_mut_ptr().cast(), a + 50, 51),
        SCENE_RT_E_OUT_OF_BOUNDS
    );
    // Outside the arena, and a host pointer instead of a device address.
    let end = DEVICE_BASE + (1 << 20);
    assert_eq!(
        scene_rt_copy_to_device(dev.0, end, data.as_ptr().cast(), 4),
        SCENE_RT_E_OUT_OF_BOUNDS
    );
    assert!(
        last_error_message().contains("arena"),
        "{}",
        last_error_message()
    );
    let host = data.as_ptr() as u64;
    assert_eq!(
        scene_rt_copy_from_device(dev.0, back.as_mut_ptr().cast(), host, 4),
        SCENE_RT_E_OUT_OF_BOUNDS
    );
    assert_eq!(
        scene_rt_copy_to_device(dev.0, a, data.as_ptr().cast(), u64::MAX),
        SCENE_RT_E_OUT_OF_BOUNDS
    );
    // Not-yet-allocated space inside the arena.
    assert_eq!(
        scene_rt_copy_to_device(dev.0, a + 4096, data.as_ptr().cast(), 4),
        SCENE_RT_E_OUT_OF_BOUNDS
    );
    // In bounds round trip.
    dev.put(a + 10, &data[..90]);
    assert_eq!(dev.get::<u8>(a + 10, 90), vec![1u8; 90]);
    // Frees.
    assert_eq!(scene_rt_free(dev.0, a + 1), SCENE_RT_E_INVALID);
    assert_eq!(scene_rt_free(dev.0, a), SCENE_RT_OK);
    assert_eq!(scene_rt_free(dev.0, a), SCENE_RT_E_INVALID);
    assert_eq!(
        scene_rt_copy_to_device(dev.0, a, data.as_ptr().cast(), 1),
        SCENE_RT_E_OUT_OF_BOUNDS
    );
    // Exhaustion.
    let mut x = 0;
    assert_eq!(scene_rt_malloc(dev.0, 2 << 20, &mut x), SCENE_RT_E_OOM);
    assert!(
        last_error_message().contains("exhausted"),
        "{}",
        last_error_message()
    );
}

#[test]
fn run_and_submit_validation() {
    let p = programs();
    let dev = Dev::open("");
    let buf = dev.malloc(256);
    let h = dev.register(&p.orch, "orch_probe", &p.all_incores());
    assert_eq!(
        dev.try_run(h, &[tensor(SCENE_DIR_OUT, buf, 257)]),
        SCENE_RT_E_OUT_OF_BOUNDS
    );
    assert!(
        last_error_message().contains("run argument 0"),
        "{}",
        last_error_message()
    );
    assert_eq!(dev.try_run(h, &[tensor(9, buf, 16)]), SCENE_RT_E_INVALID);
    let h = dev.register(&p.orch, "orch_oob", &p.all_incores());
    assert_eq!(
        dev.try_run(h, &[tensor(SCENE_DIR_OUT, buf, 256)]),
        SCENE_RT_E_OUT_OF_BOUNDS
    );
    assert!(
        last_error_message().contains("func_id 2"),
        "{}",
        last_error_message()
    );
    let h = dev.register(&p.orch, "orch_too_many_args", &p.all_incores());
    assert_eq!(
        dev.try_run(h, &[tensor(SCENE_DIR_IN, buf, 256)]),
        SCENE_RT_E_INVALID
    );
    assert!(
        last_error_message().contains("33 arguments"),
        "{}",
        last_error_message()
    );
    let h = dev.register(&p.orch, "orch_fail", &p.all_incores());
    assert_eq!(dev.try_run(h, &[]), SCENE_RT_E_ORCH);
    let msg = last_error_message();
    assert!(
        msg.contains("custom failure xyz") && msg.contains("returned 7"),
        "{msg}"
    );
}

#[test]
fn bad_handles_and_loads() {
    let p = programs();
    let dev = Dev::open("");
    assert_eq!(dev.try_run(999, &[]), SCENE_RT_E_INVALID);
    assert!(
        last_error_message().contains("999"),
        "{}",
        last_error_message()
    );
    let h = dev.register(&p.orch, "orch_probe", &p.all_incores());
    assert_eq!(scene_rt_unregister_callable(dev.0, h), SCENE_RT_OK);
    assert_eq!(scene_rt_unregister_callable(dev.0, h), SCENE_RT_E_INVALID);
    assert_eq!(dev.try_run(h, &[]), SCENE_RT_E_INVALID);

    let (rc, _) = dev.try_register(&p.orch, "no_such_entry", &p.all_incores());
    assert_eq!(rc, SCENE_RT_E_LOAD);
    assert!(
        last_error_message().contains("no_such_entry"),
        "{}",
        last_error_message()
    );
    let (rc, _) = dev.try_register(b"definitely not an ELF file", "orch_probe", &[]);
    assert_eq!(rc, SCENE_RT_E_LOAD, "{}", last_error_message());
    let (rc, _) = dev.try_register(&p.orch, "orch_probe", &[(0, 1, &[])]);
    assert_eq!(rc, SCENE_RT_E_LOAD, "{}", last_error_message());
    assert!(
        last_error_message().contains("empty"),
        "{}",
        last_error_message()
    );

    let reg = scene_rt_register_callable(dev.0, std::ptr::null(), &mut 0);
    assert_eq!(reg, SCENE_RT_E_INVALID);

    // A closed device is reported, not followed.
    let mut d = std::ptr::null_mut();
    assert_eq!(scene_rt_open(1, c"".as_ptr(), &mut d), SCENE_RT_OK);
    assert_eq!(scene_rt_close(d), SCENE_RT_OK);
    assert_eq!(scene_rt_malloc(d, 64, &mut 0), SCENE_RT_E_NO_DEVICE);
    assert_eq!(scene_rt_close(d), SCENE_RT_E_NO_DEVICE);
    assert_eq!(
        scene_rt_open(-1, std::ptr::null(), &mut d),
        SCENE_RT_E_NO_DEVICE
    );
}

#[test]
fn options_are_validated() {
    let mut d = std::ptr::null_mut();
    for (opts, needle) in [
        (c"bogus=1", "bogus"),
        (c"platform=gpu", "gpu"),
        (c"aic=two", "aic"),
        (c"fault=explode", "explode"),
        (c"fault=hang", "timeout_ms"),
    ] {
        assert_eq!(
            scene_rt_open(0, opts.as_ptr(), &mut d),
            SCENE_RT_E_INVALID,
            "{opts:?}"
        );
        assert!(
            last_error_message().contains(needle),
            "{opts:?}: {}",
            last_error_message()
        );
    }
    assert_eq!(
        scene_rt_open(
            0,
            c"platform=a5sim;aic=1;aiv=1;arena_mb=4;timeout_ms=1000".as_ptr(),
            &mut d
        ),
        SCENE_RT_OK
    );
    assert_eq!(scene_rt_close(d), SCENE_RT_OK);
}
