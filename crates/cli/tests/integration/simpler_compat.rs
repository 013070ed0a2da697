//! The original project's kernels as its own sim build compiles them
//! (issue 39): `--simpler-root` / `SCENE_SIMPLER_ROOT` names a checkout,
//! and `chip_tensor` kernels get its include dirs for the scene's runtime
//! and the platform's arch, its defines and its language standard; every
//! block reads its block index, block count and vector lane from the
//! context tail (`args[48]`, `args[49]`). CI has no checkout of the
//! original: `tests/simpler-compat/checkout` stands in, with headers of
//! our own where its kernels look for them.

use crate::common;

use common::{TestEnv, show, workspace_root};

fn compat() -> std::path::PathBuf {
    workspace_root().join("tests/simpler-compat")
}

fn run(
    env: &TestEnv,
    extra: &[&str],
    vars: &[(&str, &str)],
) -> (std::process::Output, serde_json::Value) {
    let scenes = compat().join("scenes");
    let mut args = vec!["run", "--scenes-dir", scenes.to_str().unwrap()];
    args.extend_from_slice(extra);
    env.run_with_report_using(&args, |cmd| {
        for (k, v) in vars {
            cmd.env(k, v);
        }
    })
}

/// Both runtimes' headers, both arches', the vector and cube defines, the
/// original's language standard (each kernel `#error`s without them), and
/// the tail of plain and mixed tasks of 1 to 16 blocks, compared exactly.
/// The flag and the variable name the same checkout.
#[test]
fn the_originals_kernels_get_its_toolchain_and_their_context_tail() {
    let env = TestEnv::new();
    let checkout = compat().join("checkout");
    let checkout = checkout.to_str().unwrap();
    let (out, r) = run(&env, &["--simpler-root", checkout, "tail_"], &[]);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 2, "{}", show(&out));
    let (out, r) = run(
        &env,
        &["--platform", "a5sim", "tail_"],
        &[("SCENE_SIMPLER_ROOT", checkout)],
    );
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 1, "{}", show(&out));
}

/// Without a checkout named the same kernels do not build (their headers
/// are nowhere), each failure naming the kernel and the header.
#[test]
fn without_a_checkout_the_originals_kernels_fail_naming_the_header() {
    let env = TestEnv::new();
    let (out, r) = run(&env, &["tail_tmr"], &[]);
    assert!(!out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["failed"], 1, "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("kernel `TAIL_AIV`") && stdout.contains("arch_tag.h"),
        "{}",
        show(&out)
    );
}

/// A directory that is not a checkout is a usage error (exit 2) naming
/// it and what it lacks, before any work.
#[test]
fn a_directory_that_is_not_a_checkout_is_a_usage_error() {
    let env = TestEnv::new();
    let not = env.dir.path().join("not-simpler");
    std::fs::create_dir_all(&not).unwrap();
    let out = env
        .scene(&["run", "--simpler-root", not.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--simpler-root / SCENE_SIMPLER_ROOT")
            && stderr.contains("not-simpler")
            && stderr.contains("src/common/task_interface/tensor.h"),
        "{}",
        show(&out)
    );
}

/// `orch_api` with its orchestration's text changed by `edit` (from,
/// to), in a scratch copy; the run's output and report.
fn run_orch_api(
    env: &TestEnv,
    edit: Option<(&str, &str)>,
    extra: &[&str],
) -> (std::process::Output, serde_json::Value) {
    let scenes = env.dir.path().join("compat-scenes");
    let dir = scenes.join("orch_api");
    common::copy_dir(&compat().join("scenes/orch_api"), &dir);
    if let Some((from, to)) = edit {
        let path = dir.join("orchestration.cpp");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "orchestration.cpp has no `{from}`");
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    }
    let checkout = compat().join("checkout");
    let mut args = vec![
        "run",
        "--scenes-dir",
        scenes.to_str().unwrap(),
        "--simpler-root",
        checkout.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    env.run_with_report(&args)
}

/// An orchestration written against the original's API (`api =
/// "simpler"`: ours, include/simpler/) runs on both sims: run arguments as
/// `ChipTaskArgs`, a runtime-created output and its `get_ref`, `data_as` +
/// `make_tensor_external`, views, an initial value, `PTO2_SCOPE`,
/// `get_tensor_data` / `set_tensor_data`, 4-block SPMD, a mixed task, a
/// predicate false in one case and true in the other, explicit
/// dependencies through a dummy task, the core counts and `LOG_INFO`.
#[test]
fn an_orchestration_on_the_originals_api_runs_on_both_sims() {
    let env = TestEnv::new();
    for platform in ["a2a3sim", "a5sim"] {
        let (out, r) = run_orch_api(&env, None, &["--platform", platform]);
        assert!(out.status.success(), "{platform}: {}", show(&out));
        assert_eq!(r["totals"]["passed"], 2, "{platform}: {}", show(&out));
    }
}

/// A changed constant in the orchestration fails the comparison: the
/// verdict rests on what it computes.
#[test]
fn a_changed_constant_in_an_original_api_orchestration_fails_it() {
    let env = TestEnv::new();
    let (out, r) = run_orch_api(
        &env,
        Some(("set_initial_value(1.0f)", "set_initial_value(2.0f)")),
        &[],
    );
    assert!(!out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["failed"], 2, "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 0, "{}", show(&out));
}

/// `aicpu_orchestration_config`'s `expected_arg_count` is checked against
/// the run's arguments, and `rt_report_fatal` fails the run with its
/// message, naming the function that reported it.
#[test]
fn the_expected_argument_count_and_a_reported_fatal_fail_the_run() {
    let env = TestEnv::new();
    let (out, r) = run_orch_api(
        &env,
        Some((".expected_arg_count = 6", ".expected_arg_count = 5")),
        &[],
    );
    assert!(!out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["failed"], 2, "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("aicpu_orchestration_config expects 5 arguments, the run passes 6"),
        "{}",
        show(&out)
    );

    let env = TestEnv::new();
    let (out, r) = run_orch_api(
        &env,
        Some((
            "    set_tensor_data(gate, 1, idx0, g);",
            "    if (g == 1) {\n        rt_report_fatal(PTO2_ERROR_INVALID_ARGS, \"gate %d refused\", g);\n        return;\n    }\n    set_tensor_data(gate, 1, idx0, g);",
        )),
        &[],
    );
    assert!(!out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 1, "{}", show(&out));
    assert_eq!(r["totals"]["failed"], 1, "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("aicpu_orchestration_entry (error 5): gate 1 refused"),
        "{}",
        show(&out)
    );
}

/// `get_ref` past a task's outputs (what the original's orchestrations do
/// with the empty result of a failed submit) fails the run naming it, and
/// the orchestration returns: no crash hides the first error.
#[test]
fn get_ref_past_the_outputs_fails_the_run_without_a_crash() {
    let env = TestEnv::new();
    let (out, r) = run_orch_api(
        &env,
        Some(("scaled_out.get_ref(0);", "scaled_out.get_ref(1);")),
        &[],
    );
    assert!(!out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["failed"], 2, "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("TaskOutputTensors::get_ref (error 5): output 1 of a task with 1 runtime-created outputs")
            && !stdout.contains("SIGABRT"),
        "{}",
        show(&out)
    );
}

/// Traces and dependency graphs name what the original's API adds: the
/// dummy task as dependency-only (not `func_id 4294967295`), the clobber
/// whose predicate was false as skipped with the value read.
#[test]
fn traces_label_dependency_only_and_skipped_tasks() {
    let env = TestEnv::new();
    let out_dir = env.dir.path().join("observed");
    let dir = out_dir.to_str().unwrap().to_owned();
    let (out, r) = run_orch_api(&env, None, &["--trace", &dir, "--dep-graph", &dir]);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 2, "{}", show(&out));
    let read = |case: &str, ext: &str| {
        std::fs::read_to_string(out_dir.join("orch_api").join(format!("{case}.{ext}")))
            .unwrap_or_else(|e| panic!("{case}.{ext}: {e}"))
    };
    for case in ["skipped", "dispatched"] {
        let dot = read(case, "dot");
        assert!(dot.contains("dependency-only (no kernel)"), "{case}: {dot}");
        assert!(!dot.contains("4294967295"), "{case}: {dot}");
        let deps: serde_json::Value = serde_json::from_str(&read(case, "deps.json")).unwrap();
        let tasks = deps["ranks"][0]["tasks"].as_array().expect("tasks");
        assert_eq!(
            tasks.iter().filter(|t| t["dummy"] == true).count(),
            1,
            "{case}: {deps}"
        );
        let skipped: Vec<_> = tasks.iter().filter(|t| t["skipped"] == true).collect();
        let trace = read(case, "trace.json");
        if case == "skipped" {
            assert_eq!(skipped.len(), 1, "{deps}");
            assert_eq!(skipped[0]["predicate_value"], 0, "{deps}");
            assert!(
                dot.contains("CLOBBER (func_id 3), skipped: predicate 0"),
                "{dot}"
            );
            assert!(trace.contains("skipped: predicate 0"), "{trace}");
        } else {
            assert!(skipped.is_empty(), "{deps}");
        }
        assert!(trace.contains("dependency-only (no kernel)"), "{case}");
    }
}

/// A kernel on bf16 tensors that picks its type as PTO-ISA does, built
/// by `SCENE_TEST_HOSTED_CXX` (`zig c++` under CI: `__bf16`, no
/// `<stdfloat>`, no `__truncsfbf2` in its runtime library): it builds,
/// loads and computes in bf16, exactly, through the harness's shim
/// (issue 39: without it PTO-ISA read bf16 tensors as halves).
#[test]
fn bf16_tensors_are_bf16_in_kernels_built_by_zig_cxx() {
    let Some(cxx) = common::second_hosted_cxx() else {
        return;
    };
    let env = TestEnv::new();
    let checkout = compat().join("checkout");
    let cxx = cxx.to_str().expect("UTF-8 path");
    let (out, r) = run(
        &env,
        &["--simpler-root", checkout.to_str().unwrap(), "bf16"],
        &[("SCENE_HOSTED_CXX", cxx)],
    );
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 1, "{}", show(&out));

    // The same from another directory with a relative cache directory:
    // the shim is generated under the cache and handed to the compiler
    // (which runs in the scenes root) by path. A relative one named
    // nothing there: the kernel built without it and read bf16 as halves.
    let scenes = compat().join("scenes");
    let (out, r) = env.run_with_report_using(
        &[
            "run",
            "--scenes-dir",
            scenes.to_str().unwrap(),
            "--simpler-root",
            checkout.to_str().unwrap(),
            "bf16",
        ],
        |cmd| {
            cmd.current_dir(env.dir.path())
                .env("SCENE_HOSTED_CXX", cxx)
                .env("SCENE_CACHE_DIR", "relative-cache");
        },
    );
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 1, "{}", show(&out));
    assert!(
        r["totals"]["units_compiled"].as_u64().unwrap_or(0) > 0,
        "{}",
        show(&out)
    );
    assert!(env.dir.path().join("relative-cache/tools").is_dir());
}
