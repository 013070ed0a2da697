//! Device memory as a scene and platform setting (issue 30 item 1),
//! through the real `scene` binary: the package scene `device_memory`,
//! whose big case needs more than the simulator's default 256 MiB, passes
//! on both simulators with its `device_memory`; without it (or with too
//! little, from the scene, the platform entry or `SCENE_RUNTIME_OPTIONS`)
//! that case fails before its fixtures are built, takes no card, names
//! the setting in force and the line to change, and the small case still
//! runs.

use std::path::Path;

use crate::common;

use common::TestEnv;

const BIG: &str = "over_256_mib";

/// The package scene copied as `name`, its `device_memory` line replaced
/// by `line` (`""`: removed).
fn scene_with(env: &TestEnv, name: &str, line: &str) -> std::path::PathBuf {
    let dir = common::copy_scene(env, "device_memory", name);
    let toml = dir.join("scene.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let from = "device_memory = \"BIG + 64 * 1048576\"";
    assert!(text.contains(from), "the package scene sets {from}");
    std::fs::write(&toml, text.replace(from, line)).unwrap();
    toml
}

/// Runs `scene run <filter>` with `envs`; the report.
fn run(env: &TestEnv, args: &[&str], envs: &[(&str, &Path)]) -> serde_json::Value {
    let report = env.report_path();
    let mut cmd = env.scene(&["run"]);
    cmd.args(args).env_remove("SCENE_RUNTIME_OPTIONS");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let (out, report) = common::output_with_report(&mut cmd, &report);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "a failed case is exit 1, not a setup error:\n{}",
        common::show(&out)
    );
    report
}

/// The case failed fast: the message has every part of `says`, and it
/// took no card, opened no device and built no fixture or golden.
fn assert_failed_fast(report: &serde_json::Value, case: &str, says: &[&str]) {
    let c = common::report_case(report, case);
    assert_eq!(c["status"], "failed", "{c:#}");
    assert_eq!(c["failure_stage"], "fixtures", "{c:#}");
    let message = c["message"].as_str().unwrap_or_default();
    for part in says {
        assert!(message.contains(part), "`{part}` missing from:\n{message}");
    }
    assert_eq!(c["devices"], serde_json::json!([]), "no card: {c:#}");
    assert!(c["lock"].is_null(), "no card lock: {c:#}");
    assert_eq!(c["runtime_opens"], 0, "{c:#}");
    assert_eq!(c["phases"]["fixtures_s"], 0.0, "no fixture built: {c:#}");
    assert_eq!(c["phases"]["golden_s"], 0.0, "no golden: {c:#}");
    assert_eq!(c["golden_cached"], false, "{c:#}");
}

#[test]
fn the_scene_sets_device_memory_per_case_and_passes_on_both_simulators() {
    let env = TestEnv::new();
    for platform in ["a2a3sim", "a5sim"] {
        let report = run(&env, &["device_memory", "--platform", platform], &[]);
        assert_eq!(report["totals"]["passed"], 2, "{platform}: {report:#}");
        // One card, one worker: each case's arena differs (65 MiB, 324
        // MiB), so the worker reopened its device for each.
        for case in ["device_memory::small", &format!("device_memory::{BIG}")] {
            let c = common::report_case(&report, case);
            assert_eq!(c["runtime_opens"], 1, "{platform} {case}: {c:#}");
        }
    }
}

#[test]
fn without_device_memory_the_big_case_fails_fast_and_the_small_one_runs() {
    let env = TestEnv::with_scenes(&[]);
    let toml = scene_with(&env, "no_devmem", "");
    let report = run(&env, &["no_devmem"], &[]);
    assert_eq!(report["totals"]["passed"], 1, "{report:#}");
    assert_eq!(
        common::report_case(&report, "no_devmem::small")["status"],
        "passed"
    );
    assert_failed_fast(
        &report,
        &format!("no_devmem::{BIG}"),
        &[
            "not run: the case's tensors need at least 272637952 bytes (~261 MiB) of device memory",
            "more than the 256 MiB in force",
            "the simulator's default: neither the scene nor platform `a2a3sim` sets `device_memory`",
            &format!(
                "set `device_memory = \"512 MiB\"` in {}",
                toml.canonicalize().unwrap().display()
            ),
        ],
    );
}

#[test]
fn too_little_from_the_scene_the_platform_or_the_runtime_option_is_named() {
    let env = TestEnv::with_scenes(&[]);
    let only_big = format!("::{BIG}");

    // The scene's own setting, too small.
    scene_with(&env, "small_devmem", "device_memory = \"256 MiB\"");
    let filter = format!("small_devmem{only_big}");
    let report = run(&env, &[filter.as_str()], &[]);
    assert_failed_fast(
        &report,
        &filter,
        &[
            "more than the 256 MiB in force (`device_memory = \"256 MiB\"` in ",
            "change it to `device_memory = \"512 MiB\"`",
        ],
    );

    // A platform entry's default, for a scene that sets none.
    scene_with(&env, "platform_devmem", "");
    let table = env.dir.path().join("platforms.toml");
    std::fs::write(
        &table,
        "[platforms.small-device]\nextends = \"a2a3sim\"\ndevice_memory = \"128 MiB\"\n",
    )
    .unwrap();
    let filter = format!("platform_devmem{only_big}");
    let report = run(
        &env,
        &[filter.as_str(), "--platform", "small-device"],
        &[("SCENE_PLATFORMS_FILE", &table)],
    );
    assert_failed_fast(
        &report,
        &filter,
        &[
            "more than the 128 MiB in force (the `device_memory` of platform `small-device`",
            "set `device_memory = \"512 MiB\"`",
        ],
    );

    // SCENE_RUNTIME_OPTIONS wins over the scene's (enough) setting.
    scene_with(&env, "option_devmem", "device_memory = \"1 GiB\"");
    let filter = format!("option_devmem{only_big}");
    let report = run(
        &env,
        &[filter.as_str()],
        &[("SCENE_RUNTIME_OPTIONS", Path::new("arena_mb=200"))],
    );
    assert_failed_fast(
        &report,
        &filter,
        &[
            "more than the 200 MiB in force (`arena_mb` in SCENE_RUNTIME_OPTIONS, which wins",
            "SCENE_RUNTIME_OPTIONS=arena_mb=512",
        ],
    );
}

/// Two passes: pass 1 (no card) built the slot with enough memory; pass 2
/// runs with an explicit smaller `arena_mb` and checks again before any
/// card is taken (a bundle slot's CPU stages are not rerun).
#[test]
fn pass_two_checks_device_memory_again_before_taking_a_card() {
    let env = TestEnv::with_scenes(&[]);
    scene_with(&env, "two_pass", "device_memory = \"1 GiB\"");
    let bundle = env.dir.path().join("bundle");
    let filter = format!("two_pass::{BIG}");
    let out = env
        .scene(&["precompile", filter.as_str(), "--out"])
        .arg(&bundle)
        .env_remove("SCENE_RUNTIME_OPTIONS")
        .output()
        .unwrap();
    common::assert_success(&out);
    let from = bundle.to_str().unwrap();
    let report = run(
        &env,
        &["--from", from, filter.as_str()],
        &[("SCENE_RUNTIME_OPTIONS", Path::new("arena_mb=256"))],
    );
    assert_failed_fast(
        &report,
        &filter,
        &["more than the 256 MiB in force (`arena_mb` in SCENE_RUNTIME_OPTIONS"],
    );
}
