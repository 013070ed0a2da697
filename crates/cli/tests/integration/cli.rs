//! Integration tests of the real `scene` binary against fixture scene
//! directories in temp dirs (never the user's cache or lock dir).

use crate::common;

use std::process::Stdio;

use common::{TestEnv, assert_success, copy_scene, read_report};

#[test]
fn list_shows_vector_example_cases() {
    let env = TestEnv::new();
    let out = env.scene(&["list"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.contains(&"vector_example::small"), "{stdout}");
    assert!(lines.contains(&"vector_example::odd"), "{stdout}");
}

#[test]
fn list_filter_selects_subset() {
    let env = TestEnv::new();
    let out = env.scene(&["list", "::odd"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().all(|l| l.ends_with("::odd")), "{stdout}");
    assert!(stdout.contains("vector_example::odd"), "{stdout}");
}

#[test]
fn run_vector_example_passes_with_summary() {
    let env = TestEnv::new();
    let (out, json) = env.run_with_report(&["run", "vector_example"]);
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("PASS vector_example::small"), "{stdout}");
    assert!(stdout.contains("PASS vector_example::odd"), "{stdout}");
    assert_eq!(
        stdout.lines().last(),
        Some("2 passed, 0 failed"),
        "{stdout}"
    );
    let cases = json["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    for c in cases {
        assert_eq!(c["status"], "passed");
        assert_eq!(c["devices"], serde_json::json!([0]));
        let lock = &c["lock"];
        assert!(lock["released_at"].as_f64().unwrap() >= lock["acquired_at"].as_f64().unwrap());
    }
}

#[test]
fn mutated_kernel_fails_with_mismatch_naming_the_tensor() {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, "vector_example", "vector_example");
    let add = dir.join("kernels/add.c");
    let src = std::fs::read_to_string(&add).unwrap();
    std::fs::write(&add, src.replace("a[i] + b[i]", "a[i] - b[i]")).unwrap();

    let out = env.scene(&["run"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL vector_example::small"), "{stdout}");
    assert!(stdout.contains("tensor `f`"), "{stdout}");
    assert_eq!(
        common::summary_line(&stdout),
        Some("0 passed, 2 failed"),
        "{stdout}"
    );
}

#[test]
fn syntax_error_names_kernel_and_other_scenes_still_run() {
    let env = TestEnv::with_scenes(&[]);
    let broken = copy_scene(&env, "vector_example", "vector_broken");
    let mul = broken.join("kernels/mul.c");
    let src = std::fs::read_to_string(&mul).unwrap();
    std::fs::write(&mul, src.replace("a[i] * b[i];", "a[i] * b[i] +;")).unwrap();
    copy_scene(&env, "vector_example", "vector_ok");

    let out = env.scene(&["run"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL vector_broken::small"), "{stdout}");
    assert!(stdout.contains("`mul`"), "kernel name missing: {stdout}");
    assert!(
        stdout.contains("error:"),
        "compiler message missing: {stdout}"
    );
    assert!(stdout.contains("mul.c"), "source missing: {stdout}");
    assert!(stdout.contains("PASS vector_ok::small"), "{stdout}");
    assert!(stdout.contains("PASS vector_ok::odd"), "{stdout}");
    assert_eq!(
        common::summary_line(&stdout),
        Some("2 passed, 2 failed"),
        "{stdout}"
    );
}

#[test]
fn malformed_scene_is_reported_and_others_run() {
    let env = TestEnv::with_scenes(&[]);
    let bad = copy_scene(&env, "vector_example", "vector_bad");
    let toml = bad.join("scene.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(&toml, text.replace("func_id = 2", "func_id = 1")).unwrap();
    copy_scene(&env, "vector_example", "vector_ok");

    let out = env.scene(&["run"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("vector_bad/scene.toml"), "{stderr}");
    assert!(stderr.contains("incores[2].func_id"), "{stderr}");
    assert!(stdout.contains("PASS vector_ok::small"), "{stdout}");
}

#[test]
fn usage_errors_exit_2() {
    let env = TestEnv::new();
    let out = env
        .scene(&["run", "--compile-workers", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--compile-workers"));
    let out = env.scene(&["run", "--device", "3-1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = env.scene(&["frobnicate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = env.scene(&["run", "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--compile-workers"));
}

/// The runtime library is not mapped while the process waits for the card,
/// and the waiting process only gets the card after the holder releases it.
#[test]
fn runtime_is_loaded_only_after_the_card_is_held() {
    let env = TestEnv::new();
    let pool = scene_device::CardPool::new("0".parse().unwrap(), env.lock_dir.clone()).unwrap();
    let lease = pool
        .acquire(
            1,
            "cli_test holder",
            scene_device::AcquireOptions::default(),
        )
        .unwrap();

    let report = env.dir.path().join("report.json");
    let mut child = env
        .scene(&[
            "run",
            "vector_example::small",
            "--report-json",
            report.to_str().unwrap(),
        ])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The child says it waits for the card (naming us as holder) before blocking.
    let (waiting, lines) = common::stderr_line_containing(&mut child, "waiting");
    assert!(
        waiting.contains(&std::process::id().to_string()),
        "{waiting}"
    );
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", child.id())).unwrap();
    assert!(
        !maps.contains("scene_sim_runtime"),
        "runtime mapped before the card lock was held:\n{maps}"
    );

    let released_at = common::unix_now();
    drop(lease);
    // Drain stderr so the child never blocks on a full pipe.
    for _ in lines {}
    let status = child.wait().unwrap();
    assert!(status.success());
    let json = read_report(&report);
    let acquired = json["cases"][0]["lock"]["acquired_at"].as_f64().unwrap();
    assert!(
        acquired >= released_at,
        "acquired {acquired} before release {released_at}"
    );
}

/// Two `scene run` processes on one card hold it one after the other.
#[test]
fn two_processes_on_one_card_run_one_after_the_other() {
    let env = TestEnv::new();
    let reports = common::run_concurrently(&env, 2, &["run", "vector_example"], "two");
    let per_card = common::assert_no_card_held_twice(&reports);
    assert_eq!(per_card.len(), 1, "{per_card:?}");
    assert_eq!(per_card[&0].len(), 4, "{per_card:?}");
}
