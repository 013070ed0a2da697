//! `scene run --rounds N [--warmup K]`: the device stage of each case runs
//! N (+K) times in one session on one card hold, every round's outputs are
//! compared, and the report carries per-round statistics. A kernel that is
//! right once and wrong later (the sim's test-only `fault=corrupt_on_run:K`
//! flips an output byte after the K-th run of a session) fails with the
//! round named.

use crate::common;

use common::{TestEnv, assert_success};

#[test]
fn twenty_rounds_hold_the_card_once_and_report_statistics() {
    let env = TestEnv::new();
    let (out, json) = env.run_with_report_using(
        &[
            "run",
            "vector_example::small",
            "--rounds",
            "20",
            "--warmup",
            "2",
        ],
        |cmd| {
            cmd.env_remove("SCENE_RUNTIME_OPTIONS");
        },
    );
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("20 rounds, 2 warmup: device min"),
        "the case line shows the statistics: {stdout}"
    );
    let cases = json["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 1);
    let c = &cases[0];
    assert_eq!(c["status"], "passed", "{c}");
    let r = &c["rounds"];
    assert_eq!(r["n"], 20, "{c}");
    assert_eq!(r["warmup"], 2, "{c}");
    let per_round: Vec<f64> = r["per_round_s"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(per_round.len(), 20, "only the measured rounds are reported");
    let (min, median, max) = (
        r["device_s"]["min"].as_f64().unwrap(),
        r["device_s"]["median"].as_f64().unwrap(),
        r["device_s"]["max"].as_f64().unwrap(),
    );
    assert!(min > 0.0 && min <= median && median <= max, "{r}");
    assert_eq!(min, per_round.iter().copied().fold(f64::INFINITY, f64::min));
    assert_eq!(max, per_round.iter().copied().fold(0.0, f64::max));
    // One lock interval for the case: the card was taken once for all 22
    // runs, and every run happened inside the device stage.
    let lock = &c["lock"];
    let (a, rel) = (
        lock["acquired_at"].as_f64().unwrap(),
        lock["released_at"].as_f64().unwrap(),
    );
    assert!(rel >= a, "{lock}");
    let device_s = c["phases"]["device_s"].as_f64().unwrap();
    let run_sum: f64 = per_round.iter().sum();
    assert!(
        run_sum <= device_s,
        "the rounds ({run_sum} s) run inside the one device stage ({device_s} s)"
    );
    assert!(
        c["phases"]["lock_held_s"].as_f64().unwrap() >= run_sum,
        "{c}"
    );
}

#[test]
fn a_kernel_wrong_on_round_seven_fails_naming_the_round() {
    let env = TestEnv::new();
    let (out, json) =
        env.run_with_report_using(&["run", "vector_example::small", "--rounds", "20"], |cmd| {
            cmd.env("SCENE_RUNTIME_OPTIONS", "fault=corrupt_on_run:7");
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "round 7 was corrupted: {stdout}");
    let c = &json["cases"][0];
    assert_eq!(c["status"], "failed", "{c}");
    assert_eq!(c["failure_stage"], "compare", "{c}");
    let msg = c["message"].as_str().unwrap();
    assert!(
        msg.starts_with("round 7 of 20: ") && msg.contains("`f`"),
        "the failure names the round and the tensor: {msg}"
    );
    assert!(stdout.contains("round 7 of 20"), "{stdout}");
}

#[test]
fn warmup_rounds_are_compared_too() {
    let env = TestEnv::new();
    let out = env
        .scene(&[
            "run",
            "vector_example::small",
            "--rounds",
            "3",
            "--warmup",
            "2",
        ])
        .env("SCENE_RUNTIME_OPTIONS", "fault=corrupt_on_run:2")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("warmup round 2 of 2: "), "{stdout}");
}

#[test]
fn one_round_is_an_ordinary_run() {
    let env = TestEnv::new();
    let (out, json) = env.run_with_report_using(&["run", "vector_example::small"], |cmd| {
        // A corruption after the second run cannot touch a one-run session.
        cmd.env("SCENE_RUNTIME_OPTIONS", "fault=corrupt_on_run:2");
    });
    assert_success(&out);
    assert!(json["cases"][0].get("rounds").is_none(), "{json}");
}

/// Cause 2 of issue 38 (stale outputs between rounds): an orchestration
/// that submits its task only on its first call. Before every later run
/// the outputs were left as the first run wrote them (only inputs were
/// uploaded again), so a run that did nothing passed every round. Each
/// round must start from the first round's state (outputs zeroed, inputs
/// uploaded), so every round after the first fails, each named.
#[test]
fn stale_outputs_a_run_that_does_nothing_after_the_first_fails_every_later_round() {
    let env = TestEnv::with_scenes(&[]);
    let scenes = env.scenes_dir.clone().unwrap();
    crate::crash::write_scene(
        &scenes,
        "first_call_only",
        "static int calls = 0; if (calls++ > 0) return 0;",
        "",
        crate::crash::GOOD_BODY,
    );
    // A sound orchestration beside it: every round passes.
    crate::crash::write_scene(&scenes, "every_call", "", "", crate::crash::GOOD_BODY);
    let (out, json) =
        env.run_with_report_using(&["run", "--rounds", "3", "--warmup", "2"], |cmd| {
            cmd.env_remove("SCENE_RUNTIME_OPTIONS");
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let lazy = common::report_case(&json, "first_call_only::odd");
    assert_eq!(lazy["status"], "failed", "{lazy}");
    assert_eq!(lazy["failure_stage"], "compare", "{lazy}");
    let msg = lazy["message"].as_str().unwrap();
    assert!(
        msg.starts_with("warmup round 2 of 2: ") && msg.contains("`f`"),
        "the first run that did nothing is named: {msg}"
    );
    assert!(
        msg.contains("also failed: round 1 of 3, round 2 of 3, round 3 of 3"),
        "every later round is named: {msg}"
    );
    assert_eq!(
        lazy["rounds"]["failed_warmup"],
        serde_json::json!([2]),
        "{lazy}"
    );
    assert_eq!(
        lazy["rounds"]["failed"],
        serde_json::json!([1, 2, 3]),
        "{lazy}"
    );
    let sound = common::report_case(&json, "every_call::odd");
    assert_eq!(sound["status"], "passed", "{sound}");
    assert!(sound["rounds"].get("failed").is_none(), "{sound}");

    // Without warmup: round 1 passes, rounds 2 and 3 fail.
    let (out, json) =
        env.run_with_report_using(&["run", "first_call_only", "--rounds", "3"], |cmd| {
            cmd.env_remove("SCENE_RUNTIME_OPTIONS");
        });
    assert_eq!(out.status.code(), Some(1), "{}", common::show(&out));
    let lazy = common::report_case(&json, "first_call_only::odd");
    let msg = lazy["message"].as_str().unwrap();
    assert!(msg.starts_with("round 2 of 3: "), "{msg}");
    assert!(msg.contains("also failed: round 3 of 3"), "{msg}");
    assert_eq!(
        lazy["rounds"]["failed"],
        serde_json::json!([2, 3]),
        "{lazy}"
    );
}
