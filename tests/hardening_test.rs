//! "A scene cannot take the harness down, and nothing passes that did not
//! run": the real `scene` binary on empty selections, malformed scenes,
//! out-of-range values and unusable paths.

mod common;

use std::process::Output;

use common::{TestEnv, copy_scene, read_report};

fn text(out: &Output) -> String {
    format!(
        "{:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

// ---------------------------------------------------------------------------
// No false greens.

/// A filter that matches nothing fails `run`, `compile` and `precompile`
/// with exit 4 by default; `--no-tests=warn|pass` (or `SCENE_NO_TESTS`)
/// allows it, and the flag wins over the variable.
#[test]
fn an_empty_selection_fails_by_default() {
    let env = TestEnv::new();
    let bundle = env.dir.path().join("bundle");
    let bundle = bundle.to_str().unwrap();
    for cmd in [
        vec!["run", "no_such_scene"],
        vec!["compile", "no_such_scene"],
        vec!["precompile", "no_such_scene", "--out", bundle],
    ] {
        let out = env.scene(&cmd).output().unwrap();
        assert_eq!(out.status.code(), Some(4), "{cmd:?}: {}", text(&out));
        assert!(
            stderr(&out).contains("no cases selected on a2a3sim (filter: no_such_scene"),
            "{cmd:?}: {}",
            text(&out)
        );

        let mut warn = cmd.clone();
        warn.push("--no-tests=warn");
        let out = env.scene(&warn).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{warn:?}: {}", text(&out));
        assert!(
            stderr(&out).contains("warning: no cases selected"),
            "{}",
            text(&out)
        );

        let mut pass = cmd.clone();
        pass.extend(["--no-tests", "pass"]);
        let out = env.scene(&pass).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{pass:?}: {}", text(&out));
        assert!(
            !stderr(&out).contains("no cases selected"),
            "{}",
            text(&out)
        );

        let out = env
            .scene(&cmd)
            .env("SCENE_NO_TESTS", "pass")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{cmd:?}: {}", text(&out));

        let mut fail = cmd.clone();
        fail.push("--no-tests=fail");
        let out = env
            .scene(&fail)
            .env("SCENE_NO_TESTS", "pass")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(4), "flag must win: {}", text(&out));
    }
    let out = env
        .scene(&["run", "no_such_scene"])
        .env("SCENE_NO_TESTS", "sometimes")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(stderr(&out).contains("SCENE_NO_TESTS"), "{}", text(&out));
}

/// A platform that no scene supports selects nothing: exit 4, not green.
#[test]
fn a_platform_no_scene_supports_fails() {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, "vector_example", "vec_a2");
    let toml = dir.join("scene.toml");
    let t = std::fs::read_to_string(&toml).unwrap();
    assert!(t.contains("platforms = [\"a2a3sim\", \"a5sim\"]"), "{t}");
    std::fs::write(
        &toml,
        t.replace(
            "platforms = [\"a2a3sim\", \"a5sim\"]",
            "platforms = [\"a2a3sim\"]",
        ),
    )
    .unwrap();
    let out = env.scene(&["run", "--platform", "a5sim"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(
        stderr(&out).contains("no cases selected on a5sim"),
        "{}",
        text(&out)
    );
    // `list` just prints nothing.
    let out = env
        .scene(&["list", "--platform", "a5sim"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(out.stdout.is_empty(), "{}", text(&out));
}

/// A malformed scene beside good ones is a failed entry of the JSON report
/// and the JUnit file, with its message; entries and totals agree.
#[test]
fn a_malformed_scene_is_a_failed_report_entry() {
    let env = TestEnv::with_scenes(&[]);
    let bad = copy_scene(&env, "vector_example", "vector_bad");
    let toml = bad.join("scene.toml");
    let t = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(&toml, t.replace("func_id = 2", "func_id = 1")).unwrap();
    copy_scene(&env, "vector_example", "vector_ok");
    let json = env.dir.path().join("report.json");
    let junit = env.dir.path().join("junit.xml");

    let out = env
        .scene(&[
            "run",
            "--report-json",
            json.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FAIL vector_bad::load"), "{}", text(&out));
    assert_eq!(
        stdout.lines().last(),
        Some("2 passed, 1 failed"),
        "{stdout}"
    );

    let report = read_report(&json);
    let cases = report["cases"].as_array().unwrap();
    // vector_ok's two cases + one entry for the scene that did not load.
    assert_eq!(cases.len(), 3, "{report:#}");
    let bad = cases
        .iter()
        .find(|c| c["name"] == "vector_bad::load")
        .unwrap_or_else(|| panic!("no entry for the malformed scene: {report:#}"));
    assert_eq!(bad["status"], "failed");
    assert_eq!(bad["failure_stage"], "load");
    let message = bad["message"].as_str().unwrap();
    assert!(message.contains("incores[2].func_id"), "{message}");
    let totals = &report["totals"];
    let failed = cases.iter().filter(|c| c["status"] == "failed").count();
    let passed = cases.iter().filter(|c| c["status"] == "passed").count();
    assert_eq!(totals["failed"].as_u64(), Some(failed as u64), "{report:#}");
    assert_eq!(totals["passed"].as_u64(), Some(passed as u64), "{report:#}");
    assert_eq!((passed, failed), (2, 1));

    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"3\" failures=\"1\""), "{xml}");
    assert!(
        xml.contains("<testcase classname=\"vector_bad\" name=\"load\""),
        "{xml}"
    );
    assert!(xml.contains("incores[2].func_id"), "{xml}");
}

// ---------------------------------------------------------------------------
// Validation at load and before allocating.

/// A case whose tensors would need more memory than the bound fails alone,
/// before anything is allocated, with the bytes and the bound; by default
/// the bound is a fraction of physical memory, `--max-case-bytes` /
/// `SCENE_MAX_CASE_BYTES` change it (0 = none) and the flag wins.
#[test]
fn a_case_above_max_case_bytes_fails_before_allocating() {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, "vector_example", "vec_huge");
    let toml = dir.join("scene.toml");
    let mut t = std::fs::read_to_string(&toml).unwrap();
    // 3 f32 tensors of 2^50 elements: 12 PiB, more than any machine has.
    t.push_str("\n[[cases]]\nname = \"huge\"\nparams = { N = 1125899906842624 }\n");
    std::fs::write(&toml, t).unwrap();
    let json = env.dir.path().join("report.json");

    let out = env
        .scene(&["run", "--report-json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FAIL vec_huge::huge"), "{}", text(&out));
    assert!(
        stdout.contains("the case's tensors need 13510798882111488 bytes, more than the bound of"),
        "{}",
        text(&out)
    );
    assert!(stdout.contains("PASS vec_huge::small"), "{}", text(&out));
    let report = read_report(&json);
    let huge = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "vec_huge::huge")
        .unwrap()
        .clone();
    assert_eq!(huge["failure_stage"], "fixtures", "{huge:#}");

    // 16384 f32 * 3 = 196608 bytes: above a 1K bound, given either way.
    let needle = "need 196608 bytes, more than the bound of 1024 bytes";
    let out = env
        .scene(&["run", "vec_huge::small", "--max-case-bytes", "1K"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(needle),
        "{}",
        text(&out)
    );
    let out = env
        .scene(&["run", "vec_huge::small"])
        .env("SCENE_MAX_CASE_BYTES", "1K")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(needle),
        "{}",
        text(&out)
    );
    let out = env
        .scene(&["run", "vec_huge::small", "--max-case-bytes", "0"])
        .env("SCENE_MAX_CASE_BYTES", "1K")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "the flag wins: {}", text(&out));
    let out = env
        .scene(&["run", "vec_huge::small", "--max-case-bytes", "lots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}
