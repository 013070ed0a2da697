//! `--dump-args`: every task's arguments of a case's run, on disk, for
//! `scene replay` (issue 19).
//!
//! The runtime records (`scene_rt_args_record`, the sim runtime's
//! `device/args_dump.rs`) raw span bytes and a JSON line per task into a
//! raw directory; after the session, [`CaseArgsDump::finish`] turns them
//! into the dump a user reads:
//!
//! ```text
//! <root>/<scene>/<case>/
//!     manifest.json          scene (name, directory), case, platform, the
//!                            kernels (func_id, name, core), task count
//!     task<N>/task.json      task N (0-based submit index): func_id, kernel,
//!                            core, block_num, every argument; a mixed
//!                            task also `kernels` (slot and func_id each)
//!     task<N>/arg<i>.in.npy  tensor argument i before the task's first block
//!     task<N>/arg<i>.out.npy out / inout argument i after its last block
//! ```
//!
//! A level-3 case has one such tree per rank, `<case>/rank<R>/`, and a
//! `manifest.json` at `<case>/` naming the ranks. A contiguous view is
//! stored with its dtype and shape (bf16 as raw `<u2` bits, as in case
//! dumps); any other view as the `u8` bytes of its bounding span, its
//! `SceneTensorDesc` in `task.json`. The case directory is built aside and
//! renamed in (`scene_util::replace_dir`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use scene_golden::{DType, Tensor, npy};
use serde::{Deserialize, Serialize};

use crate::scene::Scene;
use crate::select::SelectedCase;

/// Version tag of `manifest.json`.
pub const ARGS_FORMAT: &str = "scene-args/1";
/// The raw directory inside a case's dump while the session runs.
const RAW: &str = ".raw";

/// Errors reading or writing an args dump.
#[derive(Debug, thiserror::Error)]
pub enum ArgsDumpError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Malformed { path: PathBuf, message: String },
    /// A dump file that is not a regular file (a FIFO, a link to a
    /// device) or is larger than it can be.
    #[error("{0}")]
    Read(#[from] scene_util::ReadError),
}

/// The most bytes a dump's `manifest.json` or `task.json` may have: far
/// above any recorded task, and a bound on what a hostile dump can make
/// replay read.
const MAX_JSON_BYTES: u64 = 256 << 20;

/// Room for an `.npy` file's header on top of its data.
const NPY_HEADER_ROOM: u64 = 1 << 20;

/// An `.npy` file without a recorded span size: at most this many bytes.
const MAX_UNSIZED_NPY_BYTES: u64 = 64 << 30;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ArgsDumpError + '_ {
    move |source| ArgsDumpError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn malformed(path: &Path, message: impl Into<String>) -> ArgsDumpError {
    ArgsDumpError::Malformed {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// A kernel of the recorded callable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelEntry {
    pub func_id: u32,
    pub name: String,
    pub core: String,
}

/// `manifest.json` of a case's (or a rank's) dump.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub scene: String,
    /// The scene's directory when it was recorded: replay compiles the
    /// kernel from the sources found there now.
    pub scene_dir: PathBuf,
    pub case: String,
    pub platform: String,
    /// The rank of a level-3 case's rank directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// At a level-3 case's top: the rank directories (`rank0`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rank_dirs: Vec<String>,
    pub orchestration: String,
    pub kernels: Vec<KernelEntry>,
    /// Tasks recorded whole: inputs and outputs.
    pub tasks: usize,
    /// Tasks that started but never completed (a failed run: a crash, a
    /// timeout): their `task.json` and inputs, no outputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub incomplete: Vec<usize>,
}

/// One argument in `task.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ArgEntry {
    pub index: u32,
    /// `in`, `out`, `inout` or `scalar`.
    pub direction: String,
    /// A scalar's bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
    /// Tensor arguments: the view (`SceneTensorDesc`), dtype by name
    /// (`f32`, ..., `bytes`) and code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype_code: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strides: Option<Vec<u64>>,
    /// Element offset of the view in its buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Bytes of the buffer the view lies in, and of the view's span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_bytes: Option<u64>,
    /// Arguments whose spans overlap in one buffer share a group; the
    /// span starts `group_offset` bytes into the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_offset: Option<u64>,
    /// Stored with its dtype and shape (else as the span's `u8` bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contiguous: Option<bool>,
    /// `arg<i>.in.npy` / `arg<i>.out.npy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

impl ArgEntry {
    pub fn is_tensor(&self) -> bool {
        self.direction != "scalar"
    }
    pub fn is_output(&self) -> bool {
        self.direction == "out" || self.direction == "inout"
    }
}

/// One kernel of a mixed task: its slot (`aic`, `aiv0`, `aiv1`) and
/// func_id (the runtime's records say it so, in traces and arguments).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotKernel {
    pub slot: String,
    pub func_id: u32,
}

/// `task.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskEntry {
    pub task: usize,
    /// The task completed in the recorded run (else it has no outputs).
    #[serde(default = "yes")]
    pub complete: bool,
    pub func_id: u32,
    /// The kernel's name in the scene (`None` if the scene has no such
    /// func_id).
    pub kernel: Option<String>,
    pub core: String,
    /// A mixed task's kernels, slot order (`func_id` and `core` are the
    /// first one's); empty for a plain task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<SlotKernel>,
    pub block_num: u32,
    pub num_args: u32,
    pub args: Vec<ArgEntry>,
}

fn yes() -> bool {
    true
}

/// What the runtime writes per task (`taskN.json`).
#[derive(Debug, Deserialize)]
struct RawTask {
    task: usize,
    complete: bool,
    func_id: u32,
    core: String,
    #[serde(default)]
    kernels: Vec<SlotKernel>,
    block_num: u32,
    num_args: u32,
    args: Vec<RawArg>,
}

#[derive(Debug, Deserialize)]
struct RawArg {
    index: u32,
    direction: String,
    #[serde(default)]
    value: Option<u64>,
    #[serde(default)]
    dtype: u32,
    #[serde(default)]
    shape: Vec<u64>,
    #[serde(default)]
    strides: Vec<u64>,
    #[serde(default)]
    offset: u64,
    #[serde(default)]
    buffer_bytes: u64,
    #[serde(default)]
    span_bytes: u64,
    #[serde(default)]
    group: u32,
    #[serde(default)]
    group_offset: u64,
}

/// The name of an ABI dtype code (`bytes` for `SCENE_DTYPE_BYTES`).
pub fn dtype_name(code: u32) -> &'static str {
    match abi_to_dtype(code) {
        Some(d) => d.name(),
        None => "bytes",
    }
}

/// The tensor dtype of an ABI dtype code (`None`: bytes or unknown).
pub fn abi_to_dtype(code: u32) -> Option<DType> {
    use scene_device::abi::*;
    Some(match code {
        SCENE_DTYPE_F32 => DType::F32,
        SCENE_DTYPE_F64 => DType::F64,
        SCENE_DTYPE_F16 => DType::F16,
        SCENE_DTYPE_BF16 => DType::BF16,
        SCENE_DTYPE_I8 => DType::I8,
        SCENE_DTYPE_U8 => DType::U8,
        SCENE_DTYPE_I16 => DType::I16,
        SCENE_DTYPE_I32 => DType::I32,
        SCENE_DTYPE_I64 => DType::I64,
        SCENE_DTYPE_BOOL => DType::Bool,
        _ => return None,
    })
}

/// Whether a view with `shape` and `strides` of `dtype` covering
/// `span_bytes` is stored with its dtype and shape: row-major contiguous
/// and a known dtype.
fn is_contiguous(dtype: Option<DType>, shape: &[u64], strides: &[u64], span_bytes: u64) -> bool {
    let Some(dtype) = dtype else {
        return false;
    };
    let mut expect = 1u64;
    for (&d, &s) in shape.iter().zip(strides).rev() {
        if d > 1 && s != expect {
            return false;
        }
        expect = expect.saturating_mul(d);
    }
    expect.saturating_mul(dtype.size_of() as u64) == span_bytes
}

/// The `.npy` content of a tensor argument's span bytes (see the module).
pub fn span_tensor(arg: &ArgEntry, bytes: Vec<u8>) -> Result<Tensor, scene_golden::TensorError> {
    let dtype = arg.dtype_code.and_then(abi_to_dtype);
    if arg.contiguous == Some(true)
        && let Some(dtype) = dtype
    {
        let shape: Vec<usize> = arg.shape.iter().flatten().map(|&d| d as usize).collect();
        return Tensor::from_bytes(dtype, &shape, bytes);
    }
    let n = bytes.len();
    Tensor::from_bytes(DType::U8, &[n], bytes)
}

/// The span bytes an `.npy` file of an argument holds.
pub fn read_span(path: &Path, arg: &ArgEntry) -> Result<Vec<u8>, ArgsDumpError> {
    let dtype = match arg.contiguous {
        Some(true) => arg.dtype_code.and_then(abi_to_dtype).unwrap_or(DType::U8),
        _ => DType::U8,
    };
    // Not a plain read: a FIFO or a link to `/dev/zero` in a dump must not
    // hang or exhaust the replay.
    let max = arg
        .span_bytes
        .map_or(MAX_UNSIZED_NPY_BYTES, |n| n.saturating_add(NPY_HEADER_ROOM));
    let raw = scene_util::read_input_file(path, max)?;
    let t = npy::from_npy_bytes_as(&raw, dtype).map_err(|e| malformed(path, e.to_string()))?;
    let bytes = t.into_bytes();
    match arg.span_bytes {
        Some(n) if n != bytes.len() as u64 => Err(malformed(
            path,
            format!(
                "holds {} bytes, task.json says the span has {n}",
                bytes.len()
            ),
        )),
        _ => Ok(bytes),
    }
}

/// A case's args dump while its device stage runs.
#[derive(Debug)]
pub struct CaseArgsDump {
    /// `<root>/<scene>/<case>`.
    dir: PathBuf,
    /// Built here, renamed to `dir` at the end.
    tmp: PathBuf,
}

impl CaseArgsDump {
    /// Prepares `<root>/<scene>/<case>` (built aside, in
    /// `<case>.args-tmp-<pid>`).
    pub fn begin(root: &Path, sel: &SelectedCase) -> Result<Self, ArgsDumpError> {
        let scene_dir = root.join(&sel.scene.name);
        let case = &sel.case().name;
        let dir = scene_dir.join(case);
        let tmp = scene_dir.join(format!("{case}.args-tmp-{}", std::process::id()));
        scene_util::remove_dir_if_exists(&tmp).map_err(io(&tmp))?;
        std::fs::create_dir_all(tmp.join(RAW)).map_err(io(&tmp))?;
        Ok(Self { dir, tmp })
    }

    /// Where the runtime records (`rank<R>/` below it for a rank group).
    pub fn raw_dir(&self) -> PathBuf {
        self.tmp.join(RAW)
    }

    /// Converts what the runtime recorded, writes the manifests and puts
    /// the dump in place; returns its directory. Runs whatever the
    /// session's outcome: a failed run's completed tasks are dumped too.
    pub fn finish(self, sel: &SelectedCase, platform: &str) -> Result<PathBuf, ArgsDumpError> {
        let result = self.convert(sel, platform);
        if result.is_err() {
            let _ = scene_util::remove_dir_if_exists(&self.tmp);
        }
        result
    }

    fn convert(&self, sel: &SelectedCase, platform: &str) -> Result<PathBuf, ArgsDumpError> {
        let raw = self.raw_dir();
        let scene = &sel.scene;
        let case = &sel.case().name;
        let base = manifest_base(scene, case, platform);
        match sel.case().group {
            None => {
                let m = convert_dir(&raw, &self.tmp, scene, base)?;
                write_json(&self.tmp.join("manifest.json"), &m)?;
            }
            Some(g) => {
                let mut rank_dirs = Vec::new();
                for rank in 0..g.ranks {
                    let name = format!("rank{rank}");
                    let out = self.tmp.join(&name);
                    std::fs::create_dir_all(&out).map_err(io(&out))?;
                    let m = Manifest {
                        rank: Some(rank as u32),
                        ..base.clone()
                    };
                    let m = convert_dir(&raw.join(&name), &out, scene, m)?;
                    write_json(&out.join("manifest.json"), &m)?;
                    rank_dirs.push(name);
                }
                let top = Manifest { rank_dirs, ..base };
                write_json(&self.tmp.join("manifest.json"), &top)?;
            }
        }
        scene_util::remove_dir_if_exists(&raw).map_err(io(&raw))?;
        if let Some(parent) = self.dir.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        scene_util::replace_dir(&self.tmp, &self.dir).map_err(io(&self.dir))?;
        Ok(self.dir.clone())
    }
}

fn manifest_base(scene: &Scene, case: &str, platform: &str) -> Manifest {
    Manifest {
        format: ARGS_FORMAT.to_owned(),
        scene: scene.name.clone(),
        scene_dir: std::path::absolute(&scene.dir).unwrap_or_else(|_| scene.dir.clone()),
        case: case.to_owned(),
        platform: platform.to_owned(),
        rank: None,
        rank_dirs: Vec::new(),
        orchestration: scene.orchestration.function.clone(),
        kernels: scene
            .incores
            .iter()
            .map(|k| KernelEntry {
                func_id: k.func_id,
                name: k.name.clone(),
                core: k.core.as_str().to_owned(),
            })
            .collect(),
        tasks: 0,
        incomplete: Vec::new(),
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), ArgsDumpError> {
    let mut text = serde_json::to_vec_pretty(value).map_err(|e| malformed(path, e.to_string()))?;
    text.push(b'\n');
    std::fs::write(path, text).map_err(io(path))
}

/// Converts the runtime's raw files in `raw` into `task<N>/` directories
/// under `out`; fills the manifest's task counts.
fn convert_dir(
    raw: &Path,
    out: &Path,
    scene: &Scene,
    mut manifest: Manifest,
) -> Result<Manifest, ArgsDumpError> {
    let mut described = BTreeSet::new();
    let entries = match std::fs::read_dir(raw) {
        Ok(e) => e.collect::<Result<Vec<_>, _>>().map_err(io(raw))?,
        // Nothing recorded (the run failed before any task): no tasks.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io(raw)(e)),
    };
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("task") else {
            continue;
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let Ok(id) = digits.parse::<usize>() else {
            continue;
        };
        if rest[digits.len()..] == *".json" {
            described.insert(id);
        }
    }
    manifest.tasks = 0;
    manifest.incomplete = Vec::new();
    for &id in &described {
        if convert_task(raw, out, scene, id)? {
            manifest.tasks += 1;
        } else {
            manifest.incomplete.push(id);
        }
    }
    Ok(manifest)
}

/// Converts task `id`; returns whether it completed.
fn convert_task(raw: &Path, out: &Path, scene: &Scene, id: usize) -> Result<bool, ArgsDumpError> {
    let json_path = raw.join(format!("task{id}.json"));
    let text = std::fs::read(&json_path).map_err(io(&json_path))?;
    let rt: RawTask =
        serde_json::from_slice(&text).map_err(|e| malformed(&json_path, e.to_string()))?;
    if rt.task != id {
        return Err(malformed(&json_path, format!("names task {}", rt.task)));
    }
    let dir = out.join(format!("task{id}"));
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let mut args = Vec::with_capacity(rt.args.len());
    for a in rt.args {
        if a.direction == "scalar" {
            args.push(ArgEntry {
                index: a.index,
                direction: a.direction,
                value: a.value,
                dtype: None,
                dtype_code: None,
                shape: None,
                strides: None,
                offset: None,
                buffer_bytes: None,
                span_bytes: None,
                group: None,
                group_offset: None,
                contiguous: None,
                input: None,
                output: None,
            });
            continue;
        }
        let dtype = abi_to_dtype(a.dtype);
        let contiguous = is_contiguous(dtype, &a.shape, &a.strides, a.span_bytes);
        let mut entry = ArgEntry {
            index: a.index,
            direction: a.direction,
            value: None,
            dtype: Some(dtype_name(a.dtype).to_owned()),
            dtype_code: Some(a.dtype),
            shape: Some(a.shape),
            strides: Some(a.strides),
            offset: Some(a.offset),
            buffer_bytes: Some(a.buffer_bytes),
            span_bytes: Some(a.span_bytes),
            group: Some(a.group),
            group_offset: Some(a.group_offset),
            contiguous: Some(contiguous),
            input: None,
            output: None,
        };
        let store = |which: &str| -> Result<Option<String>, ArgsDumpError> {
            let src = raw.join(format!("task{id}.arg{}.{which}.bin", a.index));
            let bytes = match std::fs::read(&src) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(io(&src)(e)),
            };
            let name = format!("arg{}.{which}.npy", a.index);
            let t = span_tensor(&entry, bytes).map_err(|e| malformed(&src, e.to_string()))?;
            let dst = dir.join(&name);
            npy::write_npy(&dst, &t).map_err(io(&dst))?;
            Ok(Some(name))
        };
        let input = store("in")?;
        let output = if entry.is_output() {
            store("out")?
        } else {
            None
        };
        entry.input = input;
        entry.output = output;
        args.push(entry);
    }
    let task = TaskEntry {
        task: id,
        complete: rt.complete,
        func_id: rt.func_id,
        kernel: scene
            .incores
            .iter()
            .find(|k| k.func_id == rt.func_id)
            .map(|k| k.name.clone()),
        core: rt.core,
        kernels: rt.kernels,
        block_num: rt.block_num,
        num_args: rt.num_args,
        args,
    };
    write_json(&dir.join("task.json"), &task)?;
    Ok(rt.complete)
}

/// Reads a dump's `manifest.json`.
pub fn read_manifest(dir: &Path) -> Result<Manifest, ArgsDumpError> {
    let path = dir.join("manifest.json");
    let text = scene_util::read_input_file(&path, MAX_JSON_BYTES)?;
    let m: Manifest = serde_json::from_slice(&text).map_err(|e| malformed(&path, e.to_string()))?;
    if m.format != ARGS_FORMAT {
        return Err(malformed(
            &path,
            format!("format `{}`, this harness reads `{ARGS_FORMAT}`", m.format),
        ));
    }
    Ok(m)
}

/// Reads task `id`'s `task.json` in a dump.
pub fn read_task(dir: &Path, id: usize) -> Result<TaskEntry, ArgsDumpError> {
    let path = dir.join(format!("task{id}")).join("task.json");
    let text = scene_util::read_input_file(&path, MAX_JSON_BYTES)?;
    serde_json::from_slice(&text).map_err(|e| malformed(&path, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguity_follows_strides_and_span() {
        let f32 = Some(DType::F32);
        assert!(is_contiguous(f32, &[4, 8], &[8, 1], 128));
        assert!(!is_contiguous(f32, &[4, 8], &[16, 1], 4 * 16 * 4 - 8 * 4));
        assert!(
            is_contiguous(f32, &[1, 8], &[99, 1], 32),
            "size-1 dims take any stride"
        );
        assert!(
            !is_contiguous(None, &[16], &[1], 16),
            "bytes are stored as u8 spans"
        );
        assert!(!is_contiguous(f32, &[4], &[1], 20));
    }
}
