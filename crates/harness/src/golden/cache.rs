//! The golden cache: computed goldens (Rust or Python), content-addressed,
//! stored as entries of the kernel cache's golden tier
//! (`<cache dir>/goldens/store/`, [`Tier::Goldens`], kind
//! [`EntryKind::Golden`]).
//!
//! A key is blake3 over what decides a golden ([`GoldenInputs`]): the
//! golden's code identity (a Rust golden: the registry's digest of the
//! golden sources and the function's name; a Python golden: its file, the
//! local modules a scan of its imports finds, the driver, the python /
//! numpy / torch versions and every installed distribution's), the digest of every input tensor (dtype, shape, bytes), the
//! case's params and scalar values, and the outputs' names, dtypes and
//! shapes.
//!
//! Storing, verifying, locking, pruning and the remote tier are the kernel
//! cache's, not a copy of them: an entry goes through its [`Storage`] (a
//! directory renamed into place; with a remote configured, a
//! `TieredStorage` that reads through and writes behind), a read is
//! `read_verified` (regular files only, schema, key, size, blake3), the key
//! lock is the cache directory's (`<cache dir>/locks/`), and `scene cache
//! stats|prune|verify|clear` run `stats_in`, `prune_in`, `verify_in_with`
//! and `Storage::clear` on the golden tier. What is golden-specific is
//! only what the bytes mean: every damage check the kernel cache makes
//! applies, and then the outputs must decode as the ones the case expects.
//!
//! What a Python golden actually imported or read is only known after it
//! ran: the stage records those files' digests in the entry's manifest
//! (`python_files`), and a hit counts only when every one is unchanged
//! (see `golden::stage`).
//!
//! `last/` keeps, per `scene::case`, the inputs of its last golden, so a
//! recomputation can say why ([`why_recomputed`]); `fixtures/` keeps the
//! digest of Python fixtures per case, to notice non-deterministic ones;
//! `describe/` the descriptions of the original project's test files
//! (`crate::testfiles`), with the files each was made of.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use scene_golden::{DType, Tensor, npy};
use scene_kernels::cache::{
    Cache, CacheError, Damage, EntryKind, GOLDENS_DIR, KeyLock, LocalDisk, Manifest, PrunePolicy,
    PruneReport, Storage, StorageError, Tier, lock_key, prune_in, read_verified, stats_in,
    verify_in_with,
};
use scene_kernels::key::{CACHE_SCHEMA, KeyInputs, UnitKey};
use serde::{Deserialize, Serialize};

use crate::golden::GoldenOutputs;

/// Format of keys and records; bump to orphan old entries.
pub const SCHEMA: u32 = 1;

/// Largest record read.
const MAX_SMALL_FILE: u64 = 1 << 20;

/// The golden cache's own records, beside its tier.
const LAST_DIR: &str = "last";
const FIXTURES_DIR: &str = "fixtures";
/// Descriptions of the original project's test files (issue 40), by key.
const DESCRIBE_DIR: &str = "describe";
/// The largest description read back (a file of many cases, each with its
/// arguments: tens of KiB).
const MAX_DESCRIBE_FILE: u64 = 16 << 20;

/// What the golden cache's directory held before its entries moved into
/// the kernel cache's golden tier (one file per output, own locks, own
/// temp dirs): nothing reads them, prune removes them.
const LEGACY_DIRS: [&str; 3] = ["entries", "locks", "tmp"];

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
#[derive(Debug)]
pub enum Miss {
    NoEntry,
    /// The entry failed a check (and was removed).
    Damaged(Damage),
    /// The store could not be read (an I/O error, not damage): nothing was
    /// judged or removed.
    Unreadable(StorageError),
}

#[derive(Debug, Serialize, Deserialize)]
struct LastRecord {
    schema: u32,
    id: String,
    inputs: GoldenInputs,
}

/// A golden cache operation that failed (not damage: that is a miss, or
/// reported by verify, and removed).
#[derive(Debug, thiserror::Error)]
pub enum GoldenCacheError {
    #[error("golden cache: `{0}` is not a cache key")]
    BadKey(String),
    #[error("golden cache: cannot lock key {key}: {source}")]
    Lock {
        key: String,
        #[source]
        source: io::Error,
    },
    #[error("golden cache: {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Cache(#[from] CacheError),
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
    /// The golden tier, pruned as the kernel cache prunes a tier
    /// (`prune_in`; `leftovers`: temp dirs of killed publishers).
    pub entries: PruneReport,
    /// `last/`, `fixtures/` and `describe/` records older than the max age that were
    /// removed. (Lock files are the cache directory's: its prune removes
    /// stale ones.)
    pub stale_records: usize,
}

/// What [`GoldenCache::verify`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoldenVerifyReport {
    pub checked: usize,
    /// Damaged entries (key, where the entry was, what was wrong); removed.
    pub damaged: Vec<(String, PathBuf, Damage)>,
}

/// The golden cache of one cache directory.
#[derive(Clone, Debug)]
pub struct GoldenCache {
    /// The cache directory (its `locks/` are shared with the kernel cache).
    dir: PathBuf,
    /// `<dir>/goldens`: the tier's directory and the records.
    root: PathBuf,
    storage: Arc<dyn Storage>,
    /// The schema every entry's manifest must state: the kernel cache's,
    /// whose entry format this is (the golden [`SCHEMA`] is in the key).
    schema: u32,
}

impl GoldenCache {
    /// The golden tier of the cache in `dir`, local only (`scene cache`,
    /// which maintains the local directory; or a run without a kernel
    /// cache). Directories are created when first written.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            root: dir.join(GOLDENS_DIR),
            storage: Arc::new(LocalDisk::goldens(dir)),
            schema: CACHE_SCHEMA,
        }
    }

    /// The run's golden cache on this machine only (no remote tier), for
    /// what stays local (Python fixture bytes, test-file descriptions);
    /// `None` when the run keeps no goldens (no cache directory, or
    /// `--no-golden-cache`).
    pub fn local_of(config: &crate::config::RunConfig) -> Option<Self> {
        config
            .cache_dir
            .as_deref()
            .filter(|_| config.golden_cache)
            .map(Self::in_dir)
    }

    /// The golden tier of the run's kernel cache: the same store, so the
    /// remote tier (when configured) serves and receives goldens too, with
    /// the one remote's single failure warning.
    pub fn of_kernel_cache(cache: &Cache) -> Self {
        Self {
            dir: cache.dir().to_path_buf(),
            root: cache.dir().join(GOLDENS_DIR),
            storage: cache.tier_handle(Tier::Goldens),
            schema: cache.schema(),
        }
    }

    /// `<cache dir>/goldens`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The cache directory this golden cache belongs to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Blocks until this process holds `key`'s lock (the cache directory's
    /// per-key lock, as for kernel entries).
    pub fn lock(&self, key: &str) -> Result<KeyLock, GoldenCacheError> {
        lock_key(&self.dir, &unit_key(key)?).map_err(|source| GoldenCacheError::Lock {
            key: key.to_string(),
            source,
        })
    }

    /// The entry of `key`, verified, as the outputs `expected` (name,
    /// dtype, shape); a damaged entry is removed (hold the key's lock).
    pub fn get(
        &self,
        key: &str,
        expected: &[(&str, DType, &[usize])],
    ) -> Result<GoldenOutputs, Miss> {
        self.get_recorded(key, expected).map(|(g, _)| g)
    }

    /// [`GoldenCache::get`], with what was recorded beside the outputs
    /// when they were stored ([`GoldenCache::put_recorded`]).
    pub fn get_recorded(
        &self,
        key: &str,
        expected: &[(&str, DType, &[usize])],
    ) -> Result<(GoldenOutputs, BTreeMap<String, String>), Miss> {
        let Ok(k) = unit_key(key) else {
            // Nothing can have been published under it.
            return Err(Miss::NoEntry);
        };
        let checked = match read_verified(self.storage.as_ref(), &k, Some(self.schema)) {
            Ok(None) => return Err(Miss::NoEntry),
            Ok(Some(checked)) => checked,
            Err(e) => return Err(Miss::Unreadable(e)),
        };
        match checked.and_then(|(m, artifact)| {
            outputs_as_expected(&m, &artifact, expected).map(|g| (g, m.inputs))
        }) {
            Ok(found) => {
                // Its last use, for pruning; a failure only makes it look older.
                let _ = self.storage.touch(&k);
                Ok(found)
            }
            Err(damage) => {
                // Best effort: the next publication replaces it either way.
                let _ = self.storage.remove(&k);
                Err(Miss::Damaged(damage))
            }
        }
    }

    /// Publishes `outputs` (in the case's declared order) under `key`
    /// (hold the key's lock): locally, then to the remote tier if one is
    /// configured and writable.
    pub fn put(&self, key: &str, outputs: &[(&str, &Tensor)]) -> Result<(), GoldenCacheError> {
        self.put_recorded(key, outputs, &[])
    }

    /// [`GoldenCache::put`], recording `extra` (name, value) in the
    /// entry's manifest, where [`GoldenCache::get_recorded`] finds it: what
    /// is only known after computing (the files a Python golden imported).
    pub fn put_recorded(
        &self,
        key: &str,
        outputs: &[(&str, &Tensor)],
        extra: &[(&str, String)],
    ) -> Result<(), GoldenCacheError> {
        let k = unit_key(key)?;
        let artifact = encode_outputs(outputs);
        let mut inputs = KeyInputs::default();
        inputs
            .0
            .insert("schema".to_string(), self.schema.to_string());
        // For people reading the manifest; the key decides what it holds.
        let described: Vec<String> = outputs
            .iter()
            .map(|(name, t)| format!("{name}:{}:{:?}", t.dtype(), t.shape()))
            .collect();
        inputs.0.insert(
            "outputs".to_string(),
            serde_json::to_string(&described).unwrap_or_default(),
        );
        for (name, value) in extra {
            inputs.0.insert((*name).to_string(), value.clone());
        }
        let manifest = Manifest::new(k, EntryKind::Golden, &artifact, &inputs, "golden", 0.0);
        self.storage.put(&k, &artifact, &manifest.to_bytes())?;
        Ok(())
    }

    /// Removes `key`'s entry (hold the key's lock): a golden found
    /// uncacheable must not be served by an entry stored before.
    pub fn remove(&self, key: &str) {
        if let Ok(k) = unit_key(key) {
            // Best effort: nothing can be served from a failed removal
            // that a hit's check of the recorded files would not refuse.
            let _ = self.storage.remove(&k);
        }
    }

    fn id_file(&self, dir: &str, id: &str) -> PathBuf {
        let h = blake3::hash(id.as_bytes()).to_hex();
        self.root.join(dir).join(format!("{}.json", &h[..32]))
    }

    /// The inputs of the last golden recorded for `id` (`scene::case`).
    pub fn last_inputs(&self, id: &str) -> Option<GoldenInputs> {
        let bytes =
            scene_util::read_regular_file(&self.id_file(LAST_DIR, id), None, MAX_SMALL_FILE)
                .ok()?;
        let r: LastRecord = serde_json::from_slice(&bytes).ok()?;
        (r.schema == SCHEMA && r.id == id).then_some(r.inputs)
    }

    /// Records the inputs of `id`'s golden (best effort).
    pub fn record_inputs(&self, id: &str, inputs: &GoldenInputs) {
        let path = self.id_file(LAST_DIR, id);
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
            scene_util::read_regular_file(&self.id_file(FIXTURES_DIR, key), None, MAX_SMALL_FILE)
                .ok()?;
        String::from_utf8(bytes).ok()
    }

    /// The description of a test file of the original recorded under
    /// `key` ([`crate::testfiles`]), as stored.
    pub fn describe_record(&self, key: &str) -> Option<Vec<u8>> {
        scene_util::read_regular_file(&self.id_file(DESCRIBE_DIR, key), None, MAX_DESCRIBE_FILE)
            .ok()
    }

    /// Records `bytes` as the description of `key` (best effort: a run
    /// that cannot write it describes the file again next time).
    pub fn record_describe(&self, key: &str, bytes: &[u8]) {
        let path = self.id_file(DESCRIBE_DIR, key);
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
            let _ = scene_util::write_atomically(&path, bytes);
        }
    }

    /// Records `digest` as the fixtures of `key` (best effort).
    pub fn record_fixture_digest(&self, key: &str, digest: &str) {
        let path = self.id_file(FIXTURES_DIR, key);
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
            let _ = scene_util::write_atomically(&path, digest.as_bytes());
        }
    }
}

/// Maintenance of the whole cache: `scene cache stats|prune|verify|clear`,
/// the kernel cache's functions applied to the golden tier.
impl GoldenCache {
    fn locks(&self) -> PathBuf {
        self.dir.join("locks")
    }

    /// How many entries there are and their total size.
    pub fn stats(&self) -> Result<GoldenStats, GoldenCacheError> {
        let tier = stats_in(self.storage.as_ref())?;
        Ok(GoldenStats {
            entries: tier.entries,
            bytes: tier.bytes,
        })
    }

    /// The kernel cache's policy applied to the golden tier (`prune_in`:
    /// unused for longer than `max_age`, then least recently used over
    /// `max_size`, an entry whose key is locked kept), then `last/`,
    /// `fixtures/` and `describe/` records older than the max age, and what an earlier
    /// layout left (see `LEGACY_DIRS`).
    pub fn prune(&self, policy: &PrunePolicy) -> Result<GoldenPruneReport, GoldenCacheError> {
        let entries = prune_in(self.storage.as_ref(), &self.locks(), policy)?;
        let mut report = GoldenPruneReport {
            entries,
            stale_records: 0,
        };
        let now = SystemTime::now();
        let age = |t: SystemTime| now.duration_since(t).unwrap_or(Duration::ZERO);
        for sub in [LAST_DIR, FIXTURES_DIR, DESCRIBE_DIR] {
            let mut files = Vec::new();
            scene_util::files_under(&self.root.join(sub), &mut files);
            for path in files {
                if age(scene_util::mtime_or_epoch(&path)) > policy.max_age
                    && std::fs::remove_file(&path).is_ok()
                {
                    report.stale_records += 1;
                }
            }
        }
        for legacy in LEGACY_DIRS {
            // Best effort: nothing reads them, so one that stays harms nothing.
            let _ = scene_util::remove_any(&self.root.join(legacy));
        }
        Ok(report)
    }

    /// Checks every entry as a lookup would (`verify_in_with`: regular
    /// files, schema, key, size, blake3, then outputs that decode as their
    /// recorded dtypes) and removes damaged ones, judged again under the
    /// key's lock so a publication in progress is not mistaken for damage.
    pub fn verify(&self) -> Result<GoldenVerifyReport, GoldenCacheError> {
        let report = verify_in_with(self.storage.as_ref(), &self.locks(), &|m, artifact| {
            decode_checked(m, artifact).map(drop)
        })?;
        Ok(GoldenVerifyReport {
            checked: report.checked,
            damaged: report
                .damaged
                .into_iter()
                .map(|(key, place, damage)| (key.to_hex(), PathBuf::from(place), damage))
                .collect(),
        })
    }

    /// Removes the whole golden cache (entries and records); returns how
    /// many entries there were.
    pub fn clear(&self) -> Result<usize, GoldenCacheError> {
        let n = self.storage.clear()?;
        scene_util::remove_dir_if_exists(&self.root).map_err(|source| GoldenCacheError::Io {
            path: self.root.clone(),
            source,
        })?;
        Ok(n)
    }
}

fn unit_key(key: &str) -> Result<UnitKey, GoldenCacheError> {
    UnitKey::from_hex(key)
        .filter(|k| k.to_hex() == key)
        .ok_or_else(|| GoldenCacheError::BadKey(key.to_string()))
}

// A golden entry is several tensors, and `Storage` stores one artifact per
// entry. They are packed into that one artifact rather than the trait
// taught to store several files: then every tier (the local directory, the
// remote's one object per entry), every check (one size, one blake3 over
// all outputs) and every whole-cache operation applies unchanged, and a
// reader can never pair one publisher's first output with another's
// second. The container is length-prefixed:
//
//   "scene-golden-outputs v1\n"
//   u32 LE  number of outputs
//   per output: u32 LE + name (UTF-8), u32 LE + dtype name, u64 LE + .npy bytes
//
// It is decoded only after the manifest's size and blake3 matched, and
// still defensively (bounds checked, no trailing bytes): a manifest and
// artifact both rewritten consistently by someone else must not panic.
const OUTPUTS_MAGIC: &[u8] = b"scene-golden-outputs v1\n";

/// Why an artifact is not a golden container.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ContainerError {
    #[error("not a golden outputs container")]
    NotAContainer,
    #[error("golden outputs container truncated")]
    Truncated,
    #[error("golden outputs container has a name that is not UTF-8")]
    NotUtf8,
    #[error("golden outputs container has {0} bytes after its last output")]
    Trailing(usize),
}

fn encode_outputs(outputs: &[(&str, &Tensor)]) -> Vec<u8> {
    let mut out = OUTPUTS_MAGIC.to_vec();
    out.extend_from_slice(&(outputs.len() as u32).to_le_bytes());
    for (name, t) in outputs {
        let data = npy::to_npy_bytes(t);
        for text in [name.as_bytes(), t.dtype().name().as_bytes()] {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text);
        }
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(&data);
    }
    out
}

/// One packed output: name, dtype name, `.npy` bytes.
struct Packed<'a> {
    name: &'a str,
    dtype: &'a str,
    data: &'a [u8],
}

fn decode_outputs(bytes: &[u8]) -> Result<Vec<Packed<'_>>, ContainerError> {
    fn take<'a>(rest: &mut &'a [u8], n: u64) -> Result<&'a [u8], ContainerError> {
        let n = usize::try_from(n).map_err(|_| ContainerError::Truncated)?;
        if rest.len() < n {
            return Err(ContainerError::Truncated);
        }
        let (head, tail) = rest.split_at(n);
        *rest = tail;
        Ok(head)
    }
    fn text<'a>(rest: &mut &'a [u8]) -> Result<&'a str, ContainerError> {
        let len = take(rest, 4)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
        std::str::from_utf8(take(rest, u64::from(len))?).map_err(|_| ContainerError::NotUtf8)
    }
    let mut rest = bytes
        .strip_prefix(OUTPUTS_MAGIC)
        .ok_or(ContainerError::NotAContainer)?;
    let count = take(&mut rest, 4)?;
    let count = u32::from_le_bytes([count[0], count[1], count[2], count[3]]);
    let mut out = Vec::new();
    for _ in 0..count {
        let name = text(&mut rest)?;
        let dtype = text(&mut rest)?;
        let len = take(&mut rest, 8)?;
        let mut le = [0u8; 8];
        le.copy_from_slice(len);
        let data = take(&mut rest, u64::from_le_bytes(le))?;
        out.push(Packed { name, dtype, data });
    }
    if !rest.is_empty() {
        return Err(ContainerError::Trailing(rest.len()));
    }
    Ok(out)
}

fn content(why: impl std::fmt::Display) -> Damage {
    Damage::Content(why.to_string())
}

/// A verified golden entry's outputs, each decoded as its recorded dtype:
/// what verify checks, with no expectation.
fn decode_checked(m: &Manifest, artifact: &[u8]) -> Result<Vec<(String, Tensor)>, Damage> {
    if m.kind != EntryKind::Golden {
        return Err(Damage::WrongKind {
            found: m.kind,
            expected: EntryKind::Golden,
        });
    }
    decode_outputs(artifact)
        .map_err(content)?
        .into_iter()
        .map(|p| {
            let dtype: DType = p.dtype.parse().map_err(|_| {
                content(format_args!(
                    "output `{}`: unknown dtype `{}`",
                    p.name, p.dtype
                ))
            })?;
            let t = npy::from_npy_bytes_as(p.data, dtype)
                .map_err(|e| content(format_args!("output `{}`: {e}", p.name)))?;
            Ok((p.name.to_string(), t))
        })
        .collect()
}

/// A verified golden entry as exactly the outputs `expected`, or why not.
fn outputs_as_expected(
    m: &Manifest,
    artifact: &[u8],
    expected: &[(&str, DType, &[usize])],
) -> Result<GoldenOutputs, Damage> {
    let outputs = decode_checked(m, artifact)?;
    if outputs.len() != expected.len() {
        return Err(content(format_args!(
            "{} outputs stored, {} expected",
            outputs.len(),
            expected.len()
        )));
    }
    let mut golden = GoldenOutputs::new();
    for ((name, t), &(want, dtype, shape)) in outputs.into_iter().zip(expected) {
        if name != want || t.dtype() != dtype || t.shape() != shape {
            return Err(content(format_args!(
                "output `{name}` ({} {:?}) is not the expected `{want}` ({dtype} {shape:?})",
                t.dtype(),
                t.shape()
            )));
        }
        golden = golden.with(want, t);
    }
    Ok(golden)
}

/// Why a golden was recomputed, in words: what changed since the case's
/// last golden (`previous`), or what was wrong with the entry.
pub fn why_recomputed(previous: Option<&GoldenInputs>, now: &GoldenInputs, miss: &Miss) -> String {
    match miss {
        Miss::Damaged(why) => return format!("damaged entry ({why})"),
        Miss::Unreadable(e) => return format!("unreadable entry ({e})"),
        Miss::NoEntry => {}
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
    use std::sync::Mutex;

    use scene_kernels::cache::{
        CacheConfig, Lookup, Remote, RemoteConfig, TieredStorage, WarnSink,
    };

    use super::*;

    fn inputs(code: &str) -> GoldenInputs {
        GoldenInputs {
            code: code.into(),
            inputs: "i".into(),
            params: "p".into(),
            outputs: "o".into(),
        }
    }

    fn tensor() -> Tensor {
        Tensor::from_f32(DType::BF16, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap()
    }

    fn tensor2() -> Tensor {
        Tensor::from_f32(DType::F32, &[4], &[-1.0, 0.5, 7.0, 8.0]).unwrap()
    }

    const EXPECTED: [(&str, DType, &[usize]); 2] =
        [("out", DType::BF16, &[2, 3]), ("aux", DType::F32, &[4])];

    fn publish(cache: &GoldenCache, key: &str) {
        cache
            .put(key, &[("out", &tensor()), ("aux", &tensor2())])
            .unwrap();
    }

    fn assert_golden(got: &GoldenOutputs) {
        assert_eq!(got.get("out").unwrap(), &tensor());
        assert_eq!(got.get("aux").unwrap(), &tensor2());
    }

    fn store(cache: &GoldenCache) -> LocalDisk {
        LocalDisk::goldens(cache.dir())
    }

    fn artifact(cache: &GoldenCache, key: &str) -> PathBuf {
        store(cache).artifact_path(&UnitKey::from_hex(key).unwrap())
    }

    fn manifest(cache: &GoldenCache, key: &str) -> PathBuf {
        store(cache).manifest_path(&UnitKey::from_hex(key).unwrap())
    }

    fn flip_last_byte(path: &Path) {
        let mut bytes = std::fs::read(path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn put_get_verify_and_damage() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = GoldenCache::in_dir(tmp.path());
        let key = inputs("c").key();
        assert!(matches!(cache.get(&key, &EXPECTED), Err(Miss::NoEntry)));
        let _lock = cache.lock(&key).unwrap();
        publish(&cache, &key);
        assert!(
            artifact(&cache, &key).starts_with(tmp.path().join("goldens/store")),
            "the kernel cache's golden tier"
        );
        assert_golden(&cache.get(&key, &EXPECTED).unwrap());
        // A different expectation is a miss, never a wrong golden.
        let other = [EXPECTED[0], ("aux", DType::F16, &[4][..])];
        match cache.get(&key, &other) {
            Err(Miss::Damaged(Damage::Content(why))) => assert!(why.contains("`aux`"), "{why}"),
            other => panic!("{other:?}"),
        }
        publish(&cache, &key);
        assert!(matches!(
            cache.get(&key, &EXPECTED[..1]),
            Err(Miss::Damaged(_))
        ));
        // Flip a byte of the data: damaged, removed, then no entry.
        publish(&cache, &key);
        flip_last_byte(&artifact(&cache, &key));
        match cache.get(&key, &EXPECTED) {
            Err(Miss::Damaged(why)) => assert!(why.to_string().contains("blake3"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(cache.get(&key, &EXPECTED), Err(Miss::NoEntry)));
        // A symlink in place of a file is damage, never followed.
        publish(&cache, &key);
        let file = artifact(&cache, &key);
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
        assert!(matches!(
            cache.get(&key, &EXPECTED),
            Err(Miss::Damaged(Damage::NotAFile { .. }))
        ));
        // Recomputed and republished: whole again.
        publish(&cache, &key);
        assert_golden(&cache.get(&key, &EXPECTED).unwrap());
        assert!(matches!(
            cache.put("not a key", &[]),
            Err(GoldenCacheError::BadKey(_))
        ));
    }

    /// Every kind of damage the kernel cache recognises, plus what only the
    /// golden cache can judge, is a miss: the entry is removed, and what is
    /// published next is what the next lookup returns.
    #[test]
    fn every_damage_is_a_miss_then_recomputed_and_republished() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = GoldenCache::in_dir(tmp.path());
        let other_key = inputs("other").key();
        publish(&cache, &other_key);
        type Damager = fn(&GoldenCache, &str, &str);
        let cases: &[(&str, Damager)] = &[
            ("blake3", |c, k, _| flip_last_byte(&artifact(c, k))),
            ("bytes, manifest says", |c, k, _| {
                let path = artifact(c, k);
                let bytes = std::fs::read(&path).unwrap();
                std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
            }),
            ("artifact missing", |c, k, _| {
                std::fs::remove_file(artifact(c, k)).unwrap();
            }),
            ("manifest missing", |c, k, _| {
                std::fs::remove_file(manifest(c, k)).unwrap();
            }),
            ("manifest unparsable", |c, k, _| {
                std::fs::write(manifest(c, k), "{").unwrap();
            }),
            ("manifest is for key", |c, k, other| {
                std::fs::copy(manifest(c, other), manifest(c, k)).unwrap();
                std::fs::copy(artifact(c, other), artifact(c, k)).unwrap();
            }),
            ("schema", |c, k, _| {
                let path = manifest(c, k);
                let mut m: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                m["schema"] = (CACHE_SCHEMA + 1).into();
                std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
            }),
            ("a FIFO", |c, k, _| {
                let path = artifact(c, k);
                std::fs::remove_file(&path).unwrap();
                let status = std::process::Command::new("mkfifo")
                    .arg(&path)
                    .status()
                    .unwrap();
                assert!(status.success());
            }),
            ("a directory", |c, k, _| {
                let path = manifest(c, k);
                std::fs::remove_file(&path).unwrap();
                std::fs::create_dir(&path).unwrap();
            }),
            // Consistent manifest and artifact, but not what a golden is.
            ("entry is incore", |c, k, _| {
                let key = UnitKey::from_hex(k).unwrap();
                let bytes = std::fs::read(artifact(c, k)).unwrap();
                let mut key_inputs = KeyInputs::default();
                key_inputs
                    .0
                    .insert("schema".into(), CACHE_SCHEMA.to_string());
                let m = Manifest::new(key, EntryKind::Incore, &bytes, &key_inputs, "u", 0.0);
                std::fs::write(manifest(c, k), m.to_bytes()).unwrap();
            }),
            ("golden outputs container truncated", |c, k, _| {
                let key = UnitKey::from_hex(k).unwrap();
                let mut bytes = std::fs::read(artifact(c, k)).unwrap();
                bytes.truncate(bytes.len() - 3);
                let mut key_inputs = KeyInputs::default();
                key_inputs
                    .0
                    .insert("schema".into(), CACHE_SCHEMA.to_string());
                let m = Manifest::new(key, EntryKind::Golden, &bytes, &key_inputs, "u", 0.0);
                std::fs::write(artifact(c, k), &bytes).unwrap();
                std::fs::write(manifest(c, k), m.to_bytes()).unwrap();
            }),
        ];
        for (n, (what, damage)) in cases.iter().enumerate() {
            let key = inputs(&format!("case {n}")).key();
            publish(&cache, &key);
            damage(&cache, &key, &other_key);
            let _lock = cache.lock(&key).unwrap();
            match cache.get(&key, &EXPECTED) {
                Err(Miss::Damaged(why)) => {
                    assert!(why.to_string().contains(what), "{what}: {why}");
                    let reason = why_recomputed(None, &inputs("x"), &Miss::Damaged(why));
                    assert!(reason.starts_with("damaged entry ("), "{reason}");
                }
                other => panic!("{what}: {other:?}"),
            }
            assert!(
                std::fs::symlink_metadata(artifact(&cache, &key).parent().unwrap()).is_err(),
                "{what}: removed"
            );
            assert!(matches!(cache.get(&key, &EXPECTED), Err(Miss::NoEntry)));
            publish(&cache, &key);
            assert_golden(&cache.get(&key, &EXPECTED).unwrap());
        }
        assert_golden(&cache.get(&other_key, &EXPECTED).unwrap());
        assert_eq!(cache.verify().unwrap().damaged, vec![]);
    }

    #[test]
    fn containers_round_trip_and_damage_never_panics() {
        let (a, b) = (tensor(), tensor2());
        let bytes = encode_outputs(&[("out", &a), ("aux", &b)]);
        let parts = decode_outputs(&bytes).unwrap();
        assert_eq!(
            parts.iter().map(|p| (p.name, p.dtype)).collect::<Vec<_>>(),
            [("out", "bf16"), ("aux", "f32")]
        );
        assert_eq!(decode_outputs(&encode_outputs(&[])).unwrap().len(), 0);
        for cut in 0..bytes.len() {
            assert!(decode_outputs(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            decode_outputs(&longer).err(),
            Some(ContainerError::Trailing(1))
        );
        // A huge count or length is truncation, not an allocation.
        let mut huge = OUTPUTS_MAGIC.to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode_outputs(&huge).err(), Some(ContainerError::Truncated));
    }

    fn set_mtime(path: &Path, t: SystemTime) {
        std::fs::File::open(path).unwrap().set_modified(t).unwrap();
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
        let cache = GoldenCache::in_dir(tmp.path());
        assert_eq!(cache.stats().unwrap(), GoldenStats::default());
        assert_eq!(cache.verify().unwrap(), GoldenVerifyReport::default());
        let keys = three(&cache);
        let stats = cache.stats().unwrap();
        assert_eq!(stats.entries, 3);
        let on_disk: u64 = keys
            .iter()
            .flat_map(|k| std::fs::read_dir(artifact(&cache, k).parent().unwrap()).unwrap())
            .map(|f| f.unwrap().metadata().unwrap().len())
            .sum();
        assert_eq!(stats.bytes, on_disk);
        let clean = cache.verify().unwrap();
        assert_eq!((clean.checked, clean.damaged.len()), (3, 0));

        // Flip one data byte of `b`: found, named, removed; the rest stay.
        flip_last_byte(&artifact(&cache, &keys[1]));
        // A manifest that is not JSON is damage too.
        std::fs::write(manifest(&cache, &keys[2]), "{").unwrap();
        let report = cache.verify().unwrap();
        assert_eq!(report.checked, 3);
        assert_eq!(report.damaged.len(), 2, "{report:?}");
        let (key, dir, why) = report
            .damaged
            .iter()
            .find(|d| d.0 == keys[1])
            .unwrap()
            .clone();
        assert_eq!(key, keys[1]);
        assert_eq!(dir, artifact(&cache, &keys[1]).parent().unwrap());
        assert!(matches!(why, Damage::DigestMismatch { .. }), "{why}");
        assert!(why.to_string().contains("blake3"), "{why}");
        assert!(!dir.exists());
        assert!(!artifact(&cache, &keys[2]).exists());
        assert!(artifact(&cache, &keys[0]).exists());
        assert_eq!(cache.stats().unwrap().entries, 1);
        assert_eq!(cache.verify().unwrap().damaged, vec![]);

        // Verified bytes that are not outputs: damage only the golden cache
        // can see, found by verify too.
        let k = UnitKey::from_hex(&keys[0]).unwrap();
        let mut key_inputs = KeyInputs::default();
        key_inputs
            .0
            .insert("schema".into(), CACHE_SCHEMA.to_string());
        let junk = b"not a container".to_vec();
        let m = Manifest::new(k, EntryKind::Golden, &junk, &key_inputs, "u", 0.0);
        std::fs::write(artifact(&cache, &keys[0]), &junk).unwrap();
        std::fs::write(manifest(&cache, &keys[0]), m.to_bytes()).unwrap();
        let report = cache.verify().unwrap();
        assert_eq!(report.damaged.len(), 1, "{report:?}");
        assert!(matches!(report.damaged[0].2, Damage::Content(_)));

        // A stray directory of any name is never taken for an entry (no
        // panic on a short or non-ASCII name), and prune sweeps it.
        let stray = store(&cache).root().join("xy").join("aé");
        std::fs::create_dir_all(&stray).unwrap();
        assert_eq!(cache.verify().unwrap().checked, 0);
        assert_eq!(cache.stats().unwrap().entries, 0);
        set_mtime(&stray, SystemTime::now() - Duration::from_secs(7200));
        let r = cache.prune(&PrunePolicy::default()).unwrap();
        assert_eq!(r.entries.leftovers, 1, "{r:?}");
        assert!(!stray.exists());
    }

    #[test]
    fn prune_by_age_then_size_keeps_busy_entries_and_clear_removes_all() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = GoldenCache::in_dir(tmp.path());
        let keys = three(&cache);
        let now = SystemTime::now();
        let day = Duration::from_secs(86400);
        let manifest = |k: &str| manifest(&cache, k);
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
        assert!(!manifest(&keys[0]).exists());

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
        assert!(!manifest(&keys[1]).exists());
        assert!(manifest(&keys[2]).exists());

        // Old records go with the max age; the earlier layout goes.
        cache.record_inputs("s::c", &inputs("x"));
        let record = cache.id_file(LAST_DIR, "s::c");
        set_mtime(&record, now - 20 * day);
        let legacy = cache.root().join("entries/ab/cd");
        std::fs::create_dir_all(&legacy).unwrap();
        std::fs::write(legacy.join("0.npy"), b"old").unwrap();
        let r = cache.prune(&policy).unwrap();
        assert_eq!(r.stale_records, 1, "{r:?}");
        assert!(!record.exists());
        assert!(!cache.root().join("entries").exists());

        assert_eq!(cache.clear().unwrap(), 1);
        assert!(!cache.root().exists());
        assert_eq!(cache.clear().unwrap(), 0);
    }

    /// Entries of the layout before the golden tier are never read: a
    /// lookup is a miss, stats and verify do not see them.
    #[test]
    fn the_earlier_layout_is_ignored() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = GoldenCache::in_dir(tmp.path());
        let key = inputs("c").key();
        let old = cache.root().join("entries").join(&key[..2]).join(&key);
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join("manifest.json"), b"{\"schema\":1}").unwrap();
        std::fs::write(old.join("0.npy"), b"x").unwrap();
        assert!(matches!(cache.get(&key, &EXPECTED), Err(Miss::NoEntry)));
        assert_eq!(cache.stats().unwrap(), GoldenStats::default());
        assert_eq!(cache.verify().unwrap(), GoldenVerifyReport::default());
    }

    /// Several publishers of one key (threads here, each with its own lock
    /// file descriptor, as separate processes have): one computes and
    /// publishes, the others wait and read what it published.
    #[test]
    fn concurrent_computations_of_one_key_publish_once() {
        let tmp = tempfile::tempdir().unwrap();
        let key = inputs("shared").key();
        let computed = std::sync::atomic::AtomicUsize::new(0);
        let barrier = std::sync::Barrier::new(4);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let cache = GoldenCache::in_dir(tmp.path());
                    barrier.wait();
                    let _lock = cache.lock(&key).unwrap();
                    match cache.get(&key, &EXPECTED) {
                        Ok(g) => assert_golden(&g),
                        Err(Miss::NoEntry) => {
                            computed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            publish(&cache, &key);
                        }
                        Err(other) => panic!("{other:?}"),
                    }
                });
            }
        });
        assert_eq!(computed.into_inner(), 1);
        let cache = GoldenCache::in_dir(tmp.path());
        assert_golden(&cache.get(&key, &EXPECTED).unwrap());
        assert_eq!(cache.stats().unwrap().entries, 1);
        let shard = artifact(&cache, &key);
        let shard = shard.parent().and_then(Path::parent).unwrap();
        assert_eq!(
            shard.read_dir().unwrap().count(),
            1,
            "one entry, no temp dirs"
        );
    }

    /// A runner with its own local cache and a shared `file://` remote.
    struct Runner {
        _local: tempfile::TempDir,
        kernel: Cache,
        goldens: GoldenCache,
    }

    fn runner(remote: &Path, read_only: bool, warnings: &Arc<Mutex<Vec<String>>>) -> Runner {
        let local = tempfile::tempdir().unwrap();
        let mut config = RemoteConfig::new(format!("file://{}", remote.display()));
        config.read_only = read_only;
        let sink = Arc::clone(warnings);
        let warn: WarnSink = Arc::new(move |m| sink.lock().unwrap().push(m.to_string()));
        let kernel = Cache::open(
            CacheConfig::new(local.path())
                .with_remote(Some(config))
                .with_warn(warn),
        )
        .unwrap();
        let goldens = GoldenCache::of_kernel_cache(&kernel);
        Runner {
            _local: local,
            kernel,
            goldens,
        }
    }

    fn remote_object(remote: &Path, key: &str) -> PathBuf {
        remote.join(format!(
            "scene-cache/v{CACHE_SCHEMA}/goldens/{}/{key}",
            &key[..2]
        ))
    }

    #[test]
    fn the_remote_tier_serves_goldens_and_damage_there_is_a_miss() {
        let remote = tempfile::tempdir().unwrap();
        let warnings = Arc::default();
        let key = inputs("remote").key();

        // A computes and publishes: local, then the remote.
        let a = runner(remote.path(), false, &warnings);
        assert!(matches!(a.goldens.get(&key, &EXPECTED), Err(Miss::NoEntry)));
        publish(&a.goldens, &key);
        let object = remote_object(remote.path(), &key);
        let good = std::fs::read(&object).expect("written to the remote");

        // B, with an empty local cache, reads it through and keeps a copy.
        let b = runner(remote.path(), false, &warnings);
        assert_golden(&b.goldens.get(&key, &EXPECTED).unwrap());
        assert!(
            store(&b.goldens)
                .get(&UnitKey::from_hex(&key).unwrap())
                .unwrap()
                .is_some()
        );
        assert!(b.kernel.remote().unwrap().is_enabled());

        // Damaged remote objects (a flipped byte, truncated, not an object)
        // are misses, never copied; the republished golden repairs them.
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x40;
        for damaged in [flipped, good[..good.len() - 10].to_vec(), b"junk".to_vec()] {
            std::fs::write(&object, &damaged).unwrap();
            let c = runner(remote.path(), false, &warnings);
            assert!(matches!(c.goldens.get(&key, &EXPECTED), Err(Miss::NoEntry)));
            assert!(store(&c.goldens).list().unwrap().is_empty());
            publish(&c.goldens, &key);
            assert_ne!(std::fs::read(&object).unwrap(), damaged, "repaired");
            let d = runner(remote.path(), false, &warnings);
            assert_golden(&d.goldens.get(&key, &EXPECTED).unwrap());
        }

        // An object that verifies but holds no golden outputs: copied, then
        // judged by the golden cache, removed, recomputed, republished.
        let k = UnitKey::from_hex(&key).unwrap();
        let mut key_inputs = KeyInputs::default();
        key_inputs
            .0
            .insert("schema".into(), CACHE_SCHEMA.to_string());
        let junk = b"verified junk".to_vec();
        let m = Manifest::new(k, EntryKind::Golden, &junk, &key_inputs, "u", 0.0);
        let scratch = tempfile::tempdir().unwrap();
        let writer = TieredStorage::new(
            LocalDisk::at(scratch.path().to_path_buf()),
            Arc::new(
                Remote::open(
                    &RemoteConfig::new(format!("file://{}", remote.path().display())),
                    CACHE_SCHEMA,
                    Arc::new(|_| {}),
                )
                .unwrap(),
            ),
            Tier::Goldens.name(),
            CACHE_SCHEMA,
        );
        writer.put(&k, &junk, &m.to_bytes()).unwrap();
        let e = runner(remote.path(), false, &warnings);
        assert!(matches!(
            e.goldens.get(&key, &EXPECTED),
            Err(Miss::Damaged(Damage::Content(_)))
        ));
        publish(&e.goldens, &key);
        let f = runner(remote.path(), false, &warnings);
        assert_golden(&f.goldens.get(&key, &EXPECTED).unwrap());

        // Read-only: reads, never writes.
        let other = inputs("read only").key();
        let ro = runner(remote.path(), true, &warnings);
        assert_golden(&ro.goldens.get(&key, &EXPECTED).unwrap());
        publish(&ro.goldens, &other);
        assert!(!remote_object(remote.path(), &other).exists());
        assert_golden(&ro.goldens.get(&other, &EXPECTED).unwrap());

        assert_eq!(warnings.lock().unwrap().clone(), Vec::<String>::new());
    }

    /// Goldens use the kernel cache's one remote: once it fails, neither
    /// asks it again and there is one warning for both.
    #[test]
    fn a_failed_remote_is_one_warning_for_kernels_and_goldens() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let local = tempfile::tempdir().unwrap();
        let warnings = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = Arc::clone(&warnings);
        let warn: WarnSink = Arc::new(move |m| sink.lock().unwrap().push(m.to_string()));
        let mut remote = RemoteConfig::new(format!("redis://127.0.0.1:{port}/0"));
        remote.timeout = Duration::from_secs(5);
        let kernel = Cache::open(
            CacheConfig::new(local.path())
                .with_remote(Some(remote))
                .with_warn(warn),
        )
        .unwrap();
        let goldens = GoldenCache::of_kernel_cache(&kernel);
        for n in 0..3 {
            let key = inputs(&format!("{n}")).key();
            assert!(matches!(goldens.get(&key, &EXPECTED), Err(Miss::NoEntry)));
            publish(&goldens, &key);
            assert_golden(&goldens.get(&key, &EXPECTED).unwrap());
        }
        assert!(!kernel.remote().unwrap().is_enabled());
        assert!(matches!(kernel.lookup(&UnitKey([7; 32])), Lookup::Miss));
        let warnings = warnings.lock().unwrap().clone();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(kernel.run_stats().remote_errors, 1);
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
        let damaged = Miss::Damaged(Damage::MissingArtifact);
        assert_eq!(
            why_recomputed(Some(&now), &now, &damaged),
            "damaged entry (artifact missing)"
        );
    }

    #[test]
    fn records_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = GoldenCache::in_dir(tmp.path());
        assert_eq!(cache.last_inputs("s::c"), None);
        cache.record_inputs("s::c", &inputs("x"));
        assert_eq!(cache.last_inputs("s::c"), Some(inputs("x")));
        assert_eq!(cache.last_inputs("s::d"), None);
        cache.record_fixture_digest("k", "abc");
        assert_eq!(cache.fixture_digest("k").as_deref(), Some("abc"));
    }
}
