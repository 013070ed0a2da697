//! The device stage: acquire card(s), load the runtime, upload, run,
//! download, release. Nothing else happens while a card is held.
//!
//! [`DeviceStage`] owns the card pool. A device fault that makes a card
//! unusable retires it for the rest of the process and the case is tried
//! once more on a healthy card; a timeout retires the card too (the hung
//! kernel keeps running) but is not retried (it would hang again). A
//! worker that does not stop past its deadline (stopped, stuck in a
//! driver) is killed with its process group and reaped before the card's
//! lock is released; its card is retired. A later case that wanted a
//! retired card fails naming the case that retired it and why.
//!
//! With a worker command configured (the CLI always sets one), the session
//! runs in a supervised worker process: the job is written out before the
//! card is taken, the worker loads the runtime and runs it while the card
//! is held, and the outputs are read back after the release. A kernel or
//! orchestration that crashes the worker fails its case, worded from the
//! runtime's crash report; the run goes on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scene_device::worker::{PreparedJob, Standby, WorkerError, WorkerPool};
use scene_device::{
    AcquireOptions, CallableImage, CardLease, CardPool, DeviceJob, Direction, IncoreImageRef,
    JobArg, Runtime, TensorArg, WaitStatus,
};
use scene_golden::Tensor;
use scene_kernels::ChipCallable;

use crate::config::RunConfig;
use crate::report::{CaseReport, LockInterval, RoundStats, RoundsReport, unix_seconds};
use crate::scene::ArgDirection;
use crate::scene::ranks;
use crate::select::SelectedCase;

/// How long past `--case-timeout` (per run) a worker may run before the
/// supervisor stops it: the runtime's own deadline fires first and reports
/// which tasks were stuck; this catches runtimes (or stopped workers) that
/// never return. As long as the case timeout itself, within these bounds:
/// a short timeout is not stretched tenfold by its grace.
const WORKER_GRACE_MIN: Duration = Duration::from_secs(2);
const WORKER_GRACE_MAX: Duration = Duration::from_secs(10);

/// What the card needs for one case.
#[derive(Clone, Copy, Debug)]
pub struct DeviceWork<'a> {
    pub sel: &'a SelectedCase,
    pub callable: &'a ChipCallable,
    /// Every tensor argument, in signature order.
    pub inputs: &'a [(String, Tensor)],
    pub scalars: &'a [u64],
    /// Upload `out` tensors too (a chip step of `[[steps]]`: every
    /// tensor's bytes are the host level's current value, zeros for one
    /// the step does not touch); `false`: `out` tensors are not uploaded.
    pub upload_outputs: bool,
}

/// The result of the device stage of one case.
#[derive(Debug, Default)]
pub struct DeviceOutcome {
    /// The output tensors in declaration order, one set per run of the
    /// session (the `--warmup` runs first, then the `--rounds`; one set for
    /// an ordinary run); `None` if no attempt ran to the end.
    pub outputs: Option<Vec<Vec<Tensor>>>,
    /// What went wrong on the way (failed attempts, retries), in order.
    pub notes: Vec<String>,
    /// `--trace` / `--dep-graph`: the device phase and the runtime's
    /// records of the last attempt.
    pub trace: Option<crate::observe::trace::DeviceTrace>,
    /// The run was cancelled before the session finished: the case did
    /// not run to the end (not a failure of its own).
    pub cancelled: bool,
}

/// The card pool and how to drive a runtime on it.
#[derive(Debug)]
pub struct DeviceStage {
    pool: CardPool,
    runtime: RuntimeChoice,
    /// The library, resolved on first use; holds a private copy of the
    /// embedded runtime (removed with the stage) when the cache had none.
    runtime_path: Mutex<Option<Result<RuntimeFile, RuntimeLibError>>>,
    open_options: String,
    /// What decides each case's device memory besides its scene (the
    /// `arena_mb` added to `open_options` per case).
    memory: crate::device_memory::MemorySettings,
    /// The run's `SCENE_RUNTIME_OPTIONS`, for composing per-case options.
    runtime_options: String,
    /// The original project's device shape on this simulator
    /// (`aic=24;aiv=48` on a2a3sim), for the cases of its test files.
    original_cores: Option<String>,
    lock_timeout: Option<Duration>,
    verbose: bool,
    /// Run sessions in supervised worker processes, one per card kept for
    /// the run (`None`: in this one).
    workers: Option<WorkerPool>,
    /// When the supervisor stops a worker that ignored the runtime's own
    /// deadline.
    worker_deadline: Option<Duration>,
    /// Options of level-3 communication domains (`timeout_ms=`).
    comm_options: String,
    /// `--rounds` (at least 1) and `--warmup`.
    rounds: u32,
    warmup: u32,
    /// `SCENE_RT_TRACE_*` flags asked of the runtime (0: no trace).
    trace_flags: u32,
    /// `--dump-args`: the root of the cases' task-argument dumps.
    args_dump: Option<PathBuf>,
    /// The platform's name, for the args dump's manifest.
    platform: String,
    /// The run's cancellation: no card is waited for and no worker
    /// started once it is cancelled; running workers are terminated.
    cancel: scene_util::Cancel,
    /// Why each retired card was retired: `<scene>::<case>: <failure>`,
    /// the first case that retired it. Later cases that wanted it say so.
    retirements: Mutex<BTreeMap<u32, String>>,
}

impl DeviceStage {
    pub fn new(config: &RunConfig) -> Result<Self, scene_device::DeviceError> {
        let pool = CardPool::new(config.devices.clone(), config.lock_dir.clone())?
            .with_cancel(config.cancel.clone());
        Ok(Self {
            pool,
            runtime: RuntimeChoice::of(config),
            runtime_path: Mutex::new(None),
            open_options: open_options(config),
            memory: crate::device_memory::MemorySettings::of(config),
            runtime_options: config.runtime_options.clone(),
            original_cores: (config.runtime_lib.is_none() && config.platform.runtime().is_none())
                .then(|| crate::simpler::sim_cores(config.platform.scenes()))
                .map(|(aic, aiv)| format!("aic={aic};aiv={aiv}")),
            lock_timeout: config.lock_timeout,
            verbose: config.verbose,
            workers: config
                .device_worker
                .clone()
                .map(|command| WorkerPool::new(command, config.cancel.clone())),
            worker_deadline: worker_deadline(config),
            comm_options: config
                .comm_timeout
                .map(|t| format!("timeout_ms={}", t.as_millis().max(1)))
                .unwrap_or_default(),
            rounds: config.rounds.max(1),
            warmup: config.warmup,
            trace_flags: crate::observe::trace::runtime_flags(config),
            args_dump: config.args_dump.clone(),
            platform: config.platform.name().to_string(),
            cancel: config.cancel.clone(),
            retirements: Mutex::default(),
        })
    }

    /// The embedded runtime is not unpacked into the run's cache directory:
    /// the kernel cache found that directory unusable and said so in its
    /// one warning, so trying it again would only warn twice.
    pub(crate) fn without_runtime_cache(mut self) -> Self {
        self.runtime = self.runtime.without_cache();
        self
    }

    /// The runtime's open options for `sel`: the run's, with the case's
    /// device memory (scene or platform `device_memory`) as `arena_mb`
    /// ahead of the run's own options, so an explicit `arena_mb` in
    /// `SCENE_RUNTIME_OPTIONS` still wins. A worker whose devices were
    /// opened with other options closes and reopens them (`serve.rs`), so
    /// a case never runs on an arena sized for another.
    ///
    /// A case of the original's test files also gets the original's
    /// device shape on the simulator (its tests size SPMD launches by
    /// `rt_available_cluster_count()`), before the run's own options too.
    fn case_options(&self, sel: &SelectedCase) -> String {
        let arena = self
            .memory
            .in_force(&sel.scene, sel.case())
            .and_then(|m| m.arena_option())
            .map(|mb| format!("{}={mb}", crate::device_memory::ARENA_OPTION));
        let cores = self
            .original_cores
            .clone()
            .filter(|_| sel.scene.origin.is_some());
        let ours: Vec<String> = cores.into_iter().chain(arena).collect();
        if ours.is_empty() {
            self.open_options.clone()
        } else {
            before_runs_own(&self.open_options, &self.runtime_options, &ours.join(";"))
        }
    }

    /// Runs of one session: warmup plus measured rounds.
    fn runs(&self) -> u32 {
        self.warmup.saturating_add(self.rounds)
    }

    pub fn pool(&self) -> &CardPool {
        &self.pool
    }

    /// The device stage with one retry on another card after a fault that
    /// retired a card. `held` is the lease of a run that holds its cards
    /// (`--hold-card`); then no card is acquired and none is swapped.
    pub fn run(
        &self,
        work: DeviceWork<'_>,
        report: &mut CaseReport,
        held: Option<&CardLease>,
    ) -> DeviceOutcome {
        let mut outcome = DeviceOutcome::default();
        for attempt in 1..=2 {
            match self.attempt(work, report, held, &mut outcome.trace) {
                Ok(o) => {
                    outcome.outputs = Some(o);
                    break;
                }
                Err(_) if self.cancel.is_cancelled() => {
                    outcome.cancelled = true;
                    break;
                }
                Err(f) => {
                    let retry = f.retryable
                        && attempt == 1
                        && held.is_none()
                        && !self.pool.healthy().is_empty();
                    outcome.notes.push(f.message);
                    if !retry {
                        break;
                    }
                    outcome.notes.push(format!(
                        "retrying on a healthy card (retired: {:?})",
                        self.pool.retired()
                    ));
                }
            }
        }
        if let Some(left) = &report.worker_residue {
            outcome.notes.push(format!(
                "note: this case left in its device worker's process: {left}; \
                 the worker was replaced, so no later case inherits it"
            ));
        }
        outcome
    }

    /// One attempt: write the job out, acquire, run the session, release,
    /// account, then read the outputs back.
    fn attempt(
        &self,
        work: DeviceWork<'_>,
        report: &mut CaseReport,
        held: Option<&CardLease>,
        trace: &mut Option<crate::observe::trace::DeviceTrace>,
    ) -> Result<Vec<Vec<Tensor>>, DeviceFailure> {
        // `--hold-card` keeps its lease whatever happens to the cards: a
        // card retired by an earlier case is not used again.
        if let Some(lease) = held {
            let retired = self.pool.retired();
            let gone: Vec<u32> = lease
                .cards()
                .iter()
                .take(work.sel.cards())
                .copied()
                .filter(|c| retired.contains(c))
                .collect();
            if !gone.is_empty() {
                return Err(DeviceFailure::plain(format!(
                    "not run: {}",
                    self.retired_by(&gone)
                )));
            }
        }
        let runtime_path = self
            .runtime_path()
            .map_err(|e| DeviceFailure::plain(e.to_string()))?;
        let options = self.case_options(work.sel);
        let mut job = device_job(work, &options, &self.comm_options);
        job.rounds = self.runs();
        job.trace = self.trace_flags;
        // --- args dump (issue 19): the runtime records into a raw dir ---
        let args_dump = match &self.args_dump {
            Some(root) => Some(
                crate::observe::args_dump::CaseArgsDump::begin(root, work.sel)
                    .map_err(|e| DeviceFailure::plain(format!("--dump-args: {e}")))?,
            ),
            None => None,
        };
        let raw_dir = args_dump.as_ref().map(|d| d.raw_dir());
        job.args_dump = raw_dir.as_deref();
        // Everything that is not device work happens before the card is
        // taken: the worker's job files are written here, and a worker is
        // started unless every card it could get has one.
        let prepared = match &self.workers {
            Some(workers) => {
                let prepared = scene_device::worker::prepare(&job, &runtime_path)
                    .map_err(|e| DeviceFailure::plain(e.to_string()))?;
                let standby = workers
                    .standby(work.sel.cards(), &self.pool.healthy())
                    .map_err(|e| DeviceFailure::plain(e.to_string()))?;
                Some((prepared, standby))
            }
            None => None,
        };
        let wait_start = Instant::now();
        // Under `--hold-card` the run already holds the card(s), and flock
        // would not let this process take them a second time.
        let acquired = match held {
            Some(_) => None,
            None => Some(self.acquire(work.sel)?),
        };
        let Some(lease) = held.or(acquired.as_ref()) else {
            return Err(DeviceFailure::plain("no card lease"));
        };
        report.phases.lock_wait_s += wait_start.elapsed().as_secs_f64();
        let held_since = Instant::now();
        let acquired_at = unix_seconds(lease.acquired_at());
        report.devices = lease.cards().to_vec();
        if self.verbose {
            eprintln!(
                "{}: acquired card(s) {:?} after {:.3} s",
                work.sel.id(),
                lease.cards(),
                report.phases.lock_wait_s
            );
        }

        let job = DeviceJob {
            card: lease.cards()[0],
            group: job.group.map(|g| scene_device::GroupJob {
                cards: lease
                    .cards()
                    .iter()
                    .copied()
                    .take(g.ranks as usize)
                    .collect(),
                ..g
            }),
            ..job
        };
        let (prepared, standby) = match prepared {
            Some((p, s)) => (Some(p), Some(s)),
            None => (None, None),
        };
        let session = self.session(lease, &runtime_path, &job, prepared.as_ref().zip(standby));
        let (result, device_time, began_ns) = (session.result, session.device, session.began_ns);
        report.phases.runtime_open_s += session.open.as_secs_f64();
        report.runtime_opens += session.opens;
        if let Some(left) = session.left {
            report.worker_residue = Some(left);
        }

        let worker_alive = matches!(&result, Err(f) if f.worker_alive);
        // A held lease is released, and its hold accounted, by the run.
        let acquired = match acquired {
            Some(lease) if worker_alive => {
                // The worker outlived SIGKILL and may still use the card:
                // its lock stays taken until this process exits.
                std::mem::forget(lease);
                None
            }
            other => other,
        };
        if let Some(lease) = acquired {
            let released_at = unix_seconds(lease.release());
            report.phases.lock_held_s += held_since.elapsed().as_secs_f64();
            if self.verbose {
                eprintln!("{}: released card(s) {:?}", work.sel.id(), report.devices);
            }
            report.lock = Some(LockInterval {
                acquired_at,
                released_at,
            });
        }
        report.phases.device_s += device_time.as_secs_f64();
        if self.trace_flags != 0 {
            let records = match (&result, &prepared) {
                (Ok(done), _) if !done.traces.is_empty() => done.traces.clone(),
                (_, Some(p)) => p.traces(),
                _ => Vec::new(),
            };
            *trace = Some(crate::observe::trace::DeviceTrace {
                began_ns,
                device: device_time + session.open,
                cards: report.devices.clone(),
                records,
            });
        }
        // --- args dump (issue 19): converted after the release, whatever
        // the session's outcome (a failed run's completed tasks help most) ---
        let mut args_note = None;
        if let Some(d) = args_dump {
            match d.finish(work.sel, &self.platform) {
                Ok(dir) => report.args_dump = Some(dir.display().to_string()),
                Err(e) if result.is_ok() => {
                    return Err(DeviceFailure::plain(format!("--dump-args: {e}")));
                }
                Err(e) => args_note = Some(format!("--dump-args: {e}")),
            }
        }
        if job.group.is_some() {
            let ranks = match (&result, &prepared) {
                (Ok(done), _) if !done.ranks.is_empty() => done.ranks.clone(),
                (_, Some(p)) => p.rank_times(),
                _ => Vec::new(),
            };
            crate::report::record_group(report, &ranks);
        }
        if self.runs() > 1 {
            let times = match (&result, &prepared) {
                (Ok(done), _) if !done.run_times.is_empty() => done.run_times.clone(),
                (_, Some(p)) => p.run_times(),
                _ => Vec::new(),
            };
            let measured: Vec<f64> = times
                .iter()
                .skip(self.warmup as usize)
                .map(Duration::as_secs_f64)
                .collect();
            report.rounds = Some(RoundsReport {
                n: self.rounds,
                warmup: self.warmup,
                device_s: RoundStats::of(&measured),
                per_round_s: measured,
                failed_warmup: Vec::new(),
                failed: Vec::new(),
            });
        }
        let done = result.map_err(|e| {
            let mut f = self.classify(e, &report.devices, &work.sel.id());
            if let Some(note) = args_note {
                f.message = format!("{}\n{note}", f.message);
            }
            f
        })?;
        report.phases.session_s += done.session.as_secs_f64();
        let outputs = match (done.outputs, &prepared) {
            (Some(outputs), _) => outputs,
            (None, Some(prepared)) => prepared
                .outputs()
                .map_err(|e| DeviceFailure::plain(e.to_string()))?,
            (None, None) => return Err(DeviceFailure::plain("the session returned no outputs")),
        };
        let per_run = outputs.len() / self.runs() as usize;
        if per_run == 0 && !outputs.is_empty() {
            return Err(DeviceFailure::plain(format!(
                "the session returned {} output buffers for {} runs",
                outputs.len(),
                self.runs()
            )));
        }
        let mut runs = Vec::with_capacity(self.runs() as usize);
        let mut rest = outputs.into_iter();
        for _ in 0..self.runs() {
            let one: Vec<Vec<u8>> = rest.by_ref().take(per_run).collect();
            runs.push(output_tensors(work, one).map_err(|e| DeviceFailure::plain(e.to_string()))?);
        }
        Ok(runs)
    }

    /// Waits for the scene's cards, narrating long waits.
    fn acquire(&self, sel: &SelectedCase) -> Result<CardLease, DeviceFailure> {
        let id = sel.id();
        let cards = sel.cards();
        // A wait under a second is ordinary turn-taking between processes;
        // say so only with -v. Longer waits are announced, then repeated
        // every 10 s, so a long queue is visible without flooding the terminal.
        let mut next_note = if self.verbose {
            Duration::ZERO
        } else {
            Duration::from_secs(1)
        };
        let mut on_wait = |w: &WaitStatus| {
            if w.waited >= next_note {
                eprintln!("{id}: {w} (waited {:.1} s)", w.waited.as_secs_f64());
                next_note = w.waited + Duration::from_secs(10);
            }
        };
        self.pool
            .acquire(
                cards,
                &id,
                AcquireOptions {
                    timeout: self.lock_timeout,
                    on_wait: Some(&mut on_wait),
                },
            )
            .map_err(|e| {
                let mut message = format!("acquiring {cards} card(s): {e}");
                if let scene_device::DeviceError::NotEnoughHealthyCards { retired, .. } = &e {
                    message.push_str("; ");
                    message.push_str(&self.retired_by(retired));
                }
                DeviceFailure::plain(message)
            })
    }

    /// `card N was retired by <scene>::<case>: <failure>` for each of
    /// `cards` (retired ones).
    fn retired_by(&self, cards: &[u32]) -> String {
        let records = self.retirements.lock().unwrap_or_else(|p| p.into_inner());
        cards
            .iter()
            .map(|c| match records.get(c) {
                Some(why) => format!("card {c} was retired by {why}"),
                None => format!("card {c} was retired"),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The session on a held card: in the card's supervised worker when
    /// workers are on (the job written and a standby worker started before
    /// the card was taken), else in this process. The device time is the
    /// card time the session took less the runtime's load and open (which
    /// a worker pays on its first case only; reported apart).
    fn session(
        &self,
        lease: &CardLease,
        runtime_path: &Path,
        job: &DeviceJob<'_>,
        worker: Option<(&PreparedJob, Standby<'_>)>,
    ) -> SessionRun {
        if let (Some(workers), Some((prepared, standby))) = (&self.workers, worker) {
            let run = workers.run(standby, prepared, lease, &job.cards(), self.worker_deadline);
            let done = run.result.map(|session| SessionDone {
                outputs: None,
                session,
                ranks: Vec::new(),
                run_times: Vec::new(),
                traces: Vec::new(),
            });
            return SessionRun {
                result: done.map_err(SessionFailure::from),
                device: run.elapsed.saturating_sub(run.open),
                began_ns: run.began_ns,
                opens: run.opens,
                open: run.open,
                left: run.left,
            };
        }
        let began_ns = scene_device::monotonic_ns();
        let started = Instant::now();
        let runtime = match Runtime::load(lease, runtime_path) {
            Ok(r) => r,
            Err(e) => {
                return SessionRun {
                    result: Err(SessionFailure::of_case(&e)),
                    device: Duration::ZERO,
                    began_ns,
                    opens: 0,
                    open: started.elapsed(),
                    left: None,
                };
            }
        };
        let loaded = started.elapsed();
        let out = scene_device::run_session(&runtime, job);
        let elapsed = started.elapsed();
        let (opens, open) = match &out {
            Ok(o) => (job.cards().len() as u32, loaded + o.open),
            Err(_) => (0, loaded),
        };
        SessionRun {
            result: out
                .map(|o| SessionDone {
                    outputs: Some(o.outputs),
                    session: o.session,
                    ranks: o.ranks,
                    run_times: o.run_times,
                    traces: o.traces,
                })
                .map_err(SessionFailure::from),
            device: elapsed.saturating_sub(open),
            began_ns,
            opens,
            open,
            // In process (`--in-process`) nothing is checked: there is no
            // worker to replace (docs/simulator.md).
            left: None,
        }
    }

    /// Retires the cards of a fatal failure of case `case` (recording
    /// why, for the cases that would have used them) and words the failure.
    fn classify(&self, e: SessionFailure, cards: &[u32], case: &str) -> DeviceFailure {
        if e.fatal {
            let why = first_line(&e.message, 300);
            let mut records = self.retirements.lock().unwrap_or_else(|p| p.into_inner());
            for &c in cards {
                records.entry(c).or_insert_with(|| format!("{case}: {why}"));
                self.pool.retire(c);
            }
        }
        DeviceFailure {
            message: if e.fatal {
                format!(
                    "{}; card(s) {cards:?} retired for the rest of this run",
                    e.message
                )
            } else {
                e.message
            },
            retryable: e.retryable,
        }
    }

    /// Checks, before any case, that the runtime library a run would load
    /// exists (loading it needs a card, so that waits for a device
    /// worker): the message names the file and how to point at another.
    pub fn check_runtime(&self) -> Result<(), RuntimeLibError> {
        let path = self.runtime_path()?;
        if path.is_file() {
            return Ok(());
        }
        Err(RuntimeLibError::Missing { path })
    }

    fn runtime_path(&self) -> Result<PathBuf, RuntimeLibError> {
        let mut slot = self.runtime_path.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert_with(|| self.runtime.resolve())
            .as_ref()
            .map(|file| file.path.clone())
            .map_err(Clone::clone)
    }
}

/// Where a run's runtime library comes from, in this order: the one it
/// names (`--runtime`, `SCENE_RUNTIME_LIB`), the platform's, the simulator
/// runtime embedded in the executable (unpacked into the cache, or into a
/// private temp directory when there is no usable cache), the one built
/// beside the executable (`scene_device::default_runtime_path`).
#[derive(Clone, Debug)]
pub(crate) struct RuntimeChoice {
    named: Option<PathBuf>,
    embedded: Option<scene_device::EmbeddedRuntime>,
    /// Where the embedded runtime goes first: the run's cache directory.
    cache: Option<PathBuf>,
}

/// A resolved runtime library: its path, and the private copy it is (if
/// it is one), which lives as long as any clone of this.
#[derive(Clone, Debug)]
pub(crate) struct RuntimeFile {
    pub(crate) path: PathBuf,
    _private: Option<Arc<scene_device::UnpackedRuntime>>,
}

impl RuntimeChoice {
    pub(crate) fn of(config: &RunConfig) -> Self {
        let named = config
            .runtime_lib
            .clone()
            .or_else(|| config.platform.runtime().map(Path::to_path_buf));
        Self {
            named,
            embedded: config.embedded_runtime,
            cache: config.cache_dir.clone(),
        }
    }

    /// Never the cache directory for the embedded runtime: the kernel
    /// cache refused it, and warned.
    pub(crate) fn without_cache(mut self) -> Self {
        self.cache = None;
        self
    }

    /// The library; unpacks the embedded one when it is the choice. A
    /// cache that cannot take it costs one warning (the kernel cache's own
    /// when it refused the directory first, see
    /// [`DeviceStage::without_runtime_cache`]), never the run.
    pub(crate) fn resolve(&self) -> Result<RuntimeFile, RuntimeLibError> {
        let locate = |e| RuntimeLibError::Locate(Arc::new(e));
        let runtime = match (&self.named, &self.embedded) {
            (Some(p), _) => {
                return Ok(RuntimeFile {
                    path: p.clone(),
                    _private: None,
                });
            }
            (None, Some(runtime)) => runtime,
            (None, None) => {
                return scene_device::default_runtime_path()
                    .map(|path| RuntimeFile {
                        path,
                        _private: None,
                    })
                    .map_err(locate);
            }
        };
        let unpacked = runtime
            .unpack_for_run(self.cache.as_deref(), &std::env::temp_dir())
            .map_err(locate)?;
        if let (Some(failure), Some(dir)) = (unpacked.cache_failure(), unpacked.private_dir()) {
            eprintln!(
                "warning: cannot unpack the simulator runtime into {failure}; using a private \
                 copy in {} for this run",
                dir.display()
            );
        }
        let path = unpacked.path().to_path_buf();
        let private = unpacked.private_dir().is_some().then(|| Arc::new(unpacked));
        Ok(RuntimeFile {
            path,
            _private: private,
        })
    }
}

/// Why the run's runtime library cannot be loaded (checked before any
/// case; cloned into every case it fails).
#[derive(Clone, Debug, thiserror::Error)]
pub enum RuntimeLibError {
    /// Unpacking the embedded runtime or finding the default one failed.
    #[error("{0}")]
    Locate(#[source] Arc<scene_device::RuntimeError>),
    #[error(
        "runtime library {} not found; build it (cargo build -p scene-sim-runtime) or point \
         --runtime / SCENE_RUNTIME_LIB (or the platform entry's `runtime`) at one",
        path.display()
    )]
    Missing { path: PathBuf },
}

/// When the supervisor stops a worker whose runtime did not return from
/// its own timeout: the case timeout plus a grace period.
pub(crate) fn worker_deadline(config: &RunConfig) -> Option<Duration> {
    // The runtime's deadline is per run, and a session runs every round.
    let runs = config.warmup.saturating_add(config.rounds.max(1));
    config.case_timeout.map(|t| {
        t.saturating_mul(runs)
            .saturating_add(t.clamp(WORKER_GRACE_MIN, WORKER_GRACE_MAX))
    })
}

/// `options` (from [`open_options`], ending with the run's own
/// `runtime_options`) with `ours` (the harness's per-case options, e.g.
/// `arena_mb=<mb>`) just before those: the runtime keeps the last value
/// of a key, so the run's own `arena_mb` still wins.
fn before_runs_own(options: &str, runtime_options: &str, ours: &str) -> String {
    let harness = if runtime_options.is_empty() {
        options
    } else {
        options
            .strip_suffix(runtime_options)
            .and_then(|o| o.strip_suffix(';'))
            .unwrap_or(options)
    };
    if harness.len() == options.len() {
        format!("{harness};{ours}")
    } else {
        format!("{harness};{ours};{runtime_options}")
    }
}

/// Options string for the runtime's `open` (also `scene replay`'s).
pub(crate) fn open_options(config: &RunConfig) -> String {
    let mut o = format!("platform={}", config.platform.scenes());
    if let Some(t) = config.case_timeout {
        o.push_str(&format!(";timeout_ms={}", t.as_millis().max(1)));
    }
    if !config.runtime_options.is_empty() {
        o.push(';');
        o.push_str(&config.runtime_options);
    }
    o
}

/// The first line of `message`, cut to about `max` bytes.
fn first_line(message: &str, max: usize) -> String {
    let line = message.lines().next().unwrap_or_default();
    if line.len() <= max {
        return line.to_owned();
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &line[..end])
}

/// Why one attempt of the device stage failed.
struct DeviceFailure {
    message: String,
    /// The card failed, not the case: worth running again on another card.
    retryable: bool,
}

impl DeviceFailure {
    fn plain(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: false,
        }
    }
}

/// A failed session, judged for the card: whether it is unusable now and
/// whether the case deserves another card (`scene_device::SessionStepError`
/// is the runtime call that failed; this is what it means for the run).
struct SessionFailure {
    message: String,
    /// The card is unusable for the rest of the process.
    fatal: bool,
    /// The card, not the case, is to blame (a device fault, not a timeout:
    /// a kernel that hung once would hang on the next card too).
    retryable: bool,
    /// The worker outlived `SIGKILL`: the card's lock must stay taken.
    worker_alive: bool,
}

impl SessionFailure {
    /// A failure of the case alone: the card stays in use, no retry.
    fn of_case(e: &dyn std::error::Error) -> Self {
        Self {
            message: e.to_string(),
            fatal: false,
            retryable: false,
            worker_alive: false,
        }
    }
}

impl From<scene_device::SessionStepError> for SessionFailure {
    fn from(e: scene_device::SessionStepError) -> Self {
        let timed_out = e.is_timeout();
        SessionFailure {
            message: if timed_out {
                format!(
                    "{}: case timeout: the device run did not finish in time ({})",
                    e.what, e.message
                )
            } else {
                e.to_string()
            },
            // A timed-out device keeps running the hung kernel: unusable too.
            fatal: e.device_fatal || timed_out,
            retryable: e.device_fatal,
            worker_alive: false,
        }
    }
}

impl From<WorkerError> for SessionFailure {
    fn from(e: WorkerError) -> Self {
        match e {
            WorkerError::Session(e) => e.into(),
            // The worker ran past every deadline: what the card is doing
            // is unknown, so it is not used again.
            // Stopped or stuck workers too (a stopped one would stop
            // again on another card: no retry).
            WorkerError::TimedOut(_) | WorkerError::Unresponsive { .. } => SessionFailure {
                message: e.to_string(),
                fatal: true,
                retryable: false,
                worker_alive: false,
            },
            // It may still hold the device open: the card's lock is kept
            // until this process exits (see `DeviceStage::attempt`).
            WorkerError::Unkillable { .. } => SessionFailure {
                message: format!("{e}; the card's lock is kept until this run exits"),
                fatal: true,
                retryable: false,
                worker_alive: true,
            },
            // User code crashed the worker: a failure of this case. The
            // card's state lived in the worker and went with it, so the
            // card is not retired, and a retry would crash again.
            WorkerError::Crashed(_) | WorkerError::Setup(_) | WorkerError::Cancelled => {
                SessionFailure::of_case(&e)
            }
        }
    }
}

/// A session's outcome and its card time.
struct SessionRun {
    result: Result<SessionDone, SessionFailure>,
    /// Card time of the session less `open`.
    device: Duration,
    /// Where `device` began ([`scene_device::monotonic_ns`]).
    began_ns: u64,
    /// Devices opened for this case, and the time loading the runtime and
    /// opening them took.
    opens: u32,
    open: Duration,
    /// What the case left in its worker's process (the worker was
    /// replaced after it): see [`scene_device::WorkerRun::left`].
    left: Option<String>,
}

/// What a session that ran to the end returned.
struct SessionDone {
    /// The outputs, when the session ran in this process; a worker's are
    /// read from its job after the card is released.
    outputs: Option<Vec<Vec<u8>>>,
    /// The session's work on the open card(s) (no open, no close).
    session: Duration,
    /// A group's per-rank run times (in-process; a worker's are read from
    /// its result).
    ranks: Vec<Duration>,
    /// Each run's time (in-process; a worker's are read from its result).
    run_times: Vec<Duration>,
    /// Runtime trace records (in-process; a worker's are read from its job).
    traces: Vec<String>,
}

/// A compiled callable as the device crate takes it (borrowed images).
pub(crate) fn callable_image(callable: &ChipCallable) -> CallableImage<'_> {
    CallableImage {
        orch_so: &callable.orch_so,
        orch_symbol: &callable.orch_symbol,
        incores: callable
            .incores
            .iter()
            .map(|k| match k.kind {
                scene_kernels::IncoreKind::Image => {
                    IncoreImageRef::image(k.func_id, k.core.as_abi(), &k.text)
                }
                scene_kernels::IncoreKind::Hosted(args) => IncoreImageRef {
                    func_id: k.func_id,
                    core_type: k.core.as_abi(),
                    image: &k.text,
                    kind: scene_device::IncoreKind::Hosted {
                        symbol: None,
                        args: match args {
                            scene_kernels::ArgsConvention::Scene => {
                                scene_device::ArgsConvention::Scene
                            }
                            scene_kernels::ArgsConvention::ChipTensor => {
                                scene_device::ArgsConvention::ChipTensor
                            }
                        },
                    },
                },
            })
            .collect(),
    }
}

/// The case's device work as a job: the callable and every argument in
/// signature order (tensors, then scalars).
fn device_job<'a>(work: DeviceWork<'a>, options: &'a str, comm_options: &str) -> DeviceJob<'a> {
    let callable = callable_image(work.callable);
    let group = work.sel.case().group;
    let ranks = group.map_or(1, |g| g.ranks);
    let mut args = Vec::new();
    for rank in 0..ranks {
        for ((name, tensor), spec) in work.inputs.iter().zip(&work.sel.scene.tensors) {
            // A per-rank tensor's slice `rank`; others whole to every rank.
            let (bytes, shape) = match group {
                Some(g) if spec.per_rank => (
                    ranks::rank_slice(tensor, g.ranks, rank),
                    ranks::slice_shape(tensor.shape()),
                ),
                _ => (tensor.bytes(), tensor.shape().to_vec()),
            };
            args.push(JobArg::Tensor(TensorArg {
                name,
                direction: match spec.direction {
                    ArgDirection::In => Direction::In,
                    ArgDirection::Out => Direction::Out,
                    _ => Direction::InOut,
                },
                size: bytes.len() as u64,
                input: (work.upload_outputs || spec.direction != ArgDirection::Out)
                    .then_some(bytes),
                dtype: abi_dtype(tensor.dtype()),
                shape: shape.iter().map(|&d| d as u64).collect(),
            }));
        }
        args.extend(work.scalars.iter().map(|&s| JobArg::Scalar(s)));
    }
    DeviceJob {
        card: 0,
        options,
        callable,
        args,
        group: group.map(|g| scene_device::GroupJob {
            ranks: g.ranks as u32,
            window_size: g.window,
            window_arg: g.window_tensor.map(|i| i as u32),
            comm_options: comm_options.to_owned(),
            cards: Vec::new(),
        }),
        rounds: 1,
        trace: 0,
        args_dump: None,
    }
}

/// Why the downloaded bytes do not make the case's output tensors.
#[derive(Debug, thiserror::Error)]
enum OutputError {
    #[error("the device returned no data for tensor `{tensor}`")]
    Missing { tensor: String },
    #[error("downloaded tensor `{tensor}`: {source}")]
    Shape {
        tensor: String,
        #[source]
        source: scene_golden::TensorError,
    },
}

/// The downloaded bytes as tensors shaped like the outputs they fill, in
/// declaration order.
fn output_tensors(work: DeviceWork<'_>, outputs: Vec<Vec<u8>>) -> Result<Vec<Tensor>, OutputError> {
    let specs: Vec<_> = work
        .inputs
        .iter()
        .zip(&work.sel.scene.tensors)
        .filter(|(_, spec)| spec.direction.is_output())
        .map(|(t, _)| t)
        .collect();
    let ranks = work.sel.case().group.map_or(1, |g| g.ranks);
    // Rank-major: every output of rank 0, then of rank 1, ...
    let mut per_tensor: Vec<Vec<Vec<u8>>> = vec![Vec::new(); specs.len()];
    let mut bytes = outputs.into_iter();
    for _ in 0..ranks {
        for (k, (name, _)) in specs.iter().enumerate() {
            let b = bytes.next().ok_or_else(|| OutputError::Missing {
                tensor: name.clone(),
            })?;
            per_tensor[k].push(b);
        }
    }
    let mut tensors = Vec::new();
    for ((name, like), slices) in specs.into_iter().zip(per_tensor) {
        tensors.push(
            ranks::join_slices(like, slices).map_err(|source| OutputError::Shape {
                tensor: name.clone(),
                source,
            })?,
        );
    }
    Ok(tensors)
}

/// The ABI's `SCENE_DTYPE_*` for a tensor dtype (what `scene_orch_desc`
/// and kernels' `descs` report).
fn abi_dtype(dtype: scene_golden::DType) -> u32 {
    use scene_device::abi::*;
    use scene_golden::DType;
    match dtype {
        DType::F32 => SCENE_DTYPE_F32,
        DType::F64 => SCENE_DTYPE_F64,
        DType::F16 => SCENE_DTYPE_F16,
        DType::BF16 => SCENE_DTYPE_BF16,
        DType::I8 => SCENE_DTYPE_I8,
        DType::U8 => SCENE_DTYPE_U8,
        DType::I16 => SCENE_DTYPE_I16,
        DType::I32 => SCENE_DTYPE_I32,
        DType::I64 => SCENE_DTYPE_I64,
        DType::Bool => SCENE_DTYPE_BOOL,
    }
}

#[cfg(test)]
mod tests {
    use super::before_runs_own;

    fn with_arena(options: &str, runtime_options: &str, mb: u64) -> String {
        before_runs_own(options, runtime_options, &format!("arena_mb={mb}"))
    }

    #[test]
    fn the_arena_goes_before_the_runs_own_options() {
        assert_eq!(
            with_arena("platform=a5sim;timeout_ms=10", "", 512),
            "platform=a5sim;timeout_ms=10;arena_mb=512"
        );
        // An explicit `arena_mb` of the run comes later: the runtime keeps it.
        assert_eq!(
            with_arena("platform=a5sim;aiv=4;arena_mb=64", "aiv=4;arena_mb=64", 512),
            "platform=a5sim;arena_mb=512;aiv=4;arena_mb=64"
        );
    }
}
