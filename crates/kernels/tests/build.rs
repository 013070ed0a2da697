//! Builder behaviour with the real host compiler and linker.

mod common;

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{ORCH_SRC, Root, incore, kernel_src, orch, spec, toolchain};
use scene_kernels::{
    BuildOptions, Builder, CallableSpec, CoreType, Toolchain, UnitKind, UnitOutcome,
    extract_text_image,
};

fn options(workers: usize) -> BuildOptions {
    BuildOptions {
        workers: NonZeroUsize::new(workers).expect("non-zero"),
        work_dir: None,
        cache: None,
        ..BuildOptions::default()
    }
}

fn builder(root: &Root, workers: usize) -> Builder {
    Builder::new(root.path(), toolchain(), options(workers)).expect("builder")
}

/// A shell script standing in for a tool.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    scene_util::write_executable(&path, format!("#!/bin/sh\n{body}")).expect("write script");
    path
}

/// Three kernels, given out of func_id order, two core types, plus defines
/// that must reach the compiler.
fn three_kernel_spec(root: &Root, label: &str) -> CallableSpec {
    root.write("orch/orch.c", ORCH_SRC);
    root.write("kernels/add.c", &kernel_src("+"));
    root.write("kernels/mul.c", &kernel_src("*"));
    root.write(
        "kernels/cube.c",
        r#"#include "scene_kernel.h"
#if !defined(SCENE_CORE_AIC) || defined(SCENE_CORE_AIV) || !defined(SCENE_PLATFORM_A2A3)
#error "core/platform defines missing"
#endif
SCENE_KERNEL_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    uint64_t n = SCENE_ARG_LEN(ka, 0, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { x[i] = x[i] * x[i] * x[i] * CUBE_SCALE; }
}
"#,
    );
    let mut cube = incore("cube", 1, CoreType::Aic, "kernels/cube.c");
    cube.defines.push(("CUBE_SCALE".into(), "2.0f".into()));
    spec(
        label,
        orch("orch/orch.c", "run_orch"),
        vec![
            incore("mul", 2, CoreType::Aiv, "kernels/mul.c"),
            cube,
            incore("add", 0, CoreType::Aiv, "kernels/add.c"),
        ],
    )
}

#[test]
fn builds_three_incores_and_orchestration() {
    let root = Root::new();
    let spec = three_kernel_spec(&root, "vector_example");
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    let builder = builder(&root, 2).with_observer(Arc::new(move |_report| {
        counter.fetch_add(1, Ordering::SeqCst);
    }));
    let out = builder.build_all(std::slice::from_ref(&spec));
    let callable = out.callables[0].as_ref().expect("builds");

    let ids: Vec<u32> = callable.incores.iter().map(|i| i.func_id).collect();
    assert_eq!(ids, [0, 1, 2], "sorted by func_id");
    let names: Vec<&str> = callable.incores.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["add", "cube", "mul"]);
    assert_eq!(callable.incores[1].core, CoreType::Aic);
    assert_ne!(callable.incores[0].text, callable.incores[2].text);
    for image in &callable.incores {
        assert!(!image.text.is_empty());
        // Raw code, not an object file.
        assert_ne!(image.text.get(..4), Some(&b"\x7fELF"[..]));
    }
    assert_eq!(callable.label, "vector_example");
    assert_eq!(callable.orch_symbol, "run_orch");
    assert_eq!(callable.orch_so.get(..4), Some(&b"\x7fELF"[..]));
    assert!(
        callable.orch_so.windows(8).any(|w| w == b"run_orch"),
        "entry symbol exported"
    );

    assert_eq!(out.units.len(), 4);
    assert_eq!(out.count(UnitOutcome::Compiled), 4);
    assert_eq!(seen.load(Ordering::SeqCst), 4, "observer sees every unit");
    assert_eq!(out.units[0].kind, UnitKind::Orchestration);
    assert_eq!(out.units[0].unit, "vector_example/orch");
    assert!(out.units.iter().any(|u| u.unit == "vector_example/cube"
        && u.kind
            == UnitKind::Incore {
                func_id: 1,
                core: CoreType::Aic
            }));
}

#[test]
fn compiler_helpers_link_into_built_images() {
    let root = Root::new();
    root.write("orch.c", ORCH_SRC);
    root.write(
        "k.c",
        r#"#include "scene_kernel.h"
typedef struct { float v[16384]; } Big;
SCENE_KERNEL_ENTRY(ka) {
    Big *d = SCENE_ARG_PTR(ka, 0, Big);
    *d = *SCENE_ARG_PTR(ka, 1, const Big);
    uint16_t *h = SCENE_ARG_PTR(ka, 2, uint16_t);
    h[0] = scene_f32_to_f16(scene_f16_to_f32(h[1]) + d->v[0]);
}
"#,
    );
    let s = spec(
        "helpers",
        orch("orch.c", "run_orch"),
        vec![incore("k", 0, CoreType::Aiv, "k.c")],
    );
    let callable = builder(&root, 1)
        .build(&s)
        .expect("helpers link from builtins");
    assert!(!callable.incores[0].text.is_empty());
}

#[test]
fn failing_kernel_shows_stderr_and_others_still_build() {
    let root = Root::new();
    let good = three_kernel_spec(&root, "good");
    root.write(
        "kernels/broken.c",
        "#include \"scene_kernel.h\"\nthis is not C;\n",
    );
    let bad = spec(
        "bad",
        orch("orch/orch.c", "run_orch"),
        vec![
            incore("add", 0, CoreType::Aiv, "kernels/add.c"),
            incore("broken", 7, CoreType::Aiv, "kernels/broken.c"),
        ],
    );
    let out = builder(&root, 3).build_all(&[bad, good]);

    let err = out.callables[0].as_ref().expect_err("broken kernel");
    assert_eq!(err.label, "bad");
    assert_eq!(err.failures.len(), 1);
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "scene `bad`: kernel `broken` (func_id 7, aiv, kernels/broken.c) failed to compile"
        ),
        "{msg}"
    );
    // The compiler ran in the root with a relative path, so that is what it reports.
    assert!(msg.contains("kernels/broken.c:2"), "{msg}");
    let stderr = err.failures[0]
        .error()
        .and_then(|e| e.stderr())
        .expect("stderr kept");
    assert!(stderr.contains("error"), "{stderr}");

    assert!(out.callables[1].is_ok(), "{:?}", out.callables[1]);
    assert_eq!(out.count(UnitOutcome::Failed), 1);
    assert_eq!(out.count(UnitOutcome::Compiled), 4, "orch, add, mul, cube");
}

#[test]
fn shared_failing_unit_fails_exactly_its_users() {
    let root = Root::new();
    root.write("orch.c", ORCH_SRC);
    root.write("ok.c", &kernel_src("+"));
    root.write(
        "bad.c",
        "#include \"scene_kernel.h\"\nint broken(void) { return nope; }\n",
    );
    let uses_bad = |label: &str, id: u32| {
        spec(
            label,
            orch("orch.c", "run_orch"),
            vec![
                incore("ok", 0, CoreType::Aiv, "ok.c"),
                incore("shared_bad", id, CoreType::Aiv, "bad.c"),
            ],
        )
    };
    let clean = spec(
        "clean",
        orch("orch.c", "run_orch"),
        vec![incore("ok", 0, CoreType::Aiv, "ok.c")],
    );
    let out = builder(&root, 2).build_all(&[uses_bad("a", 1), clean, uses_bad("b", 5)]);

    let a = out.callables[0].as_ref().expect_err("a uses bad.c");
    let b = out.callables[2].as_ref().expect_err("b uses bad.c");
    assert!(out.callables[1].is_ok());
    assert!(a.to_string().contains("func_id 1"), "{a}");
    assert!(
        b.to_string()
            .contains("scene `b`: kernel `shared_bad` (func_id 5"),
        "{b}"
    );
    assert!(b.to_string().contains("nope"), "{b}");
    assert_eq!(out.units.len(), 3, "orch.c, ok.c, bad.c once each");
    assert_eq!(out.count(UnitOutcome::Failed), 1);
}

#[test]
fn shared_units_compile_once_and_are_reused() {
    let root = Root::new();
    let tools = tempfile::tempdir().expect("tempdir");
    let log = tools.path().join("cc.log");
    let cc = script(
        tools.path(),
        "cc-wrapper",
        &format!("echo \"$*\" >> '{}'\nexec cc \"$@\"\n", log.display()),
    );
    root.write("orch.c", ORCH_SRC);
    root.write("shared.c", &kernel_src("+"));
    root.write("only_a.c", &kernel_src("-"));
    root.write("only_b.c", &kernel_src("*"));
    let specs = [
        spec(
            "a",
            orch("orch.c", "run_orch"),
            vec![
                incore("shared", 0, CoreType::Aiv, "shared.c"),
                incore("mine", 1, CoreType::Aiv, "only_a.c"),
            ],
        ),
        spec(
            "b",
            orch("orch.c", "run_orch"),
            vec![
                incore("also_shared", 4, CoreType::Aiv, "shared.c"),
                incore("mine", 1, CoreType::Aiv, "only_b.c"),
            ],
        ),
    ];
    let builder =
        Builder::new(root.path(), toolchain().with_compiler(&cc), options(4)).expect("builder");
    let out = builder.build_all(&specs);
    for callable in &out.callables {
        assert!(callable.is_ok(), "{callable:?}");
    }
    let lines = std::fs::read_to_string(&log).expect("log");
    let count = |needle: &str| lines.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(count(" shared.c"), 1, "{lines}");
    assert_eq!(count(" orch.c"), 1, "{lines}");
    assert_eq!(count(" only_a.c"), 1, "{lines}");
    assert_eq!(count(" only_b.c"), 1, "{lines}");
    assert_eq!(
        count("scene_builtins.c"),
        1,
        "one core type, one builtins object"
    );
    // Plus one `--version` probe: the compiler identity in the unit keys.
    assert_eq!(count("--version"), 1, "{lines}");
    assert_eq!(lines.lines().count(), 6, "{lines}");

    let a = out.callables[0].as_ref().expect("a");
    let b = out.callables[1].as_ref().expect("b");
    assert_eq!(
        a.incores[0].text, b.incores[1].text,
        "shared.c image shared"
    );
    assert_eq!(b.incores[1].name, "also_shared");

    let again = builder.build_all(&specs);
    assert_eq!(
        std::fs::read_to_string(&log).expect("log"),
        lines,
        "nothing recompiled"
    );
    assert_eq!(again.count(UnitOutcome::Reused), again.units.len());
    assert_eq!(
        again.callables[0].as_ref().expect("a again").as_ref(),
        a.as_ref()
    );

    // A changed source is a different unit, not a reuse.
    root.write("only_a.c", &kernel_src("/"));
    let third = builder.build_all(&specs);
    assert_eq!(third.count(UnitOutcome::Compiled), 1);
    assert_eq!(third.count(UnitOutcome::Reused), 3);
}

#[test]
fn worker_count_does_not_change_bytes() {
    let root = Root::new();
    let first = three_kernel_spec(&root, "one");
    root.write("kernels/sub.c", &kernel_src("-"));
    let mut second = first.clone();
    second.label = "two".into();
    second
        .incores
        .push(incore("sub", 9, CoreType::Aiv, "kernels/sub.c"));
    let specs = [first, second];

    let serial = builder(&root, 1).build_all(&specs);
    let parallel = builder(&root, 4).build_all(&specs);
    for (s, p) in serial.callables.iter().zip(&parallel.callables) {
        let (s, p) = (s.as_ref().expect("serial"), p.as_ref().expect("parallel"));
        assert_eq!(s, p);
    }
    let shape = |units: &[scene_kernels::UnitReport]| {
        units
            .iter()
            .map(|u| (u.unit.clone(), u.kind, u.outcome))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        shape(&serial.units),
        shape(&parallel.units),
        "same plan order whatever the finish order"
    );
}

/// `cc` and `ld` wrappers in `dir` that share one `mkdir` lock and fail
/// (exit 99) if two of them are ever alive at once.
fn one_at_a_time_tools(dir: &Path) -> (PathBuf, PathBuf) {
    let lock = dir.join("lock");
    let guard = |real: &str| {
        format!(
            "mkdir '{lock}' 2>/dev/null || {{ echo 'two tool processes at once' >&2; exit 99; }}\n\
             {real} \"$@\"; rc=$?\nrmdir '{lock}'\nexit $rc\n",
            lock = lock.display()
        )
    };
    (
        script(dir, "cc", &guard("cc")),
        script(dir, "ld", &guard("ld")),
    )
}

#[test]
fn one_worker_means_one_tool_process_at_a_time() {
    let root = Root::new();
    let tools = tempfile::tempdir().expect("tempdir");
    let (cc, ld) = one_at_a_time_tools(tools.path());
    root.write("orch.c", ORCH_SRC);
    let mut incores = Vec::new();
    for (i, op) in ["+", "-", "*", "/"].iter().enumerate() {
        let src = format!("k{i}.c");
        root.write(&src, &kernel_src(op));
        let core = if i % 2 == 0 {
            CoreType::Aiv
        } else {
            CoreType::Aic
        };
        incores.push(incore(&format!("k{i}"), i as u32, core, &src));
    }
    let s = spec("serial", orch("orch.c", "run_orch"), incores);
    let tc = toolchain().with_compiler(&cc).with_linker(&ld);
    let builder = Builder::new(root.path(), tc, options(1)).expect("builder");
    let callable = builder.build(&s);
    assert!(
        callable.is_ok(),
        "{}",
        callable.err().map(|e| e.to_string()).unwrap_or_default()
    );
}

/// Two `build_all` calls running at once on one builder share its budget:
/// with one worker, still one tool process at a time (the guard wrappers
/// fail if two ever overlap).
#[test]
fn concurrent_builds_share_one_budget() {
    let root = Root::new();
    let tools = tempfile::tempdir().expect("tempdir");
    let (cc, ld) = one_at_a_time_tools(tools.path());
    root.write("orch.c", ORCH_SRC);
    let mut specs = Vec::new();
    for (i, op) in ["+", "-", "*", "/"].iter().enumerate() {
        let src = format!("k{i}.c");
        root.write(&src, &kernel_src(op));
        let k = incore(&format!("k{i}"), 0, CoreType::Aiv, &src);
        specs.push(spec(&format!("s{i}"), orch("orch.c", "run_orch"), vec![k]));
    }
    let tc = toolchain().with_compiler(&cc).with_linker(&ld);
    let builder = Builder::new(root.path(), tc, options(1)).expect("builder");
    std::thread::scope(|s| {
        let halves: Vec<_> = specs
            .chunks(2)
            .map(|half| s.spawn(|| builder.build_all(half)))
            .collect();
        for h in halves {
            let out = h.join().expect("build thread");
            for c in &out.callables {
                assert!(
                    c.is_ok(),
                    "{}",
                    c.as_ref().err().map(|e| e.to_string()).unwrap_or_default()
                );
            }
        }
    });
}

#[test]
fn missing_compiler_is_a_clear_setup_error() {
    let root = Root::new();
    let tc = toolchain().with_compiler("/nonexistent/scene-cc");
    let err = Builder::new(root.path(), tc, options(1)).expect_err("no compiler");
    let msg = err.to_string();
    assert!(msg.contains("/nonexistent/scene-cc"), "{msg}");
    assert!(msg.contains("compiler"), "{msg}");

    let tc = toolchain().with_linker("/nonexistent/scene-ld");
    let msg = Builder::new(root.path(), tc, options(1))
        .expect_err("no linker")
        .to_string();
    assert!(msg.contains("linker `/nonexistent/scene-ld`"), "{msg}");

    let msg = Toolchain::builtin("a7sim")
        .expect_err("unknown")
        .to_string();
    assert!(msg.contains("a7sim"), "{msg}");
}

#[test]
fn compiler_vanishing_after_setup_is_named() {
    let root = Root::new();
    let tools = tempfile::tempdir().expect("tempdir");
    let cc = script(tools.path(), "cc", "exec cc \"$@\"\n");
    let builder =
        Builder::new(root.path(), toolchain().with_compiler(&cc), options(1)).expect("builder");
    std::fs::remove_file(&cc).expect("remove wrapper");
    root.write("orch.c", ORCH_SRC);
    root.write("k.c", &kernel_src("+"));
    let s = spec(
        "gone",
        orch("orch.c", "run_orch"),
        vec![incore("k", 0, CoreType::Aiv, "k.c")],
    );
    let msg = builder.build(&s).expect_err("compiler gone").to_string();
    assert!(
        msg.contains(&format!("could not run compiler `{}`", cc.display())),
        "{msg}"
    );
}

#[test]
fn missing_source_names_the_file() {
    let root = Root::new();
    root.write("orch.c", ORCH_SRC);
    let s = spec(
        "lost",
        orch("orch.c", "run_orch"),
        vec![incore("ghost", 3, CoreType::Aic, "kernels/ghost.c")],
    );
    let out = builder(&root, 2).build_all(std::slice::from_ref(&s));
    let msg = out.callables[0]
        .as_ref()
        .expect_err("missing source")
        .to_string();
    assert!(
        msg.contains("kernel `ghost` (func_id 3, aic, kernels/ghost.c)"),
        "{msg}"
    );
    assert!(
        msg.contains("source file `kernels/ghost.c` not found"),
        "{msg}"
    );
    assert_eq!(out.count(UnitOutcome::Failed), 1);
}

#[test]
fn duplicate_func_ids_are_rejected_before_compiling() {
    let root = Root::new();
    root.write("orch.c", ORCH_SRC);
    root.write("k.c", &kernel_src("+"));
    let s = spec(
        "dupes",
        orch("orch.c", "run_orch"),
        vec![
            incore("first", 4, CoreType::Aiv, "k.c"),
            incore("second", 4, CoreType::Aic, "k.c"),
        ],
    );
    let out = builder(&root, 1).build_all(std::slice::from_ref(&s));
    let msg = out.callables[0].as_ref().expect_err("dupes").to_string();
    assert!(
        msg.contains("`first`") && msg.contains("`second`") && msg.contains("func_id 4"),
        "{msg}"
    );
    assert!(out.units.is_empty(), "nothing compiled for an invalid spec");
}

#[test]
fn link_and_image_failures_are_reported_per_kernel() {
    let root = Root::new();
    root.write("orch.c", ORCH_SRC);
    root.write(
        "libm.c",
        "#include \"scene_kernel.h\"\nfloat sinf(float);\nSCENE_KERNEL_ENTRY(ka) { float *x = SCENE_ARG_PTR(ka, 0, float); x[0] = sinf(x[0]); }\n",
    );
    root.write(
        "global.c",
        "#include \"scene_kernel.h\"\nstatic float acc;\nSCENE_KERNEL_ENTRY(ka) { float *x = SCENE_ARG_PTR(ka, 0, float); acc += x[0]; x[0] = acc; }\n",
    );
    let s = spec(
        "rules",
        orch("orch.c", "run_orch"),
        vec![
            incore("uses_libm", 0, CoreType::Aiv, "libm.c"),
            incore("has_global", 1, CoreType::Aiv, "global.c"),
        ],
    );
    let err = builder(&root, 2)
        .build(&s)
        .expect_err("both kernels break rules");
    assert_eq!(err.failures.len(), 2);
    let msg = err.to_string();
    assert!(
        msg.contains("kernel `uses_libm` (func_id 0, aiv, libm.c) failed to link"),
        "{msg}"
    );
    assert!(msg.contains("sinf"), "{msg}");
    assert!(
        msg.contains("kernel `has_global` (func_id 1, aiv, global.c) produced an unusable image"),
        "{msg}"
    );
    assert!(msg.contains("has writable data"), "{msg}");
}

#[test]
fn images_match_direct_extraction() {
    // The builder's image is exactly what extract_text_image returns for its
    // own link of the same source.
    let root = Root::new();
    let spec = three_kernel_spec(&root, "x");
    let callable = builder(&root, 2).build(&spec).expect("builds");
    let dir = tempfile::tempdir().expect("tempdir");
    let elf = common::ManualLink {
        source: &kernel_src("+"),
        ..common::ManualLink::default()
    };
    // Same flags, different source path: __FILE__ is unused, so same code.
    let bytes = std::fs::read(elf.link(dir.path())).expect("read");
    let text = extract_text_image(&bytes, "add").expect("extract");
    assert_eq!(callable.incore(0).expect("add").text, text);
}

#[test]
fn observer_runs_for_reused_units_too() {
    let root = Root::new();
    let spec = three_kernel_spec(&root, "obs");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let builder = builder(&root, 2).with_observer(Arc::new(move |r| {
        sink.lock()
            .expect("observer lock")
            .push((r.unit.clone(), r.outcome));
    }));
    builder.build(&spec).expect("first");
    builder.build(&spec).expect("second");
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 8);
    assert!(
        seen[4..].iter().all(|(_, o)| *o == UnitOutcome::Reused),
        "{seen:?}"
    );
}

/// Cancelled after the first unit (one worker): no further tool starts,
/// the other units end `Cancelled` (not failed), and the callable fails
/// only with cancelled units.
#[test]
fn a_cancelled_build_starts_no_more_tools() {
    let root = Root::new();
    let spec = three_kernel_spec(&root, "vector_example");
    let cancel = scene_util::Cancel::new();
    let on_unit = cancel.clone();
    let options = BuildOptions {
        cancel: cancel.clone(),
        ..options(1)
    };
    let builder = Builder::new(root.path(), toolchain(), options)
        .expect("builder")
        .with_observer(Arc::new(move |_report| {
            on_unit.cancel(scene_util::cancel::SIGINT);
        }));
    let out = builder.build_all(std::slice::from_ref(&spec));
    assert_eq!(cancel.signal(), Some(scene_util::cancel::SIGINT));
    assert_eq!(out.count(UnitOutcome::Compiled), 1, "{:?}", out.units);
    assert_eq!(out.count(UnitOutcome::Cancelled), 3, "{:?}", out.units);
    assert_eq!(out.count(UnitOutcome::Failed), 0);
    let err = out.callables[0].as_ref().expect_err("not built");
    assert!(
        err.failures
            .iter()
            .all(|f| f.error().is_some_and(|e| e.is_cancelled())),
        "{err}"
    );
}
