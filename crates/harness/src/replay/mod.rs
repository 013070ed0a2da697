//! `scene replay DIR TASK`: one recorded task (see [`crate::observe::args_dump`])
//! run again alone on the simulator, its outputs compared bit for bit with
//! the recorded ones: the first step of debugging one bad kernel.
//!
//! The task's kernel is compiled from the scene's *current* sources (the
//! normal builder, toolchain and kernel cache: an edited kernel is what
//! runs) into a callable whose orchestration is the generic replay
//! orchestration shipped with the harness (`replay/scene_replay_orch.c`):
//! it reads a task description from run argument 0 and submits that one
//! task through the v2 orchestration API, with views of run arguments
//! 1.. laid out as recorded (same descriptors, same span bytes; arguments
//! that overlapped in one buffer share one buffer again). The session runs
//! like a case's: a card from the pool, the runtime loaded in the
//! supervised worker (or in this process), the buffers downloaded, and
//! every `out` / `inout` argument compared with the recorded bytes.

use std::path::{Path, PathBuf};

use scene_device::worker::{WorkerError, WorkerPool};
use scene_device::{
    AcquireOptions, CardPool, DeviceError, DeviceJob, Direction, JobArg, Runtime, RuntimeError,
    SessionStepError, TensorArg,
};
use scene_golden::{DType, Tensor};
use scene_kernels::{CallableSpec, ChipCallable, OrchUnit};

use crate::compile::{callable_spec, compile_builder};
use crate::config::RunConfig;
use crate::device::RuntimeLibError;
use crate::observe::args_dump::{self, ArgEntry, ArgsDumpError, Manifest, TaskEntry};
use crate::scene::Scene;

/// The replay orchestration's source (compiled like any orchestration).
pub const REPLAY_ORCH_SOURCE: &str = include_str!("scene_replay_orch.c");
/// Its entry symbol.
pub const REPLAY_ORCH_FUNCTION: &str = "scene_replay_orch";
/// The task description's first word (`SCENE_REPLAY_MAGIC`, "SREPLAY1").
const MAGIC: u64 = 0x3159_414c_5045_5253;
/// The first word of a mixed task's description (`SCENE_REPLAY_MAGIC_MIXED`,
/// "SREPLAY2"): the header has a func_id per slot after the five words.
const MAGIC_MIXED: u64 = 0x3259_414c_5045_5253;
const HEADER_WORDS: usize = 5;
const ARG_WORDS: usize = 22;

/// Why a replay could not run (a mismatch is not an error: see
/// [`ReplayReport`]).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{} is not an args dump (no manifest.json): give a case's directory under the --dump-args root, e.g. <root>/<scene>/<case>", dir.display())]
    NotADump { dir: PathBuf },
    #[error("{0}")]
    Dump(#[from] ArgsDumpError),
    #[error("{} is a rank group's dump: replay one rank's tasks, e.g. {}", dir.display(), dir.join(first).display())]
    RankGroup { dir: PathBuf, first: String },
    #[error("{} recorded no task (the run failed before any task completed)", dir.display())]
    Empty { dir: PathBuf },
    #[error("task `{given}` is not in {}: the recorded task ids are {ids}", dir.display())]
    UnknownTask {
        dir: PathBuf,
        given: String,
        /// The recorded ids as ranges: `0..=5`, `0..=3, 7`.
        ids: String,
    },
    #[error("the scene `{scene}` of this dump is not at {} ({message}): pass its directory with --scene DIR", dir.display())]
    SceneMissing {
        scene: String,
        dir: PathBuf,
        message: String,
    },
    #[error("{}: {message}", manifest.display())]
    Scene { manifest: PathBuf, message: String },
    /// The scene's own load error (it names the file and the field).
    #[error("the scene does not load: {0}")]
    SceneLoad(String),
    #[error(
        "kernel `{kernel}` (func_id {func_id}) of scene `{scene}` no longer compiles:\n{message}"
    )]
    Compile {
        scene: String,
        kernel: String,
        func_id: u32,
        message: String,
    },
    #[error("replay of task {task}: {source}")]
    Device {
        task: usize,
        #[source]
        source: ReplayRunError,
    },
    #[error("replay of task {task}: buffer of argument {index} came back short")]
    ShortBuffer { task: usize, index: u32 },
}

/// Why the replay session brought no buffers back.
#[derive(Debug, thiserror::Error)]
pub enum ReplayRunError {
    #[error("{0}")]
    RuntimeLib(#[from] RuntimeLibError),
    #[error("{0}")]
    CardPool(#[source] DeviceError),
    #[error("acquiring a card: {0}")]
    Acquire(#[source] DeviceError),
    #[error("{0}")]
    Worker(#[from] WorkerError),
    #[error("{0}")]
    Load(#[from] RuntimeError),
    #[error("{0}")]
    Session(#[from] SessionStepError),
    #[error("the device returned fewer buffers than it had outputs")]
    FewerBuffers,
}

/// What to replay.
#[derive(Clone, Debug)]
pub struct ReplayRequest {
    /// A case's (or a rank's) dump directory.
    pub dir: PathBuf,
    /// The task id as the user wrote it.
    pub task: String,
    /// The scene's directory, when it moved since the recording.
    pub scene_dir: Option<PathBuf>,
}

/// One compared output argument.
#[derive(Clone, Debug)]
pub struct OutputCheck {
    pub index: u32,
    pub direction: String,
    /// `f32 [16384]`, or `bytes [n]` for a span compared as bytes.
    pub what: String,
    pub elements: usize,
    pub differing: usize,
    /// The first differing element: index, replayed value, recorded value.
    pub first: Option<(usize, String, String)>,
}

/// The outcome of a replay that ran.
#[derive(Clone, Debug)]
pub struct ReplayReport {
    pub task: usize,
    pub func_id: u32,
    pub kernel: String,
    /// A mixed task's kernels as `NAME [slot]`, slot order (`func_id` and
    /// `kernel` are the first one's); empty for a plain task.
    pub mixed: Vec<String>,
    pub outputs: Vec<OutputCheck>,
    /// Something the reader of the verdict should know (a rank's task
    /// runs without its communication domain).
    pub note: Option<String>,
    /// The task completed in the recorded run: there are outputs to
    /// compare with (else the replay only shows the task runs now).
    pub recorded_complete: bool,
}

impl ReplayReport {
    pub fn matches(&self) -> bool {
        self.recorded_complete && self.outputs.iter().all(|o| o.differing == 0)
    }

    /// One line when the outputs match; else a line per differing output.
    pub fn summary(&self) -> String {
        let head = if self.mixed.is_empty() {
            format!(
                "replay of task {} (kernel {}, func_id {})",
                self.task, self.kernel, self.func_id
            )
        } else {
            format!(
                "replay of mixed task {} (kernels {})",
                self.task,
                self.mixed.join(" + ")
            )
        };
        let elements: usize = self.outputs.iter().map(|o| o.elements).sum();
        if !self.recorded_complete {
            return format!(
                "{head}: the recorded run did not complete this task (it crashed or timed out there), so there are no recorded outputs to compare; the replay ran it to the end"
            );
        }
        if self.matches() {
            return format!(
                "{head}: outputs match bit for bit ({} output argument{}, {elements} elements)",
                self.outputs.len(),
                if self.outputs.len() == 1 { "" } else { "s" }
            );
        }
        let bad = self.outputs.iter().filter(|o| o.differing > 0).count();
        let mut s = format!(
            "{head}: outputs differ from the recording in {bad} of {} output argument{}",
            self.outputs.len(),
            if self.outputs.len() == 1 { "" } else { "s" }
        );
        for o in self.outputs.iter().filter(|o| o.differing > 0) {
            s.push_str(&format!(
                "\n  argument {} ({}, {}): {} of {} elements differ",
                o.index, o.direction, o.what, o.differing, o.elements
            ));
            if let Some((i, got, want)) = &o.first {
                s.push_str(&format!(
                    "; first at element {i}: replay {got}, recorded {want}"
                ));
            }
        }
        s
    }
}

/// Replays one task: see the module.
pub fn replay(config: &RunConfig, req: &ReplayRequest) -> Result<ReplayReport, ReplayError> {
    let dir = &req.dir;
    // `exists`, not `is_file`: a manifest that is a FIFO or a link to a
    // device is refused by the reader, saying what it is.
    if !dir.join("manifest.json").exists() {
        return Err(ReplayError::NotADump { dir: dir.clone() });
    }
    let manifest = args_dump::read_manifest(dir)?;
    if let Some(first) = manifest.rank_dirs.first() {
        return Err(ReplayError::RankGroup {
            dir: dir.clone(),
            first: first.clone(),
        });
    }
    let task_id = task_id(dir, &manifest, &req.task)?;
    let task = args_dump::read_task(dir, task_id)?;
    let scene = load_scene(&manifest, req.scene_dir.as_deref())?;
    let (callable, cache_refused) = compile(config, &scene, &task)?;
    let name = |func_id: u32| {
        scene
            .incores
            .iter()
            .find(|k| k.func_id == func_id)
            .map_or_else(|| format!("func_id {func_id}"), |k| k.name.clone())
    };
    let kernel = name(task.func_id);
    let mixed = task
        .kernels
        .iter()
        .map(|k| format!("{} (func_id {}) [{}]", name(k.func_id), k.func_id, k.slot))
        .collect();
    let layout = Layout::of(dir, &task, config.max_case_bytes.unwrap_or(u64::MAX))?;
    let outputs =
        run(config, &callable, &layout, cache_refused).map_err(|source| ReplayError::Device {
            task: task_id,
            source,
        })?;
    let checks = compare(dir, &task, &layout, &outputs)?;
    Ok(ReplayReport {
        task: task_id,
        func_id: task.func_id,
        kernel,
        mixed,
        outputs: checks,
        recorded_complete: task.complete,
        note: manifest.rank.map(|r| {
            format!(
                "task {task_id} was recorded on rank {r} of a rank group; it replays alone, without a communication domain (SceneKernelArgs::comm is NULL), so a kernel that communicates cannot reproduce its outputs"
            )
        }),
    })
}

fn task_id(dir: &Path, manifest: &Manifest, given: &str) -> Result<usize, ReplayError> {
    if manifest.tasks == 0 && manifest.incomplete.is_empty() {
        return Err(ReplayError::Empty { dir: dir.into() });
    }
    let present = |id: usize| dir.join(format!("task{id}")).join("task.json").exists();
    if let Ok(id) = given.trim().parse::<usize>()
        && present(id)
    {
        return Ok(id);
    }
    let mut ids: Vec<usize> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("task")?.parse().ok())
        .filter(|&id| present(id))
        .collect();
    ids.sort_unstable();
    Err(ReplayError::UnknownTask {
        dir: dir.into(),
        given: given.to_owned(),
        ids: id_ranges(&ids),
    })
}

/// Sorted ids as ranges: `0..=5`, `0..=3, 7`.
fn id_ranges(ids: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            ids[i].to_string()
        } else {
            format!("{}..={}", ids[i], ids[j])
        });
        i = j + 1;
    }
    parts.join(", ")
}

fn load_scene(manifest: &Manifest, moved: Option<&Path>) -> Result<Scene, ReplayError> {
    let dir = moved.unwrap_or(&manifest.scene_dir);
    if !dir.join("scene.toml").is_file() {
        return Err(ReplayError::SceneMissing {
            scene: manifest.scene.clone(),
            dir: dir.to_path_buf(),
            message: "no scene.toml there".into(),
        });
    }
    Scene::load(dir).map_err(|e| ReplayError::SceneLoad(e.to_string()))
}

/// The replay callable: the replay orchestration and the task's kernel,
/// compiled from the scene's current sources; and whether the kernel
/// cache refused the run's cache directory (it warned).
fn compile(
    config: &RunConfig,
    scene: &Scene,
    task: &TaskEntry,
) -> Result<(ChipCallable, bool), ReplayError> {
    let manifest = scene.manifest.clone();
    // (slot's core type, func_id) of every kernel the task ran.
    let ran: Vec<(&str, u32)> = if task.kernels.is_empty() {
        vec![(task.core.as_str(), task.func_id)]
    } else {
        task.kernels
            .iter()
            .map(|k| (if k.slot == "aic" { "aic" } else { "aiv" }, k.func_id))
            .collect()
    };
    let mut incores = Vec::new();
    for &(core, func_id) in &ran {
        let Some(incore) = scene.incores.iter().find(|k| k.func_id == func_id) else {
            return Err(ReplayError::Scene {
                manifest,
                message: format!(
                    "the recorded task {} ran func_id {func_id}, which the scene no longer has",
                    task.task
                ),
            });
        };
        if incore.core.as_str() != core {
            return Err(ReplayError::Scene {
                manifest,
                message: format!(
                    "kernel `{}` (func_id {}) is an {} kernel now; the recorded task ran it on an {core} core",
                    incore.name,
                    incore.func_id,
                    incore.core.as_str(),
                ),
            });
        }
        incores.push(incore);
    }
    let incore = incores[0];
    let compile_err = |message: String| ReplayError::Compile {
        scene: scene.name.clone(),
        kernel: incore.name.clone(),
        func_id: incore.func_id,
        message,
    };
    let source = replay_source(config).map_err(|e| compile_err(e.to_string()))?;
    let mut spec: CallableSpec = callable_spec(
        scene,
        &config.root,
        &config.abi_include_dir,
        &config.platform,
    );
    spec.label = format!("{} (replay of func_id {})", scene.name, incore.func_id);
    spec.incores
        .retain(|k| ran.iter().any(|&(_, func_id)| func_id == k.func_id));
    let abi_inc = config
        .abi_include_dir
        .strip_prefix(&config.root)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| config.abi_include_dir.clone());
    spec.orchestration = OrchUnit {
        name: "replay orchestration".into(),
        source: source.path().to_path_buf(),
        function: REPLAY_ORCH_FUNCTION.into(),
        include_dirs: vec![abi_inc],
        defines: Vec::new(),
        flags: Vec::new(),
    };
    let builder = compile_builder(config).map_err(|e| compile_err(e.to_string()))?;
    let cache_refused = config.cache_dir.is_some() && builder.cache().is_none();
    let out = builder.build_all(std::slice::from_ref(&spec));
    drop(source);
    match out.callables.into_iter().next() {
        Some(Ok(c)) => Ok(((*c).clone(), cache_refused)),
        Some(Err(e)) => Err(compile_err(e.to_string())),
        None => Err(compile_err("the builder returned no callable".into())),
    }
}

/// Where the replay orchestration's source is compiled from: a stable
/// file in the kernel cache directory (so its unit is cached like any
/// other), else (no cache, or one that cannot take the file: the kernel
/// cache says so when it opens) a temporary one.
enum ReplaySource {
    Stable(PathBuf),
    /// The directory lives (and the file with it) until the compile ends.
    Temp(#[allow(dead_code)] tempfile::TempDir, PathBuf),
}

impl ReplaySource {
    fn path(&self) -> &Path {
        match self {
            ReplaySource::Stable(p) | ReplaySource::Temp(_, p) => p,
        }
    }
}

fn replay_source(config: &RunConfig) -> std::io::Result<ReplaySource> {
    const NAME: &str = "scene_replay_orch.c";
    if let Some(cache) = &config.cache_dir {
        let path = cache.join("replay").join(NAME);
        let current = std::fs::read(&path).ok();
        let written = current.as_deref() == Some(REPLAY_ORCH_SOURCE.as_bytes())
            || std::fs::create_dir_all(cache.join("replay"))
                .and_then(|()| scene_util::write_atomically(&path, REPLAY_ORCH_SOURCE.as_bytes()))
                .is_ok();
        if written {
            return Ok(ReplaySource::Stable(path));
        }
    }
    let dir = tempfile::Builder::new().prefix("scene-replay").tempdir()?;
    let path = dir.path().join(NAME);
    std::fs::write(&path, REPLAY_ORCH_SOURCE)?;
    Ok(ReplaySource::Temp(dir, path))
}

/// The replay's run arguments: the task description, then one buffer per
/// argument group, filled with the recorded input spans.
struct Layout {
    description: Vec<u8>,
    /// Per group: its bytes (the recorded inputs at their offsets) and
    /// whether it holds an output.
    groups: Vec<(Vec<u8>, bool)>,
}

impl Layout {
    /// `limit` bounds the bytes of all groups together (the run's
    /// `--max-case-bytes`): offsets and sizes come from `task.json`, and a
    /// `group_offset` of 2^40 must be an error, not an allocation abort.
    fn of(dir: &Path, task: &TaskEntry, limit: u64) -> Result<Layout, ReplayError> {
        let tdir = dir.join(format!("task{}", task.task));
        let bad = |m: String| {
            ReplayError::Dump(ArgsDumpError::Malformed {
                path: tdir.join("task.json"),
                message: m,
            })
        };
        let mut groups: Vec<(Vec<u8>, bool)> = Vec::new();
        let mut words = vec![
            if task.kernels.is_empty() {
                MAGIC
            } else {
                MAGIC_MIXED
            },
            u64::from(task.func_id),
            u64::from(task.block_num),
            task.args.len() as u64,
            0,
        ];
        if !task.kernels.is_empty() {
            // A func_id per slot (aic, aiv0, aiv1), or SCENE_NO_KERNEL.
            for slot in ["aic", "aiv0", "aiv1"] {
                let id = task.kernels.iter().find(|k| k.slot == slot);
                words.push(id.map_or(u64::MAX, |k| u64::from(k.func_id)));
            }
        }
        for a in &task.args {
            let mut w = [0u64; ARG_WORDS];
            if !a.is_tensor() {
                w[0] = u64::from(scene_device::abi::SCENE_DIR_SCALAR);
                w[1] = a
                    .value
                    .ok_or_else(|| bad(format!("scalar argument {} has no value", a.index)))?;
                words.extend_from_slice(&w);
                continue;
            }
            let (Some(group), Some(goff), Some(span), Some(code), Some(shape), Some(strides)) = (
                a.group,
                a.group_offset,
                a.span_bytes,
                a.dtype_code,
                a.shape.as_ref(),
                a.strides.as_ref(),
            ) else {
                return Err(bad(format!("tensor argument {} lacks its view", a.index)));
            };
            let rank = shape.len();
            if rank > 8 || strides.len() != rank {
                return Err(bad(format!("tensor argument {} has rank {rank}", a.index)));
            }
            let input = a
                .input
                .as_ref()
                .ok_or_else(|| bad(format!("tensor argument {} has no recorded input", a.index)))?;
            // Every size below comes from task.json: checked before anything
            // is allocated or read.
            let end = goff.checked_add(span).ok_or_else(|| {
                bad(format!(
                    "argument {}: group_offset + span_bytes overflows",
                    a.index
                ))
            })?;
            if let Some(buffer) = a.buffer_bytes.filter(|&b| end > b) {
                return Err(bad(format!(
                    "argument {}: group_offset {goff} + span_bytes {span} = {end} is past the recorded buffer of {buffer} bytes",
                    a.index
                )));
            }
            check_view(&tdir.join("task.json"), a, shape, strides, span, limit)?;
            let g = group as usize;
            if g >= task.args.len() {
                return Err(bad(format!(
                    "argument {}: group {group}, but the task has {} arguments",
                    a.index,
                    task.args.len()
                )));
            }
            let held: u64 = groups.iter().map(|(b, _)| b.len() as u64).sum();
            let have = groups.get(g).map_or(0, |(b, _)| b.len() as u64);
            let total = held - have + end.max(have);
            if total > limit {
                return Err(bad(format!(
                    "argument {}: its groups need {total} bytes, more than the limit of {limit} (--max-case-bytes)",
                    a.index
                )));
            }
            let bytes = args_dump::read_span(&tdir.join(input), a)?;
            if groups.len() <= g {
                groups.resize(g + 1, (Vec::new(), false));
            }
            let (buf, out) = &mut groups[g];
            // `end <= total <= limit`, itself at most the memory the run may
            // use: it fits `usize`.
            let end = end as usize;
            if buf.len() < end {
                buf.resize(end, 0);
            }
            buf[goff as usize..end].copy_from_slice(&bytes);
            *out |= a.is_output();
            w[0] = match a.direction.as_str() {
                "in" => u64::from(scene_device::abi::SCENE_DIR_IN),
                "out" => u64::from(scene_device::abi::SCENE_DIR_OUT),
                "inout" => u64::from(scene_device::abi::SCENE_DIR_INOUT),
                d => return Err(bad(format!("argument {}: direction `{d}`", a.index))),
            };
            w[1] = u64::from(group);
            w[2] = goff;
            w[3] = span;
            w[4] = u64::from(code);
            w[5] = rank as u64;
            w[6..6 + rank].copy_from_slice(shape);
            w[14..14 + rank].copy_from_slice(strides);
            words.extend_from_slice(&w);
        }
        words[4] = groups.len() as u64;
        let slots = if task.kernels.is_empty() { 0 } else { 3 };
        debug_assert_eq!(
            words.len(),
            HEADER_WORDS + slots + task.args.len() * ARG_WORDS
        );
        for (buf, _) in &mut groups {
            // A zero-byte view still gets a buffer to point into.
            if buf.is_empty() {
                buf.push(0);
            }
        }
        Ok(Layout {
            description: words.iter().flat_map(|w| w.to_le_bytes()).collect(),
            groups,
        })
    }
}

/// Runs the replay callable on a card of the pool; returns the groups'
/// bytes after the run (groups without outputs: empty).
fn run(
    config: &RunConfig,
    callable: &ChipCallable,
    layout: &Layout,
    cache_refused: bool,
) -> Result<Vec<Vec<u8>>, ReplayRunError> {
    let names: Vec<String> = (0..layout.groups.len())
        .map(|g| format!("group{g}"))
        .collect();
    let mut args = vec![JobArg::Tensor(TensorArg {
        name: "task description",
        direction: Direction::In,
        size: layout.description.len() as u64,
        input: Some(&layout.description),
        dtype: scene_device::abi::SCENE_DTYPE_U8,
        shape: vec![layout.description.len() as u64],
    })];
    for ((bytes, out), name) in layout.groups.iter().zip(&names) {
        args.push(JobArg::Tensor(TensorArg {
            name,
            direction: if *out {
                Direction::InOut
            } else {
                Direction::In
            },
            size: bytes.len() as u64,
            input: Some(bytes),
            dtype: scene_device::abi::SCENE_DTYPE_U8,
            shape: vec![bytes.len() as u64],
        }));
    }
    let options = crate::device::open_options(config);
    let job = DeviceJob {
        card: 0,
        options: &options,
        callable: crate::device::callable_image(callable),
        args,
        group: None,
        rounds: 1,
        trace: 0,
        args_dump: None,
    };
    // Kept to the end: a private copy of the embedded runtime goes with it.
    let mut choice = crate::device::RuntimeChoice::of(config);
    if cache_refused {
        // The kernel cache refused the directory and said so: once is enough.
        choice = choice.without_cache();
    }
    let runtime_file = choice.resolve()?;
    let runtime = runtime_file.path.clone();
    let pool = CardPool::new(config.devices.clone(), config.lock_dir.clone())
        .map_err(ReplayRunError::CardPool)?
        .with_cancel(config.cancel.clone());
    let acquire = || {
        pool.acquire(
            1,
            "scene replay",
            AcquireOptions {
                timeout: config.lock_timeout,
                on_wait: None,
            },
        )
        .map_err(ReplayRunError::Acquire)
    };
    let outputs = match &config.device_worker {
        Some(worker) => {
            let workers = WorkerPool::new(worker.clone(), config.cancel.clone());
            let prepared = scene_device::worker::prepare(&job, &runtime)?;
            let standby = workers.standby(1, &pool.healthy())?;
            let lease = acquire()?;
            let deadline = crate::device::worker_deadline(config);
            let cards = [lease.cards()[0]];
            let done = workers.run(standby, &prepared, &lease, &cards, deadline);
            lease.release();
            done.result?;
            prepared.outputs()?
        }
        None => {
            let lease = acquire()?;
            let rt = Runtime::load(&lease, &runtime)?;
            let out = scene_device::run_session(&rt, &job)?;
            drop(rt);
            lease.release();
            out.outputs
        }
    };
    // Outputs come back for the in/out groups, in order.
    let mut it = outputs.into_iter();
    let mut per_group = Vec::with_capacity(layout.groups.len());
    for (_, out) in &layout.groups {
        per_group.push(if *out {
            it.next().ok_or(ReplayRunError::FewerBuffers)?
        } else {
            Vec::new()
        });
    }
    Ok(per_group)
}

/// Compares every output argument's span after the replay with the
/// recording: the view's elements first (in row-major view order), then
/// any other byte of the span.
/// A tensor view of `task.json` must lie in its span, and its elements
/// (which compare walks one by one) be no more than `limit` bytes' worth:
/// a hostile shape must not make replay allocate or loop without bound.
fn check_view(
    task_json: &Path,
    a: &ArgEntry,
    shape: &[u64],
    strides: &[u64],
    span: u64,
    limit: u64,
) -> Result<(), ArgsDumpError> {
    let bad = |message: String| ArgsDumpError::Malformed {
        path: task_json.to_path_buf(),
        message,
    };
    let es = a
        .dtype_code
        .and_then(args_dump::abi_to_dtype)
        .map_or(1, |d| d.size_of() as u64);
    let too_big = || {
        bad(format!(
            "argument {}: shape {shape:?} is too large",
            a.index
        ))
    };
    let numel = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(too_big)?;
    if numel.checked_mul(es).is_none_or(|b| b > limit) {
        return Err(too_big());
    }
    if numel == 0 {
        return Ok(());
    }
    let last = shape
        .iter()
        .zip(strides)
        .try_fold(0u64, |acc, (&d, &s)| {
            (d - 1).checked_mul(s)?.checked_add(acc)
        })
        .and_then(|e| e.checked_add(1)?.checked_mul(es))
        .ok_or_else(too_big)?;
    if last > span {
        return Err(bad(format!(
            "argument {}: the view (shape {shape:?}, strides {strides:?}) reaches byte {last}, past its span of {span} bytes",
            a.index
        )));
    }
    Ok(())
}

fn compare(
    dir: &Path,
    task: &TaskEntry,
    layout: &Layout,
    groups: &[Vec<u8>],
) -> Result<Vec<OutputCheck>, ReplayError> {
    let tdir = dir.join(format!("task{}", task.task));
    let mut checks = Vec::new();
    for a in task.args.iter().filter(|a| a.is_tensor() && a.is_output()) {
        let Some(name) = &a.output else {
            if !task.complete {
                continue;
            }
            return Err(ReplayError::Dump(ArgsDumpError::Malformed {
                path: tdir.join("task.json"),
                message: format!(
                    "output argument {} has no recorded output (the task did not complete)",
                    a.index
                ),
            }));
        };
        let recorded = args_dump::read_span(&tdir.join(name), a)?;
        let g = a.group.unwrap_or(0) as usize;
        let off = a.group_offset.unwrap_or(0) as usize;
        let buf = groups.get(g).map(Vec::as_slice).unwrap_or_default();
        let replayed = buf
            .get(off..off + recorded.len())
            .ok_or(ReplayError::ShortBuffer {
                task: task.task,
                index: a.index,
            })?;
        debug_assert!(layout.groups.len() > g);
        checks.push(compare_arg(a, replayed, &recorded));
    }
    Ok(checks)
}

fn compare_arg(a: &ArgEntry, got: &[u8], want: &[u8]) -> OutputCheck {
    let dtype = a.dtype_code.and_then(args_dump::abi_to_dtype);
    let shape = a.shape.clone().unwrap_or_default();
    let strides = a.strides.clone().unwrap_or_default();
    let (es, label) = match dtype {
        Some(d) => (d.size_of(), d.name().to_owned()),
        None => (1, "bytes".to_owned()),
    };
    let what = format!("{label} {shape:?}");
    // Byte offsets (in the span) of the view's elements, row-major.
    let numel: u64 = shape.iter().product();
    let mut offsets = Vec::with_capacity(numel as usize);
    let mut idx = vec![0u64; shape.len()];
    for _ in 0..numel {
        let el: u64 = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        offsets.push(el as usize * es);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let mut differing = 0;
    let mut first = None;
    for (i, &o) in offsets.iter().enumerate() {
        let (g, w) = (got.get(o..o + es), want.get(o..o + es));
        if g != w {
            differing += 1;
            if first.is_none() {
                first = Some((i, value(dtype, g), value(dtype, w)));
            }
        }
    }
    let mut elements = offsets.len();
    if differing == 0 && got != want {
        // Bytes of the span outside the view (a strided view's gaps).
        let i = got.iter().zip(want).position(|(x, y)| x != y).unwrap_or(0);
        elements = got.len();
        differing = got.iter().zip(want).filter(|(x, y)| x != y).count();
        first = Some((
            i,
            format!(
                "byte {:#04x} (outside the view)",
                got.get(i).copied().unwrap_or(0)
            ),
            format!("{:#04x}", want.get(i).copied().unwrap_or(0)),
        ));
    }
    OutputCheck {
        index: a.index,
        direction: a.direction.clone(),
        what,
        elements,
        differing,
        first,
    }
}

/// An element's value and bits, for messages.
fn value(dtype: Option<DType>, bytes: Option<&[u8]>) -> String {
    let Some(b) = bytes else {
        return "(missing)".into();
    };
    let hex: String = b.iter().rev().map(|x| format!("{x:02x}")).collect();
    let v = match dtype {
        Some(d @ (DType::F32 | DType::F64 | DType::F16 | DType::BF16)) => {
            Tensor::from_bytes(d, &[1], b.to_vec())
                .map(|t| format!("{:?}", t.to_f64_vec()[0]))
                .unwrap_or_default()
        }
        Some(DType::I8) => (b[0] as i8).to_string(),
        Some(DType::I16) => i16::from_le_bytes([b[0], b[1]]).to_string(),
        Some(DType::I32) => i32::from_le_bytes([b[0], b[1], b[2], b[3]]).to_string(),
        Some(DType::I64) => {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[..8]);
            i64::from_le_bytes(a).to_string()
        }
        Some(DType::U8 | DType::Bool) | None => b[0].to_string(),
    };
    format!("{v} (0x{hex})")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(shape: Vec<u64>, strides: Vec<u64>) -> ArgEntry {
        ArgEntry {
            index: 2,
            direction: "out".into(),
            value: None,
            dtype: Some("f32".into()),
            dtype_code: Some(scene_device::abi::SCENE_DTYPE_F32),
            shape: Some(shape),
            strides: Some(strides),
            offset: Some(0),
            buffer_bytes: None,
            span_bytes: None,
            group: Some(0),
            group_offset: Some(0),
            contiguous: Some(true),
            input: None,
            output: None,
        }
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn the_first_differing_element_is_named_with_both_values() {
        let a = arg(vec![4], vec![1]);
        let c = compare_arg(
            &a,
            &f32s(&[1.0, 2.0, 3.0, 5.0]),
            &f32s(&[1.0, 2.0, 3.0, 4.0]),
        );
        assert_eq!(c.differing, 1);
        assert_eq!(c.elements, 4);
        let (i, got, want) = c.first.unwrap();
        assert_eq!(i, 3);
        assert_eq!(got, "5.0 (0x40a00000)");
        assert_eq!(want, "4.0 (0x40800000)");
        let same = compare_arg(
            &a,
            &f32s(&[1.0, -0.0, 3.0, 4.0]),
            &f32s(&[1.0, 0.0, 3.0, 4.0]),
        );
        assert_eq!(same.differing, 1, "-0 and +0 differ bit for bit");
    }

    /// Issue 27, cause 9: a replay manifest with `group_offset = 2^40`
    /// resized the group buffer to a terabyte and aborted.
    #[test]
    fn a_huge_group_offset_is_a_malformed_dump_not_an_allocation_abort() {
        let dir = tempfile::tempdir().unwrap();
        let tdir = dir.path().join("task0");
        std::fs::create_dir_all(&tdir).unwrap();
        let t = scene_golden::Tensor::from_bytes(DType::F32, &[4], f32s(&[1.0; 4])).unwrap();
        scene_golden::npy::write_npy(&tdir.join("arg0.in.npy"), &t).unwrap();
        let mut a = arg(vec![4], vec![1]);
        a.index = 0;
        a.direction = "in".into();
        a.span_bytes = Some(16);
        a.buffer_bytes = Some(16);
        a.input = Some("arg0.in.npy".into());
        let task = |a: ArgEntry| TaskEntry {
            task: 0,
            complete: true,
            func_id: 0,
            kernel: None,
            core: "aiv".into(),
            kernels: Vec::new(),
            block_num: 1,
            num_args: 1,
            args: vec![a],
        };
        // As recorded: fine.
        let ok = Layout::of(dir.path(), &task(a.clone()), u64::MAX).unwrap();
        assert_eq!(ok.groups[0].0.len(), 16);
        let malformed = |a: ArgEntry, limit: u64| {
            let e = Layout::of(dir.path(), &task(a), limit)
                .err()
                .expect("refused");
            assert!(
                matches!(e, ReplayError::Dump(ArgsDumpError::Malformed { .. })),
                "{e}"
            );
            e.to_string()
        };
        let mut far = a.clone();
        far.group_offset = Some(1 << 40);
        let msg = malformed(far.clone(), u64::MAX);
        assert!(msg.contains("past the recorded buffer"), "{msg}");
        // A buffer size forged to match is still held to the limit.
        far.buffer_bytes = Some((1 << 40) + 16);
        let msg = malformed(far, 1 << 30);
        assert!(msg.contains("more than the limit"), "{msg}");
        let mut wrap = a.clone();
        wrap.group_offset = Some(u64::MAX - 3);
        malformed(wrap, u64::MAX);
        let mut group = a.clone();
        group.group = Some(u32::MAX);
        malformed(group, u64::MAX);
        let mut shape = a.clone();
        shape.shape = Some(vec![1 << 40]);
        malformed(shape, 1 << 30);
        let mut strided = a;
        strided.strides = Some(vec![1 << 20]);
        let msg = malformed(strided, u64::MAX);
        assert!(msg.contains("past its span"), "{msg}");
    }

    #[test]
    fn task_ids_are_listed_as_ranges() {
        assert_eq!(id_ranges(&[0, 1, 2, 3, 4, 5]), "0..=5");
        assert_eq!(id_ranges(&[0, 1, 2, 3, 7]), "0..=3, 7");
        assert_eq!(id_ranges(&[2]), "2");
        assert_eq!(id_ranges(&[]), "");
    }

    #[test]
    fn strided_views_compare_their_elements_then_the_gaps() {
        // Column 0 of a 2x2 matrix: elements at 0 and 2; element 1 is a gap.
        let a = arg(vec![2], vec![2]);
        let want = f32s(&[1.0, 9.0, 3.0]);
        let c = compare_arg(&a, &f32s(&[1.0, 9.0, 7.0]), &want);
        assert_eq!((c.differing, c.elements), (1, 2));
        assert_eq!(c.first.as_ref().unwrap().0, 1);
        let gap = compare_arg(&a, &f32s(&[1.0, 8.0, 3.0]), &want);
        assert!(gap.differing > 0);
        assert!(gap.first.unwrap().1.contains("outside the view"));
    }
}
