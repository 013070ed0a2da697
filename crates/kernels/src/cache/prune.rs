//! Whole-cache operations: prune (age, then size), verify, clear, stats.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::CacheError;
use super::lock;
use super::manifest::{Damage, Manifest, verify};
use super::storage::{LocalDisk, Storage};
use crate::key::{CACHE_SCHEMA, EntryKind, UnitKey};

pub(crate) const STATS_FILE: &str = "stats.jsonl";

/// Leftover temp dirs of killed publishers older than this are removed even
/// under a longer max age: a live publication takes milliseconds.
const LEFTOVER_AGE: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrunePolicy {
    /// Entries (and lock files) unused for longer than this are removed.
    pub max_age: Duration,
    /// Then the least recently used entries go until the total is under this.
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

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub removed_old: usize,
    pub removed_for_size: usize,
    pub freed_bytes: u64,
    pub kept: usize,
    pub kept_bytes: u64,
    /// Entries skipped because another process held their lock.
    pub busy: usize,
    pub stale_locks: usize,
    pub leftovers: usize,
}

/// Removes `key` if its lock is free right now. The lock file goes with
/// the entry: a process blocked on it will find it unlinked and relock.
fn remove_if_free(disk: &LocalDisk, dir: &Path, key: &UnitKey) -> Result<bool, CacheError> {
    let path = lock::lock_path(dir, key);
    let held = match lock::try_lock(&path) {
        Ok(Some(l)) => Some(l),
        Ok(None) => return Ok(false),
        // No lock file: nobody is compiling this key.
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(CacheError::Unusable { path, source });
        }
    };
    disk.remove(key)?;
    if held.is_some() {
        let _ = fs::remove_file(&path);
    }
    Ok(true)
}

fn age(now: SystemTime, then: SystemTime) -> Duration {
    now.duration_since(then).unwrap_or(Duration::ZERO)
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(it) = fs::read_dir(dir) else { return };
    for entry in it.filter_map(Result::ok) {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => files_under(&path, out),
            Ok(_) => out.push(path),
            Err(_) => {}
        }
    }
}

fn mtime(path: &Path) -> SystemTime {
    fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Removes entries unused for longer than `max_age`, then the least
/// recently used until the total is at most `max_size`; also stale lock
/// files, per-unit records and leftovers of killed publishers.
pub fn prune(dir: &Path, policy: &PrunePolicy) -> Result<PruneReport, CacheError> {
    let now = SystemTime::now();
    let disk = LocalDisk::new(dir);
    let mut report = PruneReport::default();
    let mut entries = disk.list()?;
    // Oldest first: the order of removal for size.
    entries.sort_by_key(|e| e.last_used);

    let mut kept = Vec::new();
    for e in entries {
        if age(now, e.last_used) > policy.max_age {
            if remove_if_free(&disk, dir, &e.key)? {
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
    let mut survivors = Vec::new();
    for e in kept {
        if total > policy.max_size && remove_if_free(&disk, dir, &e.key)? {
            report.removed_for_size += 1;
            report.freed_bytes += e.bytes;
            total -= e.bytes;
        } else {
            survivors.push(e);
        }
    }
    report.kept = survivors.len();
    report.kept_bytes = total;

    let mut locks = Vec::new();
    files_under(&dir.join("locks"), &mut locks);
    for path in locks {
        if age(now, mtime(&path)) > policy.max_age
            && let Ok(Some(_held)) = lock::try_lock(&path)
        {
            // Unlinked while held, so nobody can be handed this inode.
            if fs::remove_file(&path).is_ok() {
                report.stale_locks += 1;
            }
        }
    }

    let mut records = Vec::new();
    files_under(&dir.join("units"), &mut records);
    files_under(&dir.join("tools"), &mut records);
    for path in records {
        if age(now, mtime(&path)) > policy.max_age {
            let _ = fs::remove_file(&path);
        }
    }

    let leftover_age = policy.max_age.min(LEFTOVER_AGE);
    for (path, when) in disk.leftovers() {
        if age(now, when) > leftover_age && fs::remove_dir_all(&path).is_ok() {
            report.leftovers += 1;
        }
    }
    Ok(report)
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub checked: usize,
    /// Entries that failed verification; they have been removed.
    pub damaged: Vec<(UnitKey, PathBuf, Damage)>,
}

/// Checks every entry against its manifest and removes damaged ones.
///
/// Entries are checked for consistency with the schema their manifest
/// states, so entries of an older schema are not called damaged (they are
/// unreachable and age out through prune).
pub fn verify_all(dir: &Path) -> Result<VerifyReport, CacheError> {
    let disk = LocalDisk::new(dir);
    let mut report = VerifyReport::default();
    for e in disk.list()? {
        report.checked += 1;
        let check = |disk: &LocalDisk| -> Result<Option<Damage>, CacheError> {
            let Some(raw) = disk.get(&e.key)? else {
                return Ok(None);
            };
            let schema = raw
                .manifest
                .as_deref()
                .and_then(|m| serde_json::from_slice::<Manifest>(m).ok())
                .map_or(CACHE_SCHEMA, |m| m.schema);
            Ok(verify(
                e.key,
                schema,
                raw.manifest.as_deref(),
                raw.artifact.as_deref(),
            )
            .err())
        };
        if check(&disk)?.is_none() {
            continue;
        }
        // Judge again under the key's lock, so a publisher replacing the
        // entry right now is not mistaken for damage.
        let path = lock::lock_path(dir, &e.key);
        let _held = lock::lock(&path).map_err(|source| CacheError::Unusable {
            path: path.clone(),
            source,
        })?;
        if let Some(damage) = check(&disk)? {
            let entry = disk.entry_dir(&e.key);
            disk.remove(&e.key)?;
            report.damaged.push((e.key, entry, damage));
        }
    }
    Ok(report)
}

/// Removes every entry, lock file, record and the run history. Returns
/// the number of entries removed.
pub fn clear(dir: &Path) -> Result<usize, CacheError> {
    let disk = LocalDisk::new(dir);
    let n = disk.list()?.len();
    for sub in ["entries", "locks", "units", "tools"] {
        let path = dir.join(sub);
        match fs::remove_dir_all(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(CacheError::Unusable { path, source }),
        }
    }
    let _ = fs::remove_file(dir.join(STATS_FILE));
    Ok(n)
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
}

/// A row of [`CacheStats::by_kind`]: an entry's manifest kind, or
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

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CacheStats {
    pub entries: usize,
    pub bytes: u64,
    /// Entries per manifest kind, plus those whose manifest is unreadable.
    pub by_kind: std::collections::BTreeMap<StatKind, usize>,
    /// The most recent runs, oldest first.
    pub runs: Vec<RunStats>,
}

/// Entry counts and sizes plus the last `last_runs` runs' counters.
pub fn stats(dir: &Path, last_runs: usize) -> Result<CacheStats, CacheError> {
    let disk = LocalDisk::new(dir);
    let mut out = CacheStats::default();
    for e in disk.list()? {
        out.entries += 1;
        out.bytes += e.bytes;
        let kind = fs::read(disk.manifest_path(&e.key))
            .ok()
            .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
            .map_or(StatKind::Unreadable, |m| StatKind::Kind(m.kind));
        *out.by_kind.entry(kind).or_default() += 1;
    }
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
    use crate::key::KeyInputs;

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
        assert_eq!(report.removed_old, 1);
        assert_eq!(report.removed_for_size, 1);
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
        assert_eq!(report.busy, 1);
        drop(held);
        let report = prune(dir.path(), &PrunePolicy::default()).expect("prune");
        assert_eq!(report.removed_old, 1);
    }

    #[test]
    fn verify_removes_only_damaged_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let now = SystemTime::now();
        let good = put(dir.path(), 1, 10, now);
        let bad = put(dir.path(), 2, 10, now);
        let disk = LocalDisk::new(dir.path());
        fs::write(disk.artifact_path(&bad), [0u8; 10]).expect("corrupt");
        let report = verify_all(dir.path()).expect("verify");
        assert_eq!(report.checked, 2);
        assert_eq!(report.damaged.len(), 1);
        assert_eq!(report.damaged[0].0, bad);
        assert!(matches!(report.damaged[0].2, Damage::DigestMismatch { .. }));
        assert!(disk.get(&good).expect("get").is_some());
        assert!(disk.get(&bad).expect("get").is_none());
        assert!(verify_all(dir.path()).expect("verify").damaged.is_empty());
    }
}
