//! Issue 27, item 5 "bounded everything" (causes 7, 8, 9) through the real
//! `scene` binary: a huge expression is a load error, not a stack
//! overflow; a FIFO or a link to `/dev/zero` given to `scene report` or
//! inside a `scene replay` dump fails fast instead of hanging or reading
//! until the OOM killer; `--warmup`/`--rounds` and a dump's offsets are
//! bounded before anything is allocated. Every command runs against a
//! deadline: a hang fails the test rather than the test run.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{TestEnv, assert_success, copy_scene, output_within, show};

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Cause 7: `"N+0+0..."` of 20k terms overflowed the stack and aborted
/// `scene list` (SIGSEGV/SIGABRT); it is a load error naming the file and
/// the field now, and the other scenes still list.
#[test]
fn a_twenty_thousand_term_expression_is_a_load_error_not_a_stack_overflow() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "scalar_data", "scalar_data");
    let dir = copy_scene(&env, "scalar_data", "huge_expr");
    let toml = dir.join("scene.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let huge = format!("shape = [\"128*128{}\"]", "+0".repeat(20_000));
    let text = text
        .replacen("name = \"scalar_data\"", "name = \"huge_expr\"", 1)
        .replacen("shape = [\"128*128\"]", &huge, 1);
    std::fs::write(&toml, text).unwrap();
    for args in [vec!["list"], vec!["run", "huge_expr"]] {
        let out = output_within(&mut env.scene(&args), 120, "scene list");
        let err = stderr(&out);
        assert!(
            out.status.code().is_some(),
            "{args:?}: killed by a signal: {}",
            show(&out)
        );
        assert!(!out.status.success(), "{args:?}: {}", show(&out));
        assert!(err.contains("scene.toml"), "names the file: {err}");
        assert!(err.contains("shape"), "names the field: {err}");
        assert!(err.contains("too large"), "{err}");
        assert!(err.len() < 20_000, "no 40 kB echo of the expression: {err}");
    }
}

/// Cause 9: `--rounds 2 --warmup 4294967295` asked for 68 GB of per-run
/// output spans and aborted; it is a usage error naming the flag and the
/// bound.
#[test]
fn a_huge_warmup_is_a_usage_error_not_an_allocation_abort() {
    let env = TestEnv::new();
    for (args, flag) in [
        (
            vec![
                "run",
                "scalar_data",
                "--rounds",
                "2",
                "--warmup",
                "4294967295",
            ],
            "--warmup",
        ),
        (
            vec!["run", "scalar_data", "--rounds", "4294967295"],
            "--rounds",
        ),
    ] {
        let out = output_within(&mut env.scene(&args), 60, "scene run --warmup");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{}", show(&out));
        assert!(err.contains(flag), "{err}");
        assert!(err.contains("at most 10000"), "{err}");
    }
}

/// Cause 8: `scene report FIFO` waited for a writer for good, and a
/// symlink to `/dev/zero` read until the OOM killer; both fail fast with
/// exit 2 naming the file. A symlink to a real report is still followed.
#[test]
fn report_of_a_fifo_or_a_dev_zero_link_fails_fast() {
    let env = TestEnv::new();
    let fifo = env.dir.path().join("report.fifo");
    mkfifo(&fifo);
    let zero = env.dir.path().join("zero.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    for (path, kind) in [(&fifo, "FIFO"), (&zero, "character device")] {
        let p = path.to_str().unwrap();
        let out = output_within(&mut env.scene(&["report", p]), 60, "scene report");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{}", show(&out));
        assert!(err.contains(p), "names the file: {err}");
        assert!(err.contains(kind), "{err}");
    }
    let real = env.dir.path().join("real.json");
    std::fs::write(&real, r#"{"platform":"a2a3sim","cases":[]}"#).unwrap();
    let link = env.dir.path().join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = output_within(
        &mut env.scene(&["report", link.to_str().unwrap()]),
        60,
        "scene report link",
    );
    assert!(
        !stderr(&out).contains("not a regular file"),
        "a link to a regular file is read: {}",
        show(&out)
    );
}

/// Causes 8 and 9 in a replay dump: a FIFO or a `/dev/zero` link as
/// `task.json` or as a recorded `.npy` hung or exhausted `scene replay`,
/// and `group_offset = 2^40` aborted it allocating; each is a clear error
/// (exit 2) now, and the untouched dump still replays.
#[test]
fn replay_of_a_fifo_a_dev_zero_link_or_a_huge_offset_fails_fast() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "scalar_data", "scalar_data");
    let root = env.dir.path().join("args");
    let dump = format!("--dump-args={}", root.display());
    let (out, _) = env.run_with_report_using(&["run", "scalar_data::default", &dump], |cmd| {
        cmd.env_remove("SCENE_RUNTIME_OPTIONS");
    });
    assert_success(&out);
    let case = root.join("scalar_data").join("default");
    let replay = |what: &str| {
        output_within(
            &mut env.scene(&["replay", case.to_str().unwrap(), "0"]),
            120,
            what,
        )
    };
    let out = replay("replay as recorded");
    assert_success(&out);

    let t0 = case.join("task0");
    let json = t0.join("task.json");
    let json_saved = std::fs::read(&json).unwrap();
    for target in [
        case.join("manifest.json"),
        json.clone(),
        t0.join("arg0.in.npy"),
    ] {
        let saved = std::fs::read(&target).unwrap();
        for kind in ["FIFO", "character device"] {
            std::fs::remove_file(&target).unwrap();
            match kind {
                "FIFO" => mkfifo(&target),
                _ => std::os::unix::fs::symlink("/dev/zero", &target).unwrap(),
            }
            let what = format!("replay with {} as a {kind}", target.display());
            let out = replay(&what);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{what}: {}", show(&out));
            assert!(err.contains(kind), "{what}: {err}");
        }
        std::fs::remove_file(&target).unwrap();
        std::fs::write(&target, saved).unwrap();
    }

    let mut task: serde_json::Value = serde_json::from_slice(&json_saved).unwrap();
    task["args"][0]["group_offset"] = serde_json::json!(1u64 << 40);
    std::fs::write(&json, serde_json::to_vec(&task).unwrap()).unwrap();
    let out = replay("replay with group_offset 2^40");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(err.contains("group_offset"), "{err}");
    assert!(err.contains("task.json"), "{err}");

    std::fs::write(&json, &json_saved).unwrap();
    assert_success(&replay("replay restored"));
}

/// Cause 9, the product: every run of a `--rounds` session holds its own
/// outputs, so rounds times output bytes is what is allocated; it is held
/// to the per-case bound before anything is, and the case fails alone.
#[test]
fn rounds_times_output_bytes_is_held_to_the_case_bound() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "scalar_data", "scalar_data");
    // scalar_data: 192 KiB of tensors, 64 KiB of them outputs.
    let bound = "10000000";
    let (out, report) = env.run_with_report(&[
        "run",
        "scalar_data::default",
        "--rounds",
        "200",
        "--max-case-bytes",
        bound,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let c = &report["cases"][0];
    assert_eq!(c["status"], "failed", "{c}");
    let message = c["message"].to_string();
    assert!(message.contains(bound), "{c}");
    let (out, _) = env.run_with_report(&[
        "run",
        "scalar_data::default",
        "--rounds",
        "2",
        "--max-case-bytes",
        bound,
    ]);
    assert_success(&out);
}
