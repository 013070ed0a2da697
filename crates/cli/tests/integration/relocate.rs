//! The `scene` binary works from wherever it is unpacked: pass 2 (`run
//! --from`) with only what docs/ci.md says to upload (the `scene` binary,
//! the bundle, `tests/scenes/`), from another directory, with no compiler
//! and no runtime library beside it (the binary carries the simulator
//! runtime and unpacks it into its cache).
//!
//! Pass 2 runs with the checkout the binary was built in (and its target
//! directory) covered by an empty tmpfs in a private mount namespace
//! (`unshare -r -m`), so nothing there can be read. Where the host forbids
//! that (some CI images restrict user namespaces) the test says so and
//! still proves the checkout is not used: the unpacked tree holds a scene,
//! `vec_reloc`, that the checkout does not have; the run's current
//! directory is a fresh temp dir outside any workspace; the environment is
//! cleared (no `SCENE_SCENES_DIR`, `SCENE_RUNTIME_LIB`, `SCENE_CACHE_DIR`,
//! ...) but for `PATH`, a temp lock dir and `SCENE_CC=false` /
//! `SCENE_LD=false`. A binary that fell back to the checkout's scenes would
//! find no `vec_reloc` case and exit 4.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{
    build_machine_dirs, can_hide_dirs, command_hiding, copy_dir, package_scenes_dir, run_ok,
    scene_exe, show,
};

#[test]
fn pass_two_runs_from_an_unpacked_tree_elsewhere() {
    let tmp = tempfile::tempdir().unwrap();
    // The unpacked tree: scene, tests/scenes/, the bundle; no runtime.
    let tree = tmp.path().join("unpacked");
    let scenes = tree.join("tests/scenes");
    copy_dir(
        &package_scenes_dir().join("vector_example"),
        &scenes.join("vec_reloc"),
    );
    let toml = scenes.join("vec_reloc/scene.toml");
    let t = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        t.replace("name = \"vector_example\"", "name = \"vec_reloc\""),
    )
    .unwrap();
    scene_util::copy_executable(&scene_exe(), &tree.join("scene")).unwrap();
    let bundle = tree.join("bundle");

    // Pass 1, on the "build machine": the checkout's binary.
    run_ok(
        Command::new(scene_exe())
            .args(["precompile", "--out"])
            .arg(&bundle)
            .env("SCENE_SCENES_DIR", &scenes)
            .env("SCENE_CACHE_DIR", tmp.path().join("cache"))
            .env_remove("SCENE_PLATFORM"),
    );

    // Pass 2: the unpacked binary, elsewhere, with nothing pointing back.
    let cwd = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&cwd).unwrap();
    let hide = build_machine_dirs();
    assert!(
        hide.iter().all(|d| !tmp.path().starts_with(d)),
        "the temp dir {} must be outside the checkout {hide:?}",
        tmp.path().display()
    );
    if can_hide_dirs() {
        // The hiding itself works: the checkout's Cargo.toml is gone.
        let probe = command_hiding(&hide, Path::new("/bin/sh"))
            .args(["-c", "test ! -e \"$0/Cargo.toml\""])
            .arg(&hide[0])
            .status()
            .unwrap();
        assert!(probe.success(), "{} is still readable", hide[0].display());
        eprintln!("pass 2 runs with {hide:?} hidden");
    } else {
        eprintln!(
            "note: this host cannot hide directories (`unshare -r -m` fails); \
             pass 2 runs with {hide:?} readable, proven unused by the scene only the tree has"
        );
    }
    let unpacked = |args: &[&str]| {
        let mut cmd = command_hiding(&hide, &tree.join("scene"));
        cmd.args(args)
            .current_dir(&cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &cwd)
            .env("SCENE_LOCK_DIR", tmp.path().join("locks"))
            .env("SCENE_CC", "false")
            .env("SCENE_LD", "false");
        cmd
    };
    let list = run_ok(&mut unpacked(&["list"]));
    assert_eq!(
        String::from_utf8_lossy(&list.stdout)
            .lines()
            .collect::<Vec<_>>(),
        ["vec_reloc::small", "vec_reloc::odd"],
        "{}",
        show(&list)
    );
    let (out, json) = common::output_with_report(
        &mut unpacked(&["run", "--from", "../unpacked/bundle"]),
        &cwd.join("report.json"),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("PASS vec_reloc::small"), "{}", show(&out));
    assert!(stdout.ends_with("2 passed, 0 failed\n"), "{}", show(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("rebuilding"),
        "{}",
        show(&out)
    );
    for case in json["cases"].as_array().unwrap() {
        assert_eq!(case["phases"]["compile_s"], 0.0, "{json:#}");
    }
    // The runtime it ran was the one it carries, unpacked into the tree's
    // default cache.
    let runtimes = tree
        .join("target/scene-cache")
        .join(scene_device::RUNTIME_CACHE_SUBDIR);
    assert_eq!(
        std::fs::read_dir(&runtimes).map(|d| d.count()).unwrap_or(0),
        1,
        "no runtime unpacked under {}",
        runtimes.display()
    );

    // `--root` and `SCENE_ROOT` name the tree from anywhere.
    let list = run_ok(unpacked(&["list", "--root"]).arg(&tree).current_dir("/"));
    assert_eq!(String::from_utf8_lossy(&list.stdout).lines().count(), 2);
    let list = run_ok(
        unpacked(&["list"])
            .env("SCENE_ROOT", &tree)
            .current_dir("/"),
    );
    assert_eq!(String::from_utf8_lossy(&list.stdout).lines().count(), 2);
}
