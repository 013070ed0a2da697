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
//! scalar arguments, the tolerances, the size of every file, the direction
//! of every tensor, the key that produced it, and a binding that ties the
//! slot's name to its data.
//!
//! Trust model: the manifest is data from disk, so nothing it names is
//! opened before it is checked. Names must be relative, made of normal
//! components only, and must resolve (symlinks included) inside the bundle;
//! every file must be a regular file (no FIFO, device or directory) of the
//! recorded size, read through [`scene_util::read_regular_file`], and must
//! match its digest. A slot must also be the case it claims to be: its
//! tensors' names, directions, dtypes and shapes must be those of the
//! current `scene.toml` case, and its binding (a hash over its name, key,
//! file digests and tensor records) must match, so slots whose files and
//! records were swapped between cases are refused even though each is
//! internally consistent. A slot failing any check is reported with the
//! reason and its case is rebuilt from source; other slots are unaffected.
//! A bundle of a newer schema, or built for another platform, is refused as
//! a whole.
//!
//! A bundle is written into a sibling temp directory and renamed into place
//! at the end, so `DIR` is either a complete bundle or not one at all.

use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use scene_golden::{DType, Tensor, Tolerance};
use scene_kernels::ChipCallable;
use serde::{Deserialize, Serialize};

use crate::golden::GoldenOutputs;
use crate::report::FailureStage;
use crate::scene::{Case, Scene, TensorSpec};

mod read;
mod write;

pub use read::Bundle;
pub use write::BundleWriter;

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
    #[error("{source}")]
    Unreadable {
        #[source]
        source: scene_util::ReadError,
    },
    #[error(
        "bundle {} was built for {found}, but this run is for {expected}; run with --platform {found}",
        path.display()
    )]
    Platform {
        path: PathBuf,
        found: String,
        expected: String,
    },
}

/// The largest manifest read (it is JSON text; a bigger one is damage).
pub const MAX_MANIFEST_LEN: u64 = 256 << 20;

/// The largest slot file read.
pub const MAX_SLOT_FILE_LEN: u64 = 16 << 30;

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
    #[error("does not match this case: {0}")]
    WrongCase(String),
    /// Pass 1 could not build this case, and said why: the case fails
    /// with that cause instead of being rebuilt (which would fail again,
    /// or without a compiler fail for another reason).
    #[error(
        "not in the bundle: pass 1 (scene precompile) failed {}:{}",
        stage.doing(),
        first_lines(message)
    )]
    FailedInPass1 {
        stage: FailureStage,
        message: String,
    },
    #[error(
        "holds records that were not written for this case (binding {found}, recomputed {expected})"
    )]
    Unbound { found: String, expected: String },
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
    /// Cases pass 1 selected but could not store, by `scene::case`, with
    /// why (absent in bundles written before it was recorded, and when
    /// every case was stored).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed: BTreeMap<String, FailedCase>,
}

/// A case `scene precompile` could not store: the stage that failed and
/// the start of its message (the compiler's first errors, say).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailedCase {
    pub stage: FailureStage,
    pub message: String,
}

/// Lines of a pass-1 failure kept in the bundle and shown in pass 2.
pub const FAILURE_LINES: usize = 20;

/// The first [`FAILURE_LINES`] lines of `message`, and a line saying how
/// many more there were.
pub fn kept_lines(message: &str) -> String {
    let lines: Vec<&str> = message.trim_end().lines().collect();
    let mut text = lines
        .iter()
        .take(FAILURE_LINES)
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    if lines.len() > FAILURE_LINES {
        text.push_str(&format!(
            "\n... ({} more lines)",
            lines.len() - FAILURE_LINES
        ));
    }
    text
}

/// [`kept_lines`] after a colon: one line stays on the line it follows,
/// several start on a line of their own.
fn first_lines(message: &str) -> String {
    let text = kept_lines(message);
    match text.contains('\n') {
        true => format!("\n{text}"),
        false => format!(" {text}"),
    }
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
    /// Size in bytes of every file, by path relative to `dir` (absent in
    /// bundles written before it was recorded: then only the size limit
    /// applies).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sizes: BTreeMap<String, u64>,
    /// [`slot_binding`] of this slot when it was written (absent in bundles
    /// written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<String>,
    /// Level-3 `[[steps]]`: the C host functions pass 1 built, by step
    /// index, each a file relative to `dir` (absent when the scene has
    /// none), so pass 2 needs no compiler for them either.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<usize, String>,
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
    /// `image` (absent in bundles written before issue 29), `hosted` or
    /// `hosted/chip_tensor`: what `file` holds ([`scene_kernels::IncoreKind`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TensorEntry {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub file: String,
    /// The tensor's direction in the signature (`in`, `out`, `inout`);
    /// absent in bundles written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
}

/// What a valid slot gives the pipeline in place of compile, fixtures and
/// golden.
#[derive(Debug)]
pub struct SlotData {
    pub callable: Arc<ChipCallable>,
    pub inputs: Vec<(String, Tensor)>,
    pub scalars: Vec<u64>,
    pub golden: GoldenOutputs,
    /// The C host functions' executables, by step index (level-3
    /// `[[steps]]`; empty otherwise).
    pub hosts: BTreeMap<usize, Vec<u8>>,
}

/// The identity of a slot: the callable's bytes plus everything that
/// decides the case's fixtures, scalars, golden and verdict. A bundle slot is
/// used only when the key recomputed from its stored callable and the
/// current scene definition equals the recorded one, so an edited
/// `scene.toml` (shapes, seeds, params, tolerances, comparisons,
/// `skip_golden`) never runs against stale data. Pass 2 judges with the
/// comparisons of the current `scene.toml`, which the key ties to the ones
/// the slot was built for.
pub fn slot_key(
    callable: &ChipCallable,
    scene: &Scene,
    case: &Case,
    scalars: &[u64],
    platform: &str,
) -> String {
    let mut h = scene_util::FieldHasher::new("scene-bundle-slot");
    let mut field = |tag: &str, bytes: &[u8]| {
        h.field(tag, bytes);
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
    field("params", &canonical(&case.params));
    field("case_seed", &case.seed.to_le_bytes());
    field("golden", scene.golden.as_bytes());
    // Only for Python fixtures, so keys of other scenes stay as they were.
    if let Some(f) = &scene.python.fixtures {
        let rel = f.strip_prefix(&scene.dir).unwrap_or(f);
        field("fixtures", format!("python:{}", rel.display()).as_bytes());
    }
    for (i, t) in scene.tensors.iter().enumerate() {
        field("tensor", &canonical(&tensor_identity(t)));
        if t.direction.is_output() {
            field("tolerance", &canonical(&scene.tolerance_for(case, i)));
            // Hashed only when the scene chose one, so slots of scenes that
            // say nothing about comparisons keep the keys they had.
            let comparison = scene.comparison_for(case, i);
            if comparison.is_some_and(|c| !c.is_default()) || t.allow_nonfinite {
                field(
                    "comparison",
                    &canonical(&serde_json::json!({
                        "comparison": comparison,
                        "allow_nonfinite": t.allow_nonfinite,
                    })),
                );
            }
        }
    }
    field("scalars", &canonical(&scalars));
    // Only when used, so scenes without them keep their keys.
    if !scene.derived.is_empty() {
        let derived: Vec<(&str, serde_json::Value)> = scene
            .derived
            .iter()
            .map(|d| (d.name.as_str(), d.value.identity_i64()))
            .collect();
        field("derived", &canonical(&derived));
    }
    if !case.init.is_empty() {
        let init: BTreeMap<&str, serde_json::Value> = case
            .init
            .iter()
            .map(|(name, spec)| (name.as_str(), init_identity(spec)))
            .collect();
        field("case_init", &canonical(&init));
    }
    // Level 3 only (level-2 keys are unchanged): the group decides how
    // per-rank fixtures are seeded and how the device splits the tensors.
    if let Some(g) = case.group {
        let per_rank: Vec<&str> = scene
            .tensors
            .iter()
            .filter(|t| t.per_rank)
            .map(|t| t.name.as_str())
            .collect();
        let mut group = serde_json::json!({
            "ranks": g.ranks,
            "window": g.window,
            "per_rank": per_rank,
        });
        // Only when there is one, so other level-3 scenes keep their keys.
        if let Some(k) = g.window_tensor {
            let name = scene.tensors.get(k).map(|t| t.name.as_str());
            group["window_tensor"] = serde_json::json!(name);
        }
        field("group", &canonical(&group));
    }
    // Level-3 `[[steps]]`, only when a scene has them: which functions run
    // in which order on which tensors (the C host functions' executables
    // are files of the slot, under `hosts`, covered by the binding).
    if !scene.steps.is_empty() {
        let steps: Vec<serde_json::Value> = scene
            .steps
            .iter()
            .map(|s| {
                serde_json::json!({
                    "kind": s.kind.to_string(),
                    "reads": s.reads,
                    "writes": s.writes,
                })
            })
            .collect();
        field("steps", &canonical(&steps));
    }
    h.finalize().to_hex().to_string()
}

/// What ties a slot's name to its data: a hash over the slot id
/// (`scene::case`), its key (which covers the callable bytes and the case
/// definition), every file's digest and size, and its tensor and callable
/// records. The key alone is recomputed from the stored callable and the
/// current `scene.toml`, so it cannot tell two cases of one scene apart by
/// their inputs and goldens; the binding can: records (and files) moved
/// from another slot, each internally consistent, no longer hash to it.
pub fn slot_binding(id: &str, slot: &SlotManifest) -> String {
    let mut h = scene_util::FieldHasher::new("scene-bundle-binding");
    h.field("schema", &SCHEMA.to_le_bytes());
    h.field("id", id.as_bytes());
    h.field("key", slot.key.as_bytes());
    h.field("platform", slot.platform.as_bytes());
    h.field("runtime_abi", &slot.runtime_abi.to_le_bytes());
    for (name, digest) in &slot.files {
        h.field("file", name.as_bytes());
        h.field("digest", digest.as_bytes());
        let size = slot.sizes.get(name).map(|s| s.to_le_bytes());
        h.field("size", size.as_ref().map_or(&[][..], |s| &s[..]));
    }
    h.field("callable", &canonical(&slot.callable));
    h.field("inputs", &canonical(&slot.inputs));
    h.field("golden", &canonical(&slot.golden));
    h.field("scalars", &canonical(&slot.scalars));
    h.field("tolerances", &canonical(&slot.tolerances));
    // Only when present, so the bindings of other slots stay as they were.
    if !slot.hosts.is_empty() {
        h.field("hosts", &canonical(&slot.hosts));
    }
    h.finalize().to_hex().to_string()
}

/// A value's canonical bytes: JSON, with maps in key order (every map here
/// is a `BTreeMap`), so the key depends on values, never on how a type
/// happens to print itself with `Debug`.
fn canonical<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// Everything about a tensor argument that decides its fixture and its
/// comparison, as a canonical value.
fn tensor_identity(t: &TensorSpec) -> serde_json::Value {
    // Literals serialise as the numbers they always were (old bundles keep
    // their keys); an expression as its text (the case's params, hashed
    // too, decide its value).
    serde_json::json!({
        "name": t.name,
        "dtype": t.dtype.to_string(),
        "shape": t.shape.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "init": init_identity(&t.init),
        "seed": t.seed,
        "direction": t.direction.to_string(),
        "rtol": t.rtol.as_ref().map(crate::scene::NumSpec::identity_f64),
        "atol": t.atol.as_ref().map(crate::scene::NumSpec::identity_f64),
    })
}

/// An `init` as a canonical value (literals as the numbers they always
/// were, expressions as their text).
fn init_identity(init: &crate::scene::InitSpec) -> serde_json::Value {
    use crate::scene::InitSpec;
    let f = crate::scene::NumSpec::identity_f64;
    match init {
        InitSpec::Const { value } => serde_json::json!({ "kind": "const", "value": f(value) }),
        InitSpec::Uniform { low, high } => {
            serde_json::json!({ "kind": "uniform", "low": f(low), "high": f(high) })
        }
        InitSpec::Normal { mean, std } => {
            serde_json::json!({ "kind": "normal", "mean": f(mean), "std": f(std) })
        }
        InitSpec::Arange { start, step } => {
            serde_json::json!({ "kind": "arange", "start": f(start), "step": f(step) })
        }
        InitSpec::Zeros => serde_json::json!({ "kind": "zeros" }),
        InitSpec::Randint { low, high } => serde_json::json!({
            "kind": "randint",
            "low": low.identity_i64(),
            "high": high.identity_i64(),
        }),
        InitSpec::Permutation { n } => {
            serde_json::json!({ "kind": "permutation", "n": n.identity_i64() })
        }
        InitSpec::List { param } => serde_json::json!({ "kind": "list", "param": param }),
    }
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

/// A file-name-safe rendering of a scene, case or tensor name.
pub(crate) fn safe_component(name: &str) -> String {
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
pub(crate) fn tensor_file(index: usize, name: &str) -> String {
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

    fn slot(files: &[(&str, &str)]) -> SlotManifest {
        SlotManifest {
            dir: "slots/0000-s--a".into(),
            key: "k".into(),
            platform: "a2a3sim".into(),
            runtime_abi: RUNTIME_ABI,
            callable: CallableEntry {
                label: "s".into(),
                orch: "callable/orch.so".into(),
                orch_symbol: "orch".into(),
                incores: Vec::new(),
            },
            inputs: vec![TensorEntry {
                name: "a".into(),
                dtype: DType::F32,
                shape: vec![4],
                file: "inputs/a.npy".into(),
                direction: Some("in".into()),
            }],
            golden: Vec::new(),
            scalars: Vec::new(),
            tolerances: BTreeMap::new(),
            files: files
                .iter()
                .map(|(n, d)| (n.to_string(), d.to_string()))
                .collect(),
            sizes: files.iter().map(|(n, _)| (n.to_string(), 16)).collect(),
            binding: None,
            hosts: BTreeMap::new(),
        }
    }

    /// The binding ties a slot's name to its data: the same records under
    /// another name, or another file digest, size or tensor record under
    /// the same name, hash differently.
    #[test]
    fn binding_ties_the_name_to_the_data() {
        let a = slot(&[("inputs/a.npy", "d1")]);
        let base = slot_binding("s::a", &a);
        assert_eq!(base, slot_binding("s::a", &a.clone()));
        assert_ne!(base, slot_binding("s::b", &a));
        assert_ne!(base, slot_binding("s::a", &slot(&[("inputs/a.npy", "d2")])));
        let mut sized = a.clone();
        sized.sizes.insert("inputs/a.npy".into(), 17);
        assert_ne!(base, slot_binding("s::a", &sized));
        let mut reshaped = a.clone();
        reshaped.inputs[0].shape = vec![5];
        assert_ne!(base, slot_binding("s::a", &reshaped));
        let mut redirected = a.clone();
        redirected.inputs[0].direction = Some("out".into());
        assert_ne!(base, slot_binding("s::a", &redirected));
        // The binding is not part of what it hashes.
        let mut bound = a.clone();
        bound.binding = Some(base.clone());
        assert_eq!(base, slot_binding("s::a", &bound));
    }

    /// `failed` is additive within schema 1: a manifest without it (an
    /// older bundle) reads as "nothing failed", one with it round-trips,
    /// and the problem reads as pass 1's cause.
    #[test]
    fn pass_one_failures_are_recorded_and_read_back() {
        let old = serde_json::json!({
            "schema": 1, "platform": "a2a3sim", "runtime_abi": RUNTIME_ABI,
            "created_at": 0.0, "producer": "scene 0", "compile_logic": "x", "slots": {},
        });
        let m: Manifest = serde_json::from_value(old).unwrap();
        assert!(m.failed.is_empty());
        let text = serde_json::to_string(&m).unwrap();
        assert!(!text.contains("failed"), "{text}");
        let mut m = m;
        m.failed.insert(
            "s::c".into(),
            FailedCase {
                stage: FailureStage::Golden,
                message: "boom".into(),
            },
        );
        let back: Manifest = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back.failed, m.failed);
        let one = SlotProblem::FailedInPass1 {
            stage: FailureStage::Golden,
            message: "boom".into(),
        };
        assert_eq!(
            one.to_string(),
            "not in the bundle: pass 1 (scene precompile) failed computing the golden: boom"
        );
        let many = SlotProblem::FailedInPass1 {
            stage: FailureStage::Compile,
            message: (1..=30).map(|i| format!("line {i}\n")).collect(),
        };
        let text = many.to_string();
        assert!(
            text.starts_with(
                "not in the bundle: pass 1 (scene precompile) failed compiling:\nline 1\n"
            ),
            "{text}"
        );
        assert!(text.ends_with("line 20\n... (10 more lines)"), "{text}");
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

/// The slot keys of the package's own scenes are pinned: a change to what a
/// case's data is (the scene model, params, expressions) must leave every
/// existing scene's keys as they were, or bundles built before it would be
/// refused as stale.
#[cfg(test)]
mod pinned_keys {
    use super::*;

    fn callable() -> ChipCallable {
        ChipCallable {
            label: "pinned".into(),
            orch_so: b"orch".to_vec(),
            orch_symbol: "orch".into(),
            incores: vec![],
        }
    }

    pub(super) fn keys() -> Vec<(String, String)> {
        // Run time first: a nextest archive run with `--workspace-remap`
        // points it at the checkout it runs in.
        let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")));
        let root = manifest.join("../../tests/scenes");
        let mut out = Vec::new();
        for scene in crate::scene::discover(&root).expect("scenes dir") {
            let scene = scene.expect("package scene loads");
            for case in &scene.cases {
                let scalars = crate::prepare::scalar_bits(&scene, case).expect("scalars");
                let key = slot_key(&callable(), &scene, case, &scalars, "a2a3sim");
                out.push((format!("{}::{}", scene.name, case.name), key));
            }
        }
        out
    }

    /// A case with a window tensor has it in its key: the same scene with
    /// the same window bytes given as `window` (the runtime's own zeroed
    /// windows, the tensor an ordinary argument) is another case.
    #[test]
    fn a_window_tensor_is_in_the_key() {
        let manifest = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let src = manifest.join("../../tests/scenes/allgather_window");
        let tmp = tempfile::tempdir().unwrap();
        let key = |toml: &str| {
            let dir = tmp.path().join("allgather_window");
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("kernels")).unwrap();
            for f in ["orchestration.c", "kernels/stage.c", "kernels/gather.c"] {
                std::fs::copy(src.join(f), dir.join(f)).unwrap();
            }
            std::fs::write(dir.join("scene.toml"), toml).unwrap();
            let scene = crate::scene::Scene::load(&dir).unwrap();
            let case = &scene.cases[0];
            let scalars = crate::prepare::scalar_bits(&scene, case).unwrap();
            slot_key(&callable(), &scene, case, &scalars, "a2a3sim")
        };
        let text = std::fs::read_to_string(src.join("scene.toml")).unwrap();
        let with_tensor = key(&text);
        let as_bytes = text.replace("window_tensor = \"scratch\"", "window = \"nranks * C * 4\"");
        assert_ne!(as_bytes, text);
        assert_ne!(key(&as_bytes), with_tensor);
        assert_eq!(key(&text), with_tensor);
    }

    /// Two scenes changed definition, so their keys changed: paged_attention
    /// (rewritten as the original: `[derived]`, its fixtures, a per-case
    /// init for `small_batch4`) and rmsnorm (its dtype a case param); every
    /// other scene's keys are unchanged by the new fields. (`device_memory`
    /// changes no case's data, so it is not in the key: issue 30.)
    #[test]
    fn existing_scenes_keep_their_slot_keys() {
        let expected: &[(&str, &str)] = &[
            (
                "all_to_all::p2",
                "11acb9fd7d12e2bd928852e6a6d4edf5c3f530728559887d2003b19fda09c9e3",
            ),
            (
                "all_to_all::p4",
                "bcb090860b9e77695a9da0f20f48847738d74f3bf7a2be843591ebe3ca932db5",
            ),
            (
                "allgather::p2",
                "caa95aa2c8344c396f748e9affc7b6514eb6658ecebbb4a0f5a84a32e6e2e737",
            ),
            (
                "allgather::p4",
                "58cad2e20d826b6662149a460e639e494737e360d3fdf845b57d9484dc4a50eb",
            ),
            (
                "allgather_window::p2",
                "fb295a3498d357a618c3819b7bb2e607a584caba1ca6219c63bffbc84dbae0ac",
            ),
            (
                "allgather_window::p4",
                "25601dc43973c9c05fd8119105a394dc317ce444eaa9abaa935869497c7414a2",
            ),
            (
                "allreduce_atomic::p2",
                "3d9513b27de9e909191afd9dc01d04e1ab78082e4a60a02a520e208339b4e0fc",
            ),
            (
                "allreduce_atomic::p4",
                "641cc48f41812cce8adae48da1e5d56d0c1667fc79f711a813e6069d33a87210",
            ),
            (
                "allreduce_atomic::p8",
                "6940ebe3efc5390eb5a250db8f94d6aa311ce5dac94b51f658fc3273c52ad317",
            ),
            (
                "allreduce_bidirectional_ring::p2",
                "c8fa48f1021f8071e66a930f21a3dc3e25a3b62b2336f40cb0e71a189c18277b",
            ),
            (
                "allreduce_bidirectional_ring::p4",
                "255e21d24685b6acc1ecf3cbcd149990763798753c7a5e0114e698c967be9b15",
            ),
            (
                "allreduce_bidirectional_ring::p8",
                "d79b4cc9541cf7eb6e7a7a5b5776c01e0122b7100d46a88da6fb0471ab7b2c76",
            ),
            (
                "allreduce_onephase::p2",
                "90caa607784bc107dc14b5e5760ca4f83dad7c1fd50ec725a6d768525ae73627",
            ),
            (
                "allreduce_onephase::p4",
                "37550d474c795d8da9d9a92481b699e73900ca14294e94866b80530effdab1c1",
            ),
            (
                "allreduce_onephase::p8",
                "10e859e058fe3548b3f6f812f4dc5ce907a1b87f40149fc68f22f11705041f8c",
            ),
            (
                "allreduce_ring::p2",
                "45fbc1c5d6f2f8c37895e045099b19b04efeeba6cf6b1cfcbb2a164f23d1dd77",
            ),
            (
                "allreduce_ring::p4",
                "92e3ae002489b6126a57206ac76e83e03324037244a859e5b2b80866773b5c21",
            ),
            (
                "allreduce_ring::p8",
                "22e089856adb83579d9aee064ae8f087e35c2948eb5810939ff13f11a1cb1723",
            ),
            (
                "allreduce_twophase::p2",
                "4c2987781741ddab2b95da9ea3b02836ffe996d6844d3e45def3cb2c9db89506",
            ),
            (
                "allreduce_twophase::p4",
                "6310a8d453e901ac4db39e3cbc354eb20966b149a664c0745f293b899f8f2038",
            ),
            (
                "allreduce_twophase::p8",
                "1a53726b99f6e149f862f978fed16c54d104a4781e3d617681aeac094f263722",
            ),
            (
                "broadcast::p2",
                "8b11b42d3319e6d05b6a3bcf22ac89aff89c7c2e7efd1d03d796df52200a04cf",
            ),
            (
                "broadcast::p4",
                "71cca53326554121cd562fd62f4bdf76c3d8fb2ad7fc816139caa4e7feb1b21e",
            ),
            (
                "cxx_kernels::small",
                "de95156c0b8126eb669591b2246a4ffae12c1eb0a4b6605e1cb8e6720e55cfcc",
            ),
            (
                "cxx_kernels::odd",
                "87caafc61fee8601372873e4dcd352657314125e84b4b6e96221a74bf2a49b63",
            ),
            (
                "decode_layer::step16",
                "e960b8c303fe6601b4fb1bb0867e1038727da9aae4ef3e7f6acfb64bb6d72841",
            ),
            (
                "decode_layer::first_token",
                "cb3b15416aa679ba06986c0b8291182839f22c07fb0c69fdcfd6f5e2bd8e2181",
            ),
            (
                "decode_layer::full_cache_hd8",
                "f004dacd5d8eb500a548342bb8a6ad138aa76d281a2c116b1e1dae3fdffdc079",
            ),
            (
                "device_memory::small",
                "0eaf94da03d05cd059b184f352b054352bf0b9ffbac683334753b8aff2d9821e",
            ),
            (
                "device_memory::over_256_mib",
                "40dbb1ae7be0f314b10cff56d5f5ffccfb50f5a01c57a9344b202c2809950bf8",
            ),
            (
                "ffn_tp_parallel::tp2",
                "c7c43b2523c3593d61bea09464ae1abb25be7282c874b8242882f05ee28652a5",
            ),
            (
                "ffn_tp_parallel::tp4",
                "633aa3daa9cc7b9c7216753281fe7fd808a20ea5edf826adec16ca8c51335cf1",
            ),
            (
                "gemm::square64",
                "0b63eb8fa88944ee57f99b38be20c9dc506cefa088eb56d5cff84811b9d5d2ff",
            ),
            (
                "gemm::ragged",
                "7ab9a6eb726a0860fff72da8887d1a7a7bd28267baba14ba906ff8cda47a177f",
            ),
            (
                "gemm::skinny",
                "55b0907821d4de71f8faf89f12649e75985a803807fb42a941af790927b1ac40",
            ),
            (
                "gemm::tall",
                "227eb7c98a9422471d24f83076ffadae80b48ce5332af3bfe87f1bac585a8d2b",
            ),
            (
                "hosted_names_large::first",
                "387ab2aa173bf26f002c922fac513d20de1128f3c37c2a24f202d16f685c4148",
            ),
            (
                "hosted_names_large::again",
                "8bb6842748b35d826e36fbe341d0bdcd7c5d4343a565b302f5648f8769682fcd",
            ),
            (
                "hosted_names_small::first",
                "2642b4fa476d66c0b8d9951d10815d6d420e9fc8d3d04f61bfefe30d7085f7a8",
            ),
            (
                "hosted_names_small::again",
                "b76d6a9e8200e032899d0bd72a65addb2b2ca7468ac7d0893f16b3656e11b7e4",
            ),
            (
                "hosted_pipe_state::eight_blocks",
                "9689932ada13c24b44a432f3513b4eccf606b519dd57ec462bd85d045293236c",
            ),
            (
                "hosted_tiles::small",
                "483153fd342b9e2abb10d98a69c2c30e03374f1db558c3cb68125de032377a06",
            ),
            (
                "hosted_tiles::odd",
                "0bbccd6204735d127e6786c99f6313f5d606490cd6a43a456d37bfdc02311a27",
            ),
            (
                "l3_host_dependency::p2",
                "ae3ba82ae2c639afb73a2da4f604aa6db245fc942e5a80b6d56cb1a377d7828c",
            ),
            (
                "l3_host_dependency::p4",
                "0d0b789928e11ea0abf6414cd75df092fcbc299d90dd542349cdedc7eed57a13",
            ),
            (
                "l3_host_dependency_py::p2",
                "3b9e61850ef6c674a9d37e5095dc101792314e6a445e1620cb69042e63f70049",
            ),
            (
                "l3_host_dependency_py::p4",
                "8e9eaafdb26013cfb8af158f3c85db4eb6b003a441bdf5a9c2d66d6d94e4e99e",
            ),
            (
                "manual_dep_columns::tracked",
                "5b161dea69d48f4fc0bf4cc31ab6893d8830059defaef2ed67ef941d94f5bdc6",
            ),
            (
                "manual_dep_columns::manual",
                "3a20c1a622d95c471b1d90c7b7b632787db1ddf262f4472ca7e4634015396305",
            ),
            (
                "matmul::default",
                "04d307d2076f0aa97cc9e7cb7837b21e40e9dce1b86be7a330b9ede9603aeef6",
            ),
            (
                "mixed_example::case1",
                "916e5babdc62365ba47644d71a8d121c554c163201d5af6a47003b52800c42c6",
            ),
            (
                "mixed_example::case2",
                "a1dde32656809c6c00a3fc8c92e9ee75fb6dda196370374ffc29ce41d3be25f9",
            ),
            (
                "mixed_pipeline::two_vector_lanes",
                "b20df9602ac68fc517ee7df43a2d3ab98aedd87b4f506b041b0668301488b517",
            ),
            (
                "mixed_pipeline::one_vector_lane",
                "497f9631f1a4f50eade4ccdda912bb02136269b8d54e267e63f624f26af15302",
            ),
            (
                "optional_list_params::one_request",
                "9daf223502e28d1cc530e5967bc218b3f8d0e4fb0e94ee06b54b9ed815740564",
            ),
            (
                "optional_list_params::four_requests",
                "31a52b88871ba4d73463d7658c2a327a1fcea6b06364016c57b38ffdd6975df1",
            ),
            (
                "optional_list_params::wide_blocks",
                "e4443c354d468676d2cca3e836b2a7849b0f10d741f02dd907bfa1a9297b3fa9",
            ),
            (
                "overlap_pair::pair",
                "eab953c165d45cea480caf11822a40809e6e1680aec631fdf8bd8598aa58ab4a",
            ),
            (
                "paged_attention::Case1",
                "7654674366533822442a08095a750f6e76f568b02fe9307cee3b9b1e0810ad4b",
            ),
            (
                "paged_attention::Case2",
                "257eea9d09e4dc41128e1330d9557239652ccf85afe991d82838c44078aee395",
            ),
            (
                "paged_attention::small1",
                "d463dad617b426d89b080dfe81f409226e3f0b8390bd1681183a99452e15e534",
            ),
            (
                "paged_attention::small2",
                "35f5b02c28ae8e8e0929db65b7cee28e2cdf48a98bb3fb81dfa56c984a0db5dd",
            ),
            (
                "paged_attention::small_batch4",
                "30da80ea93b30e1cf8411302396fadf21941fa93cf8f73ff01e88dd8d9c3c642",
            ),
            (
                "paged_attention_py::small1",
                "31186a3286095061b3c5e4cdf08888d98ab09a275a5f2bc679bd741d203fa75f",
            ),
            (
                "paged_attention_py::small2",
                "2417a7b6f9fdb3f35833664ec7b32488d1fafb2c67db10ce374cc69a049ea8da",
            ),
            (
                "paged_attention_py::small_batch4",
                "26f504b4706603b782e0b17f60fe5ec9299d0f6e68ff06fd3d23338d0112023c",
            ),
            (
                "paged_attention_unroll_4dims::Case1",
                "105cbcc2ea52f5bed974edacbc2a5b02467973807c19dba904948c86e2d3182a",
            ),
            (
                "paged_attention_unroll_4dims::Case2",
                "32e24ddf2567420215ce093e4bb5aa57e966f7c0903cc1221f4a9190cd9687ba",
            ),
            (
                "paged_attention_unroll_4dims::Case3",
                "9ca93b43e7c396ee0863c9f58a6603e80e6952fa04d96de74527ebc55eb8e277",
            ),
            (
                "paged_attention_unroll_4dims::small1",
                "e6247a261ab0a895cd53cb9ed39f688b17387923e69dd4257df06527400517f2",
            ),
            (
                "paged_attention_unroll_4dims::small_batch4",
                "3e03d8034d4c1352fa51eef1da9ae5ed4ecc81308b846416160b54c8b3fec2c9",
            ),
            (
                "paged_attention_unroll_4dims::small_groups",
                "df428b73486fd733154f92498a565e9aebb7da679380072baceba16d69adb5a5",
            ),
            (
                "python_compare::small",
                "7ebc575a2c4a0c25c17e4959eb8695f8a0b7672786b1f2324d36be573a68c069",
            ),
            (
                "python_compare::uneven",
                "bc024d81e372bf096bd68e05109a16a026a61f3656f4b6dd699723bbb8e655f7",
            ),
            (
                "rank_local_linear::dp2",
                "904dc2b71d9a3dde6efba3879bf01776835b69f2a780f28b60247a71ff88ac74",
            ),
            (
                "rank_local_linear::dp4",
                "4816fdfd9949ff08221cba0f0df2e9770cc84cd5421f6ab7bc2dba65355e6a1f",
            ),
            (
                "reduce_scatter::p2",
                "464f63629f78b75566f4d1660ee4fca828c785e36d67ce9552cd2635a096b08c",
            ),
            (
                "reduce_scatter::p4",
                "1c95d1f9a455681adb1fc6c34f7a600920ae457c7499e30fa50098f62d41d6a4",
            ),
            (
                "rmsnorm::small",
                "596068c22cc1c9646e639d8bd17de66791d64a0f616ae5381dc99f71032448e9",
            ),
            (
                "rmsnorm::odd",
                "6127cb50a4e2ac8025fd083687d3ac788d31c90a1b7f4225affef290100212e6",
            ),
            (
                "rmsnorm::one_row",
                "ed0cba7b6a2bab3ef39466b05feaf970b6479de6c05a3c5e8b69d47b873805e3",
            ),
            (
                "rmsnorm::many_rows",
                "076425c165acf0dd8acc80ffdae00ddc602a244450adadb331459d41c887b39f",
            ),
            (
                "rmsnorm::f16_small",
                "b57c6f09bbe23508c9f72f819276c847efafc10e8781bae4578daf70f2b00a9a",
            ),
            (
                "rmsnorm::f32_odd",
                "0bf890195750e2e1b4a858af63f45d5a9fc28208edbcbeaf7b75cb945c311f3b",
            ),
            (
                "scalar_data::default",
                "aadd6bc398060be80147aa8885f56df7e60500615b13b8cf8bd0388e70e55b4e",
            ),
            (
                "scope_loop::small",
                "5d2fe73819e8bd0aeef81701dcef86da3c9eaa4d6656509e6af076d7fe68fcaa",
            ),
            (
                "scope_loop::loop_100k",
                "39b290b6f00a9880384ed67b27dcbdfd899fb16da43cf0474b77e25780763fd5",
            ),
            (
                "softmax::small",
                "92b20bf05543f0d23e9d23b15067eec41de61cf4589fd8d3edef86862126c28e",
            ),
            (
                "softmax::wide_odd",
                "f23a20baaefab5c2b6176988948674dee15aac83104252f7bcf9f3bc8547d318",
            ),
            (
                "softmax::overflow_naive",
                "683807c0058047a95801e419bcf38fb8a7fbe46b0adff5157c52073147cbaf6a",
            ),
            (
                "softmax::huge",
                "8b3798877dbc46c79a0c1f4222ed9d79b111acf2cc9d1cfc8ece44316fdd5097",
            ),
            (
                "softmax::single_col",
                "318953e25ae636211c994bfb6e3b264e58e50331907725ea6b0ec97e976e58b7",
            ),
            (
                "spmd_multiblock_mix::Case1",
                "8f7329d11db9f9af8c81a7d872706ad34b12fb535d1e011af47d3919ae88ecbd",
            ),
            (
                "vector_example::small",
                "6eb28ccb6750e9c9b79d566397135dbd468557dcee4b8606a397f9a4d8296b1d",
            ),
            (
                "vector_example::odd",
                "eaf7280021e35a93a19c54accf94b8efe0cb4fdbe24583a2bcc8b1bd0fd26892",
            ),
            (
                "vector_example::large",
                "3b3915a87ab6a3afd34d8016b176555e40d66e87b4ae5f6993d0e82a8220c5ca",
            ),
            (
                "vector_example::large_odd",
                "d8dcb3926b8855e6f03733921fc99f4083a03ef08677503ddcaf5e5855f632da",
            ),
            (
                "war_hazard::small",
                "b447d5b9d1a909bad64e7b192fe5de30e39194a21a3f10a0ad8a477d8dc2f4bb",
            ),
        ];
        let got = keys();
        let got: Vec<(&str, &str)> = got.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(got, expected);
    }

    /// A slot key covers the `[derived]` expressions (two spellings of the
    /// same values are two definitions) and a case's `init` overrides,
    /// and a case without overrides is not moved by another's.
    #[test]
    fn keys_cover_derived_expressions_and_case_inits() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/scenes");
        let tmp = tempfile::tempdir().unwrap();
        for d in ["paged_attention", "paged_attention/kernels", "common_pa"] {
            std::fs::create_dir_all(tmp.path().join(d)).unwrap();
        }
        for f in [
            "paged_attention/scene.toml",
            "paged_attention/orchestration.c",
            "paged_attention/kernels/aic_qk_matmul.c",
            "paged_attention/kernels/aic_pv_matmul.c",
            "paged_attention/kernels/aiv_softmax_prepare.c",
            "common_pa/aiv_online_update.c",
        ] {
            std::fs::copy(src.join(f), tmp.path().join(f)).unwrap();
        }
        let dir = tmp.path().join("paged_attention");
        let keys = || {
            let scene = crate::scene::Scene::load(&dir).unwrap();
            scene
                .cases
                .iter()
                .map(|case| {
                    let scalars = crate::prepare::scalar_bits(&scene, case).unwrap();
                    (
                        case.name.clone(),
                        slot_key(&callable(), &scene, case, &scalars, "a2a3sim"),
                    )
                })
                .collect::<BTreeMap<_, _>>()
        };
        let edit = |from: &str, to: &str| {
            let path = dir.join("scene.toml");
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(text.matches(from).count(), 1, "{from}");
            std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
        };
        let before = keys();
        edit(
            "total_blocks = \"batch * ceil_div(context_len, block_size)\"",
            "total_blocks = \"ceil_div(context_len, block_size) * batch\"",
        );
        let swapped = keys();
        for (case, key) in &before {
            assert_ne!(&swapped[case], key, "{case}: derived text not covered");
        }
        edit(
            "block_table = { kind = \"permutation\", n = \"total_blocks\" }",
            "block_table = { kind = \"permutation\", n = \"total_blocks + 1\" }",
        );
        let reinit = keys();
        assert_ne!(reinit["small_batch4"], swapped["small_batch4"]);
        assert_eq!(reinit["small1"], swapped["small1"]);
    }
}
