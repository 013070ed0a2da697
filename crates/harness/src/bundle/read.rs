//! Reading a bundle: every name and digest checked before use.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use scene_golden::{Tensor, npy};
use scene_kernels::{ChipCallable, CoreType, IncoreImage, IncoreKind};

use super::{
    BundleError, MANIFEST_FILE, MAX_MANIFEST_LEN, MAX_SLOT_FILE_LEN, Manifest, RUNTIME_ABI, SCHEMA,
    SlotData, SlotManifest, SlotProblem, TensorEntry, check_name, slot_binding, slot_key,
};
use crate::golden::GoldenOutputs;
use crate::prepare::missing_golden_output;
use crate::scene::{Case, Scene};
use crate::select::SelectedCase;

/// An opened bundle: its manifest, checked for schema, and its directory.
#[derive(Debug)]
pub struct Bundle {
    /// As given, for messages.
    path: PathBuf,
    /// Canonical, so resolved file paths can be checked against it.
    root: PathBuf,
    manifest: Manifest,
}

impl Bundle {
    /// Opens `dir`: reads `bundle.json`, refuses other schemas. Slots are
    /// checked when loaded ([`Bundle::load_case`]).
    pub fn open(dir: &Path) -> Result<Bundle, BundleError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| BundleError::Io { path, source }
        };
        let root = dir.canonicalize().map_err(io_err(dir))?;
        let manifest_path = root.join(MANIFEST_FILE);
        // A regular file: a FIFO or a symlink to a device here would hang
        // or exhaust the process before any check.
        let text = match scene_util::read_regular_file(&manifest_path, None, MAX_MANIFEST_LEN) {
            Ok(t) => t,
            Err(e) if e.is_not_found() => {
                return Err(BundleError::NotABundle {
                    path: dir.to_path_buf(),
                });
            }
            Err(source) => return Err(BundleError::Unreadable { source }),
        };
        let malformed = |message: String| BundleError::Malformed {
            path: manifest_path.clone(),
            message,
        };
        // The schema first, alone: a newer manifest may not parse as ours,
        // and its reader deserves "newer schema", not a field error.
        let value: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| malformed(e.to_string()))?;
        let Some(schema) = value.get("schema").and_then(serde_json::Value::as_u64) else {
            return Err(malformed("no numeric `schema` field".into()));
        };
        if schema > u64::from(SCHEMA) {
            return Err(BundleError::NewerSchema {
                path: dir.to_path_buf(),
                found: schema,
            });
        }
        if schema < u64::from(SCHEMA) {
            return Err(BundleError::OlderSchema {
                path: dir.to_path_buf(),
                found: schema,
            });
        }
        let manifest: Manifest =
            serde_json::from_value(value).map_err(|e| malformed(e.to_string()))?;
        Ok(Bundle {
            path: dir.to_path_buf(),
            root,
            manifest,
        })
    }

    /// Refuses the bundle as a whole when it was built for another
    /// platform: every slot would be rebuilt, which is a wrong `--platform`
    /// (or `--from`), not damage. Checked once, before any work.
    pub fn check_platform(&self, platform: &str) -> Result<(), BundleError> {
        if self.manifest.platform == platform {
            return Ok(());
        }
        Err(BundleError::Platform {
            path: self.path.clone(),
            found: self.manifest.platform.clone(),
            expected: platform.to_string(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The slot of `sel`, checked (names, platform, ABI, digests, key) and
    /// loaded, or why it cannot be used.
    pub fn load_case(&self, sel: &SelectedCase, platform: &str) -> Result<SlotData, SlotProblem> {
        let id = sel.id();
        let Some(slot) = self.manifest.slots.get(&id) else {
            return Err(match self.manifest.failed.get(&id) {
                Some(f) => SlotProblem::FailedInPass1 {
                    stage: f.stage,
                    message: f.message.clone(),
                },
                None => SlotProblem::Missing,
            });
        };
        check_target(slot, platform)?;
        // Every name is checked before any file is opened.
        let dir = check_names(slot)?;
        // The slot is the case it claims to be: its records describe this
        // case's tensors, and they were written under this slot's name.
        check_case(slot, &sel.scene, sel.case())?;
        if let Some(found) = &slot.binding {
            let expected = slot_binding(&sel.id(), slot);
            if *found != expected {
                return Err(SlotProblem::Unbound {
                    found: found.clone(),
                    expected,
                });
            }
        }
        let reader = SlotReader {
            root: &self.root,
            dir: &self.root.join(dir),
            slot,
        };
        let callable = reader.callable()?;
        let key = slot_key(&callable, &sel.scene, sel.case(), &slot.scalars, platform);
        if key != slot.key {
            return Err(SlotProblem::Stale {
                found: slot.key.clone(),
                expected: key,
            });
        }
        let (inputs, golden) = reader.tensors(&sel.scene, sel.case())?;
        let mut hosts = BTreeMap::new();
        for (step, file) in &slot.hosts {
            hosts.insert(*step, reader.read(file)?);
        }
        Ok(SlotData {
            hosts,
            callable: Arc::new(callable),
            inputs,
            scalars: slot.scalars.clone(),
            golden,
        })
    }
}

/// The slot was built for this platform and runtime ABI.
fn check_target(slot: &SlotManifest, platform: &str) -> Result<(), SlotProblem> {
    if slot.platform != platform {
        return Err(SlotProblem::Platform {
            found: slot.platform.clone(),
            expected: platform.to_string(),
        });
    }
    if slot.runtime_abi != RUNTIME_ABI {
        return Err(SlotProblem::Abi {
            found: slot.runtime_abi,
            expected: RUNTIME_ABI,
        });
    }
    Ok(())
}

/// The slot's tensor records against the current `scene.toml` case: every
/// signature tensor in order with its name, direction, dtype and shape (the
/// case's params bound), and a golden for outputs only, of the same dtype
/// and shape.
fn check_case(slot: &SlotManifest, scene: &Scene, case: &Case) -> Result<(), SlotProblem> {
    let names: Vec<&str> = slot.inputs.iter().map(|t| t.name.as_str()).collect();
    let expected: Vec<&str> = scene.tensors.iter().map(|t| t.name.as_str()).collect();
    if names != expected {
        return Err(SlotProblem::WrongCase(format!(
            "its tensors are {names:?}, the case's are {expected:?}"
        )));
    }
    let same = |entry: &TensorEntry, index: usize, what: &str| {
        let spec = &scene.tensors[index];
        let Some(resolved) = case.tensors.get(index) else {
            return Err(SlotProblem::WrongCase(format!(
                "tensor `{}` is not resolved by the case",
                spec.name
            )));
        };
        let shape = &resolved.shape;
        if entry.dtype != resolved.dtype || &entry.shape != shape {
            return Err(SlotProblem::WrongCase(format!(
                "{what} `{}` is recorded as {}{:?}, the case has {}{shape:?}",
                spec.name, entry.dtype, entry.shape, resolved.dtype
            )));
        }
        Ok(())
    };
    for (index, (entry, spec)) in slot.inputs.iter().zip(&scene.tensors).enumerate() {
        let direction = spec.direction.to_string();
        if let Some(found) = entry.direction.as_deref().filter(|d| *d != direction) {
            return Err(SlotProblem::WrongCase(format!(
                "tensor `{}` is recorded as `{found}`, the case has `{direction}`",
                spec.name
            )));
        }
        same(entry, index, "tensor")?;
    }
    for entry in &slot.golden {
        let Some(index) = scene.tensors.iter().position(|t| t.name == entry.name) else {
            return Err(SlotProblem::WrongCase(format!(
                "it has a golden for `{}`, which is not a tensor of the case",
                entry.name
            )));
        };
        if !scene.tensors[index].direction.is_output() {
            return Err(SlotProblem::WrongCase(format!(
                "it has a golden for `{}`, which is not an output of the case",
                entry.name
            )));
        }
        same(entry, index, "golden")?;
    }
    Ok(())
}

/// Checks the slot directory and every file name the slot uses (each must
/// also have a digest); returns the directory.
fn check_names(slot: &SlotManifest) -> Result<&Path, SlotProblem> {
    let dir = check_name(&slot.dir)?;
    for name in slot.files.keys() {
        check_name(name)?;
    }
    let referenced = std::iter::once(&slot.callable.orch)
        .chain(slot.callable.incores.iter().map(|k| &k.file))
        .chain(slot.inputs.iter().map(|t| &t.file))
        .chain(slot.golden.iter().map(|t| &t.file))
        .chain(slot.hosts.values());
    for name in referenced {
        check_name(name)?;
        if !slot.files.contains_key(name) {
            return Err(SlotProblem::Malformed(format!(
                "`{name}` is used but has no digest in `files`"
            )));
        }
    }
    Ok(dir)
}

/// Reads files of one slot, each confined to the bundle and digest-checked.
struct SlotReader<'a> {
    root: &'a Path,
    dir: &'a Path,
    slot: &'a SlotManifest,
}

impl SlotReader<'_> {
    /// The stored callable, incores ordered by func_id.
    fn callable(&self) -> Result<ChipCallable, SlotProblem> {
        let slot = self.slot;
        let mut incores = Vec::with_capacity(slot.callable.incores.len());
        for k in &slot.callable.incores {
            let core: CoreType =
                k.core
                    .parse()
                    .map_err(|e: scene_kernels::ParseCoreTypeError| {
                        SlotProblem::Malformed(e.to_string())
                    })?;
            let kind = if k.kind.is_empty() {
                IncoreKind::Image
            } else {
                k.kind
                    .parse::<IncoreKind>()
                    .map_err(|e| SlotProblem::Malformed(e.to_string()))?
            };
            incores.push(IncoreImage {
                name: k.name.clone(),
                func_id: k.func_id,
                core,
                kind,
                text: self.read(&k.file)?,
            });
        }
        // Devices look kernels up by func_id with a binary search.
        incores.sort_by_key(|k| k.func_id);
        Ok(ChipCallable {
            label: slot.callable.label.clone(),
            orch_so: self.read(&slot.callable.orch)?,
            orch_symbol: slot.callable.orch_symbol.clone(),
            incores,
        })
    }

    /// The stored inputs (matched to the scene's tensors by position) and
    /// goldens (covering every output).
    fn tensors(
        &self,
        scene: &Scene,
        case: &Case,
    ) -> Result<(Vec<(String, Tensor)>, GoldenOutputs), SlotProblem> {
        // `check_case` matched them to the scene's tensors already.
        let slot = self.slot;
        let inputs = slot
            .inputs
            .iter()
            .map(|t| Ok((t.name.clone(), self.tensor(t)?)))
            .collect::<Result<Vec<_>, SlotProblem>>()?;
        let mut golden = GoldenOutputs::new();
        for t in &slot.golden {
            golden = golden.with(&t.name, self.tensor(t)?);
        }
        if let Some(name) = missing_golden_output(scene, case, &golden) {
            return Err(SlotProblem::Malformed(format!(
                "no golden for output tensor `{name}`"
            )));
        }
        Ok((inputs, golden))
    }

    /// The bytes of `name` (already [`check_name`]d and listed in `files`).
    fn read(&self, name: &str) -> Result<Vec<u8>, SlotProblem> {
        let unreadable = |e: io::Error| SlotProblem::Unreadable {
            file: name.to_string(),
            message: e.to_string(),
        };
        // Resolving symlinks reads no file contents; a name that resolves
        // outside the bundle is refused before it is opened.
        let resolved = self.dir.join(name).canonicalize().map_err(unreadable)?;
        if !resolved.starts_with(self.root) {
            return Err(SlotProblem::Escape {
                name: name.to_string(),
                why: "a symlink resolves outside the bundle",
            });
        }
        // A regular file of the recorded size: a FIFO, a device or a
        // directory here is damage, refused before a byte is read.
        let expected_len = self.slot.sizes.get(name).copied();
        let bytes = scene_util::read_regular_file(&resolved, expected_len, MAX_SLOT_FILE_LEN)
            .map_err(|e| SlotProblem::Unreadable {
                file: name.to_string(),
                message: e.to_string(),
            })?;
        let found = blake3::hash(&bytes).to_hex().to_string();
        let expected = self.slot.files.get(name).cloned().unwrap_or_default();
        if found != expected {
            return Err(SlotProblem::Digest {
                file: name.to_string(),
                expected,
                found,
            });
        }
        Ok(bytes)
    }

    fn tensor(&self, entry: &TensorEntry) -> Result<Tensor, SlotProblem> {
        let bytes = self.read(&entry.file)?;
        // The dtype comes from the manifest: bf16 is stored as `<u2` bits.
        let t = npy::from_npy_bytes_as(&bytes, entry.dtype)
            .map_err(|e| SlotProblem::Malformed(format!("tensor file `{}`: {e}", entry.file)))?;
        if t.shape() != entry.shape.as_slice() {
            return Err(SlotProblem::Malformed(format!(
                "tensor file `{}` has shape {:?}, the manifest says {:?}",
                entry.file,
                t.shape(),
                entry.shape
            )));
        }
        Ok(t)
    }
}
