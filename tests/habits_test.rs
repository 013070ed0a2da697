//! Habits a newcomer expects of `scene` (issue 25, item 6): several
//! filters, the case count up front, the failures listed again under the
//! summary.

mod common;

use std::process::Output;

use common::{TestEnv, copy_scene, show};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
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
