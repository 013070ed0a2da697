//! The card lock covers device work only, for every case of the suite.
//!
//! A test binary of its own: the 5 ms bound is about the harness, not about
//! CPU contention from other tests' processes, so nothing else of this
//! package runs beside it (cargo runs test binaries one after another).

mod common;

use common::{TestEnv, read_report};

fn cases(report: &serde_json::Value) -> Vec<serde_json::Value> {
    report["cases"].as_array().unwrap().clone()
}

/// For every case of the suite, the card is held only for device work.
#[test]
fn lock_covers_only_device_work_for_every_case() {
    let env = TestEnv::new();
    let report = env.dir.path().join("report.json");
    let out = env
        .scene(&["run", "--report-json", report.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let json = read_report(&report);
    let cases = cases(&json);
    assert!(
        cases.len() >= 18,
        "expected the whole suite, got {}",
        cases.len()
    );
    for c in &cases {
        let p = &c["phases"];
        let held = p["lock_held_s"].as_f64().unwrap();
        let device = p["device_s"].as_f64().unwrap();
        assert!(device > 0.0, "{}: no device time", c["name"]);
        assert!(
            held <= device + 0.005,
            "{}: card held {held:.4} s for {device:.4} s of device work",
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
    }
    let totals = &json["totals"];
    assert!(totals["card_seconds_held"].as_f64().unwrap() > 0.0);
    assert!(totals["device_seconds"].as_f64().unwrap() > 0.0);
    assert!(totals["held_to_device_ratio"].as_f64().unwrap() >= 1.0);
    assert!(totals["queueing_seconds"].as_f64().is_some());
}
