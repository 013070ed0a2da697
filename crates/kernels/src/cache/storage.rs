//! Where cache entries live. Callers go through [`Storage`] (get / put /
//! touch / remove / list) so that a remote tier can be added later without
//! touching them; [`LocalDisk`] is the one implementation today.
//!
//! Storage moves bytes only: it does not judge them. Verification (size,
//! digest, manifest sanity) happens above it, in [`super::Cache`], so every
//! tier gets the same checks.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::key::UnitKey;

/// A storage operation that failed for a reason other than "not there".
#[derive(Debug, thiserror::Error)]
#[error("cache storage: cannot {action} `{}`: {source}", path.display())]
pub struct StorageError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

fn err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StorageError + 'a {
    move |source| StorageError {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// The parts stored under one key, unverified. Either part may be missing
/// (damage); both missing is "no entry" and reported as `None` instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry {
    pub artifact: Option<Vec<u8>>,
    pub manifest: Option<Vec<u8>>,
}

/// One stored entry, as listed for pruning and verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    pub key: UnitKey,
    /// Artifact plus manifest.
    pub bytes: u64,
    /// Last publication or hit.
    pub last_used: SystemTime,
}

pub trait Storage: Send + Sync + fmt::Debug {
    /// What is stored under `key`; `Ok(None)` when nothing is.
    fn get(&self, key: &UnitKey) -> Result<Option<RawEntry>, StorageError>;
    /// Publishes atomically: readers see the whole entry or none of it,
    /// even if this process dies halfway. An entry already stored under
    /// `key` is kept (same key, same bytes).
    fn put(&self, key: &UnitKey, artifact: &[u8], manifest: &[u8]) -> Result<(), StorageError>;
    /// Marks the entry as used now (for least-recently-used eviction).
    fn touch(&self, key: &UnitKey) -> Result<(), StorageError>;
    /// Removes the entry; removing a missing entry is not an error.
    fn remove(&self, key: &UnitKey) -> Result<(), StorageError>;
    /// Every entry, complete or damaged.
    fn list(&self) -> Result<Vec<EntryInfo>, StorageError>;
}

pub(crate) const ARTIFACT: &str = "artifact";
pub(crate) const MANIFEST: &str = "manifest.json";

/// Entries on a local file system:
///
/// ```text
/// <dir>/entries/<first 2 hex digits>/<key hex>/artifact
/// <dir>/entries/<first 2 hex digits>/<key hex>/manifest.json
/// ```
///
/// An entry is a directory so that publication is one `rename` of a fully
/// written (and synced) temp directory next to it: a process killed at any
/// point leaves either a `.tmp-*` directory (never read as an entry) or the
/// complete entry. Removal renames the entry away first for the same reason.
#[derive(Debug, Clone)]
pub struct LocalDisk {
    entries: PathBuf,
}

impl LocalDisk {
    pub fn new(dir: &Path) -> Self {
        LocalDisk {
            entries: dir.join("entries"),
        }
    }

    fn shard(&self, key: &UnitKey) -> PathBuf {
        self.entries.join(&key.to_hex()[..2])
    }

    pub fn entry_dir(&self, key: &UnitKey) -> PathBuf {
        self.shard(key).join(key.to_hex())
    }

    pub fn artifact_path(&self, key: &UnitKey) -> PathBuf {
        self.entry_dir(key).join(ARTIFACT)
    }

    pub fn manifest_path(&self, key: &UnitKey) -> PathBuf {
        self.entry_dir(key).join(MANIFEST)
    }

    /// Leftovers of interrupted publications and removals, with their age.
    pub fn leftovers(&self) -> Vec<(PathBuf, SystemTime)> {
        let mut out = Vec::new();
        for shard in read_dir_paths(&self.entries) {
            for path in read_dir_paths(&shard) {
                let is_temp = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with('.'));
                if is_temp {
                    let mtime = fs::symlink_metadata(&path)
                        .and_then(|m| m.modified())
                        .unwrap_or(SystemTime::UNIX_EPOCH);
                    out.push((path, mtime));
                }
            }
        }
        out
    }
}

fn read_dir_paths(dir: &Path) -> Vec<PathBuf> {
    match fs::read_dir(dir) {
        Ok(it) => it.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => Vec::new(),
    }
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, StorageError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        // A manifest replaced by a directory etc. is damage, not an outage.
        Err(e) if e.kind() == io::ErrorKind::IsADirectory => Ok(None),
        Err(e) => Err(err("read", path)(e)),
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), StorageError> {
    let mut f = File::create(path).map_err(err("create", path))?;
    f.write_all(bytes).map_err(err("write", path))?;
    f.sync_all().map_err(err("sync", path))
}

/// Syncs a directory so a rename inside it survives a crash.
fn sync_dir(dir: &Path) {
    // Best effort: some file systems refuse to fsync directories, and the
    // entry is still never read half-written (rename is atomic).
    if let Ok(f) = File::open(dir) {
        let _ = f.sync_all();
    }
}

impl Storage for LocalDisk {
    fn get(&self, key: &UnitKey) -> Result<Option<RawEntry>, StorageError> {
        let dir = self.entry_dir(key);
        let manifest = read_optional(&dir.join(MANIFEST))?;
        let artifact = read_optional(&dir.join(ARTIFACT))?;
        if manifest.is_none() && artifact.is_none() && !dir.exists() {
            return Ok(None);
        }
        Ok(Some(RawEntry { artifact, manifest }))
    }

    fn put(&self, key: &UnitKey, artifact: &[u8], manifest: &[u8]) -> Result<(), StorageError> {
        let shard = self.shard(key);
        fs::create_dir_all(&shard).map_err(err("create", &shard))?;
        let tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempdir_in(&shard)
            .map_err(err("create a temp dir in", &shard))?;
        // Artifact first, manifest last: even inside the temp dir, a
        // manifest only ever describes bytes already on disk.
        write_synced(&tmp.path().join(ARTIFACT), artifact)?;
        write_synced(&tmp.path().join(MANIFEST), manifest)?;
        sync_dir(tmp.path());
        let dest = self.entry_dir(key);
        match fs::rename(tmp.path(), &dest) {
            Ok(()) => {
                // The temp dir is now the entry; don't let its guard delete it.
                let _ = tmp.keep();
                sync_dir(&shard);
                Ok(())
            }
            // Someone published the same key first; theirs is as good.
            Err(_) if dest.join(MANIFEST).is_file() => Ok(()),
            Err(e) => Err(err("publish", &dest)(e)),
        }
    }

    fn touch(&self, key: &UnitKey) -> Result<(), StorageError> {
        let path = self.manifest_path(key);
        let f = File::options()
            .write(true)
            .open(&path)
            .map_err(err("open", &path))?;
        f.set_modified(SystemTime::now())
            .map_err(err("touch", &path))
    }

    fn remove(&self, key: &UnitKey) -> Result<(), StorageError> {
        let dir = self.entry_dir(key);
        let trash = self
            .shard(key)
            .join(format!(".trash-{}-{}", key.to_hex(), std::process::id()));
        // Renaming first makes removal atomic for readers: they see the
        // entry or nothing, never a half-deleted directory.
        match fs::rename(&dir, &trash) {
            Ok(()) => fs::remove_dir_all(&trash).map_err(err("remove", &trash)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(err("remove", &dir)(e)),
        }
    }

    fn list(&self) -> Result<Vec<EntryInfo>, StorageError> {
        let mut out = Vec::new();
        let shards = match fs::read_dir(&self.entries) {
            Ok(it) => it,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(err("list", &self.entries)(e)),
        };
        for shard in shards.filter_map(Result::ok) {
            for path in read_dir_paths(&shard.path()) {
                let Some(key) = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(UnitKey::from_hex)
                else {
                    continue;
                };
                let size = |name| fs::metadata(path.join(name)).map_or(0, |m| m.len());
                let last_used = fs::metadata(path.join(MANIFEST))
                    .or_else(|_| fs::metadata(&path))
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                out.push(EntryInfo {
                    key,
                    bytes: size(ARTIFACT) + size(MANIFEST),
                    last_used,
                });
            }
        }
        out.sort_by_key(|e| e.key);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_touch_remove_list() {
        let dir = tempfile::tempdir().expect("tempdir");
        let disk = LocalDisk::new(dir.path());
        let key = UnitKey([0xab; 32]);
        assert_eq!(disk.get(&key).expect("get"), None);
        disk.put(&key, b"bytes", b"{}").expect("put");
        assert!(
            disk.entry_dir(&key)
                .starts_with(dir.path().join("entries/ab"))
        );
        let raw = disk.get(&key).expect("get").expect("present");
        assert_eq!(raw.artifact.as_deref(), Some(&b"bytes"[..]));
        assert_eq!(raw.manifest.as_deref(), Some(&b"{}"[..]));
        // A second put of the same key keeps the first.
        disk.put(&key, b"other", b"{}").expect("put again");
        let listed = disk.list().expect("list");
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].bytes, 7);
        let old = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        File::options()
            .write(true)
            .open(disk.manifest_path(&key))
            .expect("open")
            .set_modified(old)
            .expect("set");
        disk.touch(&key).expect("touch");
        assert!(disk.list().expect("list")[0].last_used > old);
        disk.remove(&key).expect("remove");
        disk.remove(&key).expect("removing twice is fine");
        assert_eq!(disk.get(&key).expect("get"), None);
        assert!(disk.list().expect("list").is_empty());
        assert!(disk.leftovers().is_empty(), "no temp dirs left behind");
    }

    #[test]
    fn half_present_entry_is_returned_for_judging() {
        let dir = tempfile::tempdir().expect("tempdir");
        let disk = LocalDisk::new(dir.path());
        let key = UnitKey([1; 32]);
        disk.put(&key, b"bytes", b"{}").expect("put");
        fs::remove_file(disk.manifest_path(&key)).expect("rm");
        let raw = disk.get(&key).expect("get").expect("present");
        assert_eq!(raw.manifest, None);
        assert!(raw.artifact.is_some());
    }
}
