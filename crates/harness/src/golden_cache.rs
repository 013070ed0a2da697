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

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use scene_golden::{DType, Tensor, npy};
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

/// Held while one process computes and publishes one key.
#[derive(Debug)]
pub struct KeyLock {
    _file: File,
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

    /// Blocks until this process holds `key`'s lock.
    pub fn lock(&self, key: &str) -> io::Result<KeyLock> {
        let path = self
            .root
            .join("locks")
            .join(&key[..2])
            .join(format!("{key}.lock"));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let file = File::options()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)?;
        file.lock()?;
        Ok(KeyLock { _file: file })
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
            Ok(g) => Ok(g),
            Err(why) => {
                let _ = remove_any(&dir);
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
        let meta = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
        if !meta.is_dir() {
            return Err("the entry is not a directory".into());
        }
        let bytes = scene_util::read_regular_file(&dir.join("manifest.json"), None, MAX_SMALL_FILE)
            .map_err(|e| e.to_string())?;
        let m: Manifest =
            serde_json::from_slice(&bytes).map_err(|e| format!("manifest.json: {e}"))?;
        if m.schema != SCHEMA || m.key != key {
            return Err("manifest.json names another schema or key".into());
        }
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
            let file = scene_util::check_file_name(&rec.file).map_err(|e| e.to_string())?;
            let data = scene_util::read_regular_file(&dir.join(file), Some(rec.size), rec.size)
                .map_err(|e| e.to_string())?;
            if blake3::hash(&data).to_hex().as_str() != rec.blake3 {
                return Err(format!("{}: blake3 mismatch", rec.file));
            }
            let t =
                npy::from_npy_bytes_as(&data, dtype).map_err(|e| format!("{}: {e}", rec.file))?;
            if t.shape() != shape {
                return Err(format!(
                    "{}: shape {:?}, expected {shape:?}",
                    rec.file,
                    t.shape()
                ));
            }
            golden = golden.with(name, t);
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
        remove_any(&dest)?;
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

/// Removes a file, symlink or directory at `path`, if any.
fn remove_any(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
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
