//! Where the workspace is at run time, so that the `scene` binary works
//! from wherever it (with its runtime library and the scenes) is unpacked,
//! not only from the checkout it was built in.
//!
//! The root is, first match wins: `--root` / `SCENE_ROOT`; the nearest
//! directory, from the current directory up, that holds `tests/scenes/`;
//! the nearest one from the executable's directory up (an unpacked tree
//! `DIR/scene` + `DIR/tests/scenes/`, or `target/release/scene` in a
//! checkout); else the checkout the binary was built in. The scenes are
//! `<root>/tests/scenes` unless `--scenes-dir` / `SCENE_SCENES_DIR` say
//! otherwise; the kernel headers `<root>/crates/device/include` when it
//! exists, else `<executable dir>/include`, else the built checkout's.

use std::path::{Path, PathBuf};

use crate::Layout;

/// The directory under a root that marks it as one: the scenes.
pub const SCENES_SUBDIR: &str = "tests/scenes";

/// The headers under a root (a checkout).
pub const INCLUDE_SUBDIR: &str = "crates/device/include";

/// The nearest of `start` and its ancestors that holds [`SCENES_SUBDIR`].
pub fn find_root(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|d| d.join(SCENES_SUBDIR).is_dir())
        .map(Path::to_path_buf)
}

/// The root for this process: `explicit` (`--root`, `SCENE_ROOT`), else
/// found from `cwd`, else from `exe_dir`, else `built`'s.
pub fn locate(
    built: Layout,
    explicit: Option<PathBuf>,
    cwd: Option<&Path>,
    exe_dir: Option<&Path>,
) -> Layout {
    let root = explicit
        .or_else(|| cwd.and_then(find_root))
        .or_else(|| exe_dir.and_then(find_root));
    match root {
        Some(root) => Layout {
            scenes_dir: root.join(SCENES_SUBDIR),
            root,
        },
        None => built,
    }
}

/// The kernel headers for `root`: `<root>/crates/device/include`, else
/// `include/` next to the executable, else `None` (the built-in one).
pub fn include_dir(root: &Path, exe_dir: Option<&Path>) -> Option<PathBuf> {
    let candidates = [
        Some(root.join(INCLUDE_SUBDIR)),
        exe_dir.map(|d| d.join("include")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|d| d.join("scene_kernel.h").is_file())
}

/// This executable's directory, if it can be found.
pub fn exe_dir() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built() -> Layout {
        Layout {
            root: PathBuf::from("/built"),
            scenes_dir: PathBuf::from("/built/tests/scenes"),
        }
    }

    #[test]
    fn the_root_comes_from_the_flag_then_cwd_then_the_executable() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let deep = ws.join("a/b");
        std::fs::create_dir_all(ws.join(SCENES_SUBDIR)).unwrap();
        std::fs::create_dir_all(&deep).unwrap();
        let unpacked = tmp.path().join("unpacked");
        std::fs::create_dir_all(unpacked.join(SCENES_SUBDIR)).unwrap();
        let nowhere = tmp.path().join("nowhere");
        std::fs::create_dir_all(&nowhere).unwrap();

        let l = locate(built(), None, Some(&deep), Some(&unpacked));
        assert_eq!(l.root, ws);
        assert_eq!(l.scenes_dir, ws.join("tests/scenes"));
        let l = locate(built(), None, Some(&nowhere), Some(&unpacked));
        assert_eq!(l.root, unpacked);
        let l = locate(built(), Some(nowhere.clone()), Some(&deep), None);
        assert_eq!(l.root, nowhere);
        let l = locate(built(), None, Some(&nowhere), Some(&nowhere));
        assert_eq!(l.root, PathBuf::from("/built"));
    }

    #[test]
    fn headers_come_from_the_root_then_beside_the_executable() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let exe = tmp.path().join("bin");
        std::fs::create_dir_all(exe.join("include")).unwrap();
        std::fs::write(exe.join("include/scene_kernel.h"), "").unwrap();
        assert_eq!(include_dir(&root, Some(&exe)), Some(exe.join("include")));
        std::fs::create_dir_all(root.join(INCLUDE_SUBDIR)).unwrap();
        std::fs::write(root.join(INCLUDE_SUBDIR).join("scene_kernel.h"), "").unwrap();
        assert_eq!(
            include_dir(&root, Some(&exe)),
            Some(root.join(INCLUDE_SUBDIR))
        );
        assert_eq!(include_dir(&tmp.path().join("none"), None), None);
    }
}
