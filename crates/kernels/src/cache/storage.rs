//! Where cache entries live. Everything that touches entries goes through
//! [`Storage`] (read, publish, touch, remove, list, sweep, clear, and a
//! description for messages), so that another tier gets lookups, stats,
//! verification, pruning and clearing without touching their callers;
//! [`LocalDisk`] is the local implementation, used for two tiers of one
//! cache directory (`entries/` and `objects/`), and
//! [`super::TieredStorage`] puts a remote store behind it.
//!
//! Storage moves bytes only: it does not judge them. Verification (size,
//! digest, manifest sanity) happens above it, in [`super::Cache`], so every
//! tier gets the same checks. What it does report is a stored file that is
//! not a plain file of bytes ([`Part::NotAFile`]) or, when the caller said
//! how long the artifact must be, one of another length ([`Part::WrongSize`]):
//! such files are never read, so a link to `/dev/zero` or a FIFO cannot
//! exhaust memory or block a reader.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

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

/// One stored file (artifact or manifest) as a read found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Missing,
    Bytes(Vec<u8>),
    /// Present but not a regular file (`"a symbolic link"`, `"a FIFO"`,
    /// `"a directory"`, `"a device"`, `"a socket"`): not read.
    NotAFile(&'static str),
    /// A regular file of this length, not the one asked for: not read.
    WrongSize(u64),
}

impl Part {
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Part::Bytes(b) => Some(b),
            _ => None,
        }
    }
}

/// The parts stored under one key, unverified. Either part may be missing
/// or unreadable (damage); no entry at all is reported as `None` instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry {
    pub artifact: Part,
    pub manifest: Part,
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

/// Manifests are a few KiB; anything beyond this is not one.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

pub trait Storage: Send + Sync + fmt::Debug {
    /// What is stored under `key`; `Ok(None)` when nothing is.
    fn get(&self, key: &UnitKey) -> Result<Option<RawEntry>, StorageError>;
    /// The manifest stored under `key` (`Some(Part::Missing)`: an entry
    /// without one); `Ok(None)` when nothing is stored under `key`.
    fn get_manifest(&self, key: &UnitKey) -> Result<Option<Part>, StorageError> {
        Ok(self.get(key)?.map(|raw| raw.manifest))
    }
    /// The artifact stored under `key`, read only if it is `expected_len`
    /// bytes long ([`Part::WrongSize`] otherwise).
    fn get_artifact(&self, key: &UnitKey, expected_len: u64) -> Result<Part, StorageError> {
        Ok(match self.get(key)? {
            None => Part::Missing,
            Some(raw) => match raw.artifact {
                Part::Bytes(b) if b.len() as u64 != expected_len => Part::WrongSize(b.len() as u64),
                other => other,
            },
        })
    }
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
    /// Where the entry of `key` lives, for messages.
    fn describe(&self, key: &UnitKey) -> String {
        format!("entry {key}")
    }
    /// Removes what interrupted publications and removals left behind,
    /// if older than `older_than`; returns how many. Nothing by default.
    fn sweep_leftovers(&self, older_than: Duration) -> Result<usize, StorageError> {
        let _ = older_than;
        Ok(0)
    }
    /// Removes every entry; returns how many there were.
    fn clear(&self) -> Result<usize, StorageError> {
        let listed = self.list()?;
        for e in &listed {
            self.remove(&e.key)?;
        }
        Ok(listed.len())
    }
}

pub(crate) const ARTIFACT: &str = "artifact";
pub(crate) const MANIFEST: &str = "manifest.json";

/// Entries on a local file system:
///
/// ```text
/// <root>/<first 2 hex digits>/<key hex>/artifact
/// <root>/<first 2 hex digits>/<key hex>/manifest.json
/// ```
///
/// with `<root>` = `<cache dir>/entries` ([`LocalDisk::new`]) for scene
/// units and callables, `<cache dir>/objects` ([`LocalDisk::objects`]) for
/// support objects (the builtins) and `<cache dir>/goldens/store`
/// ([`LocalDisk::goldens`]) for the harness's computed goldens.
///
/// An entry is a directory so that publication is one `rename` of a fully
/// written (and synced) temp directory next to it: a process killed at any
/// point leaves either a `.tmp-*` directory (never read as an entry) or the
/// complete entry. Removal renames the entry away first for the same reason.
#[derive(Debug, Clone)]
pub struct LocalDisk {
    entries: PathBuf,
}

pub(crate) const ENTRIES_DIR: &str = "entries";
pub(crate) const OBJECTS_DIR: &str = "objects";
/// The golden cache's directory in a cache directory: its tier in
/// [`GOLDEN_STORE`], its own records (last inputs per case, fixture digests)
/// beside it.
pub const GOLDENS_DIR: &str = "goldens";
/// The golden tier under [`GOLDENS_DIR`]. Not `entries`: that name held the
/// golden cache's earlier, per-output layout, whose entries would otherwise
/// be listed (and called damaged) here.
pub const GOLDEN_STORE: &str = "store";

impl LocalDisk {
    /// The scene units and callables of the cache in `dir`.
    pub fn new(dir: &Path) -> Self {
        LocalDisk::at(dir.join(ENTRIES_DIR))
    }

    /// The support objects (builtins) of the cache in `dir`.
    pub fn objects(dir: &Path) -> Self {
        LocalDisk::at(dir.join(OBJECTS_DIR))
    }

    /// The computed goldens of the cache in `dir`.
    pub fn goldens(dir: &Path) -> Self {
        LocalDisk::at(dir.join(GOLDENS_DIR).join(GOLDEN_STORE))
    }

    /// Entries sharded directly under `root`.
    pub fn at(root: PathBuf) -> Self {
        LocalDisk { entries: root }
    }

    pub fn root(&self) -> &Path {
        &self.entries
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

    /// Leftovers of interrupted publications and removals, with their age:
    /// temp and trash directories, and anything else in a shard that is
    /// not named by a key (no lookup or listing ever sees it, so without
    /// this it would stay forever).
    fn leftovers(&self) -> Vec<(PathBuf, SystemTime)> {
        let mut out = Vec::new();
        for shard in read_dir_paths(&self.entries) {
            for path in read_dir_paths(&shard) {
                let is_entry = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| key_named(n).is_some());
                if !is_entry {
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

/// The key an entry directory named `name` holds: only the exact form
/// [`UnitKey::to_hex`] writes, so that the entry's path is its name.
fn key_named(name: &str) -> Option<UnitKey> {
    UnitKey::from_hex(name).filter(|k| k.to_hex() == name)
}

fn read_dir_paths(dir: &Path) -> Vec<PathBuf> {
    match fs::read_dir(dir) {
        Ok(it) => it.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => Vec::new(),
    }
}

/// Reads `path` only if it is a regular file (not followed if a link,
/// never blocking on a FIFO or device) whose length is `expected` (if
/// given) and at most `limit`: `scene_util::read_regular_file`, the one
/// safe read of data from disk. Damage is a [`Part`], never an error.
fn read_part(path: &Path, expected: Option<u64>, limit: u64) -> Result<Part, StorageError> {
    use scene_util::ReadError;
    match scene_util::read_regular_file(path, expected, limit) {
        Ok(bytes) => Ok(Part::Bytes(bytes)),
        Err(e) if e.is_not_found() => Ok(Part::Missing),
        Err(ReadError::Symlink { .. }) => Ok(Part::NotAFile("a symbolic link")),
        Err(ReadError::NotRegular { kind, .. }) => Ok(Part::NotAFile(match kind {
            "directory" => "a directory",
            "FIFO" => "a FIFO",
            "socket" => "a socket",
            "character device" | "block device" => "a device",
            _ => "not a regular file",
        })),
        Err(ReadError::SizeMismatch { found, .. } | ReadError::TooLarge { found, .. }) => {
            Ok(Part::WrongSize(found))
        }
        Err(ReadError::Io { source, .. }) => Err(err("read", path)(source)),
    }
}

fn write_file(path: &Path, bytes: &[u8], sync: bool) -> Result<(), StorageError> {
    let mut f = File::create(path).map_err(err("create", path))?;
    f.write_all(bytes).map_err(err("write", path))?;
    if sync {
        f.sync_all().map_err(err("sync", path))?;
    }
    Ok(())
}

/// Syncs a directory so a rename inside it survives a crash.
fn sync_dir(dir: &Path) {
    // Best effort: some file systems refuse to fsync directories, and the
    // entry is still never read half-written (rename is atomic).
    if let Ok(f) = File::open(dir) {
        let _ = f.sync_all();
    }
}

impl LocalDisk {
    /// [`Storage::put`] without syncing files and directories: for copies
    /// of entries that exist elsewhere (a verified remote entry). Still
    /// atomic for readers; a crash may leave an entry whose files are
    /// short, which every read detects (size, blake3) as damage.
    pub fn put_unsynced(
        &self,
        key: &UnitKey,
        artifact: &[u8],
        manifest: &[u8],
    ) -> Result<(), StorageError> {
        self.publish(key, artifact, manifest, false)
    }

    fn publish(
        &self,
        key: &UnitKey,
        artifact: &[u8],
        manifest: &[u8],
        sync: bool,
    ) -> Result<(), StorageError> {
        let shard = self.shard(key);
        fs::create_dir_all(&shard).map_err(err("create", &shard))?;
        let tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempdir_in(&shard)
            .map_err(err("create a temp dir in", &shard))?;
        // Artifact first, manifest last: even inside the temp dir, a
        // manifest only ever describes bytes already on disk.
        write_file(&tmp.path().join(ARTIFACT), artifact, sync)?;
        write_file(&tmp.path().join(MANIFEST), manifest, sync)?;
        if sync {
            sync_dir(tmp.path());
        }
        let dest = self.entry_dir(key);
        match fs::rename(tmp.path(), &dest) {
            Ok(()) => {
                // The temp dir is now the entry; don't let its guard delete it.
                let _ = tmp.keep();
                if sync {
                    sync_dir(&shard);
                }
                Ok(())
            }
            // Someone published the same key first; theirs is as good.
            Err(_) if dest.join(MANIFEST).is_file() => Ok(()),
            Err(e) => Err(err("publish", &dest)(e)),
        }
    }
}

impl Storage for LocalDisk {
    fn get(&self, key: &UnitKey) -> Result<Option<RawEntry>, StorageError> {
        let Some(manifest) = self.get_manifest(key)? else {
            return Ok(None);
        };
        let artifact = read_part(&self.artifact_path(key), None, u64::MAX)?;
        Ok(Some(RawEntry { artifact, manifest }))
    }

    fn get_manifest(&self, key: &UnitKey) -> Result<Option<Part>, StorageError> {
        let dir = self.entry_dir(key);
        let manifest = read_part(&dir.join(MANIFEST), None, MAX_MANIFEST_BYTES)?;
        if manifest == Part::Missing && fs::symlink_metadata(&dir).is_err() {
            return Ok(None);
        }
        Ok(Some(manifest))
    }

    fn get_artifact(&self, key: &UnitKey, expected_len: u64) -> Result<Part, StorageError> {
        read_part(&self.artifact_path(key), Some(expected_len), u64::MAX)
    }

    fn put(&self, key: &UnitKey, artifact: &[u8], manifest: &[u8]) -> Result<(), StorageError> {
        self.publish(key, artifact, manifest, true)
    }

    fn touch(&self, key: &UnitKey) -> Result<(), StorageError> {
        let path = self.manifest_path(key);
        let f = File::options()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
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
                    .and_then(key_named)
                else {
                    continue;
                };
                let size = |name| fs::symlink_metadata(path.join(name)).map_or(0, |m| m.len());
                let last_used = fs::symlink_metadata(path.join(MANIFEST))
                    .or_else(|_| fs::symlink_metadata(&path))
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

    fn describe(&self, key: &UnitKey) -> String {
        self.entry_dir(key).display().to_string()
    }

    fn sweep_leftovers(&self, older_than: Duration) -> Result<usize, StorageError> {
        let now = SystemTime::now();
        let mut removed = 0;
        for (path, when) in self.leftovers() {
            let age = now.duration_since(when).unwrap_or(Duration::ZERO);
            // Best effort: another sweeper may be removing it too.
            if age > older_than && scene_util::remove_any(&path).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    fn clear(&self) -> Result<usize, StorageError> {
        let n = self.list()?.len();
        match fs::remove_dir_all(&self.entries) {
            Ok(()) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(n),
            Err(e) => Err(err("remove", &self.entries)(e)),
        }
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
        assert_eq!(raw.artifact, Part::Bytes(b"bytes".to_vec()));
        assert_eq!(raw.manifest, Part::Bytes(b"{}".to_vec()));
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
        assert_eq!(raw.manifest, Part::Missing);
        assert!(raw.artifact.bytes().is_some());
    }

    #[test]
    fn files_that_are_not_regular_are_never_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let disk = LocalDisk::new(dir.path());
        let key = UnitKey([2; 32]);
        disk.put(&key, b"bytes", b"{}").expect("put");
        assert_eq!(
            disk.get_artifact(&key, 5).expect("read"),
            Part::Bytes(b"bytes".to_vec())
        );
        assert_eq!(
            disk.get_artifact(&key, 4).expect("read"),
            Part::WrongSize(5)
        );
        let artifact = disk.artifact_path(&key);
        fs::remove_file(&artifact).expect("rm");
        std::os::unix::fs::symlink("/dev/zero", &artifact).expect("symlink");
        assert_eq!(
            disk.get_artifact(&key, 5).expect("read"),
            Part::NotAFile("a symbolic link")
        );
        fs::remove_file(&artifact).expect("rm");
        fs::create_dir(&artifact).expect("mkdir");
        assert_eq!(
            disk.get_artifact(&key, 5).expect("read"),
            Part::NotAFile("a directory")
        );
        let manifest = disk.manifest_path(&key);
        fs::remove_file(&manifest).expect("rm");
        let elsewhere = dir.path().join("elsewhere.json");
        fs::write(&elsewhere, b"{}").expect("write");
        std::os::unix::fs::symlink(&elsewhere, &manifest).expect("symlink");
        assert_eq!(
            disk.get_manifest(&key).expect("read"),
            Some(Part::NotAFile("a symbolic link"))
        );
        assert!(disk.touch(&key).is_err(), "touch does not follow links");
        assert_eq!(fs::read(&elsewhere).expect("read"), b"{}");
    }

    #[test]
    fn names_that_are_not_keys_are_never_entries_and_are_swept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let disk = LocalDisk::goldens(dir.path());
        assert!(disk.root().ends_with("goldens/store"));
        let key = UnitKey([0xab; 32]);
        disk.put(&key, b"a", b"{}").expect("put");
        let shard = disk.root().join("ab");
        let upper = shard.join(key.to_hex().to_uppercase());
        let strays = [shard.join("a\u{e9}"), upper.clone(), shard.join("junk")];
        fs::create_dir_all(&strays[0]).expect("mkdir");
        fs::create_dir_all(&upper).expect("mkdir");
        fs::write(upper.join(MANIFEST), b"{}").expect("write");
        fs::write(&strays[2], b"x").expect("write");
        let listed = disk.list().expect("list");
        assert_eq!(listed.iter().map(|e| e.key).collect::<Vec<_>>(), [key]);
        let old = SystemTime::now() - Duration::from_secs(7200);
        for stray in &strays {
            File::open(stray)
                .expect("open")
                .set_modified(old)
                .expect("age it");
        }
        assert_eq!(
            disk.sweep_leftovers(Duration::from_secs(3600))
                .expect("sweep"),
            3
        );
        assert!(strays.iter().all(|s| !s.exists()));
        assert_eq!(disk.list().expect("list").len(), 1);
        assert!(disk.get(&key).expect("get").is_some(), "the entry stays");
    }

    #[test]
    fn sweep_and_clear() {
        let dir = tempfile::tempdir().expect("tempdir");
        let disk = LocalDisk::objects(dir.path());
        assert!(disk.root().ends_with("objects"));
        disk.put(&UnitKey([5; 32]), b"a", b"{}").expect("put");
        disk.put(&UnitKey([6; 32]), b"b", b"{}").expect("put");
        let leftover = disk.root().join("05").join(".tmp-killed");
        fs::create_dir_all(&leftover).expect("mkdir");
        File::open(&leftover)
            .expect("open")
            .set_modified(SystemTime::now() - Duration::from_secs(600))
            .expect("age it");
        assert_eq!(
            disk.sweep_leftovers(Duration::from_secs(3600))
                .expect("sweep"),
            0
        );
        assert_eq!(
            disk.sweep_leftovers(Duration::from_secs(60))
                .expect("sweep"),
            1
        );
        assert!(!leftover.exists());
        assert_eq!(disk.clear().expect("clear"), 2);
        assert!(disk.list().expect("list").is_empty());
        assert_eq!(disk.clear().expect("clear again"), 0);
    }
}
