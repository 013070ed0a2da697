//! The one resolved configuration of a run.
//!
//! The entry points (the `scene` CLI and the `cargo test` target, in
//! `scene-cli`) read the command line and the environment once and build a
//! [`RunConfig`]; everything below takes its values from here. Nothing in
//! this crate reads an environment variable, so a library user (a bench, a
//! test, another front end) configures a run completely by value.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use scene_device::DeviceList;
use scene_device::worker::WorkerCommand;

use crate::platform::Platform;

/// Default `--case-timeout`: generous for the simulator, finite so a hung
/// kernel never holds a card forever.
pub const DEFAULT_CASE_TIMEOUT: Duration = Duration::from_secs(300);

/// Everything a run is configured with.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Workspace root: compilers run here, with paths relative to it.
    pub root: PathBuf,
    /// The platform entry to build and run for (toolchain, runtime, and
    /// which scenes' cases it selects).
    pub platform: Platform,
    /// Bound on live compiler/linker processes for the whole run.
    pub compile_workers: NonZeroUsize,
    pub devices: DeviceList,
    /// Directory of the card lock files.
    pub lock_dir: PathBuf,
    /// Runtime library to load; `None` = the platform's (the built sim
    /// runtime for the sim platforms).
    pub runtime_lib: Option<PathBuf>,
    /// The simulator runtime carried by the executable, unpacked into the
    /// cache when neither `runtime_lib` nor the platform names one (into a
    /// private temp directory, removed at the end, when there is no cache
    /// dir or it cannot take it); `None`: the one built beside the
    /// executable.
    pub embedded_runtime: Option<scene_device::EmbeddedRuntime>,
    pub lock_timeout: Option<Duration>,
    /// Thread cap for goldens and comparisons.
    pub golden_threads: usize,
    /// Header directory of the runtime ABI (scene_kernel.h, scene_orch.h).
    pub abi_include_dir: PathBuf,
    /// Deadline of one device run; a run past it is stopped and its card
    /// retired (a hung kernel cannot be trusted to stop).
    pub case_timeout: Option<Duration>,
    /// Bound of a level-3 wait for a peer's signal (`SCENE_COMM_TIMEOUT`);
    /// `None` = the runtime's default (30 s in the simulator).
    pub comm_timeout: Option<Duration>,
    /// Extra `key=value;...` options for the runtime's `open`, e.g. `aiv=4`
    /// or test-only fault knobs.
    pub runtime_options: String,
    /// Where (and when) case tensors are dumped.
    pub dumps: DumpPolicy,
    /// Narrate card acquisition and release on stderr.
    pub verbose: bool,
    /// Persistent kernel cache; `None` compiles without one.
    pub cache_dir: Option<PathBuf>,
    /// A remote tier behind the kernel cache (`--cache-remote`,
    /// `SCENE_CACHE_REMOTE`); used only with `cache_dir`.
    pub cache_remote: Option<scene_kernels::cache::RemoteConfig>,
    /// `--hold-card`: the one-pass shape (card(s) taken before compiling,
    /// held until the run ends), kept to measure what two passes save.
    pub hold_card: bool,
    /// How to start the supervised worker process that runs each device
    /// session, so a crashing kernel fails its case instead of the run.
    /// `None` runs sessions in this process (library users, debugging).
    pub device_worker: Option<WorkerCommand>,
    /// Bound on the bytes of one case's tensors (inputs and outputs, each
    /// counted once; outputs once more per run after the first with
    /// `--rounds`/`--warmup`, as every run's outputs are held): a case
    /// above it fails before anything is allocated.
    /// `None` = no bound. The entry points default it to a fraction of
    /// physical memory.
    pub max_case_bytes: Option<u64>,
    /// Python goldens and fixtures: the interpreter, the per-request
    /// deadline.
    pub python: PythonConfig,
    /// Keep computed goldens in `<cache_dir>/goldens` and reuse them
    /// (`--no-golden-cache` turns it off; no `cache_dir`, no golden cache).
    pub golden_cache: bool,
    /// `--rounds N`: measured runs of each case's device stage, in one
    /// session on one card hold; every round's outputs are compared.
    pub rounds: u32,
    /// `--warmup K`: runs before the measured rounds, compared but not timed.
    pub warmup: u32,
    // ---- issue 19: traces and dependency graphs (crate::observe::trace) ----
    /// `--trace DIR`: write each case's swimlane trace (trace-event JSON)
    /// to `DIR/<scene>/<case>.trace.json`.
    pub trace_dir: Option<PathBuf>,
    /// `--dep-graph DIR`: write each case's task graph to
    /// `DIR/<scene>/<case>.dot` (+ `.svg` with Graphviz, `.deps.json`).
    pub dep_graph_dir: Option<PathBuf>,
    /// `--dump-args[=DIR]`: record every task's arguments of each case
    /// under `DIR/<scene>/<case>/` (see `args_dump`); `None` = off.
    pub args_dump: Option<PathBuf>,
    /// Cancels the run (the CLI's signal handler does, on SIGINT/SIGTERM):
    /// no compiler, case or card wait is started once it is cancelled,
    /// running compilers and workers (device, Python) are terminated, and
    /// the stages unwind normally, so temp dirs go and card locks are
    /// released. Cases that did not finish are left out of the report.
    pub cancel: scene_util::Cancel,
}

/// When a case's tensors are written as `.npy` files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpPolicy {
    /// `--dump DIR`: every case, passing or not, under `DIR/<scene>/<case>/`.
    pub every_case: Option<PathBuf>,
    /// Where a failing case is dumped when `every_case` is unset.
    pub failures: PathBuf,
}

impl RunConfig {
    /// The Python configuration as every Python worker of the run takes
    /// it: managed environments in `<cache dir>/python` unless a place is
    /// given.
    pub fn python_config(&self) -> PythonConfig {
        let mut python = self.python.clone();
        if python.env_root.is_none() {
            python.env_root = self.cache_dir.as_ref().map(|d| d.join("python"));
        }
        python
    }

    /// A configuration with the harness defaults for a workspace at `root`:
    /// card `0`, the default lock directory, the kernel cache under
    /// `<root>/target/scene-cache`, failure dumps under
    /// `<root>/target/scene-dumps`, compile workers = available parallelism.
    pub fn new(root: PathBuf, platform: Platform) -> Self {
        let target = root.join("target");
        Self {
            platform,
            compile_workers: std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
            devices: DeviceList::resolve(None, None, None).expect("the default card list is valid"),
            lock_dir: scene_device::default_lock_dir(),
            runtime_lib: None,
            embedded_runtime: None,
            lock_timeout: None,
            golden_threads: scene_golden::reference::default_thread_cap(),
            abi_include_dir: scene_device::include_dir(),
            case_timeout: Some(DEFAULT_CASE_TIMEOUT),
            comm_timeout: None,
            runtime_options: String::new(),
            dumps: DumpPolicy {
                every_case: None,
                failures: target.join("scene-dumps"),
            },
            verbose: false,
            cache_dir: Some(target.join("scene-cache")),
            cache_remote: None,
            hold_card: false,
            device_worker: None,
            max_case_bytes: None,
            python: PythonConfig::default(),
            golden_cache: true,
            rounds: 1,
            warmup: 0,
            trace_dir: None,
            dep_graph_dir: None,
            args_dump: None,
            cancel: scene_util::Cancel::default(),
            root,
        }
    }
}

// ---- Python goldens (crate::golden::python) --------------------------------------
// Here, not in `python`, so the configuration sits below every stage.

/// Default deadline of one Python request (`SCENE_GOLDEN_TIMEOUT`).
pub const DEFAULT_GOLDEN_TIMEOUT: Duration = Duration::from_secs(300);

/// How Python goldens run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PythonConfig {
    /// The interpreter (`SCENE_PYTHON`, default `python3` on `PATH`).
    pub python: PathBuf,
    /// Deadline of one request (`generate_inputs` or `compute_golden` of
    /// one case); past it the worker is killed and the case fails.
    pub timeout: Duration,
    /// Whether a managed environment may replace `python` when it lacks
    /// a scene's requirements (`SCENE_PYTHON_PROVISION`, `--no-provision`;
    /// [`Provision::Given`] when `SCENE_PYTHON` named it).
    pub provision: Provision,
    /// `uv`, when it is on `PATH`: environments are built with it.
    pub uv: Option<PathBuf>,
    /// Where managed environments live; `None` = `<cache dir>/python`
    /// (no cache directory: none are made).
    pub env_root: Option<PathBuf>,
}

impl Default for PythonConfig {
    fn default() -> Self {
        Self {
            python: PathBuf::from("python3"),
            timeout: DEFAULT_GOLDEN_TIMEOUT,
            provision: Provision::Auto,
            uv: None,
            env_root: None,
        }
    }
}

/// Whether the harness may make an environment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Provision {
    /// When the interpreter lacks the requirements (`SCENE_PYTHON_PROVISION=auto`).
    #[default]
    Auto,
    /// Never (`SCENE_PYTHON_PROVISION=never`, `--no-provision`): a missing
    /// requirement fails the Python cases, saying how to provision.
    Never,
    /// The interpreter was named (`SCENE_PYTHON`): used as it is, never
    /// probed or replaced.
    Given,
}

/// A `SCENE_PYTHON_PROVISION` value that is not a policy.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not one of auto, never")]
pub struct UnknownProvision(pub String);

impl std::str::FromStr for Provision {
    type Err = UnknownProvision;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "auto" => Ok(Self::Auto),
            "never" => Ok(Self::Never),
            _ => Err(UnknownProvision(s.to_owned())),
        }
    }
}

/// `p` with `.` components dropped and each `..` taking away the component
/// before it (no file system access: the places may not exist here).
pub(crate) fn lexical(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                // `/..` is `/`.
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(c),
            },
            c => out.push(c),
        }
    }
    out
}

/// `dir` relative to `root` when it is under it (compilers run in the root
/// and are given root-relative paths), else as it is.
pub(crate) fn root_relative(root: &Path, dir: &Path) -> PathBuf {
    dir.strip_prefix(root)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| dir.to_path_buf())
}
