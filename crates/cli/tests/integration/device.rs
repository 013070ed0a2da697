//! Device economy, end to end with the real `scene` binary: the card lock
//! covers device work only, cards are shared safely between processes, and
//! device faults retire a card without stranding the run.

use crate::common;

use std::process::Stdio;

use common::{
    TestEnv, assert_no_card_held_twice, assert_success, copy_scene, copy_scene_with_devices,
    read_report, run_concurrently, show, stderr_line_containing,
};
use scene_device::{AcquireOptions, CardPool};

fn cases(report: &serde_json::Value) -> Vec<serde_json::Value> {
    report["cases"].as_array().unwrap().clone()
}

fn lock_interval(case: &serde_json::Value) -> (f64, f64) {
    (
        case["lock"]["acquired_at"].as_f64().unwrap(),
        case["lock"]["released_at"].as_f64().unwrap(),
    )
}

/// With card 0 held by someone else, a run on `0,1` makes progress on card 1.
#[test]
fn second_card_makes_progress_while_first_is_held() {
    let env = TestEnv::new();
    let pool = CardPool::new("0".parse().unwrap(), env.lock_dir.clone()).unwrap();
    let lease = pool
        .acquire(1, "device_test holder", AcquireOptions::default())
        .unwrap();
    let (out, json) = env.run_with_report(&["run", "vector_example", "--device", "0,1"]);
    drop(lease);
    assert_success(&out);
    for c in cases(&json) {
        assert_eq!(c["devices"], serde_json::json!([1]), "{c}");
    }
}

/// A 2-card case and 1-card cases on a 3-card pool, three processes at a
/// time, many rounds: no deadlock, and no card is ever held twice at once.
#[test]
fn mixed_card_counts_across_processes_never_deadlock() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene_with_devices(&env, "vector_example", "vector_two_cards", 2);
    copy_scene(&env, "vector_example", "vector_one_card");
    for round in 0..10 {
        let reports = run_concurrently(&env, 3, &["run", "--device", "0-2"], &format!("r{round}"));
        for r in &reports {
            for c in cases(r) {
                let want = if c["scene"] == "vector_two_cards" {
                    2
                } else {
                    1
                };
                assert_eq!(c["devices"].as_array().unwrap().len(), want, "{c}");
            }
        }
        assert_no_card_held_twice(&reports);
    }
}

/// A case that needs more cards than the pool has fails at selection.
#[test]
fn too_many_cards_fails_at_selection_without_waiting() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene_with_devices(&env, "vector_example", "vector_four_cards", 4);
    let out = env.scene(&["run", "--device", "0-1"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("needs 4 cards but the pool has 2"),
        "{stdout}"
    );
}

/// Killing the process that holds a card frees the card for the next one.
#[test]
fn killing_the_holder_frees_the_card() {
    let env = TestEnv::new();
    // The child's runs hang (test-only knob), so it holds card 0 until killed.
    let mut child = env
        .scene(&[
            "run",
            "vector_example::small",
            "--case-timeout",
            "600",
            "--verbose",
        ])
        .env("SCENE_RUNTIME_OPTIONS", "fault=hang")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (line, _rest) = stderr_line_containing(&mut child, "acquired card");
    assert!(line.contains("[0]"), "{line}");
    let pool = CardPool::new("0".parse().unwrap(), env.lock_dir.clone()).unwrap();
    assert!(
        pool.try_acquire(1, "device_test").unwrap().is_none(),
        "card 0 is free while the child holds it"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let lease = pool
        .try_acquire(1, "device_test")
        .unwrap()
        .expect("card still locked right after the holder died");
    drop(lease);
}

/// A fault that makes card 0 unusable retires it; the case is re-run on
/// card 1 and everything passes.
#[test]
fn fatal_fault_retires_card_and_cases_pass_elsewhere() {
    let env = TestEnv::new();
    let (out, json) =
        env.run_with_report_using(&["run", "vector_example", "--device", "0,1"], |cmd| {
            cmd.env(
                "SCENE_RUNTIME_OPTIONS",
                "fault=fatal_on_run:1;fault_device=0",
            );
        });
    assert_success(&out);
    let cases = cases(&json);
    assert_eq!(cases.len(), 2);
    for c in &cases {
        assert_eq!(c["status"], "passed");
        assert_eq!(c["devices"], serde_json::json!([1]), "{c}");
    }
    let notes: Vec<String> = cases
        .iter()
        .filter_map(|c| c["message"].as_str().map(str::to_string))
        .collect();
    assert!(
        notes
            .iter()
            .any(|m| m.contains("retired") && m.contains("retrying")),
        "no retirement note in {notes:?}"
    );
}

/// A kernel that never finishes is stopped by the case timeout, the case
/// fails saying so, and the card goes to the next user.
#[test]
fn hung_kernel_is_stopped_by_case_timeout_and_card_is_freed() {
    let env = TestEnv::new();
    let hung_report = env.dir.path().join("hung.json");
    let ok_report = env.dir.path().join("ok.json");
    let hung = env
        .scene(&[
            "run",
            "vector_example::small",
            "--case-timeout",
            "0.5",
            "--report-json",
            hung_report.to_str().unwrap(),
        ])
        .env("SCENE_RUNTIME_OPTIONS", "fault=hang")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ok = env
        .scene(&[
            "run",
            "vector_example::odd",
            "--report-json",
            ok_report.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let hung_out = hung.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&hung_out.stdout);
    assert_eq!(hung_out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("case timeout"), "{stdout}");
    let ok_out = ok.wait_with_output().unwrap();
    assert!(ok_out.status.success(), "{}", show(&ok_out));
    let a = lock_interval(&cases(&read_report(&hung_report))[0]);
    let b = lock_interval(&cases(&read_report(&ok_report))[0]);
    assert!(
        a.1 <= b.0 || b.1 <= a.0,
        "lock intervals overlap: {a:?} {b:?}"
    );
}

/// Waiting for a busy card says who holds it.
#[test]
fn waiting_names_the_holder() {
    let env = TestEnv::new();
    let pool = CardPool::new("0".parse().unwrap(), env.lock_dir.clone()).unwrap();
    let lease = pool
        .acquire(1, "someone::else", AcquireOptions::default())
        .unwrap();
    let mut child = env
        .scene(&["run", "vector_example::small", "--lock-timeout", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (line, lines) = stderr_line_containing(&mut child, "waiting");
    assert!(line.contains("someone::else"), "{line}");
    assert!(
        line.contains(&format!("pid {}", std::process::id())),
        "{line}"
    );
    assert!(line.contains("waited"), "{line}");
    drop(lease);
    for _ in lines {}
    assert!(child.wait().unwrap().success());
}

/// Issue 27 (weak item): once a hang retired the only card, the later
/// cases failed with "only 0 healthy" and no word of why; under
/// `--hold-card` they even ran on the retired card. Now each says which
/// case retired it.
#[test]
fn cases_after_a_hang_retired_the_only_card_name_the_case_that_retired_it() {
    let env = TestEnv::new();
    for mode in [&[][..], &["--hold-card"][..]] {
        let mut args = vec![
            "run",
            "vector_example",
            "--device",
            "0",
            "--case-timeout",
            "0.5",
        ];
        args.extend(mode);
        let (out, report) = env.run_with_report_using(&args, |cmd| {
            cmd.env("SCENE_RUNTIME_OPTIONS", "fault=hang");
        });
        assert_eq!(out.status.code(), Some(1), "{mode:?}: {}", show(&out));
        let cases = cases(&report);
        assert_eq!(cases.len(), 2, "{mode:?}: {report}");
        let message = |c: &serde_json::Value| c["message"].as_str().unwrap_or_default().to_owned();
        let hung = cases
            .iter()
            .find(|c| message(c).contains("case timeout") && message(c).contains("retired"))
            .unwrap_or_else(|| panic!("{mode:?}: no case retired the card: {report}"));
        let hung_id = hung["name"].as_str().unwrap();
        let later = cases.iter().find(|c| c["name"] != hung["name"]).unwrap();
        assert_eq!(later["status"], "failed", "{mode:?}: {later}");
        assert!(
            message(later).contains(&format!("card 0 was retired by {hung_id}: ")),
            "{mode:?}: {later}"
        );
    }
}
