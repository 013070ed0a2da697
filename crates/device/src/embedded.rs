//! A runtime library carried inside the executable (the `scene` binary
//! embeds the simulator runtime), made a file on first use.
//!
//! `dlopen` needs a file, so [`EmbeddedRuntime::unpack`] writes the bytes
//! into the cache, content-addressed by their blake3
//! (`<cache>/runtime/<digest>/libscene_sim_runtime.so`). A copy already
//! there is verified (a regular file of the right size and digest) before
//! use and replaced when damaged; a new one is written aside and renamed
//! in, so a concurrent run sees the whole file or none.
//!
//! A cache that cannot take it (a file, read-only, full, not a directory
//! at all) must not stop a run that would otherwise compile without a
//! cache: [`EmbeddedRuntime::unpack_for_run`] then writes it into a
//! private directory of its own (mode 0700, under the temp directory the
//! caller names), verified the same way and removed when the run drops
//! it. Such a directory holds an owner lock, as job directories do, so the
//! next run sweeps those of runs killed before they could remove theirs.

use std::path::{Path, PathBuf};

use crate::RuntimeError;
pub use crate::error::UnpackFailure;
use crate::runtime::RUNTIME_LIB_NAME;
use crate::worker::{OwnedDir, create_owned_dir, sweep_dead_owned_dirs};

/// The subdirectory of a cache directory holding unpacked runtimes.
pub const RUNTIME_CACHE_SUBDIR: &str = "runtime";

/// Private runtime directories are named `scene-runtime-XXXXXX`; the sweep
/// goes by it.
const PRIVATE_DIR_PREFIX: &str = "scene-runtime-";

/// A runtime library's bytes and their blake3 (hex), both fixed when the
/// executable was built.
#[derive(Clone, Copy)]
pub struct EmbeddedRuntime {
    pub bytes: &'static [u8],
    pub blake3_hex: &'static str,
}

impl std::fmt::Debug for EmbeddedRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedRuntime")
            .field("len", &self.bytes.len())
            .field("blake3", &self.blake3_hex)
            .finish()
    }
}

/// An embedded runtime made a file for a run
/// ([`EmbeddedRuntime::unpack_for_run`]). Dropping it removes a private
/// copy; a copy in the cache stays for the next run.
#[derive(Debug)]
pub struct UnpackedRuntime {
    path: PathBuf,
    /// The private directory holding the copy; `None`: in the cache.
    private: Option<OwnedDir>,
    /// Why the cache did not take it, when it was tried.
    cache_failure: Option<UnpackFailure>,
}

impl UnpackedRuntime {
    /// The library file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The private directory holding it, when it is not in the cache.
    pub fn private_dir(&self) -> Option<&Path> {
        self.private.as_ref().map(OwnedDir::path)
    }

    /// Why the cache directory it was offered did not take it.
    pub fn cache_failure(&self) -> Option<&UnpackFailure> {
        self.cache_failure.as_ref()
    }
}

impl EmbeddedRuntime {
    /// Where it is unpacked under `cache_dir`.
    pub fn path_in(&self, cache_dir: &Path) -> PathBuf {
        let short = self.blake3_hex.get(..32).unwrap_or(self.blake3_hex);
        cache_dir
            .join(RUNTIME_CACHE_SUBDIR)
            .join(short)
            .join(RUNTIME_LIB_NAME)
    }

    /// The runtime as a file under `cache_dir`: verified if already there,
    /// else (re)written and verified.
    pub fn unpack(&self, cache_dir: &Path) -> Result<PathBuf, RuntimeError> {
        let path = self.path_in(cache_dir);
        self.write_verified(&path, true)
            .map_err(|UnpackFailure { path, reason }| RuntimeError::Unpack { path, reason })?;
        Ok(path)
    }

    /// The runtime as a file for one run: in `cache_dir` ([`Self::unpack`])
    /// if one is given and can take it, else in a new private directory in
    /// `temp_parent` (see the module's documentation). Fails only when
    /// neither place could, naming both.
    pub fn unpack_for_run(
        &self,
        cache_dir: Option<&Path>,
        temp_parent: &Path,
    ) -> Result<UnpackedRuntime, RuntimeError> {
        let cache_failure = match cache_dir {
            Some(dir) => match self.unpack(dir) {
                Ok(path) => {
                    return Ok(UnpackedRuntime {
                        path,
                        private: None,
                        cache_failure: None,
                    });
                }
                Err(RuntimeError::Unpack { path, reason }) => Some(UnpackFailure { path, reason }),
                Err(other) => Some(UnpackFailure {
                    path: self.path_in(dir),
                    reason: other.to_string(),
                }),
            },
            None => None,
        };
        match self.unpack_private(temp_parent) {
            Ok((dir, path)) => Ok(UnpackedRuntime {
                path,
                private: Some(dir),
                cache_failure,
            }),
            Err(private) => Err(RuntimeError::UnpackNowhere {
                tried: cache_failure.into_iter().chain([private]).collect(),
            }),
        }
    }

    /// A new private directory in `parent` holding the runtime, verified.
    fn unpack_private(&self, parent: &Path) -> Result<(OwnedDir, PathBuf), UnpackFailure> {
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| {
            sweep_dead_owned_dirs(parent, PRIVATE_DIR_PREFIX);
        });
        let dir = create_owned_dir(parent, PRIVATE_DIR_PREFIX).map_err(|e| UnpackFailure {
            path: parent.to_path_buf(),
            reason: format!("cannot create a private directory in it: {e}"),
        })?;
        let path = dir.path().join(RUNTIME_LIB_NAME);
        self.write_verified(&path, false)?;
        Ok((dir, path))
    }

    /// Makes `path` an intact copy (a regular file of this size and
    /// digest): kept if it already is one (`reuse`), else written aside,
    /// renamed in and checked again.
    fn write_verified(&self, path: &Path, reuse: bool) -> Result<(), UnpackFailure> {
        if reuse && self.is_intact(path) {
            // Its last use, for pruning; failing to record it costs nothing.
            let _ = scene_util::touch_regular_file(path);
            return Ok(());
        }
        let fail = |reason: String| UnpackFailure {
            path: path.to_path_buf(),
            reason,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
        }
        scene_util::write_atomically_with_mode(path, self.bytes, 0o755)
            .map_err(|e| fail(e.to_string()))?;
        if !self.is_intact(path) {
            return Err(fail(format!(
                "the written copy does not match the embedded one (blake3 {})",
                self.blake3_hex
            )));
        }
        Ok(())
    }

    fn is_intact(&self, path: &Path) -> bool {
        let len = self.bytes.len() as u64;
        scene_util::read_regular_file(path, Some(len), len)
            .is_ok_and(|bytes| blake3::hash(&bytes).to_hex().as_str() == self.blake3_hex)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BYTES: &[u8] = b"\x7fELF pretend library";

    fn embedded() -> EmbeddedRuntime {
        let hex: &'static str =
            Box::leak(blake3::hash(BYTES).to_hex().to_string().into_boxed_str());
        EmbeddedRuntime {
            bytes: BYTES,
            blake3_hex: hex,
        }
    }

    #[test]
    fn unpacks_verifies_and_repairs() {
        let cache = tempfile::tempdir().expect("tempdir");
        let rt = embedded();
        let path = rt.unpack(cache.path()).expect("unpacks");
        assert!(path.starts_with(cache.path().join(RUNTIME_CACHE_SUBDIR)));
        assert!(path.ends_with(RUNTIME_LIB_NAME));
        assert_eq!(std::fs::read(&path).expect("readable"), BYTES);
        // Damaged: replaced, never handed out.
        std::fs::write(&path, b"other bytes").expect("damage");
        assert_eq!(rt.unpack(cache.path()).expect("repairs"), path);
        assert_eq!(std::fs::read(&path).expect("readable"), BYTES);
        // A symlink in its place is damage too, not followed.
        let elsewhere = cache.path().join("elsewhere");
        std::fs::write(&elsewhere, BYTES).expect("write");
        std::fs::remove_file(&path).expect("rm");
        std::os::unix::fs::symlink(&elsewhere, &path).expect("symlink");
        rt.unpack(cache.path()).expect("repairs");
        assert!(std::fs::symlink_metadata(&path).expect("stat").is_file());
    }

    #[test]
    fn an_unwritable_cache_is_an_error_naming_the_path() {
        let cache = tempfile::tempdir().expect("tempdir");
        let blocker = cache.path().join("file");
        std::fs::write(&blocker, b"").expect("write");
        let err = embedded()
            .unpack(&blocker)
            .expect_err("a file is no directory");
        let msg = err.to_string();
        assert!(msg.contains("cannot unpack the simulator runtime"), "{msg}");
        assert!(msg.contains(&blocker.display().to_string()), "{msg}");
    }

    /// Issue 38, cause 5: a cache directory that cannot take the runtime
    /// (a regular file, a path under one, a FIFO, a directory even root
    /// cannot write in) made every `scene run` exit 3; the runtime goes
    /// into a private directory instead, verified, mode 0700, removed when
    /// the run drops it, and the cache's failure is kept for the one
    /// warning.
    #[test]
    fn an_unusable_cache_unpacks_into_a_private_dir_removed_on_drop() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().expect("tempdir");
        let file = tmp.path().join("file");
        std::fs::write(&file, b"").expect("write");
        let fifo = tmp.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let temp_parent = tmp.path().join("temp");
        std::fs::create_dir(&temp_parent).expect("mkdir");
        let rt = embedded();
        let caches = [
            file.clone(),
            file.join("below"),
            fifo,
            PathBuf::from("/proc/self/fdinfo"),
        ];
        for cache in &caches {
            let unpacked = rt
                .unpack_for_run(Some(cache), &temp_parent)
                .unwrap_or_else(|e| panic!("{}: {e}", cache.display()));
            let dir = unpacked
                .private_dir()
                .expect("a private copy")
                .to_path_buf();
            assert!(dir.starts_with(&temp_parent), "{}", dir.display());
            assert_eq!(unpacked.path(), dir.join(RUNTIME_LIB_NAME));
            assert_eq!(std::fs::read(unpacked.path()).expect("readable"), BYTES);
            let mode = std::fs::symlink_metadata(&dir)
                .expect("stat")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
            let failure = unpacked.cache_failure().expect("the cache's failure");
            assert!(failure.path.starts_with(cache), "{failure}");
            drop(unpacked);
            assert!(!dir.exists(), "{} outlived the run", dir.display());
        }
        // No cache at all: private, nothing to warn about.
        let unpacked = rt.unpack_for_run(None, &temp_parent).expect("private");
        assert!(unpacked.private_dir().is_some() && unpacked.cache_failure().is_none());
        drop(unpacked);
        // A usable cache is used (and kept).
        let cache = tmp.path().join("cache");
        let unpacked = rt
            .unpack_for_run(Some(&cache), &temp_parent)
            .expect("cache");
        assert_eq!(unpacked.path(), rt.path_in(&cache));
        assert!(unpacked.private_dir().is_none());
        drop(unpacked);
        assert!(rt.path_in(&cache).is_file());
        assert_eq!(
            std::fs::read_dir(&temp_parent).expect("ls").count(),
            0,
            "private directories left behind"
        );
    }

    /// When neither the cache nor the temp directory can take it, the
    /// error says so for both places, as an unpacking (not a build)
    /// failure.
    #[test]
    fn unpacking_nowhere_names_both_places() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let file = tmp.path().join("file");
        std::fs::write(&file, b"").expect("write");
        let err = embedded()
            .unpack_for_run(Some(&file), &file)
            .expect_err("nowhere to unpack");
        let msg = err.to_string();
        assert!(
            msg.starts_with("cannot unpack the simulator runtime embedded in this binary into "),
            "{msg}"
        );
        assert!(
            msg.contains(&embedded().path_in(&file).display().to_string()),
            "{msg}"
        );
        assert!(
            msg.contains(&format!(" nor into {} (", file.display())),
            "{msg}"
        );
        assert!(!msg.contains("build"), "{msg}");
    }
}
