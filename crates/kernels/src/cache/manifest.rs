//! The manifest stored next to each artifact, and the checks a read makes
//! before an artifact may be used.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::storage::{MAX_MANIFEST_BYTES, Part, Storage, StorageError};
use crate::key::{EntryKind, KeyInputs, UnitKey};

/// What an entry claims to be. Written last, after the artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: u32,
    /// Hex key the entry was published under.
    pub key: String,
    /// Artifact length in bytes.
    pub size: u64,
    /// blake3 of the artifact, hex.
    pub blake3: String,
    /// What the artifact is (`incore`, `orchestration`, `callable`,
    /// `builtins`).
    pub kind: EntryKind,
    /// `<label>/<name>` of the unit that produced it (informational).
    pub unit: String,
    /// Seconds the compile took; what a hit saves.
    pub compile_s: f64,
    pub created_unix: u64,
    /// The human-readable key inputs.
    pub inputs: BTreeMap<String, String>,
    /// Incore and orchestration units: every file the compiler read and its
    /// blake3 (see [`crate::deps`]); a hit requires each still to match.
    /// `None`: the compiler gave no list, the key's scanner closure is all
    /// that was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deps: Option<crate::deps::Deps>,
}

impl Manifest {
    pub fn new(
        key: UnitKey,
        kind: EntryKind,
        artifact: &[u8],
        inputs: &KeyInputs,
        unit: &str,
        compile_s: f64,
    ) -> Self {
        Manifest {
            schema: inputs
                .get("schema")
                .and_then(|s| s.parse().ok())
                .unwrap_or(crate::key::CACHE_SCHEMA),
            key: key.to_hex(),
            size: artifact.len() as u64,
            blake3: blake3::hash(artifact).to_hex().to_string(),
            kind,
            unit: unit.to_owned(),
            compile_s,
            created_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            inputs: inputs.0.clone(),
            deps: None,
        }
    }

    /// The manifest with the compile's dependency list.
    pub fn with_deps(mut self, deps: Option<crate::deps::Deps>) -> Self {
        self.deps = deps;
        self
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        // Serialising plain strings and numbers cannot fail.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }
}

/// Why a stored entry was not accepted. Any of these is a miss: the entry
/// is removed and the unit recompiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Damage {
    #[error("manifest missing")]
    MissingManifest,
    /// A symbolic link, FIFO, device, directory or socket where a file
    /// belongs; it was not read.
    #[error("{part} is {what}, not a regular file")]
    NotAFile {
        part: &'static str,
        what: &'static str,
    },
    #[error("artifact missing")]
    MissingArtifact,
    #[error("manifest unparsable: {0}")]
    UnparsableManifest(String),
    #[error("manifest has schema {found}, expected {expected}")]
    WrongSchema { found: u32, expected: u32 },
    #[error("manifest is for key {found}")]
    WrongKey { found: String },
    #[error("artifact is {found} bytes, manifest says {expected}")]
    SizeMismatch { expected: u64, found: u64 },
    #[error("artifact blake3 {found} does not match the manifest's {expected}")]
    DigestMismatch { expected: String, found: String },
    /// A manifest of another kind in a tier that holds one kind (a golden
    /// tier entry that says `incore`).
    #[error("entry is {found}, expected {expected}")]
    WrongKind {
        found: EntryKind,
        expected: EntryKind,
    },
    /// Verified bytes that do not decode as what their kind says they are
    /// (judged by the owner of the kind, e.g. the golden cache).
    #[error("artifact content: {0}")]
    Content(String),
}

/// Checks an entry read under `key` and returns its manifest if the
/// artifact is exactly what the manifest describes.
pub fn verify(
    key: UnitKey,
    schema: u32,
    manifest: Option<&[u8]>,
    artifact: Option<&[u8]>,
) -> Result<Manifest, Damage> {
    let manifest = verify_manifest(key, Some(schema), manifest.ok_or(Damage::MissingManifest)?)?;
    verify_artifact(&manifest, artifact.ok_or(Damage::MissingArtifact)?)?;
    Ok(manifest)
}

/// Parses a manifest stored under `key` and checks its schema (`None`: the
/// one it states) and key.
pub fn verify_manifest(
    key: UnitKey,
    schema: Option<u32>,
    bytes: &[u8],
) -> Result<Manifest, Damage> {
    let manifest: Manifest =
        serde_json::from_slice(bytes).map_err(|e| Damage::UnparsableManifest(e.to_string()))?;
    let schema = schema.unwrap_or(manifest.schema);
    if manifest.schema != schema {
        return Err(Damage::WrongSchema {
            found: manifest.schema,
            expected: schema,
        });
    }
    if manifest.key != key.to_hex() {
        return Err(Damage::WrongKey {
            found: manifest.key,
        });
    }
    Ok(manifest)
}

/// Checks an artifact's length and digest against its manifest.
pub fn verify_artifact(manifest: &Manifest, artifact: &[u8]) -> Result<(), Damage> {
    if artifact.len() as u64 != manifest.size {
        return Err(Damage::SizeMismatch {
            expected: manifest.size,
            found: artifact.len() as u64,
        });
    }
    let digest = blake3::hash(artifact).to_hex().to_string();
    if digest != manifest.blake3 {
        return Err(Damage::DigestMismatch {
            expected: manifest.blake3.clone(),
            found: digest,
        });
    }
    Ok(())
}

/// A verified entry, or why the stored one is not accepted.
pub type Checked = Result<(Manifest, Vec<u8>), Damage>;

/// Reads `key` from `storage` and verifies it: the manifest first, then
/// the artifact, which is read only if it is a regular file of the length
/// the manifest states. `Ok(None)`: nothing is stored under `key`.
/// `schema`: the schema the entry must have (`None`: the one it states).
pub fn read_verified(
    storage: &dyn Storage,
    key: &UnitKey,
    schema: Option<u32>,
) -> Result<Option<Checked>, StorageError> {
    let Some(manifest) = storage.get_manifest(key)? else {
        return Ok(None);
    };
    let manifest = match manifest {
        Part::Bytes(bytes) => match verify_manifest(*key, schema, &bytes) {
            Ok(m) => m,
            Err(damage) => return Ok(Some(Err(damage))),
        },
        Part::Missing => return Ok(Some(Err(Damage::MissingManifest))),
        Part::NotAFile(what) => {
            let part = "manifest";
            return Ok(Some(Err(Damage::NotAFile { part, what })));
        }
        Part::WrongSize(found) => {
            return Ok(Some(Err(Damage::UnparsableManifest(format!(
                "{found} bytes, over the {MAX_MANIFEST_BYTES} a manifest may have"
            )))));
        }
    };
    let checked = match storage.get_artifact(key, manifest.size)? {
        Part::Bytes(bytes) => verify_artifact(&manifest, &bytes).map(|()| (manifest, bytes)),
        Part::Missing => Err(Damage::MissingArtifact),
        Part::NotAFile(what) => Err(Damage::NotAFile {
            part: "artifact",
            what,
        }),
        Part::WrongSize(found) => Err(Damage::SizeMismatch {
            expected: manifest.size,
            found,
        }),
    };
    Ok(Some(checked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::CACHE_SCHEMA;

    fn entry(bytes: &[u8]) -> (UnitKey, Vec<u8>) {
        let mut inputs = KeyInputs::default();
        inputs.0.insert("schema".into(), CACHE_SCHEMA.to_string());
        let key = inputs.key();
        (
            key,
            Manifest::new(key, EntryKind::Incore, bytes, &inputs, "s/u", 0.5).to_bytes(),
        )
    }

    #[test]
    fn accepts_exact_bytes_only() {
        let (key, m) = entry(b"hello");
        let ok = verify(key, CACHE_SCHEMA, Some(&m), Some(b"hello")).expect("valid");
        assert_eq!(ok.size, 5);
        assert!(matches!(
            verify(key, CACHE_SCHEMA, Some(&m), Some(b"hellp")),
            Err(Damage::DigestMismatch { .. })
        ));
        assert!(matches!(
            verify(key, CACHE_SCHEMA, Some(&m), Some(b"hell")),
            Err(Damage::SizeMismatch {
                expected: 5,
                found: 4
            })
        ));
        assert_eq!(
            verify(key, CACHE_SCHEMA, None, Some(b"hello")),
            Err(Damage::MissingManifest)
        );
        assert_eq!(
            verify(key, CACHE_SCHEMA, Some(&m), None),
            Err(Damage::MissingArtifact)
        );
        assert!(matches!(
            verify(key, CACHE_SCHEMA, Some(b"garbage"), Some(b"hello")),
            Err(Damage::UnparsableManifest(_))
        ));
        assert!(matches!(
            verify(UnitKey([9; 32]), CACHE_SCHEMA, Some(&m), Some(b"hello")),
            Err(Damage::WrongKey { .. })
        ));
        assert!(matches!(
            verify(key, CACHE_SCHEMA + 1, Some(&m), Some(b"hello")),
            Err(Damage::WrongSchema { .. })
        ));
    }

    #[test]
    fn kinds_read_and_write_as_the_strings_caches_always_stored() {
        for (kind, name) in [
            (EntryKind::Incore, "incore"),
            (EntryKind::Orchestration, "orchestration"),
            (EntryKind::Callable, "callable"),
            (EntryKind::Builtins, "builtins"),
            (EntryKind::Golden, "golden"),
            (EntryKind::Host, "host"),
        ] {
            let (key, m) = entry(b"x");
            let mut json: serde_json::Value = serde_json::from_slice(&m).expect("json");
            json["kind"] = name.into();
            let bytes = serde_json::to_vec(&json).expect("bytes");
            let read = verify(key, CACHE_SCHEMA, Some(&bytes), Some(b"x")).expect("valid");
            assert_eq!(read.kind, kind);
            assert_eq!(kind.to_string(), name);
            let written: serde_json::Value =
                serde_json::from_slice(&read.to_bytes()).expect("json");
            assert_eq!(written["kind"], name);
        }
        // Listings sort kinds by name.
        let mut sorted = EntryKind::ALL;
        sorted.sort_by_key(|k| k.as_str());
        assert_eq!(sorted, EntryKind::ALL);
        let mut by_ord = EntryKind::ALL;
        by_ord.sort();
        assert_eq!(by_ord, EntryKind::ALL);
        // An unknown kind is a damaged manifest, not a panic.
        let (key, m) = entry(b"x");
        let mut json: serde_json::Value = serde_json::from_slice(&m).expect("json");
        json["kind"] = "mystery".into();
        let bytes = serde_json::to_vec(&json).expect("bytes");
        assert!(matches!(
            verify(key, CACHE_SCHEMA, Some(&bytes), Some(b"x")),
            Err(Damage::UnparsableManifest(_))
        ));
    }
}
