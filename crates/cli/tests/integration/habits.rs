//! Habits a newcomer expects of `scene` (issue 25, item 6): several
//! filters, a setup-error exit status, the case count up front, the
//! failures listed again under the summary, an out-of-memory message that
//! names its knob, and pass 2 saying why pass 1 left a case out.

use crate::common;

use std::process::{Command, Output};

use common::{TestEnv, copy_scene, package_scenes_dir, scene_exe, show, workspace_root};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The `error:` lines of a run's stderr.
fn error_lines(out: &Output) -> Vec<String> {
    stderr(out)
        .lines()
        .filter(|l| l.starts_with("error:"))
        .map(str::to_owned)
        .collect()
}

/// Asserts exit 3 with exactly one `error:` line containing every `want`.
fn assert_setup_error(out: &Output, want: &[&str]) {
    assert_eq!(out.status.code(), Some(3), "{}", show(out));
    let errors = error_lines(out);
    assert_eq!(errors.len(), 1, "{}", show(out));
    for w in want {
        assert!(errors[0].contains(w), "`{w}` missing: {}", show(out));
    }
    // Nothing ran: no case line, no summary.
    let so = stdout(out);
    assert!(
        !so.contains("PASS ") && !so.contains("FAIL "),
        "{}",
        show(out)
    );
    assert_eq!(common::summary_line(&so), None, "{}", show(out));
}

/// A private scenes dir with a working and a broken copy of vector_example
/// (a syntax error in `mul.c`).
fn ok_and_broken() -> TestEnv {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "vector_example", "vec_ok");
    let broken = copy_scene(&env, "vector_example", "vec_broken");
    let mul = broken.join("kernels/mul.c");
    let src = std::fs::read_to_string(&mul).unwrap();
    std::fs::write(&mul, src.replace("a[i] * b[i];", "a[i] * b[i] +;")).unwrap();
    env
}

#[test]
fn several_filters_select_the_cases_matching_any_of_them() {
    let env = TestEnv::new();
    let list = |args: &[&str]| {
        let out = env.scene(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        stdout(&out).lines().map(str::to_owned).collect::<Vec<_>>()
    };
    let both = list(&["list", "softmax::small", "rmsnorm::odd"]);
    assert_eq!(both, ["rmsnorm::odd", "softmax::small"], "{both:?}");
    // One filter behaves as before; the union of two is both lists.
    let softmax = list(&["list", "softmax"]);
    let rmsnorm = list(&["list", "rmsnorm"]);
    let mut union = list(&["list", "softmax", "rmsnorm"]);
    union.sort();
    let mut expected: Vec<String> = softmax.iter().chain(&rmsnorm).cloned().collect();
    expected.sort();
    assert_eq!(union, expected);
    // A filter that matches nothing does not hide the others' cases.
    assert_eq!(
        list(&["list", "no_such_case", "softmax::small"]),
        ["softmax::small"]
    );

    // `run` takes them too, and says what it runs before the first case.
    let out = env
        .scene(&["run", "vector_example::small", "vector_example::odd", "-v"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let so = stdout(&out);
    assert_eq!(
        so.lines().next(),
        Some("running 2 cases of 1 scene on a2a3sim"),
        "{}",
        show(&out)
    );
    assert!(so.contains("PASS vector_example::small"), "{}", show(&out));
    assert!(so.contains("PASS vector_example::odd"), "{}", show(&out));
    assert!(so.ends_with("2 passed, 0 failed\n"), "{}", show(&out));
    // Nothing selected by any of them: still exit 4, naming them.
    let out = env.scene(&["run", "nope1", "nope2"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    assert!(stderr(&out).contains("nope1, nope2"), "{}", show(&out));
}

#[test]
fn the_count_goes_to_stderr_with_a_report_on_stdout_and_not_with_quiet() {
    let env = TestEnv::new();
    let out = env
        .scene(&["run", "vector_example::small", "--report-json", "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        stderr(&out).contains("running 1 case of 1 scene on a2a3sim\n"),
        "{}",
        show(&out)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(report["cases"].as_array().map(Vec::len), Some(1));
    let out = env
        .scene(&["run", "-q", "vector_example::small"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(!stdout(&out).contains("running"), "{}", show(&out));
    assert!(!stderr(&out).contains("running"), "{}", show(&out));
}

#[test]
fn failures_are_listed_again_under_the_summary() {
    let env = ok_and_broken();
    let out = env.scene(&["run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let so = stdout(&out);
    assert!(
        so.starts_with("running 4 cases of 2 scenes on a2a3sim\n"),
        "{}",
        show(&out)
    );
    assert!(
        so.ends_with(
            "\n2 passed, 2 failed\nfailures:\n    vec_broken::small\n    vec_broken::odd\n"
        ),
        "{}",
        show(&out)
    );
    // `-q` keeps failures and summaries: the block too.
    let out = env.scene(&["run", "-q"]).output().unwrap();
    let so = stdout(&out);
    assert!(
        so.ends_with("failures:\n    vec_broken::small\n    vec_broken::odd\n"),
        "{so}"
    );
    // Nothing failed: no block.
    let out = env.scene(&["run", "vec_ok"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(!stdout(&out).contains("failures:"), "{}", show(&out));
}

#[test]
fn every_help_lists_the_exit_statuses() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["compile", "--help"],
        &["precompile", "--help"],
    ] {
        let out = Command::new(scene_exe()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", show(&out));
        let text = stdout(&out).replace('\n', " ");
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            text.contains("Exit status: 0 all passed, 1 any failed, 2 usage error, 3 setup error")
                && text.contains("4 nothing selected"),
            "{args:?}: {text}"
        );
    }
}

/// A compiler that is not there is one setup error before anything runs,
/// for `run`, `compile` and `precompile`: a path that does not exist, or
/// a bare `cc` on a `PATH` without one.
#[test]
fn a_missing_compiler_is_a_setup_error() {
    let env = TestEnv::new();
    let bundle = env.dir.path().join("bundle");
    for args in [
        &["run", "vector_example::small"][..],
        &["compile", "vector_example::small"],
        &[
            "precompile",
            "vector_example::small",
            "--out",
            bundle.to_str().unwrap(),
        ],
    ] {
        let out = env
            .scene(args)
            .env("SCENE_CC", "/nonexistent/bin/cc")
            .output()
            .unwrap();
        assert_setup_error(
            &out,
            &[
                "platform `a2a3sim`: compiler `/nonexistent/bin/cc` not found",
                "SCENE_CC",
            ],
        );
    }
    assert!(!bundle.exists(), "precompile wrote a bundle");

    let empty = env.dir.path().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let out = env
        .scene(&["run", "vector_example::small"])
        .env("PATH", &empty)
        .output()
        .unwrap();
    assert_setup_error(&out, &["compiler `cc` not found", "SCENE_CC"]);
}

/// A `--runtime` that is not there stops the run before any case, naming
/// the library and how to point at one. A relocated binary with nothing
/// beside it is no such case: it carries the simulator runtime.
#[test]
fn a_missing_runtime_is_a_setup_error() {
    let env = TestEnv::new();
    let bin = env.dir.path().join("unpacked/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("scene");
    scene_util::copy_executable(&scene_exe(), &exe).unwrap();
    let relocated = |args: &[&str]| {
        let mut cmd = env.scene(args);
        cmd.env_remove("SCENE_RUNTIME_LIB");
        // The same arguments and environment, the relocated binary.
        let mut moved = Command::new(&exe);
        moved.args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => moved.env(k, v),
                None => moved.env_remove(k),
            };
        }
        moved
            .arg("--root")
            .arg(workspace_root())
            .arg("--scenes-dir")
            .arg(package_scenes_dir());
        moved.output().unwrap()
    };
    let out = relocated(&["run", "vector_example::small"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));

    let missing = env.dir.path().join("no-such-runtime.so");
    let out = env
        .scene(&["run", "vector_example::small", "--runtime"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_setup_error(
        &out,
        &[
            &missing.display().to_string(),
            "not found",
            "SCENE_RUNTIME_LIB",
        ],
    );
    // Pass 1 needs no runtime: precompile from the relocated binary works.
    let bundle = env.dir.path().join("bundle");
    let out = relocated(&[
        "precompile",
        "vector_example::small",
        "--out",
        bundle.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

/// No Python interpreter when every selected case needs one (a Python
/// golden): one setup error, before any case.
#[test]
fn a_missing_python_is_a_setup_error() {
    let env = TestEnv::new();
    let out = env
        .scene(&["run", "paged_attention_py::small1"])
        .env("SCENE_PYTHON", "/nonexistent/bin/python3")
        .output()
        .unwrap();
    assert_setup_error(&out, &["/nonexistent/bin/python3"]);
    // Scenes without Python do not need it.
    let out = env
        .scene(&["run", "vector_example::small"])
        .env("SCENE_PYTHON", "/nonexistent/bin/python3")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    // With them selected too, they run; the Python case fails alone.
    let out = env
        .scene(&["run", "vector_example::small", "paged_attention_py::small1"])
        .env("SCENE_PYTHON", "/nonexistent/bin/python3")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let so = stdout(&out);
    assert!(so.contains("PASS vector_example::small"), "{}", show(&out));
    assert!(
        so.contains("FAIL paged_attention_py::small1"),
        "{}",
        show(&out)
    );
}

/// A case whose tensors do not fit the simulated device's arena fails
/// before its fixtures (issue 30), saying how much it needs, how much
/// there is, where that came from and what raises it; raising it makes
/// the case pass. (The runtime's own out-of-memory message, for buffers
/// an orchestration allocates, is `orch_v2.rs`'s and `sim-runtime`'s.)
#[test]
fn out_of_memory_names_the_option_that_raises_it() {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, "vector_example", "vec_oom");
    let toml = dir.join("scene.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    // 2 MiB per tensor.
    text.push_str("\n[[cases]]\nname = \"big\"\nparams = { N = 524288 }\n");
    std::fs::write(&toml, text).unwrap();
    let out = env
        .scene(&["run", "vec_oom::big"])
        .env("SCENE_RUNTIME_OPTIONS", "arena_mb=1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let so = stdout(&out);
    assert!(so.contains("FAIL vec_oom::big"), "{}", show(&out));
    assert!(
        so.contains(
            "the case's tensors need at least 6 MiB of device memory, more than the 1 MiB in force \
             (`arena_mb` in SCENE_RUNTIME_OPTIONS"
        ),
        "{}",
        show(&out)
    );
    assert!(
        so.contains("raise it (SCENE_RUNTIME_OPTIONS=arena_mb=8)"),
        "{}",
        show(&out)
    );
    let out = env
        .scene(&["run", "vec_oom::big"])
        .env("SCENE_RUNTIME_OPTIONS", "arena_mb=64")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

/// Pass 1 records why it could not store a case; pass 2 fails that case
/// with the cause (the compiler's first errors), without rebuilding it.
#[test]
fn pass_two_says_why_pass_one_left_a_case_out() {
    let env = ok_and_broken();
    let bundle = env.dir.path().join("bundle");
    let out = env
        .scene(&["precompile", "--out", bundle.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("bundle.json")).unwrap()).unwrap();
    let failed = &manifest["failed"]["vec_broken::small"];
    assert_eq!(failed["stage"], "compile", "{manifest:#}");
    assert!(
        failed["message"].as_str().unwrap_or("").contains("mul.c"),
        "{manifest:#}"
    );

    // Pass 2 with no compiler at all (`false` everywhere).
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--from", bundle.to_str().unwrap()];
        args.extend_from_slice(extra);
        let mut cmd = env.scene(&args);
        cmd.env("SCENE_CC", "false").env("SCENE_LD", "false");
        common::output_with_report(&mut cmd, &env.report_path())
    };
    let (out, report) = run(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let so = stdout(&out);
    assert!(
        so.starts_with(&format!(
            "running 4 cases of 2 scenes on a2a3sim from bundle {}\n",
            bundle.display()
        )),
        "{}",
        show(&out)
    );
    assert!(so.contains("PASS vec_ok::small"), "{}", show(&out));
    assert!(
        so.contains("not in the bundle: pass 1 (scene precompile) failed compiling:"),
        "{}",
        show(&out)
    );
    assert!(so.contains("mul.c"), "the compiler's error: {}", show(&out));
    assert!(!stderr(&out).contains("rebuilding"), "{}", show(&out));
    let case = common::report_case(&report, "vec_broken::odd");
    assert_eq!(case["failure_stage"], "compile", "{report:#}");
    // No card for it: no device, no card time.
    assert_eq!(case["devices"], serde_json::json!([]), "{report:#}");
    assert_eq!(case["phases"]["lock_held_s"], 0.0, "{report:#}");
    assert_eq!(case["phases"]["lock_wait_s"], 0.0, "{report:#}");
    assert_eq!(
        common::report_case(&report, "vec_ok::small")["devices"]
            .as_array()
            .map_or(0, Vec::len),
        1,
        "{report:#}"
    );
    let message = case["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("not in the bundle: pass 1 (scene precompile) failed compiling:"),
        "{message}"
    );
    assert_eq!(
        common::summary_line(&so),
        Some("2 passed, 2 failed"),
        "{}",
        show(&out)
    );
}
