//! A runtime library carried inside the executable (the `scene` binary
//! embeds the simulator runtime), made a file on first use.
//!
//! `dlopen` needs a file, so [`EmbeddedRuntime::unpack`] writes the bytes
//! into the cache, content-addressed by their blake3
//! (`<cache>/runtime/<digest>/libscene_sim_runtime.so`). A copy already
//! there is verified (a regular file of the right size and digest) before
//! use and replaced when damaged; a new one is written aside and renamed
//! in, so a concurrent run sees the whole file or none.

use std::path::{Path, PathBuf};

use crate::RuntimeError;
use crate::runtime::RUNTIME_LIB_NAME;

/// The subdirectory of a cache directory holding unpacked runtimes.
pub const RUNTIME_CACHE_SUBDIR: &str = "runtime";

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
        if self.is_intact(&path) {
            // Its last use, for pruning; failing to record it costs nothing.
            let _ = scene_util::touch_regular_file(&path);
            return Ok(path);
        }
        let fail = |reason: String| RuntimeError::Unpack {
            path: path.clone(),
            reason,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
        }
        scene_util::write_atomically_with_mode(&path, self.bytes, 0o755)
            .map_err(|e| fail(e.to_string()))?;
        if !self.is_intact(&path) {
            return Err(fail(format!(
                "the written copy does not match the embedded one (blake3 {})",
                self.blake3_hex
            )));
        }
        Ok(path)
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
}
