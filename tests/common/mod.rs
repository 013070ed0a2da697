//! Shared helpers of the scenes integration tests: a temp environment per
//! test (lock dir, cache dir, scenes dir) and a `Command` for the real
//! `scene` binary in it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct TestEnv {
    pub dir: tempfile::TempDir,
    pub lock_dir: PathBuf,
    pub cache_dir: PathBuf,
    /// `None`: the package's own scenes.
    pub scenes_dir: Option<PathBuf>,
}

pub fn package_scenes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes")
}

impl TestEnv {
    /// The package's own scenes, with private lock and cache dirs.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("scenes-test")
            .tempdir()
            .unwrap();
        let lock_dir = dir.path().join("locks");
        let cache_dir = dir.path().join("cache");
        Self {
            dir,
            lock_dir,
            cache_dir,
            scenes_dir: None,
        }
    }

    /// An empty private scenes dir; fill it with [`copy_scene`].
    pub fn with_scenes(_: &[&str]) -> Self {
        let mut env = Self::new();
        let scenes = env.dir.path().join("scenes");
        std::fs::create_dir_all(&scenes).unwrap();
        env.scenes_dir = Some(scenes);
        env
    }

    pub fn scene(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_scene"));
        cmd.args(args)
            .env("SCENE_LOCK_DIR", &self.lock_dir)
            .env("SCENE_CACHE_DIR", &self.cache_dir)
            // Failing cases dump their tensors; keep those in the temp dir.
            .env(
                "SCENE_FAILURE_DUMP_DIR",
                self.dir.path().join("failure-dumps"),
            )
            .env_remove("SCENE_DEVICES")
            .env_remove("TASK_DEVICE")
            .env_remove("SCENE_PLATFORM")
            .env_remove("SCENE_CC")
            .env_remove("SCENE_LD")
            .env_remove("SCENE_COMPILE_WORKERS");
        match &self.scenes_dir {
            Some(d) => cmd.env("SCENE_SCENES_DIR", d),
            None => cmd.env_remove("SCENE_SCENES_DIR"),
        };
        cmd
    }
}

/// Copies the package scene `from` into the env's scenes dir as `to`.
pub fn copy_scene(env: &TestEnv, from: &str, to: &str) -> PathBuf {
    let dst = env
        .scenes_dir
        .as_ref()
        .expect("env has its own scenes dir")
        .join(to);
    copy_dir(&package_scenes_dir().join(from), &dst);
    let toml = dst.join("scene.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        text.replace(&format!("name = \"{from}\""), &format!("name = \"{to}\"")),
    )
    .unwrap();
    dst
}

pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

pub fn read_report(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}
