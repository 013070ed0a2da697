//! Whole-cache operations: prune (age, then size), verify, clear, stats.
//!
//! Each works on one tier through the [`Storage`] trait (`prune_in`,
//! `verify_in`, `stats_in`, [`Storage::clear`]), with the per-key lock
//! files of a local lock directory; [`prune`], [`verify_all`], [`stats`]
//! and [`clear`] apply them to the kernel tiers of a cache directory
//! (`entries/`, `objects/`) plus its local-only parts (lock files, `units/`
//! records, `tools/` and `digests/` memos, the run history). The golden tier gets the same
//! functions from the harness's golden cache, which reports it separately.

use std::fs;
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::CacheError;
use super::lock::{self, LOCKS_DIR};
use super::manifest::{Damage, Manifest, read_verified};
use super::storage::{LocalDisk, Part, Storage};
use crate::key::{EntryKind, UnitKey};

pub(crate) const STATS_FILE: &str = "stats.jsonl";

/// Leftover temp dirs of killed publishers older than this are removed even
/// under a longer max age: a live publication takes milliseconds.
pub const LEFTOVER_AGE: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrunePolicy {
    /// Entries (and lock files) unused for longer than this are removed.
    pub max_age: Duration,
    /// Then the least recently used entries go until the total is under
    /// this (per tier: scene entries and support objects each).
    pub max_size: u64,
}

impl Default for PrunePolicy {
    fn default() -> Self {
        PrunePolicy {
            max_age: Duration::from_secs(14 * 24 * 3600),
            max_size: 5 << 30,
        }
    }
}

/// What pruning one tier did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub removed_old: usize,
    pub removed_for_size: usize,
    pub freed_bytes: u64,
    pub kept: usize,
    pub kept_bytes: u64,
    /// Entries skipped because another process held their lock.
    pub busy: usize,
    pub leftovers: usize,
}

/// What pruning a cache directory did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CachePruneReport {
    /// Scene units and callables (`entries/`).
    pub entries: PruneReport,
    /// Support objects (`objects/`).
    pub objects: PruneReport,
    pub stale_locks: usize,
}

/// Removes `key` if its lock is free right now. The lock file goes with
/// the entry: a process blocked on it will find it unlinked and relock.
fn remove_if_free(storage: &dyn Storage, locks: &Path, key: &UnitKey) -> Result<bool, CacheError> {
    let path = lock::key_lock_path(locks, key);
    let held = match lock::try_lock(&path) {
        Ok(Some(l)) => Some(l),
        Ok(None) => return Ok(false),
        // No lock file: nobody is compiling this key.
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(CacheError::Unusable { path, source });
        }
    };
    storage.remove(key)?;
    if held.is_some() {
        let _ = fs::remove_file(&path);
    }
    Ok(true)
}

fn age(now: SystemTime, then: SystemTime) -> Duration {
    now.duration_since(then).unwrap_or(Duration::ZERO)
}

/// Removes the entries of one tier unused for longer than `max_age`, then
/// the least recently used until its total is at most `max_size`, and
/// leftovers of killed publishers. An entry whose lock (in `locks`) is held
/// is kept.
pub fn prune_in(
    storage: &dyn Storage,
    locks: &Path,
    policy: &PrunePolicy,
) -> Result<PruneReport, CacheError> {
    let now = SystemTime::now();
    let mut report = PruneReport::default();
    let mut entries = storage.list()?;
    // Oldest first: the order of removal for size.
    entries.sort_by_key(|e| e.last_used);

    let mut kept = Vec::new();
    for e in entries {
        if age(now, e.last_used) > policy.max_age {
            if remove_if_free(storage, locks, &e.key)? {
                report.removed_old += 1;
                report.freed_bytes += e.bytes;
            } else {
                report.busy += 1;
                kept.push(e);
            }
        } else {
            kept.push(e);
        }
    }
    let mut total: u64 = kept.iter().map(|e| e.bytes).sum();
    let mut survivors = 0;
    for e in kept {
        if total > policy.max_size && remove_if_free(storage, locks, &e.key)? {
            report.removed_for_size += 1;
            report.freed_bytes += e.bytes;
            total -= e.bytes;
        } else {
            survivors += 1;
        }
    }
    report.kept = survivors;
    report.kept_bytes = total;
    report.leftovers = storage.sweep_leftovers(policy.max_age.min(LEFTOVER_AGE))?;
    Ok(report)
}

/// Removes the lock files under `locks` unused for longer than `max_age`
/// that nobody holds; returns how many. A file goes only while held here
/// (unlinked under the lock), so nobody can be handed its inode: a waiter
/// on it relocks the new file.
pub fn prune_locks(locks: &Path, max_age: Duration) -> usize {
    let now = SystemTime::now();
    let mut lock_files = Vec::new();
    scene_util::files_under(locks, &mut lock_files);
    let mut removed = 0;
    for path in lock_files {
        if age(now, scene_util::mtime_or_epoch(&path)) > max_age
            && let Ok(Some(_held)) = lock::try_lock(&path)
            && fs::remove_file(&path).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Both kernel tiers of the cache in `dir`: scene entries, support objects.
fn tiers(dir: &Path) -> (LocalDisk, LocalDisk) {
    (LocalDisk::new(dir), LocalDisk::objects(dir))
}

/// Prunes both tiers of the cache in `dir` ([`prune_in`]), then stale lock
/// files, per-unit records, tool memos and the digest store.
pub fn prune(dir: &Path, policy: &PrunePolicy) -> Result<CachePruneReport, CacheError> {
    let now = SystemTime::now();
    let locks = dir.join(LOCKS_DIR);
    let (entries, objects) = tiers(dir);
    let mut report = CachePruneReport {
        entries: prune_in(&entries, &locks, policy)?,
        objects: prune_in(&objects, &locks, policy)?,
        stale_locks: 0,
    };

    report.stale_locks = prune_locks(&locks, policy.max_age);
    prune_preambles(dir, &objects);

    let mut records = Vec::new();
    scene_util::files_under(&dir.join("units"), &mut records);
    scene_util::files_under(&dir.join("tools"), &mut records);
    // The digest store is bounded by its own cap; one unwritten for this
    // long belongs to an unused cache.
    scene_util::files_under(&dir.join(crate::digests::DIGESTS_DIR), &mut records);
    for path in records {
        if age(now, scene_util::mtime_or_epoch(&path)) > policy.max_age {
            let _ = fs::remove_file(&path);
        }
    }
    Ok(report)
}

/// Removes the preamble headers whose PCH entry is gone: a PCH is only
/// ever compiled from its header, so the header lives as long as it. A
/// header whose key's lock is held is being compiled from (its PCH not
/// published yet) and is kept.
fn prune_preambles(dir: &Path, objects: &LocalDisk) {
    let locks = dir.join(LOCKS_DIR);
    let mut headers = Vec::new();
    scene_util::files_under(&dir.join(super::PREAMBLES_DIR), &mut headers);
    for path in headers {
        let key = path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(UnitKey::from_hex);
        let Some(key) = key else {
            let _ = fs::remove_file(&path);
            continue;
        };
        if !matches!(objects.get_manifest(&key), Ok(None)) {
            continue;
        }
        // Removed under the key's lock (the scrutinee lives to the end of
        // the match), kept while another holds it.
        match lock::try_lock(&lock::key_lock_path(&locks, &key)) {
            Ok(None) => {}
            Ok(Some(_)) | Err(_) => {
                let _ = fs::remove_file(&path);
            }
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub checked: usize,
    /// Entries that failed verification, with where they were
    /// ([`Storage::describe`]); they have been removed.
    pub damaged: Vec<(UnitKey, String, Damage)>,
}

/// What verifying a cache directory found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheVerifyReport {
    pub entries: VerifyReport,
    pub objects: VerifyReport,
}

impl CacheVerifyReport {
    pub fn is_clean(&self) -> bool {
        self.entries.damaged.is_empty() && self.objects.damaged.is_empty()
    }
}

/// Checks every entry of one tier against its manifest and removes damaged
/// ones (judged again under the key's lock in `locks`).
///
/// Entries are checked for consistency with the schema their manifest
/// states, so entries of an older schema are not called damaged (they are
/// unreachable and age out through prune).
pub fn verify_in(storage: &dyn Storage, locks: &Path) -> Result<VerifyReport, CacheError> {
    verify_in_with(storage, locks, &|_, _| Ok(()))
}

/// A judge of an entry's verified bytes (manifest, artifact) for
/// [`verify_in_with`].
pub type ContentCheck = dyn Fn(&Manifest, &[u8]) -> Result<(), Damage>;

/// [`verify_in`] with a check of the verified bytes by whoever knows what
/// they are (the golden cache decodes its outputs): an entry it rejects is
/// damaged like one whose digest does not match.
pub fn verify_in_with(
    storage: &dyn Storage,
    locks: &Path,
    content: &ContentCheck,
) -> Result<VerifyReport, CacheError> {
    let mut report = VerifyReport::default();
    let check = |key: &UnitKey| -> Result<Option<Damage>, CacheError> {
        Ok(match read_verified(storage, key, None)? {
            None => None,
            Some(Ok((manifest, artifact))) => content(&manifest, &artifact).err(),
            Some(Err(damage)) => Some(damage),
        })
    };
    for e in storage.list()? {
        report.checked += 1;
        if check(&e.key)?.is_none() {
            continue;
        }
        // Judge again under the key's lock, so a publisher replacing the
        // entry right now is not mistaken for damage.
        let path = lock::key_lock_path(locks, &e.key);
        let _held = lock::lock(&path).map_err(|source| CacheError::Unusable {
            path: path.clone(),
            source,
        })?;
        if let Some(damage) = check(&e.key)? {
            let place = storage.describe(&e.key);
            storage.remove(&e.key)?;
            report.damaged.push((e.key, place, damage));
        }
    }
    Ok(report)
}

/// Verifies both tiers of the cache in `dir` ([`verify_in`]).
pub fn verify_all(dir: &Path) -> Result<CacheVerifyReport, CacheError> {
    let locks = dir.join(LOCKS_DIR);
    let (entries, objects) = tiers(dir);
    Ok(CacheVerifyReport {
        entries: verify_in(&entries, &locks)?,
        objects: verify_in(&objects, &locks)?,
    })
}

/// How many entries [`clear`] removed, per tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClearReport {
    pub entries: usize,
    pub objects: usize,
}

/// Removes every entry of both tiers ([`Storage::clear`]), and every lock
/// file, record, memo (tools, digests) and the run history.
pub fn clear(dir: &Path) -> Result<ClearReport, CacheError> {
    let (entries, objects) = tiers(dir);
    let report = ClearReport {
        entries: entries.clear()?,
        objects: objects.clear()?,
    };
    for sub in [
        LOCKS_DIR,
        "units",
        "tools",
        crate::digests::DIGESTS_DIR,
        super::PREAMBLES_DIR,
    ] {
        let path = dir.join(sub);
        match fs::remove_dir_all(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(CacheError::Unusable { path, source }),
        }
    }
    let _ = fs::remove_file(dir.join(STATS_FILE));
    Ok(report)
}

/// One process run's cache use, as appended to `stats.jsonl`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    pub unix: u64,
    pub pid: u32,
    /// Units taken from the persistent cache.
    pub hits: u64,
    /// Units not in it.
    pub misses: u64,
    /// Units that ran the compiler.
    pub compiles: u64,
    /// Seconds spent compiling.
    pub compile_s: f64,
    /// Compile seconds the hits' entries recorded: what the hits saved.
    pub saved_s: f64,
    /// Of `hits`, the units served by the remote tier (0 without one).
    #[serde(default)]
    pub remote_hits: u64,
    /// Of `misses`, the units the remote tier did not have (or had
    /// damaged) when asked.
    #[serde(default)]
    pub remote_misses: u64,
    /// Remote operations that failed (the first disables the remote).
    #[serde(default)]
    pub remote_errors: u64,
    /// Bytes read from the remote tier (verified or not).
    #[serde(default)]
    pub remote_read_bytes: u64,
    /// Bytes written to the remote tier.
    #[serde(default)]
    pub remote_written_bytes: u64,
}

/// A row of [`TierStats::by_kind`]: an entry's manifest kind, or
/// `unreadable` (sorted last) when its manifest cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StatKind {
    Kind(EntryKind),
    Unreadable,
}

impl std::fmt::Display for StatKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatKind::Kind(kind) => kind.fmt(f),
            StatKind::Unreadable => f.write_str("unreadable"),
        }
    }
}

/// Entry counts and sizes of one tier.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TierStats {
    pub entries: usize,
    pub bytes: u64,
    /// Entries per manifest kind, plus those whose manifest is unreadable.
    pub by_kind: std::collections::BTreeMap<StatKind, usize>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CacheStats {
    /// Scene units and callables (`entries/`).
    pub entries: TierStats,
    /// Support objects (`objects/`).
    pub objects: TierStats,
    /// The most recent runs, oldest first.
    pub runs: Vec<RunStats>,
}

/// Entry counts and sizes of one tier, by manifest kind.
pub fn stats_in(storage: &dyn Storage) -> Result<TierStats, CacheError> {
    let mut out = TierStats::default();
    for e in storage.list()? {
        out.entries += 1;
        out.bytes += e.bytes;
        let kind = match storage.get_manifest(&e.key)? {
            Some(Part::Bytes(b)) => serde_json::from_slice::<Manifest>(&b)
                .map_or(StatKind::Unreadable, |m| StatKind::Kind(m.kind)),
            _ => StatKind::Unreadable,
        };
        *out.by_kind.entry(kind).or_default() += 1;
    }
    Ok(out)
}

/// Both tiers' counts and sizes plus the last `last_runs` runs' counters.
pub fn stats(dir: &Path, last_runs: usize) -> Result<CacheStats, CacheError> {
    let (entries, objects) = tiers(dir);
    let mut out = CacheStats {
        entries: stats_in(&entries)?,
        objects: stats_in(&objects)?,
        runs: Vec::new(),
    };
    let text = fs::read_to_string(dir.join(STATS_FILE)).unwrap_or_default();
    // A line torn by a crash is skipped, not fatal.
    let runs: Vec<RunStats> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    out.runs = runs[runs.len().saturating_sub(last_runs)..].to_vec();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{EntryInfo, RawEntry, StorageError};
    use crate::key::{CACHE_SCHEMA, KeyInputs};

    fn put(dir: &Path, n: u8, size: usize, used: SystemTime) -> UnitKey {
        let mut inputs = KeyInputs::default();
        inputs.0.insert("n".into(), n.to_string());
        inputs.0.insert("schema".into(), CACHE_SCHEMA.to_string());
        let key = inputs.key();
        let bytes = vec![n; size];
        let m = Manifest::new(key, EntryKind::Incore, &bytes, &inputs, "u", 0.1);
        let disk = LocalDisk::new(dir);
        disk.put(&key, &bytes, &m.to_bytes()).expect("put");
        fs::File::options()
            .write(true)
            .open(disk.manifest_path(&key))
            .expect("open")
            .set_modified(used)
            .expect("mtime");
        key
    }

    #[test]
    fn prunes_by_age_then_least_recently_used() {
        let dir = tempfile::tempdir().expect("tempdir");
        let now = SystemTime::now();
        let day = Duration::from_secs(86400);
        let ancient = put(dir.path(), 1, 100, now - day * 30);
        let older = put(dir.path(), 2, 1000, now - day * 3);
        let newer = put(dir.path(), 3, 1000, now - day);
        let newest = put(dir.path(), 4, 1000, now);
        let disk = LocalDisk::new(dir.path());
        let size_of = |k: &UnitKey| {
            disk.list()
                .expect("list")
                .iter()
                .find(|e| e.key == *k)
                .map(|e| e.bytes)
                .expect("listed")
        };
        let budget = size_of(&newer) + size_of(&newest);
        let report = prune(
            dir.path(),
            &PrunePolicy {
                max_age: day * 14,
                max_size: budget,
            },
        )
        .expect("prune");
        assert_eq!(report.entries.removed_old, 1);
        assert_eq!(report.entries.removed_for_size, 1);
        let left: Vec<UnitKey> = disk.list().expect("list").iter().map(|e| e.key).collect();
        assert!(
            !left.contains(&ancient) && !left.contains(&older),
            "{left:?}"
        );
        assert!(left.contains(&newer) && left.contains(&newest));
    }

    #[test]
    fn locked_entries_survive_prune() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = SystemTime::now() - Duration::from_secs(86400 * 30);
        let key = put(dir.path(), 1, 10, old);
        let held = lock::lock(&lock::lock_path(dir.path(), &key)).expect("lock");
        let report = prune(dir.path(), &PrunePolicy::default()).expect("prune");
        assert_eq!(report.entries.busy, 1);
        drop(held);
        let report = prune(dir.path(), &PrunePolicy::default()).expect("prune");
        assert_eq!(report.entries.removed_old, 1);
    }

    #[test]
    fn verify_removes_only_damaged_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let now = SystemTime::now();
        let good = put(dir.path(), 1, 10, now);
        let bad = put(dir.path(), 2, 10, now);
        let disk = LocalDisk::new(dir.path());
        fs::write(disk.artifact_path(&bad), [0u8; 10]).expect("corrupt");
        let report = verify_all(dir.path()).expect("verify").entries;
        assert_eq!(report.checked, 2);
        assert_eq!(report.damaged.len(), 1);
        assert_eq!(report.damaged[0].0, bad);
        assert!(matches!(report.damaged[0].2, Damage::DigestMismatch { .. }));
        assert!(disk.get(&good).expect("get").is_some());
        assert!(disk.get(&bad).expect("get").is_none());
        assert!(verify_all(dir.path()).expect("verify").is_clean());
    }

    /// A tier that is not a directory: entries in a map, "last used" set by
    /// hand. Only the required methods; every default is exercised.
    #[derive(Debug, Default)]
    struct Memory {
        entries: std::sync::Mutex<std::collections::BTreeMap<UnitKey, (RawEntry, SystemTime)>>,
    }

    impl Memory {
        fn map(
            &self,
        ) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<UnitKey, (RawEntry, SystemTime)>>
        {
            self.entries.lock().expect("memory storage")
        }

        fn put_entry(&self, n: u8, kind: EntryKind, size: usize, used: SystemTime) -> UnitKey {
            let mut inputs = KeyInputs::default();
            inputs.0.insert("n".into(), n.to_string());
            let key = inputs.key();
            let bytes = vec![n; size];
            let m = Manifest::new(key, kind, &bytes, &inputs, "u", 0.1);
            self.put(&key, &bytes, &m.to_bytes()).expect("put");
            self.map().get_mut(&key).expect("stored").1 = used;
            key
        }
    }

    impl Storage for Memory {
        fn get(&self, key: &UnitKey) -> Result<Option<RawEntry>, StorageError> {
            Ok(self.map().get(key).map(|(raw, _)| raw.clone()))
        }
        fn put(&self, key: &UnitKey, artifact: &[u8], manifest: &[u8]) -> Result<(), StorageError> {
            let raw = RawEntry {
                artifact: Part::Bytes(artifact.to_vec()),
                manifest: Part::Bytes(manifest.to_vec()),
            };
            self.map().entry(*key).or_insert((raw, SystemTime::now()));
            Ok(())
        }
        fn touch(&self, key: &UnitKey) -> Result<(), StorageError> {
            if let Some(e) = self.map().get_mut(key) {
                e.1 = SystemTime::now();
            }
            Ok(())
        }
        fn remove(&self, key: &UnitKey) -> Result<(), StorageError> {
            self.map().remove(key);
            Ok(())
        }
        fn list(&self) -> Result<Vec<EntryInfo>, StorageError> {
            let size = |p: &Part| p.bytes().map_or(0, |b| b.len() as u64);
            Ok(self
                .map()
                .iter()
                .map(|(key, (raw, used))| EntryInfo {
                    key: *key,
                    bytes: size(&raw.artifact) + size(&raw.manifest),
                    last_used: *used,
                })
                .collect())
        }
    }

    #[test]
    fn preamble_headers_live_as_long_as_their_entries() {
        let dir = tempfile::tempdir().expect("cache");
        let objects = LocalDisk::objects(dir.path());
        let kept = UnitKey([1; 32]);
        let orphan = UnitKey([2; 32]);
        // A builder holds this key's lock: its PCH is not published yet.
        let building = UnitKey([3; 32]);
        let held =
            lock::lock(&lock::key_lock_path(&dir.path().join(LOCKS_DIR), &building)).expect("lock");
        objects.put(&kept, b"pch", b"{}").expect("put");
        let home = dir.path().join(super::super::PREAMBLES_DIR);
        fs::create_dir_all(&home).expect("mkdir");
        for name in [
            format!("{}.hpp", kept.to_hex()),
            format!("{}.hpp", orphan.to_hex()),
            format!("{}.hpp", building.to_hex()),
            "not-a-key.hpp".to_owned(),
        ] {
            fs::write(home.join(name), "#include <x.h>\n").expect("header");
        }
        prune(dir.path(), &PrunePolicy::default()).expect("prune");
        let mut left: Vec<_> = fs::read_dir(&home)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut expected = [
            format!("{}.hpp", kept.to_hex()),
            format!("{}.hpp", building.to_hex()),
        ];
        expected.sort();
        assert_eq!(left, expected);
        drop(held);
        prune(dir.path(), &PrunePolicy::default()).expect("prune");
        assert!(!home.join(format!("{}.hpp", building.to_hex())).exists());
        clear(dir.path()).expect("clear");
        assert!(!home.exists(), "clear removes them all");
    }

    #[test]
    fn whole_cache_operations_work_on_any_storage() {
        let locks = tempfile::tempdir().expect("locks");
        let memory = Memory::default();
        let now = SystemTime::now();
        let day = Duration::from_secs(86400);
        let old = memory.put_entry(1, EntryKind::Incore, 10, now - day * 30);
        let good = memory.put_entry(2, EntryKind::Callable, 10, now);
        let bad = memory.put_entry(3, EntryKind::Builtins, 10, now);
        let short = memory.put_entry(4, EntryKind::Orchestration, 10, now);
        let golden = memory.put_entry(5, EntryKind::Golden, 10, now);
        let preamble = memory.put_entry(6, EntryKind::Preamble, 10, now);
        let host = memory.put_entry(7, EntryKind::Host, 10, now);
        // Damage two: a flipped byte, and an artifact of the wrong length.
        if let Some((raw, _)) = memory.map().get_mut(&bad) {
            raw.artifact = Part::Bytes(vec![9; 10]);
        }
        if let Some((raw, _)) = memory.map().get_mut(&short) {
            raw.artifact = Part::Bytes(vec![4; 3]);
        }

        let tier = stats_in(&memory).expect("stats");
        assert_eq!(tier.entries, 7);
        for kind in EntryKind::ALL {
            assert_eq!(tier.by_kind.get(&StatKind::Kind(kind)), Some(&1), "{kind}");
        }
        assert!(tier.bytes > 40);

        let report = verify_in(&memory, locks.path()).expect("verify");
        assert_eq!(report.checked, 7);
        let mut damaged: Vec<_> = report
            .damaged
            .iter()
            .map(|(k, _, d)| (*k, d.clone()))
            .collect();
        damaged.sort_by_key(|(k, _)| *k);
        let mut expected = vec![(bad, "digest"), (short, "size")];
        expected.sort_by_key(|(k, _)| *k);
        assert_eq!(damaged.len(), 2, "{damaged:?}");
        for ((key, damage), (want_key, what)) in damaged.iter().zip(&expected) {
            assert_eq!(key, want_key);
            match *what {
                "digest" => assert!(matches!(damage, Damage::DigestMismatch { .. }), "{damage}"),
                _ => assert!(
                    matches!(
                        damage,
                        Damage::SizeMismatch {
                            expected: 10,
                            found: 3
                        }
                    ),
                    "{damage}"
                ),
            }
        }
        assert!(
            report.damaged[0].1.starts_with("entry "),
            "default describe"
        );
        assert!(memory.get(&bad).expect("get").is_none(), "damage removed");

        // A content check rejects what verifies byte for byte: damage too.
        let report = verify_in_with(&memory, locks.path(), &|m, bytes| {
            assert_eq!(bytes.len() as u64, m.size, "only verified bytes reach it");
            match m.kind {
                EntryKind::Golden => Err(Damage::Content("not outputs".into())),
                _ => Ok(()),
            }
        })
        .expect("verify");
        assert_eq!(report.checked, 5);
        assert_eq!(
            report
                .damaged
                .iter()
                .map(|(k, _, d)| (*k, d.to_string()))
                .collect::<Vec<_>>(),
            vec![(golden, "artifact content: not outputs".to_string())]
        );
        assert!(
            memory.get(&golden).expect("get").is_none(),
            "damage removed"
        );

        let report = prune_in(&memory, locks.path(), &PrunePolicy::default()).expect("prune");
        assert_eq!(report.removed_old, 1);
        assert_eq!(report.kept, 3);
        assert!(memory.get(&old).expect("get").is_none());
        assert!(memory.get(&good).expect("get").is_some());
        assert!(memory.get(&preamble).expect("get").is_some());
        assert!(memory.get(&host).expect("get").is_some());
        assert_eq!(report.leftovers, 0, "the default sweep does nothing");

        assert_eq!(memory.clear().expect("clear"), 3);
        assert_eq!(stats_in(&memory).expect("stats").entries, 0);
    }
}
