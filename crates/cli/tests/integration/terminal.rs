//! Terminal habits of the real `scene` binary: `--color` / `NO_COLOR`,
//! `-q` / `-v` on every subcommand, reports on stdout (`-`), report file
//! permissions, and a warm `scene compile` that prints one line.

use crate::common;

use std::os::unix::fs::PermissionsExt;

use common::{TestEnv, read_report, run_ok};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn colour_follows_the_flag_then_no_color() {
    let env = TestEnv::new();
    let run = |extra: &[&str], no_color: Option<&str>| {
        let mut args = vec!["run", "vector_example::small"];
        args.extend_from_slice(extra);
        let mut cmd = env.scene(&args);
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        text(&run_ok(&mut cmd).stdout)
    };
    let green = "\x1b[32mPASS\x1b[0m vector_example::small";
    assert!(run(&["--color", "always"], None).contains(green));
    // The flag wins over NO_COLOR.
    assert!(run(&["--color", "always"], Some("1")).contains(green));
    let plain = run(&["--color", "never"], None);
    assert!(plain.contains("PASS vector_example::small"), "{plain}");
    assert!(!plain.contains('\x1b'), "{plain}");
    // Not a terminal, and NO_COLOR: plain (auto).
    assert!(!run(&["--color", "auto"], Some("1")).contains('\x1b'));
    let bad = env
        .scene(&["run", "--color", "sometimes"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
}

#[test]
fn quiet_and_verbose_are_accepted_by_every_subcommand() {
    let env = TestEnv::new();
    let bundle = env.dir.path().join("bundle");
    let bundle = bundle.to_str().unwrap();
    for flag in ["-q", "-v", "--quiet", "--verbose"] {
        for args in [
            vec!["list", flag],
            vec![flag, "list"],
            vec!["compile", "vector_example", flag],
            vec!["precompile", "vector_example", "--out", bundle, flag],
            vec!["run", "vector_example::small", flag],
            vec!["run", "--from", bundle, "vector_example::small", flag],
            vec!["cache", "stats", flag],
            vec!["cache", "verify", flag],
        ] {
            let out = env.scene(&args).output().unwrap();
            assert!(
                out.status.success(),
                "{args:?}: {}\n{}",
                text(&out.stdout),
                text(&out.stderr)
            );
        }
    }
    // `-q` hides passing cases; the summary stays.
    let out = run_ok(&mut env.scene(&["run", "vector_example", "-q"]));
    let so = text(&out.stdout);
    assert!(!so.contains("PASS"), "{so}");
    assert!(so.ends_with("2 passed, 0 failed\n"), "{so}");
    let both = env.scene(&["run", "-q", "-v"]).output().unwrap();
    assert_eq!(both.status.code(), Some(2), "{}", text(&both.stderr));
}

#[test]
fn reports_go_to_stdout_with_dash_and_lines_to_stderr() {
    let env = TestEnv::new();
    let out = run_ok(&mut env.scene(&["run", "vector_example", "--report-json", "-"]));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not the JSON report: {e}\n{}", text(&out.stdout)));
    assert_eq!(json["cases"].as_array().map(Vec::len), Some(2));
    let se = text(&out.stderr);
    assert!(se.contains("PASS vector_example::small"), "{se}");
    assert!(se.contains("2 passed, 0 failed"), "{se}");

    let out = run_ok(&mut env.scene(&["run", "vector_example", "--junit", "-"]));
    let xml = text(&out.stdout);
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(xml.contains("vector_example"), "{xml}");
    assert!(xml.ends_with("</testsuites>\n"), "{xml}");
    assert!(!xml.contains("PASS vector_example"), "{xml}");
    assert!(text(&out.stderr).contains("2 passed, 0 failed"));

    let both = env
        .scene(&["run", "--report-json", "-", "--junit", "-"])
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2), "{}", text(&both.stderr));
    assert!(text(&both.stderr).contains("stdout"));
}

#[test]
fn report_files_are_readable_by_everyone() {
    let env = TestEnv::new();
    let json = env.dir.path().join("report.json");
    let junit = env.dir.path().join("junit.xml");
    run_ok(&mut env.scene(&[
        "run",
        "vector_example::small",
        "--report-json",
        json.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]));
    for p in [&json, &junit] {
        let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o644, "{}", p.display());
    }
    assert_eq!(
        read_report(&json)["cases"].as_array().map(Vec::len),
        Some(1)
    );
}

#[test]
fn warm_compile_prints_one_summary_line_and_units_with_verbose() {
    let env = TestEnv::new();
    let cold = text(&run_ok(&mut env.scene(&["compile", "vector_example"])).stdout);
    assert!(cold.contains("compiled vector_example/add "), "{cold}");
    assert!(cold.contains("ok vector_example "), "{cold}");

    let warm = text(&run_ok(&mut env.scene(&["compile", "vector_example"])).stdout);
    assert_eq!(warm.lines().count(), 1, "{warm}");
    assert!(
        warm.starts_with("compiled 1 callables: 1 cached, 0 compiled, 0 failed in "),
        "{warm}"
    );

    let verbose = text(&run_ok(&mut env.scene(&["compile", "vector_example", "-v"])).stdout);
    assert!(verbose.contains("cached vector_example/add "), "{verbose}");
    assert!(verbose.contains("ok vector_example "), "{verbose}");
    assert!(verbose.lines().count() > 1, "{verbose}");
}

/// On a terminal (a pty from util-linux `script`), a cold `scene run` shows
/// the compile bar `scene compile` shows, then the case lines.
#[test]
fn cold_run_on_a_terminal_shows_compile_progress() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped: `script` (util-linux) is not installed, no pty to test with");
        return;
    }
    let env = TestEnv::new();
    let command = format!("{} run vector_example", common::scene_exe().display());
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("SCENE_LOCK_DIR", &env.lock_dir)
        .env("SCENE_CACHE_DIR", &env.cache_dir)
        .env("SCENE_FAILURE_DUMP_DIR", env.dir.path().join("dumps"))
        .env_remove("SCENE_SCENES_DIR")
        .env_remove("SCENE_DEVICES")
        .env_remove("TASK_DEVICE")
        .env_remove("SCENE_PLATFORM")
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let tty = text(&out.stdout);
    assert!(out.status.success(), "{tty}");
    let bar = tty
        .find("/4 vector_example/")
        .unwrap_or_else(|| panic!("no compile bar:\n{tty}"));
    let pass = tty
        .find("PASS\x1b[0m vector_example::")
        .unwrap_or_else(|| panic!("no coloured case line:\n{tty}"));
    assert!(bar < pass, "{tty}");
}
