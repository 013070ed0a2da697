//! Hosted kernels keep their C++ objects to themselves (issue 38, cause 1).
//!
//! g++ gives the static locals of inline functions, C++17 inline variables,
//! template static data members and `inline thread_local` variables the
//! binding `STB_GNU_UNIQUE`, which glibc binds process-wide by name (across
//! `RTLD_LOCAL`) and never unloads. In one device worker a hosted kernel
//! then used another scene's object of the same name, and a reset did not
//! give it fresh ones. Here two kernels built by the real builder (the
//! flags, probe and checks a scene gets) from sources that share every
//! such name, with other values and sizes, run one after the other in one
//! process, with the simulator loaded as the harness loads it
//! (`RTLD_LOCAL`, promoted to the global scope for PTO's hooks).
//!
//! Its own test binary: nothing else loads kernels into this process.

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::{Arc, Mutex};

use scene_device::abi::SCENE_CORE_AIV;
use scene_device::{
    AcquireOptions, CallableHandle, CallableImage, CardLease, CardPool, DeviceSession, Direction,
    IncoreImageRef, RunArg, Runtime, default_runtime_path,
};
use scene_kernels::{
    ArgsConvention, BuildOptions, Builder, CallableSpec, ChipCallable, CoreType, IncoreKind,
    IncoreUnit, OrchUnit, Toolchain,
};

/// Every kind of object g++ made `STB_GNU_UNIQUE`, under one name in
/// every kernel built from this text; `TAG` and `SIZE` differ per kernel.
/// The kernel reads each object, then changes the ones a later run (or
/// case) must not find changed: `seen` is [tag, the function static, the
/// template static, runs before, calls before, stage[0], stage[SIZE-1]].
const NAMES_KERNEL: &str = r#"
#include <cstdint>
#include "scene_kernel.h"

namespace names {
constexpr int64_t kTag = TAG;
constexpr int kSize = SIZE;
inline int64_t tag = kTag;                                            // inline variable
inline int64_t &origin() { static int64_t v = kTag + 1; return v; }   // static local
template <typename T> struct Table { static T values[kSize]; };
template <typename T> T Table<T>::values[kSize] = {kTag + 2};          // template static
inline thread_local int64_t stage[kSize] = {kTag + 3};                 // inline thread_local
inline int64_t runs = 0;
inline int64_t &calls() { static int64_t n = 0; return n; }
}  // namespace names

extern "C" void kernel_entry(const SceneKernelArgs *ka) {
    using namespace names;
    int64_t *seen = SCENE_ARG_PTR(ka, 0, int64_t);
    seen[0] = tag;
    seen[1] = origin();
    seen[2] = Table<int64_t>::values[0];
    seen[3] = runs++;
    seen[4] = calls()++;
    seen[5] = stage[0];
    seen[6] = stage[kSize - 1];
    for (int i = 0; i < kSize; ++i) stage[i] = -1;
}
"#;

const ORCH: &str = r#"
#include "scene_orch.h"
SCENE_ORCH_ENTRY(names_orch, ctx, args, nargs) {
    (void)nargs;
    SceneTaskArg t[1] = { SCENE_OUT(args[0]) };
    return scene_orch_submit(ctx, 0, 1, t, 1);
}
"#;

/// What a fresh copy of a kernel built with `tag` reads (`runs` runs of
/// this copy before: their changes show).
fn fresh(tag: i64, runs: i64) -> [i64; 7] {
    if runs == 0 {
        [tag, tag + 1, tag + 2, 0, 0, tag + 3, 0]
    } else {
        [tag, tag + 1, tag + 2, runs, runs, -1, -1]
    }
}

fn lease(dir: &Path) -> CardLease {
    CardPool::new("0".parse().unwrap(), dir.join("locks"))
        .unwrap()
        .acquire(1, "hosted_unique", AcquireOptions::default())
        .unwrap()
}

/// Builds, with the real builder and its default toolchain (hosted
/// compiler `c++`, or `hosted_cxx`), one callable per `(name, tag, size)`:
/// the orchestration above and the names kernel as hosted func_id 0.
fn build(
    root: &Path,
    kernels: &[(&str, i64, usize)],
    hosted_cxx: Option<&str>,
) -> Vec<ChipCallable> {
    let include = root.join("include");
    std::fs::create_dir_all(&include).unwrap();
    // The checkout the test runs in (a nextest archive run with
    // `--workspace-remap` points the variable at it), else the build's.
    let headers = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
        .join("include");
    for entry in std::fs::read_dir(&headers).unwrap() {
        let entry = entry.unwrap();
        // The ABI headers (not the `simpler/` directory).
        if entry.path().is_file() {
            std::fs::copy(entry.path(), include.join(entry.file_name())).unwrap();
        }
    }
    std::fs::write(root.join("orch.c"), ORCH).unwrap();
    let specs: Vec<CallableSpec> = kernels
        .iter()
        .map(|&(name, tag, size)| {
            let source = format!("{name}.cpp");
            let text = NAMES_KERNEL
                .replace("TAG", &tag.to_string())
                .replace("SIZE", &size.to_string());
            std::fs::write(root.join(&source), text).unwrap();
            CallableSpec {
                label: name.into(),
                orchestration: OrchUnit {
                    name: "orch".into(),
                    source: "orch.c".into(),
                    function: "names_orch".into(),
                    include_dirs: vec!["include".into()],
                    defines: vec![],
                    flags: Vec::new(),
                },
                incores: vec![IncoreUnit {
                    name: "names".into(),
                    func_id: 0,
                    core: CoreType::Aiv,
                    kind: IncoreKind::Hosted(ArgsConvention::Scene),
                    source: source.into(),
                    include_dirs: vec!["include".into()],
                    defines: vec![],
                    flags: vec![],
                }],
            }
        })
        .collect();
    let mut tc = Toolchain::builtin("a2a3sim")
        .unwrap()
        .with_search_path(std::env::var_os("PATH"));
    if let Some(cxx) = hosted_cxx {
        tc.hosted_cxx = cxx.into();
    }
    let options = BuildOptions {
        workers: NonZeroUsize::new(2).unwrap(),
        work_dir: Some(root.join("work")),
        ..BuildOptions::default()
    };
    let builder = Builder::new(root, tc, options).unwrap();
    builder
        .build_all(&specs)
        .callables
        .into_iter()
        .map(|c| Arc::unwrap_or_clone(c.unwrap_or_else(|e| panic!("builds: {e}"))))
        .collect()
}

fn register(dev: &DeviceSession<'_>, callable: &ChipCallable) -> CallableHandle {
    dev.register(&CallableImage {
        orch_so: &callable.orch_so,
        orch_symbol: &callable.orch_symbol,
        incores: vec![IncoreImageRef::hosted(
            0,
            SCENE_CORE_AIV,
            &callable.incores[0].text,
            None,
        )],
    })
    .unwrap_or_else(|e| panic!("register {}: {e}", callable.label))
}

fn run(dev: &DeviceSession<'_>, h: CallableHandle) -> [i64; 7] {
    let buf = dev.malloc(8 * 7).unwrap();
    dev.run(h, &[RunArg::tensor(Direction::Out, buf)]).unwrap();
    let mut raw = [0u8; 8 * 7];
    dev.copy_from(buf.addr, &mut raw).unwrap();
    dev.free(buf.addr).unwrap();
    let mut seen = [0i64; 7];
    for (v, b) in seen.iter_mut().zip(raw.chunks(8)) {
        *v = i64::from_le_bytes(b.try_into().unwrap());
    }
    seen
}

/// The lines of this process's memory map that belong to the loaded copy
/// of `bytes` (the runtime names each copy's file after its blake3).
fn mapped(bytes: &[u8]) -> Vec<String> {
    let hash = blake3::hash(bytes).to_hex().to_string();
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&hash))
        .map(str::to_owned)
        .collect()
}

/// Two kernels, `small` (tag 100, 8 of each array) and `large` (tag 200,
/// 512), share the name of every object: each sees only its own, the
/// second registered while the first is still loaded; a reset unloads
/// both (nothing of theirs stays mapped) and the same bytes registered
/// again start from fresh objects. `large` is the wrong kernel that would
/// pass only by inheriting: were its `tag` bound to `small`'s, it would
/// read 100.
fn each_kernel_sees_its_own_objects(hosted_cxx: Option<&str>) {
    // One test at a time loads kernels into this process.
    static SERIAL: Mutex<()> = Mutex::new(());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let built = build(
        dir.path(),
        &[("small", 100, 8), ("large", 200, 512)],
        hosted_cxx,
    );
    let (small, large) = (&built[0], &built[1]);
    let lease = lease(dir.path());
    let rt = Runtime::load(&lease, &default_runtime_path().unwrap()).unwrap();
    // One core thread: every block of every run on the same thread, so its
    // thread_local storage is the one both kernels would share.
    let dev = rt.open(0, "aic=1;aiv=1").unwrap();
    let hs = register(&dev, small);
    assert_eq!(run(&dev, hs), fresh(100, 0), "small, first run");
    assert_eq!(
        run(&dev, hs),
        fresh(100, 1),
        "small, second run: a copy keeps its state between runs"
    );
    let hl = register(&dev, large);
    assert_eq!(
        run(&dev, hl),
        fresh(200, 0),
        "large, registered while small is loaded: its own objects"
    );
    assert_eq!(
        run(&dev, hs),
        fresh(100, 2),
        "small again, untouched by large"
    );
    assert_eq!(run(&dev, hl), fresh(200, 1), "large again");

    dev.reset().unwrap();
    for c in &built {
        assert_eq!(
            mapped(&c.incores[0].text),
            Vec::<String>::new(),
            "{}: still mapped after scene_rt_reset",
            c.label
        );
    }
    // Registered again, in the other order, after the reset: fresh objects.
    let hl = register(&dev, large);
    assert_eq!(run(&dev, hl), fresh(200, 0), "large after the reset");
    let hs = register(&dev, small);
    assert_eq!(run(&dev, hs), fresh(100, 0), "small after the reset");
    dev.close().unwrap();
}

#[test]
fn gnu_unique_objects_are_not_shared_between_hosted_kernels_or_across_a_reset() {
    each_kernel_sees_its_own_objects(None);
}

/// The same with the compiler `SCENE_TEST_HOSTED_CXX` names (`zig c++`
/// under CI: clang, which never emits `STB_GNU_UNIQUE` and refuses
/// `-fno-gnu-unique`). Skipped without one, except under CI.
#[test]
fn gnu_unique_objects_are_not_shared_with_a_second_hosted_compiler() {
    let Some(cxx) = std::env::var("SCENE_TEST_HOSTED_CXX")
        .ok()
        .filter(|v| !v.is_empty())
    else {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "CI must set SCENE_TEST_HOSTED_CXX (.ci/run installs zig c++)"
        );
        eprintln!("skipped: set SCENE_TEST_HOSTED_CXX to a second C++20 compiler (zig c++)");
        return;
    };
    each_kernel_sees_its_own_objects(Some(&cxx));
}
