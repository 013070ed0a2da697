//! Precompiled bundles: the output of `scene precompile`, the input of
//! `scene run --from`.
//!
//! A bundle lets a machine without cards do all the CPU work (compile,
//! fixtures, goldens) and a machine with cards spend them on device work
//! only. Layout:
//!
//! ```text
//! DIR/
//!     bundle.json                         the manifest (below)
//!     slots/<nnnn>-<scene>--<case>/
//!         callable/orch.so                orchestration shared object
//!         callable/incore-<func_id>-<core>.bin   incore `.text` images
//!         inputs/<tensor>.npy             every tensor in signature order
//!         golden/<tensor>.npy             expected outputs
//! ```
//!
//! The manifest records the schema, the platform and runtime ABI, and per
//! slot (`"scene::case"`): its directory, the blake3 digest of every file,
//! the orchestration symbol, func ids and core types, dtypes and shapes, the
//! scalar arguments, the tolerances, and the key that produced it.
//!
//! Trust model: the manifest is data from disk, so nothing it names is
//! opened before it is checked. Names must be relative, made of normal
//! components only, and must resolve (symlinks included) inside the bundle;
//! every file must match its digest. A slot failing any check is reported
//! with the reason and its case is rebuilt from source; other slots are
//! unaffected. A bundle of a newer schema is refused as a whole, since its
//! meaning is unknown.
//!
//! A bundle is written into a sibling temp directory and renamed into place
//! at the end, so `DIR` is either a complete bundle or not one at all.

use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use scene_golden::{DType, Tensor, Tolerance, npy};
use scene_kernels::{ChipCallable, CoreType, IncoreImage};
use serde::{Deserialize, Serialize};

use crate::golden::GoldenOutputs;
use crate::pipeline::SelectedCase;
use crate::scene::{Case, Scene};

/// The manifest schema this harness writes and reads.
pub const SCHEMA: u32 = 1;

/// File name of the manifest inside a bundle directory.
pub const MANIFEST_FILE: &str = "bundle.json";

/// The runtime ABI every slot is built against.
pub const RUNTIME_ABI: i32 = scene_device::abi::SCENE_RUNTIME_ABI_VERSION;

/// Errors about a bundle as a whole: it cannot be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error(
        "{}: not a scene bundle (no {MANIFEST_FILE}); make one with `scene precompile --out DIR`",
        path.display()
    )]
    NotABundle { path: PathBuf },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: malformed bundle manifest: {message}", path.display())]
    Malformed { path: PathBuf, message: String },
    #[error(
        "{}: bundle schema {found} is newer than this scene understands (schema {SCHEMA}); \
         run it with a newer scene, or rebuild it with this one's `scene precompile`",
        path.display()
    )]
    NewerSchema { path: PathBuf, found: u64 },
    #[error(
        "{}: bundle schema {found} is older than this scene understands (schema {SCHEMA}); \
         rebuild it with `scene precompile`",
        path.display()
    )]
    OlderSchema { path: PathBuf, found: u64 },
    #[error(
        "refusing to write a bundle to {}: it exists and is not a scene bundle \
         (no {MANIFEST_FILE}); choose an empty or new directory",
        path.display()
    )]
    NotReplaceable { path: PathBuf },
    #[error("slot `{slot}` is added twice")]
    DuplicateSlot { slot: String },
}

/// Why one slot cannot be used; its case is rebuilt instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SlotProblem {
    #[error("is missing from the bundle")]
    Missing,
    #[error("was built for platform `{found}`, but this run is for `{expected}`")]
    Platform { found: String, expected: String },
    #[error("was built for runtime ABI {found}, but this harness speaks ABI {expected}")]
    Abi { found: i32, expected: i32 },
    #[error("names `{name}`, which is refused: {why}")]
    Escape { name: String, why: &'static str },
    #[error("file `{file}` failed its digest check (manifest blake3 {expected}, file {found})")]
    Digest {
        file: String,
        expected: String,
        found: String,
    },
    #[error("file `{file}` is unreadable: {message}")]
    Unreadable { file: String, message: String },
    #[error("is malformed: {0}")]
    Malformed(String),
    #[error(
        "was built from a different definition of this case (key {found}, expected {expected})"
    )]
    Stale { found: String, expected: String },
}

/// The manifest, `bundle.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: u32,
    pub platform: String,
    pub runtime_abi: i32,
    /// Unix seconds.
    pub created_at: f64,
    /// `scene <version>` that wrote it.
    pub producer: String,
    /// Hash of the kernel crate's compile logic, for humans diagnosing a
    /// mismatch; not checked (the slot key covers the bytes themselves).
    pub compile_logic: String,
    /// By `scene::case`.
    pub slots: BTreeMap<String, SlotManifest>,
}

/// One case of a bundle.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SlotManifest {
    /// Relative to the bundle directory.
    pub dir: String,
    /// [`slot_key`] of the stored callable and the case definition.
    pub key: String,
    pub platform: String,
    pub runtime_abi: i32,
    pub callable: CallableEntry,
    /// Every tensor of the signature, in order (what is uploaded).
    pub inputs: Vec<TensorEntry>,
    /// Expected value of every output tensor.
    pub golden: Vec<TensorEntry>,
    /// Raw bits of the scalar arguments, in order.
    pub scalars: Vec<u64>,
    /// Per output tensor.
    pub tolerances: BTreeMap<String, Tolerance>,
    /// blake3 (hex) of every file, by path relative to `dir`.
    pub files: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CallableEntry {
    pub label: String,
    /// Relative to the slot directory.
    pub orch: String,
    pub orch_symbol: String,
    pub incores: Vec<IncoreEntry>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IncoreEntry {
    pub name: String,
    pub func_id: u32,
    pub core: String,
    pub file: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TensorEntry {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub file: String,
}

/// What a valid slot gives the pipeline in place of compile, fixtures and
/// golden.
#[derive(Debug)]
pub struct SlotData {
    pub callable: Arc<ChipCallable>,
    pub inputs: Vec<(String, Tensor)>,
    pub scalars: Vec<u64>,
    pub golden: GoldenOutputs,
}

/// The identity of a slot: the callable's bytes plus everything that
/// decides the case's fixtures, scalars, golden and verdict. A bundle slot is
/// used only when the key recomputed from its stored callable and the
/// current scene definition equals the recorded one, so an edited
/// `scene.toml` (shapes, seeds, params, tolerances) never runs against stale
/// data.
pub fn slot_key(
    callable: &ChipCallable,
    scene: &Scene,
    case: &Case,
    scalars: &[u64],
    platform: &str,
) -> String {
    let mut h = blake3::Hasher::new();
    // Length-prefixed fields, so no two different field lists hash alike.
    let mut field = |tag: &str, bytes: &[u8]| {
        for part in [tag.as_bytes(), bytes] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
    };
    field("schema", &SCHEMA.to_le_bytes());
    field("platform", platform.as_bytes());
    field("runtime_abi", &RUNTIME_ABI.to_le_bytes());
    field("orch_so", &callable.orch_so);
    field("orch_symbol", callable.orch_symbol.as_bytes());
    for k in &callable.incores {
        field(
            "incore",
            format!("{}:{}:{}", k.name, k.func_id, k.core).as_bytes(),
        );
        field("text", &k.text);
    }
    field("scene", scene.name.as_bytes());
    field("case", case.name.as_bytes());
    field("params", format!("{:?}", case.params).as_bytes());
    field("case_seed", &case.seed.to_le_bytes());
    field("golden", scene.golden.as_bytes());
    for t in &scene.tensors {
        field("tensor", format!("{t:?}").as_bytes());
        if t.direction.is_output() {
            field(
                "tolerance",
                format!("{:?}", scene.tolerance_for(t)).as_bytes(),
            );
        }
    }
    field("scalars", format!("{scalars:?}").as_bytes());
    h.finalize().to_hex().to_string()
}

/// Checks a manifest name before anything is opened: relative, and made of
/// normal components only (no root, no `..`, no `.`, not empty).
pub fn check_name(name: &str) -> Result<&Path, SlotProblem> {
    let escape = |why| SlotProblem::Escape {
        name: name.to_string(),
        why,
    };
    if name.is_empty() {
        return Err(escape("empty path"));
    }
    if name.contains('\0') {
        return Err(escape("NUL in path"));
    }
    let path = Path::new(name);
    if path.is_absolute() || path.has_root() {
        return Err(escape("absolute path"));
    }
    // `Path::components` drops interior `.` and empty segments; the raw
    // segments are checked too, so a name has exactly one spelling.
    for seg in name.split('/') {
        match seg {
            "" => return Err(escape("empty path component")),
            "." => return Err(escape("`.` component")),
            ".." => return Err(escape("`..` component")),
            _ => {}
        }
    }
    for c in path.components() {
        match c {
            Component::Normal(_) => {}
            Component::ParentDir => return Err(escape("`..` component")),
            Component::CurDir => return Err(escape("`.` component")),
            Component::RootDir | Component::Prefix(_) => return Err(escape("absolute path")),
        }
    }
    Ok(path)
}

/// An opened bundle: its manifest, checked for schema, and its directory.
#[derive(Debug)]
pub struct Bundle {
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
        let text = match std::fs::read(&manifest_path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(BundleError::NotABundle {
                    path: dir.to_path_buf(),
                });
            }
            Err(e) => return Err(io_err(&manifest_path)(e)),
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
        Ok(Bundle { root, manifest })
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
        let slot = self
            .manifest
            .slots
            .get(&sel.id())
            .ok_or(SlotProblem::Missing)?;
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
        // Every name is checked before any file is opened.
        let dir = check_name(&slot.dir)?;
        for name in slot.files.keys() {
            check_name(name)?;
        }
        let reader = SlotReader {
            root: &self.root,
            dir: &self.root.join(dir),
            slot,
        };
        let referenced = std::iter::once(&slot.callable.orch)
            .chain(slot.callable.incores.iter().map(|k| &k.file))
            .chain(slot.inputs.iter().map(|t| &t.file))
            .chain(slot.golden.iter().map(|t| &t.file));
        for name in referenced {
            check_name(name)?;
            if !slot.files.contains_key(name) {
                return Err(SlotProblem::Malformed(format!(
                    "`{name}` is used but has no digest in `files`"
                )));
            }
        }

        let scene = &sel.scene;
        let case = sel.case();
        let mut incores = Vec::with_capacity(slot.callable.incores.len());
        for k in &slot.callable.incores {
            let core: CoreType =
                k.core
                    .parse()
                    .map_err(|e: scene_kernels::ParseCoreTypeError| {
                        SlotProblem::Malformed(e.to_string())
                    })?;
            incores.push(IncoreImage {
                name: k.name.clone(),
                func_id: k.func_id,
                core,
                text: reader.read(&k.file)?,
            });
        }
        // Devices look kernels up by func_id with a binary search.
        incores.sort_by_key(|k| k.func_id);
        let callable = ChipCallable {
            label: slot.callable.label.clone(),
            orch_so: reader.read(&slot.callable.orch)?,
            orch_symbol: slot.callable.orch_symbol.clone(),
            incores,
        };

        let key = slot_key(&callable, scene, case, &slot.scalars, platform);
        if key != slot.key {
            return Err(SlotProblem::Stale {
                found: slot.key.clone(),
                expected: key,
            });
        }

        // The device stage pairs inputs with the signature by position.
        let names: Vec<&str> = slot.inputs.iter().map(|t| t.name.as_str()).collect();
        let expected: Vec<&str> = scene.tensors.iter().map(|t| t.name.as_str()).collect();
        if names != expected {
            return Err(SlotProblem::Malformed(format!(
                "inputs are {names:?}, the scene's tensors are {expected:?}"
            )));
        }
        let inputs = slot
            .inputs
            .iter()
            .map(|t| Ok((t.name.clone(), reader.tensor(t)?)))
            .collect::<Result<Vec<_>, SlotProblem>>()?;
        let mut golden = GoldenOutputs::new();
        for t in &slot.golden {
            golden = golden.with(&t.name, reader.tensor(t)?);
        }
        for spec in scene.tensors.iter().filter(|t| t.direction.is_output()) {
            if golden.get(&spec.name).is_none() {
                return Err(SlotProblem::Malformed(format!(
                    "no golden for output tensor `{}`",
                    spec.name
                )));
            }
        }
        Ok(SlotData {
            callable: Arc::new(callable),
            inputs,
            scalars: slot.scalars.clone(),
            golden,
        })
    }
}

/// Reads files of one slot, each confined to the bundle and digest-checked.
struct SlotReader<'a> {
    root: &'a Path,
    dir: &'a Path,
    slot: &'a SlotManifest,
}

impl SlotReader<'_> {
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
        let bytes = std::fs::read(&resolved).map_err(unreadable)?;
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

/// Writes a bundle into a temp sibling of its destination, then renames it
/// into place ([`BundleWriter::commit`]). Dropped uncommitted, it removes the
/// temp directory and leaves the destination untouched.
#[derive(Debug)]
pub struct BundleWriter {
    dest: PathBuf,
    tmp: PathBuf,
    manifest: Manifest,
    committed: bool,
}

impl BundleWriter {
    /// Starts a bundle for `platform` to be placed at `dest`. Refuses a
    /// `dest` that exists and is anything but an empty directory or a
    /// bundle, so a typo in `--out` never replaces someone's data.
    pub fn create(dest: &Path, platform: &str) -> Result<BundleWriter, BundleError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| BundleError::Io { path, source }
        };
        let dest = std::path::absolute(dest).map_err(io_err(dest))?;
        check_replaceable(&dest)?;
        let (Some(parent), Some(name)) = (dest.parent(), dest.file_name()) else {
            return Err(BundleError::NotReplaceable { path: dest });
        };
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        let mut tmp_name = name.to_os_string();
        tmp_name.push(format!(".tmp-{}", std::process::id()));
        let tmp = parent.join(tmp_name);
        // Left over from a crashed run of a process with our pid: ours by name.
        remove_if_exists(&tmp)?;
        std::fs::create_dir(&tmp).map_err(io_err(&tmp))?;
        Ok(BundleWriter {
            dest,
            tmp,
            manifest: Manifest {
                schema: SCHEMA,
                platform: platform.to_string(),
                runtime_abi: RUNTIME_ABI,
                created_at: crate::report::unix_seconds(std::time::SystemTime::now()),
                producer: format!("scene {}", env!("CARGO_PKG_VERSION")),
                compile_logic: scene_kernels::COMPILE_LOGIC_TOKEN.to_string(),
                slots: BTreeMap::new(),
            },
            committed: false,
        })
    }

    /// Stores one case.
    pub fn add_slot(
        &mut self,
        sel: &SelectedCase,
        callable: &ChipCallable,
        inputs: &[(String, Tensor)],
        scalars: &[u64],
        golden: &GoldenOutputs,
    ) -> Result<(), BundleError> {
        let id = sel.id();
        if self.manifest.slots.contains_key(&id) {
            return Err(BundleError::DuplicateSlot { slot: id });
        }
        let scene = &sel.scene;
        let case = sel.case();
        let dir = format!(
            "slots/{:04}-{}--{}",
            self.manifest.slots.len(),
            safe_component(&scene.name),
            safe_component(&case.name)
        );
        let slot_dir = self.tmp.join(&dir);
        let mut files = BTreeMap::new();
        let mut put = |name: String, bytes: &[u8]| -> Result<String, BundleError> {
            let path = slot_dir.join(&name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|source| BundleError::Io {
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
            std::fs::write(&path, bytes).map_err(|source| BundleError::Io {
                path: path.clone(),
                source,
            })?;
            files.insert(name.clone(), blake3::hash(bytes).to_hex().to_string());
            Ok(name)
        };

        let orch = put("callable/orch.so".to_string(), &callable.orch_so)?;
        let mut incores = Vec::with_capacity(callable.incores.len());
        for k in &callable.incores {
            let file = put(
                format!("callable/incore-{}-{}.bin", k.func_id, k.core),
                &k.text,
            )?;
            incores.push(IncoreEntry {
                name: k.name.clone(),
                func_id: k.func_id,
                core: k.core.to_string(),
                file,
            });
        }
        let mut tensors = |group: &str, list: &[(String, Tensor)]| {
            list.iter()
                .enumerate()
                .map(|(i, (name, t))| {
                    let file = put(
                        format!("{group}/{}", tensor_file(i, name)),
                        &npy::to_npy_bytes(t),
                    )?;
                    Ok(TensorEntry {
                        name: name.clone(),
                        dtype: t.dtype(),
                        shape: t.shape().to_vec(),
                        file,
                    })
                })
                .collect::<Result<Vec<_>, BundleError>>()
        };
        let inputs = tensors("inputs", inputs)?;
        let golden = tensors("golden", &golden.0)?;
        let tolerances = scene
            .tensors
            .iter()
            .filter(|t| t.direction.is_output())
            .map(|t| (t.name.clone(), scene.tolerance_for(t)))
            .collect();
        let slot = SlotManifest {
            dir,
            key: slot_key(callable, scene, case, scalars, &self.manifest.platform),
            platform: self.manifest.platform.clone(),
            runtime_abi: RUNTIME_ABI,
            callable: CallableEntry {
                label: callable.label.clone(),
                orch,
                orch_symbol: callable.orch_symbol.clone(),
                incores,
            },
            inputs,
            golden,
            scalars: scalars.to_vec(),
            tolerances,
            files,
        };
        self.manifest.slots.insert(id, slot);
        Ok(())
    }

    pub fn slots(&self) -> usize {
        self.manifest.slots.len()
    }

    /// Writes the manifest and moves the bundle into place. Returns the
    /// bundle's path.
    pub fn commit(mut self) -> Result<PathBuf, BundleError> {
        let manifest_path = self.tmp.join(MANIFEST_FILE);
        let mut text =
            serde_json::to_vec_pretty(&self.manifest).map_err(|e| BundleError::Malformed {
                path: manifest_path.clone(),
                message: e.to_string(),
            })?;
        text.push(b'\n');
        std::fs::write(&manifest_path, text).map_err(|source| BundleError::Io {
            path: manifest_path.clone(),
            source,
        })?;
        // Checked again: someone may have put data there since `create`.
        check_replaceable(&self.dest)?;
        let mut old_name = self.dest.as_os_str().to_os_string();
        old_name.push(format!(".old-{}", std::process::id()));
        let old = PathBuf::from(old_name);
        remove_if_exists(&old)?;
        // rename(2) cannot replace a non-empty directory: move the old
        // bundle aside, move the new one in, then delete the old one.
        let moved_old = match std::fs::rename(&self.dest, &old) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(source) => {
                return Err(BundleError::Io {
                    path: self.dest.clone(),
                    source,
                });
            }
        };
        if let Err(source) = std::fs::rename(&self.tmp, &self.dest) {
            if moved_old {
                // Put the previous bundle back rather than leave nothing.
                let _ = std::fs::rename(&old, &self.dest);
            }
            return Err(BundleError::Io {
                path: self.dest.clone(),
                source,
            });
        }
        self.committed = true;
        if moved_old {
            remove_if_exists(&old)?;
        }
        Ok(self.dest.clone())
    }
}

impl Drop for BundleWriter {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// `dest` may be replaced if it does not exist, is an empty directory, or
/// is a bundle (holds a manifest).
fn check_replaceable(dest: &Path) -> Result<(), BundleError> {
    let refuse = || BundleError::NotReplaceable {
        path: dest.to_path_buf(),
    };
    let meta = match std::fs::symlink_metadata(dest) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(BundleError::Io {
                path: dest.to_path_buf(),
                source,
            });
        }
    };
    if !meta.is_dir() {
        return Err(refuse());
    }
    if dest.join(MANIFEST_FILE).is_file() {
        return Ok(());
    }
    let mut entries = std::fs::read_dir(dest).map_err(|source| BundleError::Io {
        path: dest.to_path_buf(),
        source,
    })?;
    if entries.next().is_some() {
        return Err(refuse());
    }
    Ok(())
}

fn remove_if_exists(path: &Path) -> Result<(), BundleError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(BundleError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// A file-name-safe rendering of a scene, case or tensor name.
fn safe_component(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}

/// `<tensor>.npy` when the name is safe as is, else a positional name that
/// cannot collide.
fn tensor_file(index: usize, name: &str) -> String {
    if safe_component(name) == name {
        format!("{name}.npy")
    } else {
        format!("{index:02}-{}.npy", safe_component(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_before_use() {
        assert!(check_name("callable/orch.so").is_ok());
        assert!(check_name("slots/0000-a--b").is_ok());
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/./b",
            "./a",
            "a//b",
            "a/",
            "a\0b",
        ] {
            assert!(
                matches!(check_name(bad), Err(SlotProblem::Escape { .. })),
                "`{bad:?}` accepted"
            );
        }
    }

    #[test]
    fn tensor_files_never_collide() {
        assert_eq!(tensor_file(0, "x"), "x.npy");
        assert_ne!(tensor_file(0, "a.b/c"), tensor_file(1, "a.b_c"));
        assert_eq!(safe_component(".."), "_..");
        assert_eq!(safe_component("a/b"), "a_b");
    }

    #[test]
    fn writer_refuses_to_replace_a_non_bundle() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("precious");
        std::fs::create_dir(&dest).unwrap();
        std::fs::write(dest.join("notes.txt"), "keep me").unwrap();
        let err = BundleWriter::create(&dest, "a2a3sim").unwrap_err();
        assert!(matches!(err, BundleError::NotReplaceable { .. }), "{err}");
        assert_eq!(
            std::fs::read_to_string(dest.join("notes.txt")).unwrap(),
            "keep me"
        );
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(BundleWriter::create(&file, "a2a3sim").is_err());
    }

    #[test]
    fn an_uncommitted_bundle_leaves_nothing_behind() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("b");
        let w = BundleWriter::create(&dest, "a2a3sim").unwrap();
        drop(w);
        assert!(!dest.exists());
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn commit_replaces_a_previous_bundle_and_schema_is_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("b");
        BundleWriter::create(&dest, "a2a3sim")
            .unwrap()
            .commit()
            .unwrap();
        let b = Bundle::open(&dest).unwrap();
        assert_eq!(b.manifest().schema, SCHEMA);
        assert_eq!(b.manifest().runtime_abi, RUNTIME_ABI);
        BundleWriter::create(&dest, "a5sim")
            .unwrap()
            .commit()
            .unwrap();
        assert_eq!(Bundle::open(&dest).unwrap().manifest().platform, "a5sim");
        // Only the bundle remains: no temp or old siblings.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);

        let path = dest.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"schema\": 1", "\"schema\": 99")).unwrap();
        let err = Bundle::open(&dest).unwrap_err();
        assert!(
            matches!(err, BundleError::NewerSchema { found: 99, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("newer"), "{err}");

        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(matches!(
            Bundle::open(&empty).unwrap_err(),
            BundleError::NotABundle { .. }
        ));
    }
}
