//! The golden cache: computed goldens (Rust or Python), content-addressed,
//! under `<cache dir>/goldens/`.
//!
//! A key is blake3 over what decides a golden ([`GoldenInputs`]): the
//! golden's code identity (a Rust golden: the registry's digest of the
//! golden sources and the function's name; a Python golden: its file, the
//! local modules it imports, the driver, the python / numpy / torch
//! versions), the digest of every input tensor (dtype, shape, bytes), the
//! case's params and scalar values, and the outputs' names, dtypes and
//! shapes. The same rules as the kernel cache:
//!
//! - an entry is `entries/<xx>/<key>/{manifest.json, <i>.npy}`, written in
//!   `tmp/` and published by renaming the directory (a reader sees a whole
//!   entry or none);
//! - a read checks every file is a regular file of its recorded size and
//!   blake3 before using it; anything else is a miss (the entry is removed
//!   and recomputed);
//! - one process computes a key at a time (`locks/<xx>/<key>.lock`, an
//!   exclusive `flock`, dropped when its holder dies).
//!
//! `last/` keeps, per `scene::case`, the inputs of its last golden, so a
//! recomputation can say why ([`why_recomputed`]); `fixtures/` keeps the
//! digest of Python fixtures per case, to notice non-deterministic ones.
//!
//! A hit touches the entry's `manifest.json` (its mtime is the entry's last
//! use), so `scene cache prune` applies the kernel cache's policy here too
//! ([`GoldenCache::prune`]: unused for longer than the max age, then least
//! recently used over the max size); [`GoldenCache::verify`] checks every
//! entry against its own manifest, [`GoldenCache::stats`] counts them and
//! [`GoldenCache::clear`] removes the whole cache.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use scene_golden::{DType, Tensor, npy};
use scene_kernels::cache::{
    KeyLock, LEFTOVER_AGE, PrunePolicy, PruneReport, lock_file, try_lock_file,
};
use serde::{Deserialize, Serialize};

use crate::golden::GoldenOutputs;

/// Format of entries and records; bump to orphan old entries.
pub const SCHEMA: u32 = 1;

/// Largest manifest or record read.
const MAX_SMALL_FILE: u64 = 1 << 20;

/// What decides a golden, as digests (hex).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoldenInputs {
    pub code: String,
    pub inputs: String,
    pub params: String,
    pub outputs: String,
}

impl GoldenInputs {
    /// The cache key.
    pub fn key(&self) -> String {
        let mut h = scene_util::FieldHasher::new("scene-golden-cache");
        h.field("schema", &SCHEMA.to_le_bytes())
            .field("code", self.code.as_bytes())
            .field("inputs", self.inputs.as_bytes())
            .field("params", self.params.as_bytes())
            .field("outputs", self.outputs.as_bytes());
        h.finalize().to_hex().to_string()
    }
}

/// Why a lookup found nothing usable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Miss {
    NoEntry,
    /// The entry failed a check (and was removed); what was wrong.
    Damaged(String),
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    schema: u32,
    key: String,
    outputs: Vec<OutputRecord>,
}

#[derive(Debug, Serialize, Deserialize)]
struct OutputRecord {
    name: String,
    dtype: String,
    shape: Vec<usize>,
    file: String,
    size: u64,
    blake3: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct LastRecord {
    schema: u32,
    id: String,
    inputs: GoldenInputs,
}

/// A whole-cache operation failed on `path` (not damage: that is reported
/// and removed).
#[derive(Debug, thiserror::Error)]
#[error("golden cache: {}: {source}", path.display())]
pub struct GoldenCacheError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> GoldenCacheError + '_ {
    move |source| GoldenCacheError {
        path: path.to_path_buf(),
        source,
    }
}

/// Entry count and size of the golden cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GoldenStats {
    pub entries: usize,
    pub bytes: u64,
}

/// What [`GoldenCache::prune`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoldenPruneReport {
    /// The entries, counted as the kernel cache counts a tier (`leftovers`:
    /// temp dirs of killed publishers).
    pub entries: PruneReport,
    /// Lock files and `last/` / `fixtures/` records older than the max age
    /// that were removed.
    pub stale_records: usize,
}

/// What [`GoldenCache::verify`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoldenVerifyReport {
    pub checked: usize,
    /// Damaged entries (key, entry directory, what was wrong); removed.
    pub damaged: Vec<(String, PathBuf, String)>,
}

/// One entry directory as listed.
struct Listed {
    key: String,
    dir: PathBuf,
    bytes: u64,
    last_used: SystemTime,
}

/// The golden cache in one directory.
#[derive(Clone, Debug)]
pub struct GoldenCache {
    root: PathBuf,
}

impl GoldenCache {
    /// The cache under `root` (`<cache dir>/goldens`); directories are
    /// created when first written.
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn entry_dir(&self, key: &str) -> PathBuf {
        self.root.join("entries").join(&key[..2]).join(key)
    }

    /// `locks/<xx>/<key>.lock`; any directory name found under `entries/`
    /// maps to a path (no panic on a short or non-ASCII name).
    fn lock_path(&self, key: &str) -> PathBuf {
        self.root
            .join("locks")
            .join(key.get(..2).unwrap_or("__"))
            .join(format!("{key}.lock"))
    }

    /// Blocks until this process holds `key`'s lock.
    pub fn lock(&self, key: &str) -> io::Result<KeyLock> {
        let path = self.lock_path(key);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        lock_file(&path)
    }

    /// The entry of `key`, verified, as the outputs `expected` (name,
    /// dtype, shape); a damaged entry is removed (hold the key's lock).
    pub fn get(
        &self,
        key: &str,
        expected: &[(&str, DType, &[usize])],
    ) -> Result<GoldenOutputs, Miss> {
        let dir = self.entry_dir(key);
        match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Miss::NoEntry),
            _ => {}
        }
        match self.read_entry(&dir, key, expected) {
            Ok(g) => {
                // Its last use, for pruning (best effort).
                let _ = scene_util::touch_regular_file(&dir.join("manifest.json"));
                Ok(g)
            }
            Err(why) => {
                let _ = scene_util::remove_any(&dir);
                Err(Miss::Damaged(why))
            }
        }
    }

    fn read_entry(
        &self,
        dir: &Path,
        key: &str,
        expected: &[(&str, DType, &[usize])],
    ) -> Result<GoldenOutputs, String> {
        let m = read_manifest(dir, key)?;
        if m.outputs.len() != expected.len() {
            return Err(format!(
                "{} outputs recorded, {} expected",
                m.outputs.len(),
                expected.len()
            ));
        }
        let mut golden = GoldenOutputs::new();
        for (rec, &(name, dtype, shape)) in m.outputs.iter().zip(expected) {
            if rec.name != name || rec.dtype != dtype.name() || rec.shape != shape {
                return Err(format!(
                    "output `{}` is not the expected `{name}`",
                    rec.name
                ));
            }
            golden = golden.with(name, read_output(dir, rec, dtype)?);
        }
        Ok(golden)
    }

    /// Publishes `golden` (the outputs in `expected` order) under `key`
    /// (hold the key's lock).
    pub fn put(&self, key: &str, outputs: &[(&str, &Tensor)]) -> io::Result<()> {
        let tmp_root = self.root.join("tmp");
        std::fs::create_dir_all(&tmp_root)?;
        let tmp = tempfile::Builder::new()
            .prefix(&key[..16])
            .tempdir_in(&tmp_root)?;
        let mut records = Vec::new();
        for (i, (name, t)) in outputs.iter().enumerate() {
            let file = format!("{i}.npy");
            let bytes = npy::to_npy_bytes(t);
            std::fs::write(tmp.path().join(&file), &bytes)?;
            records.push(OutputRecord {
                name: (*name).to_string(),
                dtype: t.dtype().name().to_string(),
                shape: t.shape().to_vec(),
                file,
                size: bytes.len() as u64,
                blake3: blake3::hash(&bytes).to_hex().to_string(),
            });
        }
        let manifest = Manifest {
            schema: SCHEMA,
            key: key.to_string(),
            outputs: records,
        };
        let json = serde_json::to_vec_pretty(&manifest).map_err(io::Error::other)?;
        scene_util::write_atomically(&tmp.path().join("manifest.json"), &json)?;
        let dest = self.entry_dir(key);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        scene_util::remove_any(&dest)?;
        let tmp = tmp.keep();
        std::fs::rename(&tmp, &dest).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&tmp);
        })
    }

    fn id_file(&self, dir: &str, id: &str) -> PathBuf {
        let h = blake3::hash(id.as_bytes()).to_hex();
        self.root.join(dir).join(format!("{}.json", &h[..32]))
    }

    /// The inputs of the last golden recorded for `id` (`scene::case`).
    pub fn last_inputs(&self, id: &str) -> Option<GoldenInputs> {
        let bytes =
            scene_util::read_regular_file(&self.id_file("last", id), None, MAX_SMALL_FILE).ok()?;
        let r: LastRecord = serde_json::from_slice(&bytes).ok()?;
        (r.schema == SCHEMA && r.id == id).then_some(r.inputs)
    }

    /// Records the inputs of `id`'s golden (best effort).
    pub fn record_inputs(&self, id: &str, inputs: &GoldenInputs) {
        let path = self.id_file("last", id);
        let r = LastRecord {
            schema: SCHEMA,
            id: id.to_string(),
            inputs: inputs.clone(),
        };
        if let (Some(parent), Ok(json)) = (path.parent(), serde_json::to_vec(&r)) {
            let _ = std::fs::create_dir_all(parent);
            let _ = scene_util::write_atomically(&path, &json);
        }
    }

    /// The fixture digest recorded under `key` (Python fixtures).
    pub fn fixture_digest(&self, key: &str) -> Option<String> {
        let bytes =
            scene_util::read_regular_file(&self.id_file("fixtures", key), None, MAX_SMALL_FILE)
                .ok()?;
        String::from_utf8(bytes).ok()
    }

    /// Records `digest` as the fixtures of `key` (best effort).
    pub fn record_fixture_digest(&self, key: &str, digest: &str) {
        let path = self.id_file("fixtures", key);
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
            let _ = scene_util::write_atomically(&path, digest.as_bytes());
        }
    }
}

/// Maintenance of the whole cache: `scene cache stats|prune|verify|clear`.
impl GoldenCache {
    /// Every entry directory under `entries/<xx>/`, with its size (the
    /// files directly in it, links not followed) and last use (its
    /// manifest's mtime, or the directory's when that is missing).
    fn list(&self) -> Result<Vec<Listed>, GoldenCacheError> {
        let mut out = Vec::new();
        let entries = self.root.join("entries");
        for shard in read_dir_or_empty(&entries)? {
            let shard = shard.map_err(at(&entries))?.path();
            if !shard.is_dir() {
                continue;
            }
            for entry in std::fs::read_dir(&shard).map_err(at(&shard))? {
                let entry = entry.map_err(at(&shard))?;
                let dir = entry.path();
                let Some(key) = entry.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                let mut bytes = 0;
                let mut last_used = scene_util::mtime_or_epoch(&dir);
                if let Ok(files) = std::fs::read_dir(&dir) {
                    for f in files.filter_map(Result::ok) {
                        if let Ok(m) = f.path().symlink_metadata() {
                            bytes += m.len();
                            if f.file_name() == "manifest.json" {
                                last_used = m.modified().unwrap_or(last_used);
                            }
                        }
                    }
                }
                out.push(Listed {
                    key,
                    dir,
                    bytes,
                    last_used,
                });
            }
        }
        Ok(out)
    }

    /// How many entries there are and their total size.
    pub fn stats(&self) -> Result<GoldenStats, GoldenCacheError> {
        let listed = self.list()?;
        Ok(GoldenStats {
            entries: listed.len(),
            bytes: listed.iter().map(|e| e.bytes).sum(),
        })
    }

    /// Removes `e` if nobody holds its key's lock right now; false if busy.
    fn remove_if_free(&self, e: &Listed) -> Result<bool, GoldenCacheError> {
        let path = self.lock_path(&e.key);
        let held = match try_lock_file(&path) {
            Ok(Some(held)) => Some(held),
            Ok(None) => return Ok(false),
            // No lock file: nobody is computing this key.
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(source) => return Err(GoldenCacheError { path, source }),
        };
        scene_util::remove_any(&e.dir).map_err(at(&e.dir))?;
        if held.is_some() {
            // Unlinked while held: a waiter finds it gone and relocks.
            let _ = std::fs::remove_file(&path);
        }
        Ok(true)
    }

    /// The kernel cache's policy applied to the golden entries: those
    /// unused for longer than `max_age` go, then the least recently used
    /// until the total is at most `max_size`; an entry whose key is being
    /// computed is kept. Then lock files, `last/` and `fixtures/` records
    /// and leftover temp dirs older than the max age go too.
    pub fn prune(&self, policy: &PrunePolicy) -> Result<GoldenPruneReport, GoldenCacheError> {
        let now = SystemTime::now();
        let age = |t: SystemTime| now.duration_since(t).unwrap_or(Duration::ZERO);
        let mut report = GoldenPruneReport::default();
        let r = &mut report.entries;
        let mut listed = self.list()?;
        listed.sort_by_key(|e| e.last_used);
        let mut kept = Vec::new();
        for e in listed {
            if age(e.last_used) > policy.max_age {
                if self.remove_if_free(&e)? {
                    r.removed_old += 1;
                    r.freed_bytes += e.bytes;
                    continue;
                }
                r.busy += 1;
            }
            kept.push(e);
        }
        let mut total: u64 = kept.iter().map(|e| e.bytes).sum();
        for e in kept {
            if total > policy.max_size && self.remove_if_free(&e)? {
                r.removed_for_size += 1;
                r.freed_bytes += e.bytes;
                total -= e.bytes;
            } else {
                r.kept += 1;
            }
        }
        r.kept_bytes = total;

        // Records and unheld lock files past the max age; temp dirs of
        // killed publishers past an hour (a publication takes milliseconds).
        for sub in ["last", "fixtures", "locks"] {
            let mut files = Vec::new();
            scene_util::files_under(&self.root.join(sub), &mut files);
            for path in files {
                if age(scene_util::mtime_or_epoch(&path)) <= policy.max_age {
                    continue;
                }
                // A lock file goes only while held here (unlinked under the
                // lock: a waiter on it relocks the new one).
                let _held = match sub {
                    "locks" => match try_lock_file(&path) {
                        Ok(Some(held)) => Some(held),
                        _ => continue,
                    },
                    _ => None,
                };
                if std::fs::remove_file(&path).is_ok() {
                    report.stale_records += 1;
                }
            }
        }
        let tmp = self.root.join("tmp");
        for t in read_dir_or_empty(&tmp)?.filter_map(Result::ok) {
            let path = t.path();
            if age(scene_util::mtime_or_epoch(&path)) > policy.max_age.min(LEFTOVER_AGE)
                && scene_util::remove_any(&path).is_ok()
            {
                report.entries.leftovers += 1;
            }
        }
        Ok(report)
    }

    /// Checks every entry against its own manifest (regular files of the
    /// recorded size and blake3, readable as the recorded dtype and shape)
    /// and removes damaged ones, judged again under the key's lock so a
    /// publication in progress is not mistaken for damage.
    pub fn verify(&self) -> Result<GoldenVerifyReport, GoldenCacheError> {
        let mut report = GoldenVerifyReport::default();
        for e in self.list()? {
            report.checked += 1;
            if verify_entry(&e.dir, &e.key).is_ok() {
                continue;
            }
            let _held = self.lock(&e.key).map_err(at(&self.lock_path(&e.key)))?;
            if let Err(why) = verify_entry(&e.dir, &e.key) {
                scene_util::remove_any(&e.dir).map_err(at(&e.dir))?;
                report.damaged.push((e.key, e.dir, why));
            }
        }
        Ok(report)
    }

    /// Removes the whole golden cache (entries, records, locks); returns
    /// how many entries there were.
    pub fn clear(&self) -> Result<usize, GoldenCacheError> {
        let n = self.list()?.len();
        scene_util::remove_dir_if_exists(&self.root).map_err(at(&self.root))?;
        Ok(n)
    }
}

/// An entry's manifest, checked to be this schema's and `key`'s.
fn read_manifest(dir: &Path, key: &str) -> Result<Manifest, String> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err("the entry is not a directory".into());
    }
    let bytes = scene_util::read_regular_file(&dir.join("manifest.json"), None, MAX_SMALL_FILE)
        .map_err(|e| e.to_string())?;
    let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| format!("manifest.json: {e}"))?;
    if m.schema != SCHEMA || m.key != key {
        return Err("manifest.json names another schema or key".into());
    }
    Ok(m)
}

/// One recorded output: a regular file of its recorded size and blake3,
/// an `.npy` of `dtype` and the recorded shape.
fn read_output(dir: &Path, rec: &OutputRecord, dtype: DType) -> Result<Tensor, String> {
    let file = scene_util::check_file_name(&rec.file).map_err(|e| e.to_string())?;
    let data = scene_util::read_regular_file(&dir.join(file), Some(rec.size), rec.size)
        .map_err(|e| e.to_string())?;
    if blake3::hash(&data).to_hex().as_str() != rec.blake3 {
        return Err(format!("{}: blake3 mismatch", rec.file));
    }
    let t = npy::from_npy_bytes_as(&data, dtype).map_err(|e| format!("{}: {e}", rec.file))?;
    if t.shape() != rec.shape {
        return Err(format!(
            "{}: shape {:?}, expected {:?}",
            rec.file,
            t.shape(),
            rec.shape
        ));
    }
    Ok(t)
}

/// An entry checked against its own manifest alone (no expectation).
fn verify_entry(dir: &Path, key: &str) -> Result<(), String> {
    let m = read_manifest(dir, key)?;
    for rec in &m.outputs {
        let dtype: DType = rec
            .dtype
            .parse()
            .map_err(|_| format!("output `{}`: unknown dtype `{}`", rec.name, rec.dtype))?;
        read_output(dir, rec, dtype)?;
    }
    Ok(())
}

/// The entries of `dir`, none when it does not exist.
fn read_dir_or_empty(
    dir: &Path,
) -> Result<Box<dyn Iterator<Item = io::Result<std::fs::DirEntry>>>, GoldenCacheError> {
    match std::fs::read_dir(dir) {
        Ok(it) => Ok(Box::new(it)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Box::new(std::iter::empty())),
        Err(source) => Err(GoldenCacheError {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Why a golden was recomputed, in words: what changed since the case's
/// last golden (`previous`), or what was wrong with the entry.
pub fn why_recomputed(previous: Option<&GoldenInputs>, now: &GoldenInputs, miss: &Miss) -> String {
    if let Miss::Damaged(why) = miss {
        return format!("damaged entry ({why})");
    }
    let Some(prev) = previous else {
        return "no entry (no golden of this case in the cache)".to_string();
    };
    let mut changed = Vec::new();
    if prev.code != now.code {
        changed.push("golden code");
    }
    if prev.inputs != now.inputs {
        changed.push("inputs");
    }
    if prev.params != now.params {
        changed.push("params");
    }
    if prev.outputs != now.outputs {
        changed.push("output dtypes or shapes");
    }
    if changed.is_empty() {
        "no entry (removed from the cache since it was computed)".to_string()
    } else {
        format!("{} changed", changed.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(code: &str) -> GoldenInputs {
        GoldenInputs {
            code: code.into(),
            inputs: "i".into(),
            params: "p".into(),
            outputs: "o".into(),
        }
    }

    #[test]
    fn put_get_verify_and_damage() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = GoldenCache::new(tmp.path().join("goldens"));
        let key = inputs("c").key();
        let t = Tensor::from_f32(DType::BF16, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let expected = [("out", DType::BF16, &[2usize, 3][..])];
        assert_eq!(cache.get(&key, &expected).unwrap_err(), Miss::NoEntry);
        let _lock = cache.lock(&key).unwrap();
        cache.put(&key, &[("out", &t)]).unwrap();
        let got = cache.get(&key, &expected).unwrap();
        assert_eq!(got.get("out").unwrap(), &t);
        // A different expectation is a miss, never a wrong golden.
        let other = [("out", DType::F32, &[2usize, 3][..])];
        assert!(matches!(cache.get(&key, &other), Err(Miss::Damaged(_))));
        // Flip a byte of the data: damaged, removed, then no entry.
        cache.put(&key, &[("out", &t)]).unwrap();
        let file = cache.entry_dir(&key).join("0.npy");
        let mut bytes = std::fs::read(&file).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&file, bytes).unwrap();
        match cache.get(&key, &expected) {
            Err(Miss::Damaged(why)) => assert!(why.contains("blake3"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(cache.get(&key, &expected).unwrap_err(), Miss::NoEntry);
        // A symlink in place of a file is damage, never followed.
        cache.put(&key, &[("out", &t)]).unwrap();
        let file = cache.entry_dir(&key).join("0.npy");
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
        assert!(matches!(cache.get(&key, &expected), Err(Miss::Damaged(_))));
    }

    fn set_mtime(path: &Path, t: SystemTime) {
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    /// Three entries `a`, `b`, `c` (their keys), published in that order.
    fn three(cache: &GoldenCache) -> Vec<String> {
        ["a", "b", "c"]
            .iter()
            .map(|code| {
                let key = inputs(code).key();
                let t = Tensor::from_f32(DType::F32, &[4], &[1.0, 2.0, 3.0, 4.0]).unwrap();
                cache.put(&key, &[("out", &t)]).unwrap();
                key
            })
            .collect()
    }

    #[test]
    fn stats_and_verify_find_and_remove_a_damaged_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = GoldenCache::new(tmp.path().join("goldens"));
        assert_eq!(cache.stats().unwrap(), GoldenStats::default());
        assert_eq!(cache.verify().unwrap(), GoldenVerifyReport::default());
        let keys = three(&cache);
        let stats = cache.stats().unwrap();
        assert_eq!(stats.entries, 3);
        let on_disk: u64 = keys
            .iter()
            .flat_map(|k| std::fs::read_dir(cache.entry_dir(k)).unwrap())
            .map(|f| f.unwrap().metadata().unwrap().len())
            .sum();
        assert_eq!(stats.bytes, on_disk);
        let clean = cache.verify().unwrap();
        assert_eq!((clean.checked, clean.damaged.len()), (3, 0));

        // Flip one data byte of `b`: found, named, removed; the rest stay.
        let file = cache.entry_dir(&keys[1]).join("0.npy");
        let mut bytes = std::fs::read(&file).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&file, bytes).unwrap();
        // A manifest that is not JSON is damage too.
        std::fs::write(cache.entry_dir(&keys[2]).join("manifest.json"), "{").unwrap();
        let report = cache.verify().unwrap();
        assert_eq!(report.checked, 3);
        assert_eq!(report.damaged.len(), 2, "{report:?}");
        let (key, dir, why) = &report.damaged[..]
            .iter()
            .find(|d| d.0 == keys[1])
            .unwrap()
            .clone();
        assert_eq!(key, &keys[1]);
        assert_eq!(dir, &cache.entry_dir(&keys[1]));
        assert!(why.contains("0.npy: blake3 mismatch"), "{why}");
        assert!(!cache.entry_dir(&keys[1]).exists());
        assert!(!cache.entry_dir(&keys[2]).exists());
        assert!(cache.entry_dir(&keys[0]).exists());
        assert_eq!(cache.stats().unwrap().entries, 1);
        assert_eq!(cache.verify().unwrap().damaged, vec![]);

        // A stray directory of any name is damage, found and removed.
        let stray = cache.root().join("entries").join("xy").join("aé");
        std::fs::create_dir_all(&stray).unwrap();
        let report = cache.verify().unwrap();
        assert_eq!(report.checked, 2);
        assert_eq!(report.damaged.len(), 1, "{report:?}");
        assert_eq!(report.damaged[0].0, "aé");
        assert!(!stray.exists());
    }

    #[test]
    fn prune_by_age_then_size_keeps_busy_entries_and_clear_removes_all() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = GoldenCache::new(tmp.path().join("goldens"));
        let keys = three(&cache);
        let now = SystemTime::now();
        let day = Duration::from_secs(86400);
        let manifest = |k: &str| cache.entry_dir(k).join("manifest.json");
        set_mtime(&manifest(&keys[0]), now - 20 * day);
        set_mtime(&manifest(&keys[1]), now - 2 * day);
        set_mtime(&manifest(&keys[2]), now - day / 24);
        // A hit is a use: it refreshes the entry's last use.
        let expected = [("out", DType::F32, &[4usize][..])];
        cache.get(&keys[1], &expected).unwrap();
        assert!(scene_util::mtime_or_epoch(&manifest(&keys[1])) > now - day);
        set_mtime(&manifest(&keys[1]), now - 2 * day);

        // `a` is old, but its key is being computed right now: kept.
        let held = cache.lock(&keys[0]).unwrap();
        let policy = PrunePolicy::default();
        let r = cache.prune(&policy).unwrap().entries;
        assert_eq!((r.removed_old, r.busy, r.kept), (0, 1, 3), "{r:?}");
        drop(held);
        let r = cache.prune(&policy).unwrap().entries;
        assert_eq!((r.removed_old, r.removed_for_size, r.kept), (1, 0, 2));
        assert!(r.freed_bytes > 0);
        assert!(!cache.entry_dir(&keys[0]).exists());

        // By size: the least recently used (`b`) goes first.
        let newest = cache.stats().unwrap().bytes / 2;
        let r = cache
            .prune(&PrunePolicy {
                max_age: policy.max_age,
                max_size: newest,
            })
            .unwrap()
            .entries;
        assert_eq!((r.removed_for_size, r.kept, r.kept_bytes), (1, 1, newest));
        assert!(!cache.entry_dir(&keys[1]).exists());
        assert!(cache.entry_dir(&keys[2]).exists());

        // Old records and unheld lock files go with the max age.
        cache.record_inputs("s::c", &inputs("x"));
        let record = cache.id_file("last", "s::c");
        set_mtime(&record, now - 20 * day);
        let r = cache.prune(&policy).unwrap();
        assert!(r.stale_records >= 1, "{r:?}");
        assert!(!record.exists());

        assert_eq!(cache.clear().unwrap(), 1);
        assert!(!cache.root().exists());
        assert_eq!(cache.clear().unwrap(), 0);
    }

    #[test]
    fn reasons() {
        let now = inputs("new");
        assert!(why_recomputed(None, &now, &Miss::NoEntry).starts_with("no entry"));
        let mut prev = inputs("old");
        prev.params = "q".into();
        assert_eq!(
            why_recomputed(Some(&prev), &now, &Miss::NoEntry),
            "golden code, params changed"
        );
        assert!(why_recomputed(Some(&now), &now, &Miss::NoEntry).contains("removed"));
        assert!(why_recomputed(Some(&now), &now, &Miss::Damaged("x".into())).contains("damaged"));
    }

    #[test]
    fn records_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = GoldenCache::new(tmp.path().to_path_buf());
        assert_eq!(cache.last_inputs("s::c"), None);
        cache.record_inputs("s::c", &inputs("x"));
        assert_eq!(cache.last_inputs("s::c"), Some(inputs("x")));
        assert_eq!(cache.last_inputs("s::d"), None);
        cache.record_fixture_digest("k", "abc");
        assert_eq!(cache.fixture_digest("k").as_deref(), Some("abc"));
    }
}
