//! "A scene cannot take the harness down, and nothing passes that did not
//! run": the real `scene` binary on empty selections, malformed scenes,
//! out-of-range values and unusable paths.

use crate::common;

use std::process::Output;

use common::{TestEnv, copy_scene, show};

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
        assert_eq!(out.status.code(), Some(4), "{cmd:?}: {}", show(&out));
        assert!(
            stderr(&out).contains("no cases selected on a2a3sim (filter: no_such_scene"),
            "{cmd:?}: {}",
            show(&out)
        );

        let mut warn = cmd.clone();
        warn.push("--no-tests=warn");
        let out = env.scene(&warn).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{warn:?}: {}", show(&out));
        assert!(
            stderr(&out).contains("warning: no cases selected"),
            "{}",
            show(&out)
        );

        let mut pass = cmd.clone();
        pass.extend(["--no-tests", "pass"]);
        let out = env.scene(&pass).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{pass:?}: {}", show(&out));
        assert!(
            !stderr(&out).contains("no cases selected"),
            "{}",
            show(&out)
        );

        let out = env
            .scene(&cmd)
            .env("SCENE_NO_TESTS", "pass")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{cmd:?}: {}", show(&out));

        let mut fail = cmd.clone();
        fail.push("--no-tests=fail");
        let out = env
            .scene(&fail)
            .env("SCENE_NO_TESTS", "pass")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(4), "flag must win: {}", show(&out));
    }
    let out = env
        .scene(&["run", "no_such_scene"])
        .env("SCENE_NO_TESTS", "sometimes")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(stderr(&out).contains("SCENE_NO_TESTS"), "{}", show(&out));
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
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    assert!(
        stderr(&out).contains("no cases selected on a5sim"),
        "{}",
        show(&out)
    );
    // `list` just prints nothing.
    let out = env
        .scene(&["list", "--platform", "a5sim"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(out.stdout.is_empty(), "{}", show(&out));
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
    let junit = env.dir.path().join("junit.xml");

    let (out, report) = env.run_with_report(&["run", "--junit", junit.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FAIL vector_bad::load"), "{}", show(&out));
    assert_eq!(
        common::summary_line(&stdout),
        Some("2 passed, 1 failed"),
        "{stdout}"
    );

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
    // A scene that did not load is an `<error>` (it never ran), as
    // nextest reports a test binary that did not build.
    assert!(xml.contains("tests=\"3\""), "{xml}");
    assert!(xml.contains("errors=\"1\""), "{xml}");
    assert!(xml.contains("failures=\"0\""), "{xml}");
    assert!(
        xml.contains("<testcase name=\"load\" classname=\"vector_bad\""),
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
    let (out, report) = env.run_with_report(&["run"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FAIL vec_huge::huge"), "{}", show(&out));
    assert!(
        stdout.contains("the case's tensors need 13510798882111488 bytes, more than the bound of"),
        "{}",
        show(&out)
    );
    assert!(stdout.contains("PASS vec_huge::small"), "{}", show(&out));
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
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(needle),
        "{}",
        show(&out)
    );
    let out = env
        .scene(&["run", "vec_huge::small"])
        .env("SCENE_MAX_CASE_BYTES", "1K")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(needle),
        "{}",
        show(&out)
    );
    let out = env
        .scene(&["run", "vec_huge::small", "--max-case-bytes", "0"])
        .env("SCENE_MAX_CASE_BYTES", "1K")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "the flag wins: {}", show(&out));
    let out = env
        .scene(&["run", "vec_huge::small", "--max-case-bytes", "lots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
}

// ---------------------------------------------------------------------------
// Command-line values.

fn assert_usage_error(out: &Output, needles: &[&str]) {
    assert_eq!(out.status.code(), Some(2), "{}", show(out));
    let err = stderr(out);
    for n in needles {
        assert!(err.contains(n), "missing {n:?}: {}", show(out));
    }
    assert!(!err.contains("panicked"), "{}", show(out));
    assert!(out.stdout.is_empty(), "work started: {}", show(out));
}

/// Every duration flag refuses negative, NaN, infinite and huge values
/// with exit 2 and a message (`--case-timeout 1e20` used to panic).
#[test]
fn out_of_range_durations_are_usage_errors() {
    let env = TestEnv::new();
    for flag in ["--case-timeout", "--lock-timeout"] {
        for value in ["1e20", "-1", "nan", "inf", "1e400"] {
            let arg = format!("{flag}={value}");
            let out = env.scene(&["run", &arg]).output().unwrap();
            assert_usage_error(&out, &[flag, value]);
        }
    }
    let out = env
        .scene(&["run", "--case-timeout", "1e20"])
        .output()
        .unwrap();
    assert_usage_error(&out, &["out of range"]);
    for value in ["1e300", "-2", "nan", "inf"] {
        let arg = format!("--max-age={value}");
        let out = env.scene(&["cache", "prune", &arg]).output().unwrap();
        assert_usage_error(&out, &["--max-age", value]);
    }
}

/// Output paths are checked before any work: exit 2 naming the flag and
/// the path.
#[test]
fn unusable_output_paths_fail_before_any_work() {
    let env = TestEnv::new();
    let file = env.dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let under_file = file.join("report.json");
    let missing = env.dir.path().join("missing/report.json");
    let dir = env.dir.path().to_str().unwrap();
    let cases = [
        (
            "--report-json",
            under_file.to_str().unwrap(),
            "is not a directory",
        ),
        ("--report-json", missing.to_str().unwrap(), "does not exist"),
        ("--report-json", dir, "is a directory"),
        ("--junit", dir, "is a directory"),
        (
            "--junit",
            under_file.to_str().unwrap(),
            "is not a directory",
        ),
        ("--dump", file.to_str().unwrap(), "is not a directory"),
        ("--dump", under_file.to_str().unwrap(), "is not a directory"),
    ];
    for (flag, path, why) in cases {
        let out = env
            .scene(&["run", "vector_example", flag, path])
            .output()
            .unwrap();
        assert_usage_error(&out, &[flag, path, why]);
    }
    let out = env
        .scene(&[
            "precompile",
            "vector_example",
            "--out",
            under_file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_usage_error(&out, &["--out", "is not a directory"]);
    let out = env
        .scene(&["run", "vector_example", "--report-json="])
        .output()
        .unwrap();
    assert_usage_error(&out, &["--report-json"]);
}

/// Directories the harness creates (cache, failure dumps, card locks) under
/// a file: "is not a directory", never a raw `os error`.
#[test]
fn directories_under_a_file_are_worded() {
    let env = TestEnv::new();
    let file = env.dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let under = file.join("sub");
    for (cmd, var, value) in [
        (&["cache", "stats"][..], "SCENE_CACHE_DIR", &file),
        (&["cache", "stats"][..], "SCENE_CACHE_DIR", &under),
        (&["run", "vector_example"][..], "SCENE_LOCK_DIR", &file),
        (&["run", "vector_example"][..], "SCENE_LOCK_DIR", &under),
        (
            &["run", "vector_example"][..],
            "SCENE_FAILURE_DUMP_DIR",
            &under,
        ),
    ] {
        let out = env.scene(cmd).env(var, value).output().unwrap();
        assert_usage_error(&out, &[var, "is not a directory"]);
        assert!(!stderr(&out).contains("os error"), "{}", show(&out));
    }
    // A cache dir that cannot be used is not fatal for a run: one worded
    // warning, then no cache.
    let out = env
        .scene(&["compile", "vector_example"])
        .env("SCENE_CACHE_DIR", &under)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let err = stderr(&out);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{}", show(&out));
    assert!(
        warnings[0].contains(&format!("{} is not a directory", file.display())),
        "{}",
        show(&out)
    );
    assert!(!err.contains("os error"), "{}", show(&out));
}

/// Every variable set to the empty string means unset: in particular an
/// empty `SCENE_FAILURE_DUMP_DIR` dumps to the default place, never into
/// the current directory.
#[test]
fn empty_variables_mean_unset() {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, "vector_example", "vec_empty_vars");
    let add = dir.join("kernels/add.c");
    let src = std::fs::read_to_string(&add).unwrap();
    std::fs::write(&add, src.replace("a[i] + b[i]", "a[i] - b[i]")).unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let mut cmd = env.scene(&["run", "vec_empty_vars::small"]);
    cmd.current_dir(cwd.path());
    for var in [
        "SCENE_PLATFORM",
        "SCENE_PLATFORMS_FILE",
        "SCENE_DEVICES",
        "TASK_DEVICE",
        "SCENE_CC",
        "SCENE_LD",
        "SCENE_RUNTIME_LIB",
        "SCENE_RUNTIME_OPTIONS",
        "SCENE_COMPILE_WORKERS",
        "SCENE_GOLDEN_THREADS",
        "SCENE_FAILURE_DUMP_DIR",
        "SCENE_NO_TESTS",
        "SCENE_MAX_CASE_BYTES",
    ] {
        cmd.env(var, "");
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("FAIL vec_empty_vars::small"),
        "{}",
        show(&out)
    );
    let dump = stdout
        .lines()
        .find_map(|l| l.split("dump written to ").nth(1))
        .unwrap_or_else(|| panic!("no dump line: {}", show(&out)))
        .trim()
        .to_string();
    let dump = std::path::PathBuf::from(dump);
    // The default: <workspace>/target/scene-dumps/<scene>/<case>.
    let scene_dumps = dump.parent().unwrap().to_path_buf();
    let cleanup = scopeguard(scene_dumps.clone());
    assert!(
        dump.ends_with("target/scene-dumps/vec_empty_vars/small"),
        "{}",
        dump.display()
    );
    assert!(dump.is_absolute() && dump.is_dir(), "{}", dump.display());
    let in_cwd: Vec<_> = std::fs::read_dir(cwd.path()).unwrap().collect();
    assert!(
        in_cwd.is_empty(),
        "wrote into the current directory: {in_cwd:?}"
    );
    drop(cleanup);
}

/// Removes a directory when dropped (the default dump place is the
/// workspace's target dir, not a temp dir).
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scopeguard(path: std::path::PathBuf) -> RemoveOnDrop {
    RemoveOnDrop(path)
}

/// A flag wins over its variable, even over a variable that would be an
/// error on its own.
#[test]
fn flags_win_over_their_variables() {
    let env = TestEnv::new();
    let scenes = common::package_scenes_dir();
    let file = env.dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = env
        .scene(&[
            "--scenes-dir",
            scenes.to_str().unwrap(),
            "list",
            "vector_example",
        ])
        .env("SCENE_SCENES_DIR", env.dir.path().join("nowhere"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("vector_example::small"),
        "{}",
        show(&out)
    );
    let cache = env.dir.path().join("flag-cache");
    let out = env
        .scene(&["--cache-dir", cache.to_str().unwrap(), "cache", "stats"])
        .env("SCENE_CACHE_DIR", &file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let out = env
        .scene(&["run", "nothing", "--no-tests=pass", "--golden-threads", "2"])
        .env("SCENE_GOLDEN_THREADS", "5000")
        .env("SCENE_NO_TESTS", "fail")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

/// `list`, `compile`, `precompile` and `cache` never touch a card, so
/// malformed card variables do not break them; `run` reports them.
#[test]
fn commands_without_cards_ignore_malformed_card_variables() {
    let env = TestEnv::new();
    let bundle = env.dir.path().join("bundle");
    let bundle = bundle.to_str().unwrap();
    let bad = |args: &[&str]| {
        let mut c = env.scene(args);
        c.env("TASK_DEVICE", "garbage")
            .env("SCENE_DEVICES", "9-1")
            .env(
                "SCENE_LOCK_DIR",
                env.dir.path().join("missing-file-is-fine"),
            );
        c.output().unwrap()
    };
    for args in [
        &["list"][..],
        &["compile", "vector_example::small"][..],
        &["precompile", "vector_example::small", "--out", bundle][..],
        &["cache", "stats"][..],
    ] {
        let out = bad(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", show(&out));
    }
    let out = bad(&["run", "vector_example::small"]);
    assert_usage_error(&out, &["9-1"]);
}

/// `--golden-threads` and `SCENE_GOLDEN_THREADS` have an upper bound.
#[test]
fn golden_threads_are_bounded() {
    let env = TestEnv::new();
    let out = env
        .scene(&["run", "--golden-threads", "1025"])
        .output()
        .unwrap();
    assert_usage_error(&out, &["--golden-threads", "at most 1024"]);
    let out = env
        .scene(&["run"])
        .env("SCENE_GOLDEN_THREADS", "100000")
        .output()
        .unwrap();
    assert_usage_error(&out, &["SCENE_GOLDEN_THREADS", "at most 1024"]);
    let out = env
        .scene(&[
            "run",
            "nothing",
            "--no-tests=pass",
            "--golden-threads",
            "1024",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

/// A runtime library that does not load says why (the `dlerror` text), not
/// only "dlopen failed".
#[test]
fn a_failed_dlopen_says_why() {
    let env = TestEnv::new();
    let lib = env.dir.path().join("not-a-library.so");
    std::fs::write(&lib, vec![b'x'; 256]).unwrap();
    let out = env
        .scene(&[
            "run",
            "vector_example::small",
            "--runtime",
            lib.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("cannot load the device runtime"),
        "{}",
        show(&out)
    );
    assert!(stdout.contains("invalid ELF header"), "{}", show(&out));
}
