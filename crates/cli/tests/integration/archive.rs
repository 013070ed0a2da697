//! A `cargo nextest archive` of this package runs on "another runner": the
//! archive is extracted next to a copy of the checkout at a different path
//! with `--workspace-remap`, as docs/ci.md describes, while the checkout it
//! was built in (and every target directory) is covered by an empty tmpfs
//! in a private mount namespace (`unshare -r -m`; where the host forbids
//! that, the test says so and relies on the next check alone).
//!
//! The copy holds a scene the checkout does not have, `vec_remap`: its
//! trial passing proves the scene trials read the remapped checkout, not a
//! path baked in at build time. The integration tests that run the `scene`
//! binary (here `relocate`) must find it and the scenes through the
//! run-time variables nextest sets (`NEXTEST_BIN_EXE_scene`,
//! `CARGO_MANIFEST_DIR`); architecture_test.rs keeps every test that way.
//!
//! The archive is built with its own target directory under
//! `CARGO_TARGET_TMPDIR` (the outer build holds its own directory's lock
//! while tests run), so the first run of this test on a machine pays a
//! second full build of the workspace, several minutes on two cores. So it
//! runs under `CI` (where it must not skip) or with `SCENE_TEST_ARCHIVE=1`,
//! and says it skipped otherwise: a developer's `cargo test --workspace`
//! stays one build.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    assert_success, build_machine_dirs, can_hide_dirs, command_hiding, in_ci, show, workspace_root,
};

fn cargo() -> PathBuf {
    std::env::var_os("CARGO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("cargo"))
}

/// `cmd` without the variables of the run this test is part of: an outer
/// nextest's, and any `SCENE_*` a developer exported.
fn clean_env(cmd: &mut Command) -> &mut Command {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("NEXTEST") || k.starts_with("SCENE_") || k == "CARGO_TARGET_DIR" {
            cmd.env_remove(k.as_ref());
        }
    }
    cmd
}

/// Copies the checkout's sources (no `target/`, no `.git/`).
fn copy_checkout(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        let to = dst.join(&name);
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_checkout(&entry.path(), &to);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

#[test]
fn a_nextest_archive_passes_from_a_remapped_checkout() {
    let opted_in = std::env::var_os("SCENE_TEST_ARCHIVE").is_some_and(|v| v == "1");
    if !in_ci() && !opted_in {
        println!(
            "skipped: archiving builds the workspace a second time; \
             runs under CI=true or SCENE_TEST_ARCHIVE=1"
        );
        return;
    }
    let nextest = Command::new(cargo())
        .args(["nextest", "--version"])
        .output();
    if !nextest.as_ref().is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must test nextest archives: install cargo-nextest (.ci/run does)"
        );
        println!("skipped: cargo-nextest is not installed (cargo install cargo-nextest --locked)");
        return;
    }
    let root = workspace_root();
    let tmp = tempfile::tempdir().unwrap();
    let hide = {
        let mut dirs = build_machine_dirs();
        let nested = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        if !dirs.iter().any(|d| nested.starts_with(d)) {
            dirs.push(nested);
        }
        dirs
    };
    assert!(
        hide.iter().all(|d| !tmp.path().starts_with(d)),
        "the temp dir {} must be outside {hide:?}",
        tmp.path().display()
    );

    // The build machine: archive the package.
    let archive = tmp.path().join("scenes.tar.zst");
    let build = clean_env(
        Command::new(cargo())
            .args([
                "nextest",
                "archive",
                "-p",
                "scenes",
                "-p",
                "scene-cli",
                "--locked",
            ])
            .arg("--archive-file")
            .arg(&archive)
            .current_dir(&root)
            .env(
                "CARGO_TARGET_DIR",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("archive-target"),
            ),
    )
    .output()
    .unwrap();
    assert_success(&build);

    // The other runner: the checkout at another path, plus a scene the
    // build machine's checkout does not have.
    let checkout = tmp.path().join("runner/checkout");
    copy_checkout(&root, &checkout);
    let scenes = checkout.join("tests/scenes");
    common::copy_dir(&scenes.join("vector_example"), &scenes.join("vec_remap"));
    let toml = scenes.join("vec_remap/scene.toml");
    let t = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        t.replace("name = \"vector_example\"", "name = \"vec_remap\""),
    )
    .unwrap();

    let extracted = tmp.path().join("runner/extracted");
    std::fs::create_dir_all(&extracted).unwrap();
    if can_hide_dirs() {
        eprintln!("the archive runs with {hide:?} hidden");
    } else {
        eprintln!(
            "note: this host cannot hide directories (`unshare -r -m` fails); \
             the archive runs with {hide:?} readable"
        );
    }
    let run = clean_env(
        command_hiding(&hide, &cargo())
            .args(["nextest", "run", "--no-fail-fast", "--archive-file"])
            .arg(&archive)
            .arg("--workspace-remap")
            .arg(&checkout)
            .arg("--extract-to")
            .arg(&extracted)
            .args([
                "-E",
                "binary(scenes) | (binary(integration) & test(/^relocate::/))",
            ])
            .current_dir(&checkout)
            .env("SCENE_LOCK_DIR", tmp.path().join("locks"))
            .env("SCENE_CACHE_DIR", tmp.path().join("cache"))
            .env("SCENE_FAILURE_DUMP_DIR", tmp.path().join("failure-dumps")),
    )
    .output()
    .unwrap();
    let out = show(&run);
    assert!(run.status.success(), "{out}");
    for trial in [
        "scenes::scenes vec_remap::small",
        "scenes::scenes vector_example::small",
        "scenes::scenes paged_attention::small1",
        "scene-cli::integration relocate::pass_two_runs_from_an_unpacked_tree_elsewhere",
    ] {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with("PASS") && l.ends_with(trial)),
            "no PASS line for {trial}:\n{out}"
        );
    }
    assert!(!out.contains("FAIL ["), "{out}");
}
