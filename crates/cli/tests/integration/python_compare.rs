//! Python comparisons (`compare = { python = "FUNCTION", ... }`, issue 30
//! item 5), end to end with the real `scene` binary: the shipped
//! `python_compare` scene (only the first `recv_count[e]` rows per expert
//! are meaningful) passes on both sims, each output judged by the scene's
//! own Python function; a comparison that checks one row too many fails
//! the case with the function's detail, naming the tensor; a function that
//! raises or returns the wrong thing fails its case alone, with the
//! traceback; a typo in the function's name is a load error.
//!
//! Needs numpy, as the Python goldens do (`common::test_python`).

use crate::common;

use std::path::PathBuf;

use common::{TestEnv, copy_scene, report_case as case, show};
use serde_json::Value;

/// `python_compare` and the `vector_example` whose kernels it uses, in a
/// scenes dir of their own; `edit` rewrites the copy's `scene.toml`.
fn setup(edit: impl FnOnce(String) -> String) -> (TestEnv, PathBuf) {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "vector_example", "vector_example");
    let dir = copy_scene(&env, "python_compare", "python_compare");
    let toml = dir.join("scene.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(&toml, edit(text)).unwrap();
    (env, dir)
}

fn run(env: &TestEnv, platform: &str) -> (std::process::Output, Value) {
    env.run_with_report(&["run", "python_compare", "--platform", platform])
}

fn message(report: &Value, name: &str) -> String {
    case(report, name)["message"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn python_compare_scene_passes_on_both_sims() {
    let (env, _) = setup(|t| t);
    for platform in ["a2a3sim", "a5sim"] {
        let (out, report) = run(&env, platform);
        assert_eq!(out.status.code(), Some(0), "{platform}: {}", show(&out));
        for (name, checked) in [
            ("python_compare::small", "16 valid rows of 32 match"),
            ("python_compare::uneven", "10 valid rows of 27 match"),
        ] {
            let c = case(&report, name);
            assert_eq!(c["status"], "passed", "{platform}: {c:#}");
            let f = &c["outputs"][0];
            assert_eq!(f["name"], "f");
            assert_eq!(f["comparison"], "python:compare_valid_rows(slack=0)");
            assert_eq!(f["verdict"], "pass");
            assert_eq!(f["detail"], checked, "{platform}: {c:#}");
        }
    }
}

#[test]
fn a_python_compare_checking_one_row_too_many_fails_with_its_detail() {
    let (env, _) = setup(|t| {
        assert!(t.contains("slack = 0 }"));
        t.replace("slack = 0 }", "slack = 1 }")
    });
    for platform in ["a2a3sim", "a5sim"] {
        let (out, report) = run(&env, platform);
        assert_eq!(out.status.code(), Some(1), "{platform}: {}", show(&out));
        let c = case(&report, "python_compare::small");
        assert_eq!(c["status"], "failed", "{c:#}");
        assert_eq!(c["failure_stage"], "compare", "{c:#}");
        let m = message(&report, "python_compare::small");
        // Expert 0 received 3 rows: row 3 is the golden's garbage.
        assert!(
            m.contains("tensor `f` failed comparison python:compare_valid_rows(slack=1): f: expert 0 row 3 col 0: "),
            "{platform}: {m}"
        );
        assert!(
            m.contains("comparison: python:compare_valid_rows(slack=1)"),
            "{m}"
        );
        assert_eq!(
            case(&report, "python_compare::small")["outputs"][0]["verdict"],
            "fail"
        );
    }
}

/// golden.py's comparison, replaced by one that misbehaves in case `bad`.
const MISBEHAVING: &str = r#"

def compare_valid_rows(name, actual, expected, params):
    mode = params["mode"]
    if mode == 1:
        raise RuntimeError("boom from the comparison")
    if mode == 2:
        return "yes"
    return True, "fine"
"#;

#[test]
fn a_python_compare_that_raises_or_returns_garbage_fails_its_case_alone() {
    let (env, dir) = setup(|t| {
        let head = &t[..t.find("[[cases]]").unwrap()];
        let mut t = head.replace("slack = 0 }", "mode = \"get(mode_of_case, 0)\" }");
        for (name, mode) in [("ok", 0), ("raises", 1), ("garbage", 2), ("ok2", 0)] {
            t.push_str(&format!(
                "[[cases]]\nname = \"{name}\"\nparams = {{ recv_count = [2, 3], capacity = 4, hidden = 16, mode_of_case = {mode} }}\n\n"
            ));
        }
        t
    });
    let golden = dir.join("golden.py");
    let text = std::fs::read_to_string(&golden).unwrap();
    let cut = text.find("def compare_valid_rows").unwrap();
    std::fs::write(&golden, format!("{}{MISBEHAVING}", &text[..cut])).unwrap();
    let (out, report) = run(&env, "a2a3sim");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    for ok in ["python_compare::ok", "python_compare::ok2"] {
        assert_eq!(case(&report, ok)["status"], "passed", "{}", show(&out));
    }
    let raised = message(&report, "python_compare::raises");
    assert!(raised.contains("tensor `f`"), "{raised}");
    assert!(
        raised.contains("RuntimeError: boom from the comparison"),
        "{raised}"
    );
    assert!(raised.contains("Traceback"), "{raised}");
    assert!(raised.contains("golden.py"), "{raised}");
    let garbage = message(&report, "python_compare::garbage");
    assert!(
        garbage
            .contains("compare_valid_rows returned str 'yes'; a comparison returns (ok, detail)"),
        "{garbage}"
    );
}

#[test]
fn a_misspelt_python_compare_is_a_load_error() {
    let (env, _) = setup(|t| {
        t.replace(
            "python = \"compare_valid_rows\"",
            "python = \"compare_valid_row\"",
        )
    });
    let (out, report) = run(&env, "a2a3sim");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let m = message(&report, "python_compare::load");
    assert!(
        m.contains("`tensors[2].compare.python`")
            && m.contains("defines no function `compare_valid_row`"),
        "{m}\n{}",
        show(&out)
    );
}

/// Pass 2 of a two-pass run holds no golden code but judges the outputs:
/// a Python comparison runs there, in pass 2's Python worker.
#[test]
fn a_two_pass_run_judges_with_the_python_compare_in_pass_2() {
    let (env, _) = setup(|t| t);
    let bundle = env.dir.path().join("bundle");
    let out = env
        .scene(&[
            "precompile",
            "--out",
            bundle.to_str().unwrap(),
            "python_compare",
        ])
        .output()
        .unwrap();
    common::assert_success(&out);
    let (out, report) = env.run_with_report_using(
        &["run", "--from", bundle.to_str().unwrap(), "python_compare"],
        |cmd| {
            cmd.env("SCENE_CC", "false").env("SCENE_LD", "false");
        },
    );
    common::assert_success(&out);
    assert_eq!(report["totals"]["goldens_computed"], 0);
    let f = &case(&report, "python_compare::small")["outputs"][0];
    assert_eq!(f["detail"], "16 valid rows of 32 match", "{f:#}");
}

/// golden.py's comparison, replaced by one whose detail or exception
/// message holds a lone surrogate (`'\udc80'`, what `os.fsdecode` makes of
/// a byte that is not UTF-8) in case `returns` / `raises`; every detail
/// names the worker's pid.
const SURROGATE: &str = r#"
import os

def compare_valid_rows(name, actual, expected, params):
    mode = params["mode"]
    if mode == 1:
        return False, "bad \udc80 byte in pid %d" % os.getpid()
    if mode == 2:
        raise ValueError("lone \udc80 in pid %d" % os.getpid())
    return True, "pid %d" % os.getpid()
"#;

/// JSON escapes a lone surrogate as `\udc80`, which serde_json refuses: the
/// reply was taken for a broken worker, killed, and the case failed saying
/// so. Now the surrogate reaches the report as the text `\udc80`, the case
/// passes or fails on its own merits, and the next case is answered by the
/// same worker.
#[test]
fn a_lone_surrogate_in_a_python_compare_detail_keeps_the_worker() {
    let (env, dir) = setup(|t| {
        let head = &t[..t.find("[[cases]]").unwrap()];
        let mut t = head.replace("slack = 0 }", "mode = \"get(mode_of_case, 0)\" }");
        for (name, mode) in [("ok", 0), ("returns", 1), ("raises", 2), ("ok2", 0)] {
            t.push_str(&format!(
                "[[cases]]\nname = \"{name}\"\nparams = {{ recv_count = [2, 3], capacity = 4, hidden = 16, mode_of_case = {mode} }}\n\n"
            ));
        }
        t
    });
    let golden = dir.join("golden.py");
    let text = std::fs::read_to_string(&golden).unwrap();
    let cut = text.find("def compare_valid_rows").unwrap();
    std::fs::write(&golden, format!("{}{SURROGATE}", &text[..cut])).unwrap();
    let (out, report) = run(&env, "a2a3sim");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let detail = |name: &str| {
        case(&report, name)["outputs"][0]["detail"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    for ok in ["python_compare::ok", "python_compare::ok2"] {
        assert_eq!(case(&report, ok)["status"], "passed", "{}", show(&out));
    }
    let pid = detail("python_compare::ok");
    assert!(pid.starts_with("pid "), "{pid}");
    assert_eq!(
        detail("python_compare::ok2"),
        pid,
        "the worker was replaced after the surrogate\n{}",
        show(&out)
    );
    let returned = case(&report, "python_compare::returns");
    assert_eq!(returned["status"], "failed", "{returned:#}");
    assert_eq!(returned["failure_stage"], "compare", "{returned:#}");
    assert_eq!(returned["outputs"][0]["verdict"], "fail", "{returned:#}");
    let m = message(&report, "python_compare::returns");
    assert!(
        m.contains(&format!(
            "failed comparison python:compare_valid_rows(mode=1): bad \\udc80 byte in {pid}"
        )),
        "{m}"
    );
    let raised = message(&report, "python_compare::raises");
    assert!(
        raised.contains(&format!("ValueError: lone \\udc80 in {pid}")),
        "{raised}"
    );
    assert!(!raised.contains("died"), "{raised}");
}
