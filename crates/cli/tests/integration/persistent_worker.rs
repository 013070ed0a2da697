//! One device worker per card, kept for the run (issue 28): the runtime is
//! opened once per card, not once per case; a crash costs one case and
//! one reopen; what a case leaves on the device cannot reach the next one.

use crate::common;
use crate::crash::{GOOD_BODY, ORCH, SCENE, bad_scenes, write_scene};

use common::{TestEnv, report_case, show};

fn cases(report: &serde_json::Value) -> &Vec<serde_json::Value> {
    report["cases"].as_array().expect("cases")
}

fn opens(case: &serde_json::Value) -> u64 {
    case["runtime_opens"].as_u64().expect("runtime_opens")
}

/// Every crash of the crash suite, each followed by a well-behaved case,
/// on one card in one run: every crash fails its case with the same
/// words as with a worker per case, the case after it passes on a new
/// worker, and the runtime is opened once plus once per crash.
#[test]
fn crashes_on_one_card_cost_one_case_and_one_reopen_each() {
    let env = TestEnv::with_scenes(&[]);
    let scenes = env.scenes_dir.clone().expect("scenes dir");
    let bad = bad_scenes();
    for b in &bad {
        write_scene(&scenes, b.name, b.prologue, b.before, b.body);
        // Sorts right after its crash: the next case on the card.
        write_scene(&scenes, &format!("{}_then_good", b.name), "", "", GOOD_BODY);
    }
    let (out, r) = env.run_with_report(&["run", "--device", "0"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let mut crashes = 0;
    for b in &bad {
        let c = report_case(&r, &format!("{}::odd", b.name));
        assert_eq!(c["status"], "failed", "{}: {c}", b.name);
        let msg = c["message"].as_str().unwrap_or_default();
        for e in &b.expect {
            assert!(msg.contains(e), "{}: `{e}` not in:\n{msg}", b.name);
        }
        // A worker that died (a signal, exit()) versus a run the runtime
        // failed (a damaged canary): only the first costs a reopen.
        let died = msg.contains("the device worker");
        crashes += usize::from(died);
        let next = report_case(&r, &format!("{}_then_good::odd", b.name));
        assert_eq!(next["status"], "passed", "after {}: {next}", b.name);
        assert_eq!(
            opens(next),
            u64::from(died),
            "after {}: the next case opens the card again exactly when the worker died: {next}",
            b.name
        );
    }
    assert!(
        crashes >= 7,
        "{crashes} of {} bad cases killed the worker",
        bad.len()
    );
    assert_eq!(
        r["totals"]["runtime_opens"].as_u64(),
        Some(1 + crashes as u64),
        "one open for the card plus one per crash:\n{}",
        show(&out)
    );
    assert_eq!(r["totals"]["passed"], bad.len());
}

/// An orchestration with a global: it counts its runs and fails the case
/// with `N = 100000` after counting. That failed session leaves its
/// callable registered (so, without a reset, its library and the global)
/// and its 1.2 MB of tensors allocated in a 2 MiB arena. The next case
/// reuses the same orchestration bytes on the same open card: it passes
/// only if it sees a fresh global (`runs == 1`) and the memory back.
#[test]
fn what_a_failed_case_leaves_on_the_device_does_not_reach_the_next() {
    let env = TestEnv::with_scenes(&[]);
    let scenes = env.scenes_dir.clone().expect("scenes dir");
    write_scene(&scenes, "leaky", "", "", GOOD_BODY);
    let prologue = "static int runs; runs++; \
        if (runs != 1) { scene_orch_fail(ctx, \"state of an earlier case leaked: a second run of this library\"); return SCENE_RT_E_ORCH; } \
        if (args[2].size == 400000) { scene_orch_fail(ctx, \"fails on purpose after counting\"); return SCENE_RT_E_ORCH; }";
    std::fs::write(
        scenes.join("leaky").join("orchestration.c"),
        ORCH.replace("PROLOGUE", prologue),
    )
    .expect("orchestration");
    let toml = SCENE.replace("NAME", "leaky").replace(
        "[[cases]]\nname = \"odd\"\nparams = { N = 12347 }",
        "[[cases]]\nname = \"fails_first\"\nparams = { N = 100000 }\n\n\
         [[cases]]\nname = \"then_passes\"\nparams = { N = 100001 }",
    );
    assert!(toml.contains("then_passes"), "{toml}");
    std::fs::write(scenes.join("leaky").join("scene.toml"), toml).expect("scene");
    // The small arena catches leaked buffers (the second case's would not
    // fit); the default one lets the second case reach its orchestration,
    // which catches a leaked global.
    for options in ["arena_mb=2", ""] {
        let (out, r) = env.run_with_report_using(&["run", "leaky", "--device", "0"], |c| {
            c.env("SCENE_RUNTIME_OPTIONS", options);
        });
        let first = report_case(&r, "leaky::fails_first");
        assert_eq!(first["status"], "failed", "{options}: {}", show(&out));
        let msg = first["message"].as_str().unwrap_or_default();
        assert!(msg.contains("fails on purpose"), "{options}: {msg}");
        let second = report_case(&r, "leaky::then_passes");
        assert_eq!(second["status"], "passed", "{options}: {}", show(&out));
        // The same worker, its card open since the first case: nothing
        // was reopened to get the clean state.
        assert_eq!(r["totals"]["runtime_opens"], 1, "{options}: {}", show(&out));
    }
}

/// `open_ms=N` makes the simulator's open take N ms, as a real runtime's
/// start-up does: on one card the whole run pays it once, in the first
/// case's `runtime_open_s`, outside every case's `device_s`; with two
/// cards, once per card used. In-process, every case opens.
#[test]
fn a_slow_open_is_paid_once_per_card() {
    let env = TestEnv::new();
    let slow = |c: &mut std::process::Command| {
        c.env("SCENE_RUNTIME_OPTIONS", "open_ms=400");
    };
    let (out, r) = env.run_with_report_using(&["run", "rmsnorm", "--device", "0"], slow);
    assert!(out.status.success(), "{}", show(&out));
    let n = cases(&r).len();
    assert!(n >= 4, "{n} cases");
    assert_eq!(r["totals"]["runtime_opens"], 1, "{}", show(&out));
    let openers: Vec<_> = cases(&r).iter().filter(|c| opens(c) > 0).collect();
    assert_eq!(openers.len(), 1, "{:#}", r["cases"]);
    let open_s = openers[0]["phases"]["runtime_open_s"]
        .as_f64()
        .expect("open_s");
    assert!(open_s >= 0.4, "the open took {open_s} s with open_ms=400");
    // The open is card time (the card was held for it) but not device work.
    let held = openers[0]["phases"]["lock_held_s"].as_f64().expect("held");
    assert!(held >= open_s, "held {held} s < open {open_s} s");
    for c in cases(&r) {
        let device = c["phases"]["device_s"].as_f64().expect("device_s");
        assert!(device < 0.4, "device_s {device} counts the open: {c}");
    }
    let total = r["totals"]["runtime_open_s"].as_f64().expect("total");
    assert!(total >= 0.4, "{total}");

    let (out, r) = env.run_with_report_using(&["run", "rmsnorm", "--device", "0-1"], slow);
    assert!(out.status.success(), "{}", show(&out));
    let mut used: Vec<u64> = cases(&r)
        .iter()
        .flat_map(|c| c["devices"].as_array().cloned().unwrap_or_default())
        .filter_map(|d| d.as_u64())
        .collect();
    used.sort_unstable();
    used.dedup();
    assert_eq!(
        r["totals"]["runtime_opens"].as_u64(),
        Some(used.len() as u64),
        "one open per card used ({used:?})"
    );

    let (out, r) = env.run_with_report(&["run", "rmsnorm", "--device", "0", "--in-process"]);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(
        r["totals"]["runtime_opens"].as_u64(),
        Some(cases(&r).len() as u64),
        "in-process, every case opens"
    );
}
