//! An installed `scene` (`cargo install --path crates/cli` copies the built
//! binary into `<root>/bin/`, nothing else) runs the README's main job from
//! any directory of a checkout: it finds the workspace from its current
//! directory up and carries its simulator runtime, which it unpacks into
//! the cache on first use. (`ci/fresh-clone` runs the real `cargo install`
//! into a temp root.)

use crate::common;

use std::process::Command;

use common::{run_ok, scene_exe, show, workspace_root};

#[test]
fn an_installed_scene_runs_from_any_directory_of_a_checkout() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("install-root/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let scene = bin.join("scene");
    scene_util::copy_executable(&scene_exe(), &scene).unwrap();
    let cache = tmp.path().join("cache");
    let root = workspace_root();
    for cwd in [
        root.join("tests/scenes/vector_example"),
        root.join("crates/device/include"),
    ] {
        let out = run_ok(
            Command::new(&scene)
                .args(["run", "vector_example"])
                .current_dir(&cwd)
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("HOME", tmp.path())
                .env("SCENE_LOCK_DIR", tmp.path().join("locks"))
                .env("SCENE_CACHE_DIR", &cache),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("PASS vector_example::small"),
            "from {}:\n{}",
            cwd.display(),
            show(&out)
        );
        assert!(stdout.ends_with(" passed, 0 failed\n"), "{}", show(&out));
    }
    // Nothing beside the binary: the runtime it loaded is the one it
    // carries, unpacked once into the cache.
    assert_eq!(std::fs::read_dir(&bin).unwrap().count(), 1);
    let unpacked: Vec<_> = std::fs::read_dir(cache.join(scene_device::RUNTIME_CACHE_SUBDIR))
        .expect("the runtime was unpacked into the cache")
        .map(|e| e.unwrap().path().join(scene_device::RUNTIME_LIB_NAME))
        .collect();
    assert_eq!(unpacked.len(), 1, "{unpacked:?}");
    assert!(unpacked[0].is_file(), "{unpacked:?}");
}
