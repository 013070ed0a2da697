//! Python goldens and fixtures: a worker process per scene.
//!
//! A scene may name a Python file for its golden (`golden = { python =
//! "golden.py" }`, defining `compute_golden(tensors, params)`) and/or its
//! inputs (`fixtures = { python = "golden.py" }`, defining
//! `generate_inputs(params)`), as simpler's scene tests do. The first such
//! case of a scene starts its worker: `python3 -u -c <driver.py>` (the
//! driver is embedded here), which answers JSON requests on stdin/stdout,
//! one per line, each reply carrying its request's id; tensors travel as
//! `.npy` files in a per-run temporary directory (in `/dev/shm` when there
//! is one), never as text.
//!
//! The same file may define comparisons (`compare = { python = "FUNCTION"
//! }`): [`PythonRunner::compare`] runs one on an output after the device
//! stage, in the same worker (the `compare` request).
//!
//! Each scene has its own worker, so its own `sys.modules` and `sys.path`:
//! two scenes with a `helper.py` each get each their own (a purge of
//! `sys.modules` between scenes would leave C-extension state, monkey
//! patches and module-level caches behind). At most [`MAX_WORKERS`] are
//! alive at once; the least recently used one is stopped for a new one.
//! Every successful reply lists the files the scene's code was loaded
//! from or read ([`Imported`]), which the golden cache digests.
//!
//! A Python exception fails its case (with the traceback); the worker goes
//! on. A request that takes longer than [`PythonConfig::timeout`] kills the
//! worker and fails its case; the next request starts a new one, as does a
//! worker that died. No python3, or no numpy, fails the Python scenes only,
//! with one line saying what to install.
//!
//! Unless the interpreter was named (`SCENE_PYTHON`), the `python3` found
//! is probed once per requirement set (a scene's `requirements`, default
//! `numpy`); when it lacks something, the run uses a managed virtual
//! environment instead ([`provision`]), made once and cached. There is a
//! worker per interpreter in use.

pub mod compat;
pub mod identity;
pub mod provision;
mod testfile;
mod versions;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use scene_golden::{DType, Tensor, npy};
use scene_util::{Cancel, cancel::CancelChild};
use serde_json::{Value as Json, json};

pub use crate::config::{DEFAULT_GOLDEN_TIMEOUT, PythonConfig};
use crate::golden::GoldenOutputs;
use crate::scene::expr::Num;
use crate::scene::{Case, Scene};
use provision::{EnvCache, Installer, ManagedEnv, Probe, Provision, requirement_set, shell_words};

/// The driver script the worker runs.
pub const DRIVER: &str = include_str!("driver.py");

/// Workers alive at once (one per scene); more scenes take turns.
pub const MAX_WORKERS: usize = 4;

/// The least time the interpreter gets to start and import numpy (and
/// torch) before its hello: startup is not the user's golden, and on a
/// loaded machine it alone can take longer than a short golden timeout.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a Python request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PyError {
    /// No usable interpreter (no python3, no numpy): every Python scene
    /// fails with this one line.
    #[error("{0}")]
    Unavailable(String),
    /// The user's code raised, or returned something wrong.
    #[error("{0}")]
    Failed(String),
    #[error(
        "no answer within {secs} s (SCENE_GOLDEN_TIMEOUT); the Python worker was killed and will be restarted"
    )]
    Timeout { secs: f64 },
    #[error("the Python worker died ({0}); it will be restarted")]
    Died(String),
    /// Files of the exchange directory.
    #[error("{0}")]
    Exchange(String),
    /// The run was cancelled (SIGINT, SIGTERM) before the request was
    /// answered, or before its interpreter was ready: the run's outcome
    /// is the interrupt, not this case's.
    #[error("interrupted: the run was cancelled")]
    Interrupted,
}

impl PyError {
    /// A timeout or a dead worker, prefixed with whose request it was
    /// (`<file> (<scene>::<case>)`); other errors are worded already.
    fn naming(self, who: &str) -> PyError {
        match self {
            PyError::Timeout { .. } | PyError::Died(_) => PyError::Failed(format!("{who}: {self}")),
            e => e,
        }
    }
}

/// The interpreter's versions, as the worker reported them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versions {
    pub python: String,
    pub numpy: String,
    pub torch: Option<String>,
    /// Every installed distribution, `name==version`, sorted.
    pub packages: Vec<String>,
}

/// What a scene's Python was made of when it answered: every file outside
/// the interpreter's own directories it was loaded from (`sys.modules`) or
/// opened for reading, and what it loaded that cannot be digested.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Imported {
    /// Real paths, sorted; the run's exchange files left out.
    pub files: Vec<PathBuf>,
    /// Why the golden cannot be cached (a C extension, a zip import).
    pub opaque: Vec<String>,
}

/// What `generate_inputs` gave: the tensors it returned (the others take
/// their `scene.toml` init) and the scalars it returned.
#[derive(Debug)]
pub struct PyInputs {
    pub tensors: Vec<(String, Tensor)>,
    pub scalars: Vec<(String, Json)>,
}

/// One running worker process.
struct Worker {
    /// In its own process group, registered with the run's [`Cancel`]:
    /// cancelling terminates it (a terminal's Ctrl-C never reaches it, so
    /// numpy prints no `KeyboardInterrupt`).
    child: CancelChild,
    stdin: ChildStdin,
    lines: Receiver<String>,
    versions: Versions,
    /// The id of the next request; a reply must carry its request's.
    next_id: u64,
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Our own child, by its handle: stop it and reap it. When `python`
        // is a wrapper that runs the interpreter as its child (a pyenv
        // shim), the interpreter sees its parent go and exits by itself
        // (the driver's watchdog).
        let _ = self.child.kill();
    }
}

fn install_hint(config: &PythonConfig, python: &Path) -> String {
    let mut hint = format!(
        "Python goldens need python3 with numpy: install them (`apt-get install python3-numpy`, or `{} -m pip install numpy`), or point SCENE_PYTHON at an interpreter that has them",
        python.display()
    );
    if config.provision == Provision::Never {
        hint.push_str(
            "; or let the harness provision a managed environment with them in the cache: \
             unset SCENE_PYTHON_PROVISION=never / drop --no-provision",
        );
    }
    hint
}

/// The configured interpreter, as it is.
fn given_interpreter(config: &PythonConfig) -> Interpreter {
    Interpreter {
        python: config.python.clone(),
        env: None,
    }
}

impl Worker {
    fn start(config: &PythonConfig, python: &Path, cancel: &Cancel) -> Result<Worker, PyError> {
        if cancel.is_cancelled() {
            return Err(PyError::Interrupted);
        }
        let mut child = cancel
            .spawn(
                Command::new(python)
                    .args(["-u", "-c", DRIVER])
                    .env("PYTHONDONTWRITEBYTECODE", "1")
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit()),
            )
            .map_err(|e| {
                PyError::Unavailable(format!(
                    "cannot start `{}`: {e}. {}",
                    python.display(),
                    install_hint(config, python)
                ))
            })?;
        let pipes = child.child_mut();
        let (Some(stdin), Some(stdout)) = (pipes.stdin.take(), pipes.stdout.take()) else {
            let _ = child.kill();
            return Err(PyError::Died("no pipes to the worker".into()));
        };
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut worker = Worker {
            child,
            stdin,
            lines,
            versions: Versions {
                python: String::new(),
                numpy: String::new(),
                torch: None,
                packages: Vec::new(),
            },
            next_id: 1,
        };
        let hello = match worker.receive(config.timeout.max(STARTUP_TIMEOUT)) {
            Ok(h) => h,
            // Terminated by the run's cancel while it started.
            Err(_) if cancel.is_cancelled() => return Err(PyError::Interrupted),
            Err(PyError::Died(why)) => {
                return Err(PyError::Unavailable(format!(
                    "`{}` exited before answering ({why}). {}",
                    python.display(),
                    install_hint(config, python)
                )));
            }
            Err(e) => return Err(e),
        };
        if let Some(err) = hello.get("error").and_then(Json::as_str) {
            return Err(PyError::Unavailable(format!(
                "`{}`: {err}. {}",
                python.display(),
                install_hint(config, python)
            )));
        }
        let text = |k: &str| hello.get(k).and_then(Json::as_str).map(str::to_owned);
        worker.versions = Versions {
            python: text("python").unwrap_or_default(),
            numpy: text("numpy").unwrap_or_default(),
            torch: text("torch"),
            packages: hello
                .get("packages")
                .and_then(Json::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Json::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        };
        Ok(worker)
    }

    fn receive(&mut self, timeout: Duration) -> Result<Json, PyError> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => serde_json::from_str(&line).map_err(|e| {
                PyError::Died(format!("it wrote `{line}`, which is not a reply: {e}"))
            }),
            Err(RecvTimeoutError::Timeout) => Err(PyError::Timeout {
                secs: timeout.as_secs_f64(),
            }),
            Err(RecvTimeoutError::Disconnected) => {
                // Whatever the golden forked dies with the worker (the group
                // id is still the unreaped worker's, so not recycled).
                self.child.exit_watch().wait();
                self.child.kill_group();
                let status = self
                    .child
                    .wait()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|e| format!("status unknown: {e}"));
                Err(PyError::Died(status))
            }
        }
    }

    /// Sends `req` with the next id and waits for the reply to it; a reply
    /// to anything else is a protocol error (the worker is then restarted).
    fn request(&mut self, req: &Json, timeout: Duration) -> Result<Json, PyError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut req = req.clone();
        if let Some(obj) = req.as_object_mut() {
            obj.insert("id".into(), json!(id));
        }
        let mut line = req.to_string();
        line.push('\n');
        if let Err(e) = self
            .stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
        {
            let status = self.child.kill().map(|s| s.to_string()).unwrap_or_default();
            return Err(PyError::Died(format!("writing to it: {e}; {status}")));
        }
        let reply = self.receive(timeout)?;
        match reply.get("id").and_then(Json::as_u64) {
            Some(got) if got == id => Ok(reply),
            got => Err(PyError::Died(format!(
                "protocol error: a reply to request {} while waiting for request {id} \
                 (a forked child or a write to the reply channel?)",
                got.map_or_else(|| "without an id".to_string(), |g| g.to_string())
            ))),
        }
    }
}

/// A scene's worker slot: which interpreter, and when it was last used.
struct Slot {
    python: PathBuf,
    used: u64,
    worker: Option<Worker>,
}

/// The workers of a run, one per scene, and the interpreters that cannot
/// start one.
#[derive(Default)]
struct Workers {
    by_scene: HashMap<PathBuf, Slot>,
    unavailable: HashMap<PathBuf, String>,
    clock: u64,
}

/// The interpreter a scene's Python runs in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interpreter {
    pub python: PathBuf,
    /// The managed environment it belongs to, when one was provisioned.
    pub env: Option<ManagedEnv>,
}

/// Which interpreter serves which requirement set, worked out once per
/// run: probes and environments, failures included (a failed install is
/// not retried for every case).
#[derive(Default)]
struct Resolved {
    by_requirements: HashMap<Vec<String>, Result<Interpreter, PyError>>,
    /// The probe of the interpreter a managed environment was made from,
    /// by requirement set (to repair it).
    probes: HashMap<Vec<String>, Probe>,
}

/// The Python side of a run: starts a worker per interpreter on first use,
/// restarts it after a timeout or a crash, and removes the exchange
/// directory at the end.
pub struct PythonRunner {
    config: PythonConfig,
    resolved: Mutex<Resolved>,
    workers: Mutex<Workers>,
    /// What each case's last Python call was made of, by `scene::case`.
    imported: Mutex<HashMap<String, Imported>>,
    dir: OnceLock<Result<tempfile::TempDir, PyError>>,
    next: AtomicU64,
    identities: Mutex<HashMap<PathBuf, String>>,
    /// [`Self::versions`], by interpreter.
    versions: Mutex<HashMap<PathBuf, Versions>>,
    cancel: Cancel,
}

impl std::fmt::Debug for PythonRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PythonRunner")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Which worker a request goes to: its slot key, the requirement set its
/// interpreter must have, and a name for messages.
struct WorkerFor<'a> {
    key: PathBuf,
    requirements: &'a [String],
    name: &'a str,
}

impl<'a> WorkerFor<'a> {
    /// A scene's own worker; the scenes made from the original's test
    /// files share one per requirement set, as the original's pytest
    /// session shares its process (so torch is imported once).
    fn scene(scene: &'a Scene) -> Self {
        match &scene.origin {
            Some(_) => Self::test_files(&scene.python.requirements, &scene.name),
            None => WorkerFor {
                key: scene.dir.join(&scene.name),
                requirements: &scene.python.requirements,
                name: &scene.name,
            },
        }
    }

    /// The worker the original's test files of one requirement set share
    /// (describing them and serving the scenes made from them).
    fn test_files(requirements: &'a [String], name: &'a str) -> Self {
        WorkerFor {
            key: PathBuf::from(format!("simpler-tests:{}", requirements.join(","))),
            requirements,
            name,
        }
    }
}

/// `<scene>::<case>` and the file, for messages.
fn whose(scene: &Scene, case: &Case, file: &Path) -> String {
    format!("{} ({}::{})", file.display(), scene.name, case.name)
}

impl PythonRunner {
    pub fn new(config: PythonConfig) -> Self {
        Self {
            config,
            resolved: Mutex::new(Resolved::default()),
            workers: Mutex::new(Workers::default()),
            imported: Mutex::new(HashMap::new()),
            dir: OnceLock::new(),
            next: AtomicU64::new(0),
            identities: Mutex::new(HashMap::new()),
            versions: Mutex::new(HashMap::new()),
            cancel: Cancel::default(),
        }
    }

    /// Starts the worker registered with `cancel` (terminated, and never
    /// restarted, once it is cancelled).
    pub fn with_cancel(mut self, cancel: Cancel) -> Self {
        self.cancel = cancel;
        self
    }

    pub fn config(&self) -> &PythonConfig {
        &self.config
    }

    /// The interpreter for `scene`'s Python: `SCENE_PYTHON` as it is;
    /// else the `python3` found when it has the scene's requirements; else
    /// a managed environment (unless provisioning is off).
    pub fn interpreter(&self, scene: &Scene) -> Result<Interpreter, PyError> {
        self.interpreter_for(&WorkerFor::scene(scene))
    }

    /// The interpreter for `who`'s requirements (see [`Self::interpreter`]).
    fn interpreter_for(&self, who: &WorkerFor<'_>) -> Result<Interpreter, PyError> {
        let given = || given_interpreter(&self.config);
        // Named, or provisioning off: today's behaviour, not even a probe.
        if self.config.provision != Provision::Auto {
            return Ok(given());
        }
        let reqs = requirement_set(who.requirements);
        let mut resolved = self.resolved.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = resolved.by_requirements.get(&reqs) {
            return r.clone();
        }
        let result = match provision::probe_with(&self.config.python, &reqs, &self.cancel) {
            Err(_) if self.cancel.is_cancelled() => Err(PyError::Interrupted),
            // No interpreter at all: the worker's start says so as before.
            Err(_) => Ok(given()),
            Ok(p) if p.missing.is_empty() => Ok(given()),
            Ok(p) => {
                let env = self.provisioned(who.name, &p, &reqs, None);
                resolved.probes.insert(reqs.clone(), p);
                env
            }
        };
        resolved.by_requirements.insert(reqs, result.clone());
        result
    }

    /// `interp`, whose managed environment's interpreter did not start:
    /// when the environment's files are not what was installed,
    /// it is rebuilt (one warning naming what was wrong) and the new
    /// interpreter returned; `None` when it is intact (the failure is not
    /// the environment's) or is no managed one.
    fn repaired(&self, who: &WorkerFor<'_>, interp: &Interpreter) -> Option<Interpreter> {
        let broken = interp.env.as_ref()?;
        let reqs = requirement_set(who.requirements);
        let mut resolved = self.resolved.lock().unwrap_or_else(|p| p.into_inner());
        let probe = resolved.probes.get(&reqs)?.clone();
        let result = self.provisioned(who.name, &probe, &reqs, Some(broken));
        match &result {
            Ok(fixed) if fixed.env.as_ref().map(|e| &e.built) == Some(&broken.built) => None,
            _ => {
                resolved.by_requirements.insert(reqs, result.clone());
                result.ok()
            }
        }
    }

    /// A managed environment for `probe`'s interpreter and `reqs`, or the
    /// one-line reason the scene's Python cannot run
    /// ([`PyError::Unavailable`]).
    fn provisioned(
        &self,
        for_whom: &str,
        probe: &Probe,
        reqs: &[String],
        broken: Option<&ManagedEnv>,
    ) -> Result<Interpreter, PyError> {
        let python = self.config.python.display().to_string();
        let named = if python == probe.executable {
            python.clone()
        } else {
            format!("{python} ({})", probe.executable)
        };
        let fix = format!("{} -m pip install {}", probe.executable, shell_words(reqs));
        let lacks = probe.missing.join(", ");
        let root = match &self.config.env_root {
            Some(root) => root,
            None => {
                return Err(PyError::Unavailable(format!(
                    "`{named}` lacks {lacks}, and there is no cache directory to provision an environment in; \
                     fix: `{fix}`, or point SCENE_PYTHON at an interpreter that has it"
                )));
            }
        };
        let installer = Installer {
            uv: self.config.uv.clone(),
        };
        let cache = EnvCache::new(root.clone());
        let started = Instant::now();
        let mut built = false;
        let progress = |dir: &Path, damage: Option<&provision::EnvDamage>| {
            built = true;
            match (damage, broken) {
                (Some(damage), Some(_)) => eprintln!(
                    "warning: managed Python environment {} is damaged ({damage}; found when its interpreter would not start); rebuilding it",
                    dir.display()
                ),
                (Some(damage), None) => eprintln!(
                    "warning: managed Python environment {} is damaged ({damage}); rebuilding it",
                    dir.display()
                ),
                (None, _) => {}
            }
            eprintln!(
                "provisioning Python environment for {}: {} (once; cached in {})",
                for_whom,
                installer.describe(&python, reqs),
                dir.display()
            );
        };
        let made = match broken {
            None => cache
                .ensure(probe, reqs, &installer, &self.cancel, progress)
                .map(Some),
            Some(env) => cache.repair(probe, reqs, &installer, &self.cancel, env, progress),
        };
        let env = match (made, broken) {
            (Ok(Some(env)), _) => env,
            // `repair` found it intact: it stays (the interpreter's failure
            // is not the environment's).
            (Ok(None), Some(env)) => env.clone(),
            (Ok(None), None) => return Err(PyError::Died("no environment".into())),
            (Err(provision::ProvisionError::Interrupted), _) => return Err(PyError::Interrupted),
            (Err(e), _) => {
                return Err(PyError::Unavailable(format!(
                    "`{named}` lacks {lacks} and a managed environment for it could not be made: {e}. \
                     Fix: `{fix}` (or point SCENE_PYTHON at an interpreter that has it; \
                     SCENE_PYTHON_PROVISION=never stops these attempts)"
                )));
            }
        };
        if built {
            eprintln!(
                "provisioned Python environment in {:.1} s: {} ({})",
                started.elapsed().as_secs_f64(),
                env.pinned(),
                scene_util::human_size(provision::dir_size(&env.dir))
            );
        }
        Ok(Interpreter {
            python: env.python.clone(),
            env: Some(env),
        })
    }

    /// The managed environments this run used, by directory.
    pub fn environments(&self) -> Vec<ManagedEnv> {
        let resolved = self.resolved.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<ManagedEnv> = Vec::new();
        for env in resolved
            .by_requirements
            .values()
            .filter_map(|r| r.as_ref().ok()?.env.clone())
        {
            if !out.iter().any(|e| e.dir == env.dir) {
                out.push(env);
            }
        }
        out.sort_by(|a, b| a.dir.cmp(&b.dir));
        out
    }

    /// Runs `f` on `scene`'s own worker, starting it if needed (stopping
    /// the least recently used one when [`MAX_WORKERS`] are alive); a
    /// worker that timed out, died or broke the protocol is dropped
    /// (killed) so the next call starts a new one.
    fn with_worker<T>(
        &self,
        scene: &Scene,
        f: impl FnOnce(&mut Worker) -> Result<T, PyError>,
    ) -> Result<T, PyError> {
        self.with_worker_for(&WorkerFor::scene(scene), f)
    }

    /// [`Self::with_worker`] for the worker `who` describes.
    fn with_worker_for<T>(
        &self,
        who: &WorkerFor<'_>,
        f: impl FnOnce(&mut Worker) -> Result<T, PyError>,
    ) -> Result<T, PyError> {
        let interp = self.interpreter_for(who)?;
        let mut python = interp.python.clone();
        let mut guard = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        let workers = &mut *guard;
        if let Some(why) = workers.unavailable.get(&python) {
            return Err(PyError::Unavailable(why.clone()));
        }
        workers.clock += 1;
        let now = workers.clock;
        let key = who.key.clone();
        // Another interpreter for the same scene (a changed requirement
        // set cannot happen within a run, but a slot never serves two).
        if workers
            .by_scene
            .get(&key)
            .is_some_and(|s| s.python != python)
        {
            workers.by_scene.remove(&key);
        }
        let has_worker = workers
            .by_scene
            .get(&key)
            .is_some_and(|s| s.worker.is_some());
        if !has_worker {
            let alive = workers
                .by_scene
                .values()
                .filter(|s| s.worker.is_some())
                .count();
            if alive >= MAX_WORKERS
                && let Some(oldest) = workers
                    .by_scene
                    .iter()
                    .filter(|(_, s)| s.worker.is_some())
                    .min_by_key(|(_, s)| s.used)
                    .map(|(k, _)| k.clone())
            {
                // Dropping it stops and reaps it.
                workers.by_scene.remove(&oldest);
            }
            let mut started = Worker::start(&self.config, &python, &self.cancel);
            // A managed environment whose interpreter does not start may
            // be damaged in a way the cheap check of every use (sizes,
            // links) does not see: its files' digests decide, and a
            // damaged one is rebuilt and tried once more.
            if let Err(PyError::Unavailable(_)) = &started
                && let Some(fixed) = self.repaired(who, &interp)
            {
                python = fixed.python;
                started = Worker::start(&self.config, &python, &self.cancel);
            }
            match started {
                Ok(w) => {
                    workers.by_scene.insert(
                        key.clone(),
                        Slot {
                            python: python.clone(),
                            used: now,
                            worker: Some(w),
                        },
                    );
                }
                Err(PyError::Unavailable(why)) => {
                    workers.unavailable.insert(python, why.clone());
                    return Err(PyError::Unavailable(why));
                }
                Err(e) => return Err(e),
            }
        }
        let Some(slot) = workers.by_scene.get_mut(&key) else {
            return Err(PyError::Died("not running".into()));
        };
        slot.used = now;
        let Some(worker) = slot.worker.as_mut() else {
            return Err(PyError::Died("not running".into()));
        };
        let result = f(worker);
        if matches!(result, Err(PyError::Timeout { .. } | PyError::Died(_))) {
            slot.worker = None;
        }
        result
    }

    /// What `scene::case`'s last successful Python call (fixtures or
    /// golden) was made of, taken (so a later call of the case cannot see
    /// a stale one).
    pub fn take_imported(&self, scene: &Scene, case: &Case) -> Option<Imported> {
        let mut m = self.imported.lock().unwrap_or_else(|p| p.into_inner());
        m.remove(&format!("{}::{}", scene.name, case.name))
    }

    /// Keeps what `reply` says the scene's Python was made of, for the
    /// golden cache (the run's exchange files left out).
    fn note_imported(&self, scene: &Scene, case: &Case, reply: &Json) {
        let exchange = self
            .dir
            .get()
            .and_then(|d| d.as_ref().ok())
            .map(|d| d.path().to_path_buf());
        let strings = |k: &str| -> Vec<String> {
            reply
                .get(k)
                .and_then(Json::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Json::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut opaque = strings("opaque");
        if reply.get("files").and_then(Json::as_array).is_none() {
            opaque.push("the worker did not say which files it imported".into());
        }
        let files = strings("files")
            .into_iter()
            .map(PathBuf::from)
            .filter(|p| exchange.as_ref().is_none_or(|e| !p.starts_with(e)))
            .collect();
        let mut m = self.imported.lock().unwrap_or_else(|p| p.into_inner());
        m.insert(
            format!("{}::{}", scene.name, case.name),
            Imported { files, opaque },
        );
    }

    /// The code identity of a Python file: its bytes and those of the local
    /// modules it imports (see [`identity`]), memoised for the run.
    pub fn code_identity(&self, file: &Path, scenes_root: &Path) -> Result<String, PyError> {
        let mut memo = self.identities.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(id) = memo.get(file) {
            return Ok(id.clone());
        }
        let id = identity::code_identity(file, scenes_root)
            .map_err(|e| PyError::Exchange(format!("{}: {e}", file.display())))?;
        memo.insert(file.to_path_buf(), id.clone());
        Ok(id)
    }

    /// A fresh request directory in the run's exchange directory.
    fn request_dir(&self) -> Result<RequestDir, PyError> {
        let base = self
            .dir
            .get_or_init(|| {
                let shm = Path::new("/dev/shm");
                let mut b = tempfile::Builder::new();
                b.prefix("scene-python-");
                if shm.is_dir() {
                    b.tempdir_in(shm).or_else(|_| b.tempdir())
                } else {
                    b.tempdir()
                }
                .map_err(|e| {
                    PyError::Exchange(format!("cannot create the Python exchange directory: {e}"))
                })
            })
            .as_ref()
            .map_err(PyError::clone)?;
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = base.path().join(format!("r{n}"));
        std::fs::create_dir(&path)
            .map_err(|e| PyError::Exchange(format!("{}: {e}", path.display())))?;
        Ok(RequestDir(path))
    }

    /// Turns a reply into `Ok(reply)` or the case's error.
    fn check_reply(reply: Json, who: &str) -> Result<Json, PyError> {
        if reply.get("ok").and_then(Json::as_bool) == Some(true) {
            return Ok(reply);
        }
        let error = reply
            .get("error")
            .and_then(Json::as_str)
            .unwrap_or("failed without a message");
        let mut msg = format!("{who}: {error}");
        if let Some(tb) = reply.get("traceback").and_then(Json::as_str) {
            msg.push('\n');
            msg.push_str(tb.trim_end());
        }
        Err(PyError::Failed(msg))
    }

    /// `generate_inputs(params)` of `file` for one case: the tensors it
    /// returned, checked against the case's dtypes and shapes, and its
    /// scalars.
    pub fn generate_inputs(
        &self,
        scene: &Scene,
        case: &Case,
        file: &Path,
        seed: u64,
    ) -> Result<PyInputs, PyError> {
        let who = whose(scene, case, file);
        let dir = self.request_dir()?;
        let specs: Vec<Json> = scene
            .tensors
            .iter()
            .zip(&case.tensors)
            .enumerate()
            .map(|(i, (t, r))| {
                json!({
                    "name": t.name,
                    "dtype": r.dtype.name(),
                    "shape": r.shape,
                    "path": dir.0.join(format!("t{i}.npy")),
                })
            })
            .collect();
        let mut req = json!({
            "op": "inputs",
            "file": file,
            "sys_path": sys_path(scene),
            "seed": seed,
            // The `[derived]` ones included: a param like the others, as
            // Rust goldens see it (`ctx.value`); the keys hash them too.
            "params": case.values,
            "tensors": specs,
        });
        testfile::with_origin(&mut req, scene, Some(case));
        let reply = self
            .with_worker(scene, |w| w.request(&req, self.config.timeout))
            .map_err(|e| e.naming(&who))?;
        let reply = Self::check_reply(reply, &who)?;
        self.note_imported(scene, case, &reply);
        let written: Vec<&str> = reply
            .get("written")
            .and_then(Json::as_array)
            .map(|a| a.iter().filter_map(Json::as_str).collect())
            .unwrap_or_default();
        let mut tensors = Vec::new();
        for (i, (t, r)) in scene.tensors.iter().zip(&case.tensors).enumerate() {
            if !written.contains(&t.name.as_str()) {
                continue;
            }
            let tensor =
                read_tensor(&dir.0.join(format!("t{i}.npy")), r.dtype, &r.shape).map_err(|e| {
                    PyError::Failed(format!("{who}: generate_inputs tensor `{}`: {e}", t.name))
                })?;
            tensors.push((t.name.clone(), tensor));
        }
        let scalars = reply
            .get("scalars")
            .and_then(Json::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        Ok(PyInputs { tensors, scalars })
    }

    /// `compute_golden(tensors, params)` of `file` on the case's inputs:
    /// the expected value of every output tensor.
    pub fn compute_golden(
        &self,
        scene: &Scene,
        case: &Case,
        file: &Path,
        inputs: &[(String, Tensor)],
    ) -> Result<GoldenOutputs, PyError> {
        let who = whose(scene, case, file);
        // A failed call must not leave the fixtures' record to be taken
        // for the golden's.
        drop(self.take_imported(scene, case));
        let dir = self.request_dir()?;
        let mut tensors = Vec::new();
        for (i, (name, t)) in inputs.iter().enumerate() {
            let path = dir.0.join(format!("in{i}.npy"));
            npy::write_npy(&path, t)
                .map_err(|e| PyError::Exchange(format!("{}: {e}", path.display())))?;
            tensors.push(json!({
                "name": name,
                "dtype": t.dtype().name(),
                "shape": t.shape(),
                "path": path,
            }));
        }
        let outputs: Vec<(usize, &str, DType, &[usize])> = scene
            .tensors
            .iter()
            .zip(&case.tensors)
            .enumerate()
            .filter(|(_, (t, _))| t.direction.is_output())
            .map(|(i, (t, r))| (i, t.name.as_str(), r.dtype, r.shape.as_slice()))
            .collect();
        let out_path = |i: usize| dir.0.join(format!("out{i}.npy"));
        let out_specs: Vec<Json> = outputs
            .iter()
            .map(|&(i, name, dtype, shape)| {
                json!({"name": name, "dtype": dtype.name(), "shape": shape, "path": out_path(i)})
            })
            .collect();
        let scalars: serde_json::Map<String, Json> = scene
            .scalars
            .iter()
            .zip(&case.scalars)
            .map(|(s, v)| {
                let v = match *v {
                    Num::Int(i) => json!(i),
                    Num::Float(f) => json!(f),
                };
                (s.name.clone(), v)
            })
            .collect();
        let mut req = json!({
            "op": "golden",
            "file": file,
            "sys_path": sys_path(scene),
            // The `[derived]` ones included: a param like the others, as
            // Rust goldens see it (`ctx.value`); the keys hash them too.
            "params": case.values,
            "tensors": tensors,
            "scalars": scalars,
            "outputs": out_specs,
            "seed": crate::golden::stage::python_seed(scene, case),
        });
        testfile::with_origin(&mut req, scene, Some(case));
        let reply = self
            .with_worker(scene, |w| w.request(&req, self.config.timeout))
            .map_err(|e| e.naming(&who))?;
        let reply = Self::check_reply(reply, &who)?;
        self.note_imported(scene, case, &reply);
        let mut golden = GoldenOutputs::new();
        for (i, name, dtype, shape) in outputs {
            let t = read_tensor(&out_path(i), dtype, shape)
                .map_err(|e| PyError::Failed(format!("{who}: golden output `{name}`: {e}")))?;
            golden = golden.with(name, t);
        }
        Ok(golden)
    }
}

/// What a Python comparison said of one output: its verdict and its
/// detail (for the report either way).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyVerdict {
    pub passed: bool,
    pub detail: String,
}

impl PythonRunner {
    /// `function(name, actual, expected, params)` of `file` on one output
    /// of a case (`params`: the case's params, the `[derived]` ones
    /// included, and the comparison's arguments). Run after the device
    /// stage, in the scene's own worker.
    #[allow(clippy::too_many_arguments)]
    pub fn compare(
        &self,
        scene: &Scene,
        case: &Case,
        file: &Path,
        function: &str,
        tensor: &str,
        (actual, expected): (&Tensor, &Tensor),
        args: &std::collections::BTreeMap<String, f64>,
    ) -> Result<PyVerdict, PyError> {
        let who = whose(scene, case, file);
        let dir = self.request_dir()?;
        let spec = |what: &str, t: &Tensor| -> Result<Json, PyError> {
            let path = dir.0.join(format!("{what}.npy"));
            npy::write_npy(&path, t)
                .map_err(|e| PyError::Exchange(format!("{}: {e}", path.display())))?;
            Ok(json!({"dtype": t.dtype().name(), "shape": t.shape(), "path": path}))
        };
        let actual = spec("actual", actual)?;
        let expected = spec("expected", expected)?;
        let mut params = serde_json::to_value(&case.values)
            .map_err(|e| PyError::Exchange(format!("the case params as JSON: {e}")))?;
        if let Some(obj) = params.as_object_mut() {
            for (k, v) in args {
                // Integral arguments as ints, so `a[:rows]` works.
                let v = if v.fract() == 0.0 && v.abs() < 9.0e15 {
                    json!(*v as i64)
                } else {
                    json!(v)
                };
                obj.insert(k.clone(), v);
            }
        }
        let req = json!({
            "op": "compare",
            "file": file,
            "sys_path": sys_path(scene),
            "function": function,
            "name": tensor,
            "actual": actual,
            "expected": expected,
            "params": params,
        });
        let reply = self
            .with_worker(scene, |w| w.request(&req, self.config.timeout))
            .map_err(|e| e.naming(&who))?;
        verdict(&Self::check_reply(reply, &who)?, &who, "compare")
    }
}

/// The verdict of a reply to `op` (`compare`, `compare_case`).
fn verdict(reply: &Json, who: &str, op: &str) -> Result<PyVerdict, PyError> {
    let (Some(passed), Some(detail)) = (
        reply.get("passed").and_then(Json::as_bool),
        reply.get("detail").and_then(Json::as_str),
    ) else {
        return Err(PyError::Failed(format!(
            "{who}: the worker's reply to `{op}` has no verdict"
        )));
    };
    Ok(PyVerdict {
        passed,
        detail: detail.to_owned(),
    })
}

impl PythonRunner {
    /// A Python host step of a level-3 scene ([`crate::steps`]):
    /// `function(tensors, params)` of `file` on the step's tensors (`name,
    /// value, whether the step writes it`; a dict of numpy arrays, bf16 as
    /// float32), filled in place or returned in a dict. Returns the new
    /// value of every written tensor, in the order given; changing a
    /// tensor the step only reads is an error. `scalars`: a test file's
    /// sub task's (its callable's `args.scalar(i)`).
    pub fn host_step(
        &self,
        scene: &Scene,
        case: &Case,
        file: &Path,
        function: &str,
        tensors: &[(&str, &Tensor, bool)],
        scalars: &[u64],
    ) -> Result<Vec<Tensor>, PyError> {
        let who = whose(scene, case, file);
        let dir = self.request_dir()?;
        let mut specs = Vec::new();
        for (i, (name, t, writes)) in tensors.iter().enumerate() {
            let path = dir.0.join(format!("h{i}.npy"));
            npy::write_npy(&path, t)
                .map_err(|e| PyError::Exchange(format!("{}: {e}", path.display())))?;
            specs.push(json!({
                "name": name,
                "dtype": t.dtype().name(),
                "shape": t.shape(),
                "path": path,
                "out": dir.0.join(format!("h{i}.out.npy")),
                "writes": writes,
            }));
        }
        let mut req = json!({
            "op": "host",
            "file": file,
            "sys_path": sys_path(scene),
            "function": function,
            "params": case.values,
            "tensors": specs,
            "scalars": scalars,
        });
        testfile::with_origin(&mut req, scene, Some(case));
        let reply = self
            .with_worker(scene, |w| w.request(&req, self.config.timeout))
            .map_err(|e| e.naming(&who))?;
        Self::check_reply(reply, &who)?;
        let mut written = Vec::new();
        for (i, (name, t, writes)) in tensors.iter().enumerate() {
            let new = read_tensor(&dir.0.join(format!("h{i}.out.npy")), t.dtype(), t.shape())
                .map_err(|e| PyError::Failed(format!("{who}: {function}: tensor `{name}`: {e}")))?;
            if *writes {
                written.push(new);
            } else if new.bytes() != t.bytes() {
                return Err(PyError::Failed(format!(
                    "{who}: {function} changed `{name}`, which the step only reads (name it in `writes`)"
                )));
            }
        }
        Ok(written)
    }
}

impl Drop for PythonRunner {
    fn drop(&mut self) {
        let workers = self.workers.get_mut().unwrap_or_else(|p| p.into_inner());
        for slot in workers.by_scene.values_mut() {
            if let Some(w) = &mut slot.worker {
                let _ = w.stdin.write_all(b"{\"op\": \"quit\"}\n");
            }
            // Dropping the worker kills and reaps it; the TempDir removes
            // the exchange directory.
            slot.worker = None;
        }
    }
}

/// The scene directory and the scenes root, where shared modules live.
fn sys_path(scene: &Scene) -> Vec<PathBuf> {
    if let Some(origin) = &scene.origin {
        return origin.sys_path.clone();
    }
    let mut v = vec![scene.dir.clone()];
    if let Some(root) = scene.dir.parent() {
        v.push(root.to_path_buf());
    }
    v
}

/// A `.npy` the worker wrote, checked to be `dtype` (bf16 as `<u2` bits)
/// and `shape`.
fn read_tensor(path: &Path, dtype: DType, shape: &[usize]) -> Result<Tensor, ReadTensorError> {
    let bytes = scene_util::read_regular_file(path, None, u64::MAX)?;
    let t = npy::from_npy_bytes_as(&bytes, dtype)
        .map_err(|source| ReadTensorError::Decode { source, dtype })?;
    if t.shape() != shape {
        return Err(ReadTensorError::Shape {
            found: t.shape().to_vec(),
            expected: shape.to_vec(),
        });
    }
    Ok(t)
}

/// Why a `.npy` the worker wrote is not the tensor the case declares.
#[derive(Debug, thiserror::Error)]
enum ReadTensorError {
    #[error("{0}")]
    Read(#[from] scene_util::ReadError),
    #[error("{source} (expected {dtype})")]
    Decode {
        #[source]
        source: npy::NpyError,
        dtype: DType,
    },
    #[error("shape {found:?}, expected {expected:?}")]
    Shape {
        found: Vec<usize>,
        expected: Vec<usize>,
    },
}

/// A request's files, removed when the request is done.
struct RequestDir(PathBuf);

impl Drop for RequestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in interpreter that says hello, then answers every request
    /// with the id of another one.
    fn wrong_id_worker(dir: &Path) -> PathBuf {
        let path = dir.join("python");
        scene_util::write_executable(
            &path,
            "#!/bin/sh\n\
             echo '{\"hello\": 1, \"python\": \"3\", \"numpy\": \"1\"}'\n\
             while read -r line; do echo '{\"id\": 999, \"ok\": true}'; done\n",
        )
        .unwrap();
        path
    }

    #[test]
    fn a_reply_to_another_request_is_a_protocol_error() {
        let dir = tempfile::tempdir().unwrap();
        let python = wrong_id_worker(dir.path());
        let config = PythonConfig {
            python: python.clone(),
            ..PythonConfig::default()
        };
        let mut worker = Worker::start(&config, &python, &Cancel::default()).unwrap();
        let err = worker
            .request(&json!({"op": "golden"}), Duration::from_secs(30))
            .unwrap_err();
        match err {
            PyError::Died(why) => assert!(
                why.contains("protocol error") && why.contains("999"),
                "{why}"
            ),
            e => panic!("not a protocol error: {e:?}"),
        }
    }
}
