//! The port of simpler's host_build_graph `matmul` diamond (C++ kernels and
//! orchestration) through the real `scene` binary: its one case, manual as
//! in the original, passes on a2a3sim when named, and fails in the compare
//! stage, on tensor `f`, when one kernel is mutated (copies in a temp
//! scenes dir, so the package's scenes are never touched).

use crate::common;

use common::{TestEnv, copy_dir, package_scenes_dir};

const CASE: &str = "matmul::default";

fn env_with_matmul() -> TestEnv {
    let env = TestEnv::with_scenes(&[]);
    let dir = env.scenes_dir.clone().unwrap();
    copy_dir(&package_scenes_dir().join("matmul"), &dir.join("matmul"));
    env
}

/// Replaces `from` (which must occur exactly once) by `to` in `file`.
fn mutate(env: &TestEnv, file: &str, from: &str, to: &str) {
    let path = env.scenes_dir.as_ref().unwrap().join("matmul").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text.matches(from).count(),
        1,
        "{file}: the mutation site `{from}` must occur exactly once"
    );
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

/// Runs `filter` on a2a3sim; the text printed and the one case's report.
fn run(env: &TestEnv, filter: &str, extra: &[&str]) -> (bool, String, serde_json::Value) {
    let mut args = vec!["run", filter, "--platform", "a2a3sim"];
    args.extend_from_slice(extra);
    let (out, json) = env.run_with_report(&args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let cases = json["cases"].as_array().cloned().unwrap_or_default();
    let case = cases
        .into_iter()
        .find(|c| c["scene"] == "matmul" && c["case"] == "default")
        .unwrap_or(serde_json::Value::Null);
    (out.status.success(), text, case)
}

fn assert_fails_in_compare(env: &TestEnv, what: &str) {
    let (ok, text, case) = run(env, CASE, &[]);
    assert!(!ok, "{what}: the mutated scene passed\n{text}");
    assert_eq!(case["status"], "failed", "{what}: {case}\n{text}");
    assert_eq!(case["failure_stage"], "compare", "{what}: {case}\n{text}");
    assert!(
        text.contains(&format!("FAIL {CASE}")) && text.contains("tensor `f` mismatch"),
        "{what}: expected `{CASE}` to fail on tensor `f`\n{text}"
    );
}

#[test]
fn the_port_passes_when_named_and_is_manual_otherwise() {
    let env = env_with_matmul();
    let (ok, text, case) = run(&env, CASE, &[]);
    assert!(ok, "{text}");
    assert!(text.contains(&format!("PASS {CASE} ")), "{text}");
    assert_eq!(case["status"], "passed", "{case}");
    // Manual as in the original: a plain run of the scene selects nothing
    // and says why; --include-manual runs it.
    let out = env.scene(&["run", "matmul"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("case matmul::default is manual: add --include-manual"),
        "{stderr}"
    );
    let (ok, text, _) = run(&env, "matmul", &["--include-manual"]);
    assert!(ok && text.contains(&format!("PASS {CASE} ")), "{text}");
}

#[test]
fn fails_without_the_sqrt_in_log_sqrt() {
    let env = env_with_matmul();
    mutate(
        &env,
        "kernels/aiv/kernel_log_sqrt.cpp",
        "dst[i] = T::store(scene_sqrtf(tmp));",
        "dst[i] = T::store(tmp);",
    );
    assert_fails_in_compare(&env, "log_sqrt without sqrt");
}

#[test]
fn fails_with_a_dropped_term_in_matmul() {
    let env = env_with_matmul();
    mutate(
        &env,
        "kernels/aic/kernel_matmul.cpp",
        "for (int k = 0; k < K; k++)",
        "for (int k = 1; k < K; k++)",
    );
    assert_fails_in_compare(&env, "matmul dropped term");
}

#[test]
fn fails_with_a_sign_flipped_in_add_exp() {
    let env = env_with_matmul();
    mutate(
        &env,
        "kernels/aiv/kernel_add_exp.cpp",
        "T::load(x[i]) + T::load(y[i])",
        "T::load(x[i]) - T::load(y[i])",
    );
    assert_fails_in_compare(&env, "add_exp sign");
}
