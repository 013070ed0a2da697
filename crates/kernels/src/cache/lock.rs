//! Per-key exclusive locks: `flock` on `<dir>/locks/<shard>/<key>.lock`.
//!
//! The kernel drops a lock when its holder dies, so a killed compiler never
//! leaves a key locked. Lock files are not deleted on unlock (deleting a
//! file another process is about to lock would let two processes "hold" the
//! same key); prune deletes stale ones, and a locker that finds its file
//! unlinked under it retries on the new file.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::key::UnitKey;

/// Held while one process compiles and publishes one key.
#[derive(Debug)]
pub struct KeyLock {
    _file: File,
}

/// The lock file of `key` in the cache directory `dir`.
pub fn lock_path(dir: &Path, key: &UnitKey) -> PathBuf {
    key_lock_path(&dir.join(LOCKS_DIR), key)
}

/// The lock file of `key` in the lock directory `locks` (`<dir>/locks`).
pub fn key_lock_path(locks: &Path, key: &UnitKey) -> PathBuf {
    let hex = key.to_hex();
    locks.join(&hex[..2]).join(format!("{hex}.lock"))
}

pub(crate) const LOCKS_DIR: &str = "locks";

fn open(path: &Path) -> io::Result<File> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    File::options()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
}

/// True if `file` is still the file at `path` (not unlinked by prune).
fn still_linked(file: &File, path: &Path) -> io::Result<bool> {
    let held = file.metadata()?;
    Ok(match fs::metadata(path) {
        Ok(now) => now.ino() == held.ino() && now.dev() == held.dev(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    })
}

/// Blocks until this process holds the lock of `key` in the cache
/// directory `dir` (`<dir>/locks/`, shared by every tier).
pub fn lock_key(dir: &Path, key: &UnitKey) -> io::Result<KeyLock> {
    lock(&lock_path(dir, key))
}

/// Blocks until this process holds the lock of `path`.
pub fn lock(path: &Path) -> io::Result<KeyLock> {
    loop {
        let file = open(path)?;
        file.lock()?;
        if still_linked(&file, path)? {
            // The mtime of a lock file is its last use, for pruning.
            let _ = file.set_modified(SystemTime::now());
            return Ok(KeyLock { _file: file });
        }
    }
}

/// The lock if it is free right now; `None` if another holder has it.
pub fn try_lock(path: &Path) -> io::Result<Option<KeyLock>> {
    let file = File::options().read(true).write(true).open(path)?;
    match file.try_lock() {
        Ok(()) if still_linked(&file, path)? => Ok(Some(KeyLock { _file: file })),
        Ok(()) => Ok(None),
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_excludes_until_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = lock_path(dir.path(), &UnitKey([3; 32]));
        let held = lock(&path).expect("lock");
        assert!(try_lock(&path).expect("try").is_none(), "held elsewhere");
        drop(held);
        assert!(try_lock(&path).expect("try").is_some());
    }

    #[test]
    fn relocks_when_the_file_was_unlinked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = lock_path(dir.path(), &UnitKey([4; 32]));
        let first = lock(&path).expect("lock");
        fs::remove_file(&path).expect("unlink");
        // A new locker gets the new file; the old holder no longer excludes it.
        let second = lock(&path).expect("relock");
        assert!(try_lock(&path).expect("try").is_none());
        drop((first, second));
    }
}
