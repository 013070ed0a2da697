//! The card lock covers device work only, for every case of the suite, in a
//! plain `scene run` and in pass 2 of a two-pass run (`scene run --from`).
//!
//! A test binary of its own with a single test: the 5 ms bound is about the
//! harness, not about CPU contention from other tests' processes, so nothing
//! else runs beside it (cargo runs test binaries one after another; the
//! nextest config gives this binary every thread).

use crate::common;

use common::{TestEnv, assert_success, copy_dir, package_scenes_dir, run_ok};
use serde_json::Value;

/// Checks every case of a report: device time recorded, card held at most
/// 5 ms longer than that and the runtime open the case paid, every phase present, a sane lock interval.
/// Returns the cases.
fn check_card_time(json: &Value) -> Vec<Value> {
    let cases = json["cases"].as_array().unwrap().clone();
    assert!(
        cases.len() >= 18,
        "expected the whole suite, got {}",
        cases.len()
    );
    let (mut held_sum, mut device_sum) = (0.0, 0.0);
    for c in &cases {
        assert_eq!(c["status"], "passed", "{c}");
        let p = &c["phases"];
        let held = p["lock_held_s"].as_f64().unwrap();
        let device = p["device_s"].as_f64().unwrap();
        // Card time but not device work: the first case on a card opens
        // the runtime (its worker keeps it open for the later ones).
        let open = p["runtime_open_s"].as_f64().unwrap();
        assert!(device > 0.0, "{}: no device time", c["name"]);
        assert!(
            held <= device + open + 0.005,
            "{}: card held {held:.4} s for {device:.4} s of device work and {open:.4} s of runtime open",
            c["name"]
        );
        for key in [
            "compile_s",
            "fixtures_s",
            "golden_s",
            "lock_wait_s",
            "compare_s",
        ] {
            assert!(
                p[key].as_f64().is_some(),
                "{}: missing phases.{key}",
                c["name"]
            );
        }
        let (a, r) = (
            c["lock"]["acquired_at"].as_f64().unwrap(),
            c["lock"]["released_at"].as_f64().unwrap(),
        );
        assert!(r >= a);
        held_sum += held;
        device_sum += device + open;
    }
    let n = cases.len() as f64;
    assert!(
        held_sum <= device_sum + 0.005 * n,
        "suite: card held {held_sum:.4} s for {device_sum:.4} s of device work"
    );
    let totals = &json["totals"];
    assert!(totals["card_seconds_held"].as_f64().unwrap() > 0.0);
    assert!(totals["device_seconds"].as_f64().unwrap() > 0.0);
    assert!(totals["held_to_device_ratio"].as_f64().unwrap() >= 1.0);
    assert!(totals["queueing_seconds"].as_f64().is_some());
    cases
}

#[test]
fn card_is_held_only_for_device_work_in_one_and_two_passes() {
    // The level-2 suite on its one card: level-3 groups would widen the
    // default pool to 8 cards and put up to 8 sessions on the machine's
    // cores at once (their card-seconds are checked in level3_test and
    // measured in BENCHMARKS.md).
    let env = TestEnv::with_scenes(&[]);
    let dir = env.scenes_dir.clone().unwrap();
    for entry in std::fs::read_dir(package_scenes_dir()).unwrap() {
        let src = entry.unwrap().path();
        let toml = std::fs::read_to_string(src.join("scene.toml")).unwrap_or_default();
        if !toml.contains("\nlevel = 3\n") {
            copy_dir(&src, &dir.join(src.file_name().unwrap()));
        }
    }

    // One pass: compile, fixtures and goldens all happen, outside the lock.
    let (out, report) = env.run_with_report(&["run"]);
    assert_success(&out);
    check_card_time(&report);

    // Two passes: pass 2 has nothing but device work and the comparison.
    let bundle = env.dir.path().join("bundle");
    run_ok(&mut env.scene(&["precompile", "--out", bundle.to_str().unwrap()]));
    let (out, report2) =
        env.run_with_report_using(&["run", "--from", bundle.to_str().unwrap()], |cmd| {
            cmd.env("SCENE_CC", "false").env("SCENE_LD", "false");
        });
    assert_success(&out);
    for c in check_card_time(&report2) {
        for key in ["compile_s", "golden_s", "fixtures_s"] {
            assert_eq!(c["phases"][key].as_f64(), Some(0.0), "{}: {key}", c["name"]);
        }
    }
}
