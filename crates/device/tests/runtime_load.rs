//! Loading runtimes: the real simulator (built as a dev-dependency) and
//! hand-made shared objects that are not valid runtimes.

use std::path::{Path, PathBuf};
use std::process::Command;

use scene_device::abi::{
    SCENE_CORE_AIC, SCENE_CORE_AIV, SCENE_RT_E_INVALID, SCENE_RT_E_LOAD, SCENE_RT_E_ORCH,
    SCENE_RT_E_OUT_OF_BOUNDS,
};
use scene_device::{
    AcquireOptions, ArgsConvention, CallableHandle, CallableImage, CardLease, CardPool, Direction,
    IncoreImageRef, IncoreKind, RunArg, Runtime, RuntimeError, default_runtime_path,
};
use scene_kernels::{BuiltinPlatform, Extraction, Toolchain};

fn lease(dir: &Path) -> CardLease {
    CardPool::new("0".parse().unwrap(), dir.join("locks"))
        .unwrap()
        .acquire(1, "runtime_load", AcquireOptions::default())
        .unwrap()
}

fn cc(args: &[&str]) {
    let out = Command::new("cc").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "cc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn c_so(dir: &Path, name: &str, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    let so = dir.join(format!("{name}.so"));
    std::fs::write(&c, src).unwrap();
    let inc = include_dir();
    cc(&[
        "-shared",
        "-fPIC",
        "-O1",
        "-I",
        inc.to_str().unwrap(),
        c.to_str().unwrap(),
        "-o",
        so.to_str().unwrap(),
    ]);
    so
}

/// `src` built by the host C++ compiler (C++20, the ABI headers on the
/// path) into `<dir>/<name>.so`; its bytes.
fn cxx_so(dir: &Path, name: &str, src: &str) -> Vec<u8> {
    let cpp = dir.join(format!("{name}.cpp"));
    let so = dir.join(format!("{name}.so"));
    std::fs::write(&cpp, src).unwrap();
    let out = Command::new("c++")
        .args(["-std=c++20", "-shared", "-fPIC", "-O1", "-I"])
        .arg(include_dir())
        .arg(&cpp)
        .arg("-o")
        .arg(&so)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "c++: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(so).unwrap()
}

#[test]
fn sim_runtime_memory_round_trip_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let lease = lease(dir.path());
    let path = default_runtime_path().unwrap();
    assert!(
        path.ends_with(scene_device::RUNTIME_LIB_NAME),
        "{}",
        path.display()
    );
    let rt = Runtime::load(&lease, &path).unwrap();
    assert_eq!(
        rt.abi_version(),
        scene_device::abi::SCENE_RUNTIME_ABI_VERSION
    );
    assert_eq!(rt.path(), path);

    let dev = rt.open(0, "arena_mb=4;aic=1;aiv=1").unwrap();
    assert_eq!(dev.device_id(), 0);
    let buf = dev.malloc(1000).unwrap();
    assert_eq!(buf.size, 1000);
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
    dev.copy_to(buf.addr, &data).unwrap();
    let mut back = vec![0u8; 1000];
    dev.copy_from(buf.addr, &mut back).unwrap();
    assert_eq!(back, data);

    let e = dev.copy_to(buf.addr, &[0u8; 1001]).unwrap_err();
    match &e {
        RuntimeError::Call {
            call,
            status,
            message,
        } => {
            assert_eq!(*call, "scene_rt_copy_to_device");
            assert_eq!(*status, SCENE_RT_E_OUT_OF_BOUNDS);
            assert!(message.contains("allocation"), "{message}");
        }
        e => panic!("{e:?}"),
    }
    assert!(!e.is_device_fatal());
    assert!(e.to_string().contains("SCENE_RT_E_OUT_OF_BOUNDS"), "{e}");
    let e = dev.copy_from(buf.addr + (8 << 20), &mut back).unwrap_err();
    assert_eq!(e.status(), Some(SCENE_RT_E_OUT_OF_BOUNDS));
    dev.free(buf.addr).unwrap();
    assert_eq!(
        dev.free(buf.addr).unwrap_err().status(),
        Some(SCENE_RT_E_INVALID)
    );
    dev.close().unwrap();

    let e = rt.open(0, "bogus=1").unwrap_err();
    assert_eq!(e.status(), Some(SCENE_RT_E_INVALID));
    assert!(e.to_string().contains("bogus"), "{e}");
    assert!(matches!(
        rt.open(0, "a\0b"),
        Err(RuntimeError::InvalidArgument(_))
    ));

    // A fatal status is recognisable.
    let dev = rt.open(1, "fault=fatal_on_run:1").unwrap();
    let e = dev.run(scene_device::CallableHandle(1), &[]).unwrap_err();
    assert!(e.is_device_fatal(), "{e:?}");
    assert!(dev.malloc(64).unwrap_err().is_device_fatal());
}

const FILL_KERNEL: &str = r#"#include "scene_kernel.h"
SCENE_KERNEL_ENTRY(ka) {
    uint32_t *o = SCENE_ARG_PTR(ka, 0, uint32_t);
    uint32_t v = (uint32_t)SCENE_ARG_U64(ka, 1);
    uint64_t n = SCENE_ARG_LEN(ka, 0, uint32_t);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { o[i] = v + (uint32_t)i; }
}
"#;

const FILL_ORCH: &str = r#"#include "scene_orch.h"
SCENE_ORCH_ENTRY(fill_orch, ctx, args, nargs) {
    if (nargs != 2) { ctx->ops->fail(ctx, "want 2 args"); return -1; }
    SceneTaskArg t[2] = { SCENE_OUT(args[0]), SCENE_SCALAR_U64(args[1].value) };
    return scene_orch_submit(ctx, 3, 4, t, 2);
}
"#;

fn kernel_image(dir: &Path) -> Vec<u8> {
    let c = dir.join("k.c");
    let o = dir.join("k.o");
    let elf = dir.join("k.elf");
    let bin = dir.join("k.bin");
    let ld = dir.join("kernel.ld");
    std::fs::write(&c, FILL_KERNEL).unwrap();
    std::fs::write(&ld, "ENTRY(kernel_entry) SECTIONS { . = 0; .text 0 : { KEEP(*(.text.kernel_entry)) *(.text .text.*) *(.rodata .rodata.*) } /DISCARD/ : { *(.comment) *(.note*) *(.eh_frame*) } }").unwrap();
    let inc = include_dir();
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    // The flags every scene kernel compiles and links with, from the one
    // definition (the kernels crate's ELF toolchain).
    let tc = Toolchain::builtin_for(BuiltinPlatform::A2a3Sim, Extraction::Elf);
    let mut args = tc.incore_flags.clone();
    args.extend(["-I".into(), s(&inc), "-c".into(), s(&c), "-o".into(), s(&o)]);
    cc(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let st = Command::new("ld")
        .args(&tc.link_flags)
        .args(["-T", &s(&ld), "-o", &s(&elf), &s(&o)])
        .status()
        .unwrap();
    assert!(st.success());
    let st = Command::new("objcopy")
        .args(["-O", "binary", "-j", ".text", &s(&elf), &s(&bin)])
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::read(bin).unwrap()
}

#[test]
fn sim_runtime_runs_a_callable() {
    let dir = tempfile::tempdir().unwrap();
    let image = kernel_image(dir.path());
    let orch = std::fs::read(c_so(dir.path(), "orch", FILL_ORCH)).unwrap();
    let lease = lease(dir.path());
    let rt = Runtime::load(&lease, &default_runtime_path().unwrap()).unwrap();
    let dev = rt.open(0, "aiv=2").unwrap();
    let callable = CallableImage {
        orch_so: &orch,
        orch_symbol: "fill_orch",
        incores: vec![IncoreImageRef::image(3, SCENE_CORE_AIV, &image)],
    };
    let h = dev.register(&callable).unwrap();
    let buf = dev.malloc(4 * 100).unwrap();
    dev.run(
        h,
        &[RunArg::tensor(Direction::Out, buf), RunArg::Scalar(1000)],
    )
    .unwrap();
    let mut raw = vec![0u8; 400];
    dev.copy_from(buf.addr, &mut raw).unwrap();
    let got: Vec<u32> = raw
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, (1000..1100).collect::<Vec<u32>>());
    // Untraced runs leave no record (issue 19); a traced run leaves one,
    // taken once; unknown flags are refused.
    assert_eq!(dev.trace_take().unwrap(), None);
    assert!(dev.trace_enable(1 << 7).is_err());
    dev.trace_enable(
        scene_device::abi::SCENE_RT_TRACE_TIMELINE | scene_device::abi::SCENE_RT_TRACE_DEPS,
    )
    .unwrap();
    let before = scene_device::monotonic_ns();
    dev.run(
        h,
        &[RunArg::tensor(Direction::Out, buf), RunArg::Scalar(1000)],
    )
    .unwrap();
    let record: serde_json::Value =
        serde_json::from_str(&dev.trace_take().unwrap().expect("a record")).unwrap();
    assert!(
        record["run"]["begin_ns"].as_u64().unwrap() >= before,
        "{record}"
    );
    let tasks = record["tasks"].as_array().unwrap();
    assert!(!tasks.is_empty(), "{record}");
    assert_eq!(tasks[0]["func_id"], 3, "{record}");
    assert_eq!(tasks[0]["accesses"][0]["buffer"], "arg", "{record}");
    let blocks = record["blocks"].as_array().unwrap().len() as u64;
    let expected: u64 = tasks.iter().map(|t| t["block_num"].as_u64().unwrap()).sum();
    assert_eq!(blocks, expected, "{record}");
    assert_eq!(dev.trace_take().unwrap(), None, "taken once");
    dev.trace_enable(0).unwrap();

    let e = dev
        .run(h, &[RunArg::tensor(Direction::Out, buf)])
        .unwrap_err();
    assert_eq!(e.status(), Some(SCENE_RT_E_ORCH));
    assert!(e.to_string().contains("want 2 args"), "{e}");
    dev.unregister(h).unwrap();
    assert_eq!(
        dev.unregister(h).unwrap_err().status(),
        Some(SCENE_RT_E_INVALID)
    );
}

#[test]
fn files_that_are_not_runtimes_are_rejected_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let lease = lease(dir.path());

    let junk = dir.path().join("junk.so");
    std::fs::write(&junk, b"this is not an ELF file").unwrap();
    let e = Runtime::load(&lease, &junk).unwrap_err();
    assert!(matches!(e, RuntimeError::Load { .. }), "{e:?}");
    assert!(e.to_string().contains(junk.to_str().unwrap()), "{e}");

    let missing = dir.path().join("does-not-exist.so");
    assert!(matches!(
        Runtime::load(&lease, &missing),
        Err(RuntimeError::Load { .. })
    ));

    let empty = c_so(
        dir.path(),
        "empty",
        "int scene_nothing(void) { return 0; }\n",
    );
    let e = Runtime::load(&lease, &empty).unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::MissingSymbol {
                symbol: "scene_rt_abi_version",
                ..
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains(empty.to_str().unwrap()) && msg.contains("scene_rt_abi_version"),
        "{msg}"
    );

    let partial = c_so(
        dir.path(),
        "partial",
        &format!(
            "int scene_rt_abi_version(void) {{ return {}; }}\n",
            scene_device::abi::SCENE_RUNTIME_ABI_VERSION
        ),
    );
    let e = Runtime::load(&lease, &partial).unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::MissingSymbol {
                symbol: "scene_rt_open",
                ..
            }
        ),
        "{e:?}"
    );
}

/// A runtime with every required symbol, reporting ABI version `version`.
fn stub_runtime_source(version: &str) -> String {
    format!(
        r#"#include "scene_runtime.h"
static int dev_token;
int32_t scene_rt_abi_version(void) {{ return {version}; }}
int32_t scene_rt_open(int32_t d, const char *o, SceneDevice **out) {{ (void)d; (void)o; *out = (SceneDevice *)&dev_token; return 0; }}
int32_t scene_rt_close(SceneDevice *dev) {{ (void)dev; return 0; }}
int32_t scene_rt_malloc(SceneDevice *dev, uint64_t s, uint64_t *a) {{ (void)dev; (void)s; (void)a; return -1; }}
int32_t scene_rt_free(SceneDevice *dev, uint64_t a) {{ (void)dev; (void)a; return -1; }}
int32_t scene_rt_copy_to_device(SceneDevice *dev, uint64_t d, const void *s, uint64_t n) {{ (void)dev; (void)d; (void)s; (void)n; return -1; }}
int32_t scene_rt_copy_from_device(SceneDevice *dev, void *d, uint64_t s, uint64_t n) {{ (void)dev; (void)d; (void)s; (void)n; return -1; }}
int32_t scene_rt_register_callable(SceneDevice *dev, const SceneCallableDesc *d, uint32_t *h) {{ (void)dev; (void)d; (void)h; return -1; }}
int32_t scene_rt_unregister_callable(SceneDevice *dev, uint32_t h) {{ (void)dev; (void)h; return -1; }}
int32_t scene_rt_run(SceneDevice *dev, uint32_t h, const SceneRunArg *a, uint32_t n) {{ (void)dev; (void)h; (void)a; (void)n; return -1; }}
int32_t scene_rt_run2(SceneDevice *dev, uint32_t h, const SceneRunArg *a, const SceneTensorDesc *d, uint32_t n) {{ (void)dev; (void)h; (void)a; (void)d; (void)n; return -1; }}
const char *scene_rt_last_error(void) {{ return ""; }}
"#
    )
}

/// The one version policy of scene_abi.h: a runtime older than the
/// harness's SCENE_RUNTIME_ABI_VERSION is refused as such, naming both
/// versions, before any symbol it lacks.
#[test]
fn abi_mismatch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lease = lease(dir.path());
    let needed = scene_device::abi::SCENE_RUNTIME_ABI_VERSION;
    for (name, found) in [("older", needed - 1), ("zero", 0), ("negative", -7)] {
        let so = c_so(dir.path(), name, &stub_runtime_source(&found.to_string()));
        let e = Runtime::load(&lease, &so).unwrap_err();
        assert!(
            matches!(e, RuntimeError::AbiMismatch { found: f, expected } if f == found && expected == needed),
            "{name}: {e:?}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("version {found},"))
                && msg.contains(&format!("needs version {needed} or newer")),
            "{msg}"
        );
    }
    // Refused for its version even when it lacks v2's symbols.
    let v1 = stub_runtime_source("1").replace("int32_t scene_rt_run2", "int32_t not_run2");
    let e = Runtime::load(&lease, &c_so(dir.path(), "v1", &v1)).unwrap_err();
    assert!(
        matches!(e, RuntimeError::AbiMismatch { found: 1, .. }),
        "{e:?}"
    );
}

/// Versions only add (scene_abi.h), so a runtime newer than this harness
/// serves it: it loads, reports its own version, and opens devices.
#[test]
fn a_newer_runtime_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let lease = lease(dir.path());
    let needed = scene_device::abi::SCENE_RUNTIME_ABI_VERSION;
    for (name, found) in [("same", needed), ("next", needed + 1), ("far", 999)] {
        let so = c_so(dir.path(), name, &stub_runtime_source(&found.to_string()));
        let rt = Runtime::load(&lease, &so).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(rt.abi_version(), found, "{name}");
        rt.open(0, "").unwrap().close().unwrap();
    }
}

/// The device headers of the checkout the test runs in: the manifest dir is
/// read at run time first (a nextest archive run with `--workspace-remap`
/// points it at the checkout it runs in; `scene_device::include_dir()` is
/// the build machine's).
fn include_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("include")
}

/// A version-2 runtime without `scene_rt_comm_create` / `_destroy` (and
/// `scene_rt_args_record`) still loads and opens cards (level 2 runs on
/// it); asking it for a communication domain (level 3) or an args dump
/// says what it lacks.
#[test]
fn a_runtime_without_comm_entries_cannot_run_rank_groups() {
    let dir = tempfile::tempdir().unwrap();
    let lease = lease(dir.path());
    let src = stub_runtime_source("SCENE_RUNTIME_ABI_VERSION");
    let so = c_so(dir.path(), "nocomm", &src);
    let rt = Runtime::load(&lease, &so).unwrap();
    let a = rt.open(0, "").unwrap();
    let b = rt.open(1, "").unwrap();
    let e = rt.comm_create(&[&a, &b], 64, "").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("has no scene_rt_comm_create / scene_rt_comm_destroy")
            && msg.contains("level-3"),
        "{msg}"
    );
    // Nor has it the trace entries (issue 19): asking for a trace names
    // the runtime and the missing symbol.
    let e = a
        .trace_enable(scene_device::abi::SCENE_RT_TRACE_TIMELINE)
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("has no scene_rt_trace_enable") && msg.contains(so.to_str().unwrap()),
        "{msg}"
    );
    let e = a.trace_take().unwrap_err();
    assert!(e.to_string().contains("has no scene_rt_trace_take"), "{e}");
    // Nor can it record task arguments (`--dump-args`).
    let msg = a.record_args(dir.path()).unwrap_err().to_string();
    assert!(
        msg.contains("has no scene_rt_args_record") && msg.contains("nocomm.so"),
        "{msg}"
    );
    // Nor can it run hosted kernels (issue 29): registering one names the
    // runtime and the missing symbol; image-only callables still take the
    // old call.
    assert!(!rt.has_hosted_kernels());
    let callable = CallableImage {
        orch_so: b"orch",
        orch_symbol: "orch",
        incores: vec![
            IncoreImageRef::image(0, SCENE_CORE_AIV, b"image"),
            IncoreImageRef::hosted(4, SCENE_CORE_AIV, b"so", None),
        ],
    };
    let e = a.register(&callable).unwrap_err();
    assert!(matches!(e, RuntimeError::InvalidArgument(_)), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("has no scene_rt_register_callable2")
            && msg.contains("nocomm.so")
            && msg.contains("func_id 4"),
        "{msg}"
    );
    let images_only = CallableImage {
        incores: vec![IncoreImageRef::image(0, SCENE_CORE_AIV, b"image")],
        ..callable
    };
    match a.register(&images_only).unwrap_err() {
        RuntimeError::Call { call, .. } => assert_eq!(call, "scene_rt_register_callable"),
        e => panic!("{e:?}"),
    }
    // Nor can it reset an open device (issue 28): the caller reopens.
    assert!(!rt.has_reset());
    let e = a.reset().unwrap_err();
    assert!(matches!(e, RuntimeError::InvalidArgument(_)), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("has no scene_rt_reset") && msg.contains("nocomm.so"),
        "{msg}"
    );
}

/// The simulator offers `scene_rt_reset`: allocations from before it are
/// gone, the device serves new ones; a rank of a live domain is refused
/// until the domain is destroyed; a fatal device stays fatal.
#[test]
fn sim_runtime_resets_an_open_device() {
    let dir = tempfile::tempdir().unwrap();
    let lease = lease(dir.path());
    let rt = Runtime::load(&lease, &default_runtime_path().unwrap()).unwrap();
    assert!(rt.has_reset());
    let a = rt.open(0, "arena_mb=2;aic=1;aiv=1").unwrap();
    let old = a.malloc(1 << 20).unwrap();
    a.copy_to(old.addr, &[1, 2, 3]).unwrap();
    a.reset().unwrap();
    let e = a.copy_to(old.addr, &[1, 2, 3]).unwrap_err();
    assert_eq!(e.status(), Some(SCENE_RT_E_OUT_OF_BOUNDS), "{e}");
    let new = a.malloc(1 << 20).unwrap();
    let mut back = [9u8; 3];
    a.copy_from(new.addr, &mut back).unwrap();
    assert_eq!(back, [0; 3]);

    let b = rt.open(1, "aic=1;aiv=1").unwrap();
    let comm = rt.comm_create(&[&a, &b], 64, "").unwrap();
    let e = b.reset().unwrap_err();
    assert_eq!(e.status(), Some(SCENE_RT_E_INVALID), "{e}");
    assert!(
        e.to_string()
            .contains("destroy the communication domain first"),
        "{e}"
    );
    comm.destroy().unwrap();
    b.reset().unwrap();

    let f = rt.open(2, "fault=fatal_on_run:1").unwrap();
    assert!(
        f.run(scene_device::CallableHandle(1), &[])
            .unwrap_err()
            .is_device_fatal()
    );
    assert!(f.reset().unwrap_err().is_device_fatal());
}

/// The simulator records task arguments once asked (the layout is checked
/// end to end by the scenes package's replay tests).
#[test]
fn sim_runtime_accepts_an_args_record_directory() {
    let dir = tempfile::tempdir().unwrap();
    let lease = lease(dir.path());
    let rt = Runtime::load(&lease, &default_runtime_path().unwrap()).unwrap();
    let dev = rt.open(0, "").unwrap();
    dev.record_args(&dir.path().join("args")).unwrap();
}

/// The simulator's domain: two open devices become ranks 0 and 1; a
/// device cannot be a rank of two domains at once; destroying the domain
/// frees the devices for the next one.
#[test]
fn sim_runtime_comm_domains_attach_and_detach() {
    let dir = tempfile::tempdir().unwrap();
    let lease = lease(dir.path());
    let rt = Runtime::load(&lease, &default_runtime_path().unwrap()).unwrap();
    let a = rt.open(0, "").unwrap();
    let b = rt.open(1, "").unwrap();
    let comm = rt.comm_create(&[&a, &b], 4096, "timeout_ms=500").unwrap();
    let e = rt.comm_create(&[&a, &b], 4096, "").unwrap_err();
    assert!(
        e.to_string().contains("another communication domain"),
        "{e}"
    );
    let e = rt.comm_create(&[&a], 64, "bogus=1").unwrap_err();
    assert!(
        e.to_string().contains("unknown comm option `bogus=1`"),
        "{e}"
    );
    comm.destroy().unwrap();
    rt.comm_create(&[&b, &a], 64, "")
        .unwrap()
        .destroy()
        .unwrap();
}

/// `scene_rt_comm_create2` (`[comm] window_tensor`): each rank's window is
/// memory of its own device. A window address that is not a live
/// allocation of the rank's device, or a window larger than the
/// allocation, fails naming the rank; the window's allocation cannot be
/// freed while the domain lives, and can after it is destroyed.
#[test]
fn sim_runtime_windows_in_device_memory() {
    let dir = tempfile::tempdir().unwrap();
    let lease = lease(dir.path());
    let rt = Runtime::load(&lease, &default_runtime_path().unwrap()).unwrap();
    let a = rt.open(0, "").unwrap();
    let b = rt.open(1, "").unwrap();
    let wa = a.malloc(256).unwrap();
    let wb = b.malloc(256).unwrap();
    // b's address is not an allocation of a (each device has its own arena).
    let e = rt
        .comm_create_at(&[&a, &b], 256, Some(&[wa.addr, wb.addr + 512]), "")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("scene_rt_comm_create2") && e.contains("rank 1's window"),
        "{e}"
    );
    let e = rt
        .comm_create_at(&[&a, &b], 257, Some(&[wa.addr, wb.addr]), "")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rank 0's window (257 bytes)") && e.contains("runs past the end"),
        "{e}"
    );
    let e = rt
        .comm_create_at(&[&a, &b], 64, Some(&[wa.addr]), "")
        .unwrap_err()
        .to_string();
    assert!(e.contains("1 window addresses for 2 ranks"), "{e}");
    // A failed create attached nothing: this one succeeds. A window may
    // be part of an allocation (a view of a tensor).
    let comm = rt
        .comm_create_at(&[&a, &b], 128, Some(&[wa.addr + 128, wb.addr]), "")
        .unwrap();
    let e = b.free(wb.addr).unwrap_err().to_string();
    assert!(
        e.contains("rank 1's communication window")
            && e.contains("destroy the communication domain"),
        "{e}"
    );
    comm.destroy().unwrap();
    a.free(wa.addr).unwrap();
    b.free(wb.addr).unwrap();
}

/// A runtime with `scene_rt_comm_create` but without `_create2` runs
/// level-3 scenes with heap windows and says what it lacks for a window
/// tensor.
#[test]
fn a_runtime_without_comm_create2_cannot_take_window_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let lease = lease(dir.path());
    // The stub plus the first comm entries, without scene_rt_comm_create2.
    let src = stub_runtime_source("SCENE_RUNTIME_ABI_VERSION")
        + r#"static int comm_token;
int32_t scene_rt_comm_create(SceneDevice *const *devs, uint32_t n, uint64_t w, const char *o, SceneCommDomain **out) { (void)devs; (void)n; (void)w; (void)o; *out = (SceneCommDomain *)&comm_token; return 0; }
int32_t scene_rt_comm_destroy(SceneCommDomain *c) { (void)c; return 0; }
"#;
    let so = c_so(dir.path(), "nocreate2", &src);
    let rt = Runtime::load(&lease, &so).unwrap();
    let a = rt.open(0, "").unwrap();
    let b = rt.open(1, "").unwrap();
    rt.comm_create(&[&a, &b], 64, "")
        .unwrap()
        .destroy()
        .unwrap();
    let e = rt
        .comm_create_at(&[&a, &b], 64, Some(&[1, 2]), "")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("has no scene_rt_comm_create2")
            && e.contains("window_tensor")
            && e.contains("nocreate2.so"),
        "{e}"
    );
}

const HOSTED_FILL: &str = r#"#include "scene_kernel.h"
#include <vector>
/* C++20 with its runtime: o[i] = v + i over this block's share. */
extern "C" void fill_entry(const SceneKernelArgs *ka) {
    uint32_t *o = SCENE_ARG_PTR(ka, 0, uint32_t);
    uint32_t v = (uint32_t)SCENE_ARG_U64(ka, 1);
    uint64_t n = SCENE_ARG_LEN(ka, 0, uint32_t);
    std::vector<uint32_t> part;
    uint64_t b, e;
    scene_block_range(ka, n, &b, &e);
    for (uint64_t i = b; i < e; ++i) part.push_back(v + (uint32_t)i);
    for (uint64_t i = b; i < e; ++i) o[i] = part[i - b];
}
"#;

/// A hosted kernel compiled with the host C++ compiler.
fn hosted_so(dir: &Path) -> Vec<u8> {
    cxx_so(dir, "hosted", HOSTED_FILL)
}

/// The loader registers a hosted kernel (issue 29) through the simulator's
/// `scene_rt_register_callable2`, and the run computes with it; a missing
/// entry symbol is the runtime's load error.
#[test]
fn sim_runtime_registers_a_hosted_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let so = hosted_so(dir.path());
    let orch = std::fs::read(c_so(dir.path(), "orch", FILL_ORCH)).unwrap();
    let lease = lease(dir.path());
    let rt = Runtime::load(&lease, &default_runtime_path().unwrap()).unwrap();
    assert!(rt.has_hosted_kernels());
    let dev = rt.open(0, "aiv=2").unwrap();
    let hosted = IncoreImageRef::hosted(3, SCENE_CORE_AIV, &so, Some("fill_entry"));
    assert!(hosted.is_hosted());
    assert_eq!(
        hosted.kind,
        IncoreKind::Hosted {
            symbol: Some("fill_entry"),
            args: ArgsConvention::Scene
        }
    );
    let h = dev
        .register(&CallableImage {
            orch_so: &orch,
            orch_symbol: "fill_orch",
            incores: vec![hosted],
        })
        .unwrap();
    let buf = dev.malloc(4 * 100).unwrap();
    dev.run(
        h,
        &[RunArg::tensor(Direction::Out, buf), RunArg::Scalar(7000)],
    )
    .unwrap();
    let mut raw = vec![0u8; 400];
    dev.copy_from(buf.addr, &mut raw).unwrap();
    let got: Vec<u32> = raw
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, (7000..7100).collect::<Vec<u32>>());

    let missing = CallableImage {
        orch_so: &orch,
        orch_symbol: "fill_orch",
        incores: vec![IncoreImageRef::hosted(3, SCENE_CORE_AIV, &so, None)],
    };
    match dev.register(&missing).unwrap_err() {
        RuntimeError::Call {
            call,
            status,
            message,
        } => {
            assert_eq!(call, "scene_rt_register_callable2");
            assert_eq!(status, SCENE_RT_E_LOAD);
            assert!(
                message.contains("func_id 3") && message.contains("`kernel_entry`"),
                "{message}"
            );
        }
        e => panic!("{e:?}"),
    }
}

/// What the loader passes to `scene_rt_register_callable2`: a stub runtime
/// encodes each incore's kind, convention, symbol and bytes into the
/// handle, and refuses the old call, so the test sees which call was used.
#[test]
fn the_loader_describes_hosted_and_image_incores_to_register_callable2() {
    let dir = tempfile::tempdir().unwrap();
    let lease = lease(dir.path());
    let src = stub_runtime_source("SCENE_RUNTIME_ABI_VERSION")
        + r#"#include <string.h>
int32_t scene_rt_register_callable2(SceneDevice *dev, const SceneCallableDesc2 *d, uint32_t *h) {
    (void)dev;
    uint32_t code = 0;
    if (d->num_incores != 2 || strcmp(d->orch_symbol, "orch") != 0) return -1;
    for (uint32_t i = 0; i < d->num_incores; ++i) {
        const SceneIncoreDesc2 *k = &d->incores[i];
        for (int r = 0; r < 4; ++r) if (k->reserved[r]) return -1;
        if (k->image_len != 2 || k->image[0] != 'k') return -1;
        code = code * 1000 + k->func_id * 100 + k->kind * 10 + k->args_convention;
        if (k->symbol) code += strcmp(k->symbol, "entry") == 0 ? 5 : 7;
    }
    *h = code;
    return 0;
}
"#;
    let rt = Runtime::load(&lease, &c_so(dir.path(), "hosted_stub", &src)).unwrap();
    assert!(rt.has_hosted_kernels());
    let dev = rt.open(0, "").unwrap();
    let mut callable = CallableImage {
        orch_so: b"orch",
        orch_symbol: "orch",
        incores: vec![
            IncoreImageRef::image(1, SCENE_CORE_AIC, b"k1"),
            IncoreImageRef::hosted(2, SCENE_CORE_AIV, b"k2", Some("entry")),
        ],
    };
    // Image: kind 0, convention 0, no symbol; hosted: kind 1, convention
    // 0, symbol "entry".
    assert_eq!(
        dev.register(&callable).unwrap(),
        CallableHandle(100 * 1000 + 210 + 5)
    );
    callable.incores[1].kind = IncoreKind::Hosted {
        symbol: None,
        args: ArgsConvention::ChipTensor,
    };
    assert_eq!(
        dev.register(&callable).unwrap(),
        CallableHandle(100 * 1000 + 211)
    );
    // Without hosted incores: the old call (which this stub refuses).
    callable.incores[1] = IncoreImageRef::image(2, SCENE_CORE_AIV, b"k2");
    match dev.register(&callable).unwrap_err() {
        RuntimeError::Call { call, .. } => assert_eq!(call, "scene_rt_register_callable"),
        e => panic!("{e:?}"),
    }
    // A NUL in an entry symbol is refused before the call.
    callable.incores[1] = IncoreImageRef::hosted(2, SCENE_CORE_AIV, b"k2", Some("a\0b"));
    assert!(matches!(
        dev.register(&callable),
        Err(RuntimeError::InvalidArgument(_))
    ));
}

/// Hosted kernels that ask the process for PTO-ISA's execution-context hook
/// the way PTO-ISA's CPU backend does (`dlsym(RTLD_DEFAULT, ...)`), and
/// kernels in the original project's `chip_tensor` convention (issue 29).
/// `Record` is the test's own struct with the original's published layout.
const HOOK_KERNELS: &str = r#"#include "scene_kernel.h"
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <dlfcn.h>

using ExecutionContextHook = void (*)(uint32_t *, uint32_t *, uint32_t *);

/* What the hook reports, or all ones when the process has no hook. */
static void context(uint32_t *block, uint32_t *sub, uint32_t *dim) {
    static const auto hook = reinterpret_cast<ExecutionContextHook>(
        dlsym(RTLD_DEFAULT, "pto_cpu_sim_get_execution_context"));
    *block = *sub = *dim = 0xffffffffu;
    if (hook) hook(block, sub, dim);
}

/* scene convention: out[3 * b .. 3 * b + 3] = what block b's hook said. */
extern "C" void where_entry(const SceneKernelArgs *ka) {
    uint32_t *o = SCENE_ARG_PTR(ka, 0, uint32_t) + 3 * ka->block_idx;
    context(&o[0], &o[1], &o[2]);
}

struct alignas(64) Record {
    uint64_t addr;           /* buffer.addr */
    uint64_t size;           /* buffer.size (bytes) */
    uint64_t owner_task_id;  /* UINT64_MAX: no creating task */
    uint64_t start_offset;   /* elements */
    int32_t version;
    uint32_t ndims;
    uint8_t dtype;           /* 0 FLOAT32, 5 UINT8, ... */
    bool manual_dep;
    bool is_contiguous;
    uint8_t address_space;   /* 0 host */
    uint32_t shapes[5];
    uint64_t extent_elem_cache;
    uint32_t strides[5];
    uint8_t reserved[36];
};
static_assert(sizeof(Record) == 128 && alignof(Record) == 64);
static_assert(offsetof(Record, size) == 8 && offsetof(Record, owner_task_id) == 16);
static_assert(offsetof(Record, start_offset) == 24 && offsetof(Record, version) == 32);
static_assert(offsetof(Record, ndims) == 36 && offsetof(Record, dtype) == 40);
static_assert(offsetof(Record, manual_dep) == 41 && offsetof(Record, is_contiguous) == 42);
static_assert(offsetof(Record, address_space) == 43 && offsetof(Record, shapes) == 44);
static_assert(offsetof(Record, extent_elem_cache) == 64 && offsetof(Record, strides) == 72);

static const Record *rec(int64_t word) { return reinterpret_cast<const Record *>(word); }

template <typename T> static T *data(const Record *r) {
    return reinterpret_cast<T *>(r->addr) + r->start_offset;
}

/* A plain 1-D host tensor of `dtype` and `n` elements. */
static bool plain(const Record *r, uint8_t dtype, uint64_t n, uint64_t elem) {
    return r->dtype == dtype && r->ndims == 1 && r->shapes[0] == n && r->strides[0] == 1 &&
           r->is_contiguous && r->extent_elem_cache == n && r->size == n * elem &&
           r->start_offset == 0 && r->owner_task_id == UINT64_MAX && r->version == 0 &&
           !r->manual_dep && r->address_space == 0;
}

static void share(uint64_t n, uint32_t blocks, uint64_t *b, uint64_t *e) {
    uint32_t block = 0, sub = 0, dim = 0;
    context(&block, &sub, &dim);
    uint64_t per = (n + blocks - 1) / blocks;
    *b = std::min<uint64_t>(n, per * block);
    *e = std::min<uint64_t>(n, *b + per);
}

/* chip_tensor: a, b (f32 [n]), c (f32 [n]), k, blocks: c = a + b * k. */
extern "C" void kernel_entry(int64_t *args) {
    const Record *a = rec(args[0]), *b = rec(args[1]), *c = rec(args[2]);
    const int64_t k = args[3];
    const uint32_t blocks = (uint32_t)args[4];
    const uint64_t n = c->shapes[0];
    const bool ok = plain(a, 0, n, 4) && plain(b, 0, n, 4) && plain(c, 0, n, 4);
    uint64_t i0, i1;
    share(n, blocks, &i0, &i1);
    for (uint64_t i = i0; i < i1; ++i)
        data<float>(c)[i] = ok ? data<float>(a)[i] + data<float>(b)[i] * (float)k : -12345.0f;
}

/* chip_tensor over byte tensors (v1 submits): t, o (u32 data), k, blocks: o = t + k. */
extern "C" void add_k_entry(int64_t *args) {
    const Record *t = rec(args[0]), *o = rec(args[1]);
    const uint32_t k = (uint32_t)args[2], blocks = (uint32_t)args[3];
    const uint64_t n = o->shapes[0] / 4;
    const bool ok = plain(t, 5, 4 * n, 1) && plain(o, 5, 4 * n, 1);
    uint64_t i0, i1;
    share(n, blocks, &i0, &i1);
    for (uint64_t i = i0; i < i1; ++i)
        data<uint32_t>(o)[i] = ok ? data<uint32_t>(t)[i] + k : 0xdeadbeefu;
}
"#;

const HOOK_ORCH: &str = r#"#include "scene_orch.h"
/* out, func_id, blocks: one task. */
SCENE_ORCH_ENTRY(one_orch, ctx, args, nargs) {
    if (nargs != 3) { ctx->ops->fail(ctx, "want 3 args"); return -1; }
    SceneTaskArg t[1] = { SCENE_OUT(args[0]) };
    return scene_orch_submit(ctx, (uint32_t)args[1].value, (uint32_t)args[2].value, t, 1);
}
/* a, b, c, k, blocks: func 1 with the run's descriptions (v2). */
SCENE_ORCH_ENTRY(chip_orch, ctx, args, nargs) {
    if (nargs != 5) { ctx->ops->fail(ctx, "want 5 args"); return -1; }
    SceneTaskArgV2 t[5] = {
        scene_task_arg(ctx, args, 0, SCENE_DIR_IN), scene_task_arg(ctx, args, 1, SCENE_DIR_IN),
        scene_task_arg(ctx, args, 2, SCENE_DIR_OUT), scene_task_scalar(args[3].value),
        scene_task_scalar(args[4].value) };
    return scene_orch_submit_v2(ctx, 1, (uint32_t)args[4].value, t, 5);
}
/* t, o, v, k: t = v + i (image func 3, 4 blocks), then o = t + k (chip func 2, 3 blocks). */
SCENE_ORCH_ENTRY(mixed_orch, ctx, args, nargs) {
    if (nargs != 4) { ctx->ops->fail(ctx, "want 4 args"); return -1; }
    SceneTaskArg f[2] = { SCENE_OUT(args[0]), SCENE_SCALAR_U64(args[2].value) };
    int32_t rc = scene_orch_submit(ctx, 3, 4, f, 2);
    if (rc) return rc;
    SceneTaskArg g[4] = { SCENE_IN(args[0]), SCENE_OUT(args[1]), SCENE_SCALAR_U64(args[3].value),
                          SCENE_SCALAR_U64(3) };
    return scene_orch_submit(ctx, 2, 3, g, 4);
}
"#;

fn hook_kernels_so(dir: &Path) -> Vec<u8> {
    cxx_so(dir, "hooks", HOOK_KERNELS)
}

fn chip_incore<'a>(func_id: u32, so: &'a [u8], symbol: Option<&'a str>) -> IncoreImageRef<'a> {
    IncoreImageRef {
        kind: IncoreKind::Hosted {
            symbol,
            args: ArgsConvention::ChipTensor,
        },
        ..IncoreImageRef::image(func_id, SCENE_CORE_AIV, so)
    }
}

fn words<T>(raw: &[u8], f: fn([u8; 4]) -> T) -> Vec<T> {
    raw.chunks(4).map(|c| f(c.try_into().unwrap())).collect()
}

/// The runtime is loaded `RTLD_LOCAL` (as the harness does), yet a hosted
/// kernel finds `pto_cpu_sim_get_execution_context` with
/// `dlsym(RTLD_DEFAULT, ...)` (PTO-ISA's `get_block_idx()`), and every
/// block hears its own index, sub-block 0 of 1.
#[test]
fn hosted_kernels_find_the_execution_context_hook() {
    let dir = tempfile::tempdir().unwrap();
    let so = hook_kernels_so(dir.path());
    let orch = std::fs::read(c_so(dir.path(), "orch", HOOK_ORCH)).unwrap();
    let lease = lease(dir.path());
    let rt = Runtime::load(&lease, &default_runtime_path().unwrap()).unwrap();
    let dev = rt.open(0, "aiv=3").unwrap();
    let h = dev
        .register(&CallableImage {
            orch_so: &orch,
            orch_symbol: "one_orch",
            incores: vec![IncoreImageRef::hosted(
                0,
                SCENE_CORE_AIV,
                &so,
                Some("where_entry"),
            )],
        })
        .unwrap();
    let blocks = 7u32;
    let buf = dev.malloc(12 * u64::from(blocks)).unwrap();
    dev.run(
        h,
        &[
            RunArg::tensor(Direction::Out, buf),
            RunArg::Scalar(0),
            RunArg::Scalar(u64::from(blocks)),
        ],
    )
    .unwrap();
    let mut raw = vec![0u8; 12 * blocks as usize];
    dev.copy_from(buf.addr, &mut raw).unwrap();
    let got = words(&raw, u32::from_le_bytes);
    let want: Vec<u32> = (0..blocks).flat_map(|b| [b, 0, 1]).collect();
    assert_eq!(got, want, "(block, subblock_id, subblock_dim) per block");
}

/// `chip_tensor` kernels (`void kernel_entry(int64_t *args)`): tensor
/// words are records in the original's layout (dtype, ndims, shape,
/// contiguity, buffer, owner), scalars are values, the block comes from the
/// hook; several blocks each compute their share. A callable mixing an
/// image kernel and a chip_tensor kernel runs both, in dependency order.
#[test]
fn chip_tensor_kernels_get_records_and_scalars() {
    let dir = tempfile::tempdir().unwrap();
    let so = hook_kernels_so(dir.path());
    let image = kernel_image(dir.path());
    let orch = std::fs::read(c_so(dir.path(), "orch", HOOK_ORCH)).unwrap();
    let lease = lease(dir.path());
    let rt = Runtime::load(&lease, &default_runtime_path().unwrap()).unwrap();
    let dev = rt.open(0, "aiv=2").unwrap();

    let h = dev
        .register(&CallableImage {
            orch_so: &orch,
            orch_symbol: "chip_orch",
            incores: vec![chip_incore(1, &so, None)],
        })
        .unwrap();
    let n = 1000usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let size = 4 * n as u64;
    let (ba, bb, bc) = (
        dev.malloc(size).unwrap(),
        dev.malloc(size).unwrap(),
        dev.malloc(size).unwrap(),
    );
    dev.copy_to(ba.addr, &bytes(&a)).unwrap();
    dev.copy_to(bb.addr, &bytes(&b)).unwrap();
    let f32_desc = scene_device::abi::SceneTensorDesc::contiguous(
        scene_device::abi::SCENE_DTYPE_F32,
        &[n as u64],
    );
    for blocks in [1u64, 4, 7] {
        dev.run_described(
            h,
            &[
                RunArg::tensor(Direction::In, ba),
                RunArg::tensor(Direction::In, bb),
                RunArg::tensor(Direction::Out, bc),
                RunArg::Scalar(3),
                RunArg::Scalar(blocks),
            ],
            &[f32_desc, f32_desc, f32_desc, f32_desc, f32_desc],
        )
        .unwrap();
        let mut raw = vec![0u8; 4 * n];
        dev.copy_from(bc.addr, &mut raw).unwrap();
        let got = words(&raw, f32::from_le_bytes);
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y * 3.0).collect();
        assert_eq!(got, want, "{blocks} blocks");
        dev.copy_to(bc.addr, &vec![0u8; 4 * n]).unwrap();
    }

    // One image kernel (func 3: t = v + i, 4 blocks) and one chip_tensor
    // kernel (func 2: o = t + k over byte tensors, 3 blocks).
    let h = dev
        .register(&CallableImage {
            orch_so: &orch,
            orch_symbol: "mixed_orch",
            incores: vec![
                IncoreImageRef::image(3, SCENE_CORE_AIV, &image),
                chip_incore(2, &so, Some("add_k_entry")),
            ],
        })
        .unwrap();
    let (bt, bo) = (dev.malloc(400).unwrap(), dev.malloc(400).unwrap());
    dev.run(
        h,
        &[
            RunArg::tensor(Direction::Out, bt),
            RunArg::tensor(Direction::Out, bo),
            RunArg::Scalar(1000),
            RunArg::Scalar(5),
        ],
    )
    .unwrap();
    let mut raw = vec![0u8; 400];
    dev.copy_from(bo.addr, &mut raw).unwrap();
    assert_eq!(
        words(&raw, u32::from_le_bytes),
        (1005..1105).collect::<Vec<u32>>()
    );
}

/// `chip_tensor` kernels reading the context tail the way the original's
/// kernels do (its `get_block_idx(args)`, `get_block_num(args)`,
/// `get_sub_block_id(args)`: `args[48]` and `args[49]` point at a local and
/// a global context). The structs are the test's own, in the layout the
/// original publishes. Each kernel writes a row `{block_idx, block_num,
/// sub_block_id, ok}` where `ok` says the async context is "none" (null
/// pointers, capacity 0, invalid token) and the DMA workspaces zero.
const TAIL_KERNELS: &str = r#"#include <cstddef>
#include <cstdint>

struct AsyncCtx {
    volatile uint32_t *completion_count;
    volatile int32_t *completion_error_code;
    volatile void *completion_entries;
    uint32_t completion_capacity;
    uint64_t task_token;
};
struct LocalContext { int32_t block_idx; int32_t block_num; AsyncCtx async_ctx; };
struct GlobalContext { int32_t sub_block_id; uint64_t dma_workspace[2]; };
static_assert(sizeof(LocalContext) == 48 && offsetof(LocalContext, async_ctx) == 8);
static_assert(sizeof(GlobalContext) == 24);

static const LocalContext *local(int64_t *args) {
    return reinterpret_cast<const LocalContext *>(args[48]);
}
static const GlobalContext *global(int64_t *args) {
    return reinterpret_cast<const GlobalContext *>(args[49]);
}
struct Record { uint64_t addr; };

/* Writes this block's row at row index `row`. */
static void put(int64_t *args, uint64_t row) {
    int32_t *out = reinterpret_cast<int32_t *>(reinterpret_cast<const Record *>(args[0])->addr);
    const LocalContext *l = local(args);
    const GlobalContext *g = global(args);
    const AsyncCtx &a = l->async_ctx;
    const bool ok = a.completion_count == nullptr && a.completion_error_code == nullptr &&
                    a.completion_entries == nullptr && a.completion_capacity == 0 &&
                    a.task_token == UINT64_MAX && g->dma_workspace[0] == 0 &&
                    g->dma_workspace[1] == 0;
    int32_t *r = out + 4 * row;
    r[0] = l->block_idx;
    r[1] = l->block_num;
    r[2] = g->sub_block_id;
    r[3] = ok ? 1 : 0;
}

/* A plain vector task: row = block. */
extern "C" void single_entry(int64_t *args) { put(args, (uint64_t)local(args)->block_idx); }
/* A mixed task: the cube kernel at row 3b, the vector lanes at 3b+1+lane. */
extern "C" void cube_entry(int64_t *args) { put(args, 3 * (uint64_t)local(args)->block_idx); }
extern "C" void vec_entry(int64_t *args) {
    put(args, 3 * (uint64_t)local(args)->block_idx + 1 + (uint64_t)global(args)->sub_block_id);
}
"#;

const TAIL_ORCH: &str = r#"#include "scene_orch.h"
/* single, mixed, blocks: a vector task, then a mixed task (cube + two vector lanes). */
SCENE_ORCH_ENTRY(tail_orch, ctx, args, nargs) {
    if (nargs != 3) { ctx->ops->fail(ctx, "want 3 args"); return -1; }
    uint32_t blocks = (uint32_t)args[2].value;
    SceneTaskArg s[1] = { SCENE_OUT(args[0]) };
    int32_t rc = scene_orch_submit(ctx, 0, blocks, s, 1);
    if (rc) return rc;
    SceneTaskArgV2 m[1] = { scene_task_arg(ctx, args, 1, SCENE_DIR_OUT) };
    return scene_orch_submit_mixed(ctx, scene_mixed(1, 2, 2), blocks, m, 1);
}
"#;

/// Every block of every `chip_tensor` task gets its context tail (issue
/// 39): block index and count in a plain task and in each kernel of a mixed
/// one, the vector lane 0/1 within a mixed cluster, and an async context
/// that says "none".
#[test]
fn chip_tensor_kernels_read_block_index_count_and_lane_from_the_context_tail() {
    let dir = tempfile::tempdir().unwrap();
    let so = cxx_so(dir.path(), "tail", TAIL_KERNELS);
    let orch = std::fs::read(c_so(dir.path(), "orch", TAIL_ORCH)).unwrap();
    let lease = lease(dir.path());
    let rt = Runtime::load(&lease, &default_runtime_path().unwrap()).unwrap();
    let dev = rt.open(0, "aic=2;aiv=4").unwrap();
    let incore = |func_id, core_type, symbol| IncoreImageRef {
        kind: IncoreKind::Hosted {
            symbol: Some(symbol),
            args: ArgsConvention::ChipTensor,
        },
        ..IncoreImageRef::image(func_id, core_type, &so)
    };
    let h = dev
        .register(&CallableImage {
            orch_so: &orch,
            orch_symbol: "tail_orch",
            incores: vec![
                incore(0, SCENE_CORE_AIV, "single_entry"),
                incore(1, SCENE_CORE_AIC, "cube_entry"),
                incore(2, SCENE_CORE_AIV, "vec_entry"),
            ],
        })
        .unwrap();
    for blocks in [1u32, 5] {
        let rows = 3 * blocks as usize;
        let single = dev.malloc(16 * u64::from(blocks)).unwrap();
        let mixed = dev.malloc(16 * rows as u64).unwrap();
        dev.copy_to(single.addr, &vec![0xff; 16 * blocks as usize])
            .unwrap();
        dev.copy_to(mixed.addr, &vec![0xff; 16 * rows]).unwrap();
        dev.run(
            h,
            &[
                RunArg::tensor(Direction::Out, single),
                RunArg::tensor(Direction::Out, mixed),
                RunArg::Scalar(u64::from(blocks)),
            ],
        )
        .unwrap();
        let read = |buf: scene_device::DeviceBuffer, n: usize| {
            let mut raw = vec![0u8; 16 * n];
            dev.copy_from(buf.addr, &mut raw).unwrap();
            words(&raw, i32::from_le_bytes)
        };
        let b = blocks as i32;
        let want: Vec<i32> = (0..b).flat_map(|i| [i, b, 0, 1]).collect();
        assert_eq!(
            read(single, blocks as usize),
            want,
            "plain task, {blocks} blocks"
        );
        let want: Vec<i32> = (0..b)
            .flat_map(|i| [[i, b, 0, 1], [i, b, 0, 1], [i, b, 1, 1]])
            .flatten()
            .collect();
        assert_eq!(read(mixed, rows), want, "mixed task, {blocks} blocks");
    }
}
