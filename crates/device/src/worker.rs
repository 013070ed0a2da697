//! Device sessions in a supervised worker process.
//!
//! User code (kernels, the orchestration) runs inside the runtime, and user
//! code can crash: a NULL dereference, an integer division by zero, a trap,
//! a stack overflow, `abort()`, `exit(0)`. In the harness process any of
//! those would end the whole run. So the supervisor (the harness, holding
//! the card) starts a worker process per session and only the worker loads
//! the runtime:
//!
//! ```text
//! supervisor                               worker (same executable, WORKER_ENV set)
//! prepare: job.json + data file
//! acquire the card
//! spawn, stdin = pipe ───────────────────► serve(): load runtime (SupervisedCard),
//!                                            crash report on, run_session,
//!                                            outputs into the data file,
//! wait (deadline)          ◄──────────────── result.json, exit 0
//! release the card
//! read result / crash report / outputs
//! ```
//!
//! The job directory lives in shared memory (`/dev/shm` where it exists):
//! inputs are written once by the supervisor and read once by the worker,
//! outputs the other way, with no serialisation of tensor bytes.
//!
//! A worker that dies without a result is a *case* failure, worded from
//! the runtime's crash report (`scene_rt_crash_report`: signal, which kernel
//! or the orchestration, the faulting buffer) and the exit status. The
//! worker watches its stdin: when the supervisor dies or gives up (deadline),
//! the pipe closes and the worker aborts at once, hung kernels and all.
//! One that cannot (stopped by `SIGSTOP`, stuck in a driver) is killed
//! with its process group after a short grace and reaped before `run`
//! returns, so the card's lock is never released under a live worker
//! ([`WorkerError::Unresponsive`]).
//!
//! The worker's stdout is the supervisor's stderr: a `printf` in user code
//! stays visible without mixing into a report written to stdout.
//!
//! The worker runs in a process group of its own, registered with the
//! run's [`Cancel`] ([`Cancel::spawn`]): a terminal's Ctrl-C reaches the
//! supervisor alone, and cancelling the run terminates the worker; the
//! supervisor then releases the card as after any session
//! ([`WorkerError::Cancelled`]).

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use scene_util::Cancel;
use scene_util::cancel::CancelChild;
use serde::{Deserialize, Serialize};

use crate::held::{HeldCard, SupervisedCard};
use crate::job::{self, DeviceJob, GroupJob, JobArg, SessionOutput, SessionStepError, TensorArg};
use crate::runtime::{CallableImage, Direction, IncoreImageRef, Runtime};

/// The environment variable that turns an executable into a device worker:
/// its value is the job directory. Entry points check it first thing.
pub const WORKER_ENV: &str = "SCENE_DEVICE_WORKER";

/// Version of the job files; supervisor and worker are the same executable,
/// so a mismatch means a stale worker binary.
const JOB_VERSION: u32 = 1;

/// How long a worker past its deadline may take to stop after its stdin
/// closed (it aborts at once if it runs at all) before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// How long a worker's process group may take to die of `SIGKILL` before
/// the supervisor stops waiting (a process in an uninterruptible wait dies
/// only when the wait ends).
const KILL_GRACE: Duration = Duration::from_secs(10);

/// How to start a worker: the program (normally the running executable)
/// and its arguments; [`WORKER_ENV`] is added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

impl WorkerCommand {
    /// The running executable, with no arguments.
    pub fn current_exe() -> std::io::Result<WorkerCommand> {
        Ok(WorkerCommand {
            program: std::env::current_exe()?,
            args: Vec::new(),
        })
    }
}

/// Why a supervised session produced no outputs.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WorkerError {
    /// A runtime call failed; the worker reported it and exited normally.
    #[error(transparent)]
    Session(#[from] SessionStepError),
    /// The worker died by a signal or exited without a result.
    #[error("{0}")]
    Crashed(CrashReport),
    /// The worker ran past the deadline and was stopped.
    #[error(
        "case timeout: the device worker did not finish within {:.1} s and was stopped",
        .0.as_secs_f64()
    )]
    TimedOut(Duration),
    /// The worker ran past the deadline, did not stop when told to and was
    /// killed (`SIGKILL` to its process group) and reaped.
    #[error(
        "case timeout: the device worker did not finish within {:.1} s and is stopped / \
         unresponsive ({state}); its process group was killed (SIGKILL)",
        .deadline.as_secs_f64()
    )]
    Unresponsive {
        deadline: Duration,
        state: StuckState,
    },
    /// As [`WorkerError::Unresponsive`], but the worker outlived `SIGKILL`
    /// too: it may still hold the device open.
    #[error(
        "case timeout: the device worker did not finish within {:.1} s and is stopped / \
         unresponsive ({state}); it did not die of SIGKILL within {} s and may still hold \
         the device",
        .deadline.as_secs_f64(),
        KILL_GRACE.as_secs()
    )]
    Unkillable {
        deadline: Duration,
        state: StuckState,
    },
    /// The job could not be handed over (files, spawn).
    #[error("device worker: {0}")]
    Setup(#[from] WorkerSetupError),
    /// The run was cancelled: the worker was terminated (or never told
    /// to start).
    #[error("the device worker was stopped: the run was interrupted")]
    Cancelled,
}

/// Why the supervisor could not hand a job to a worker, follow it, or
/// read its outputs (shared: [`WorkerError`] is cloned with its cause).
#[derive(Debug, Clone, thiserror::Error)]
pub enum WorkerSetupError {
    /// A file of the job directory, or the worker's executable.
    #[error("{action} `{}`: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("{0}")]
    Encode(#[source] Arc<serde_json::Error>),
    #[error("the device worker was already used")]
    AlreadyUsed,
    /// The go could not be sent, nor the worker stopped.
    #[error("device worker: {send}; {kill}")]
    Unstoppable {
        send: Arc<std::io::Error>,
        #[source]
        kill: Arc<std::io::Error>,
    },
    #[error("lost the device worker's status")]
    LostStatus,
    #[error("waiting for the device worker: {0}")]
    Wait(#[source] Arc<std::io::Error>),
}

/// What the supervisor knows about a worker that ended without a result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// `SIGSEGV`, ... (from the report, else from the exit status).
    pub signal: Option<String>,
    pub exit_code: Option<i32>,
    /// `kernel func_id 3 (aiv core, block 0 of 4)` or `the orchestration`.
    pub running: Option<String>,
    /// What the runtime found out about the fault.
    pub fault: Option<String>,
    /// Whether user code called `exit()`.
    pub exit_called: bool,
}

impl std::fmt::Display for CrashReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let during = self
            .running
            .as_deref()
            .map(|r| format!(" while {r} was running"))
            .unwrap_or_default();
        match (&self.signal, self.exit_code) {
            _ if self.exit_called => write!(
                f,
                "{} called exit({}): the device worker ended before the run finished",
                self.running.as_deref().unwrap_or("user code"),
                self.exit_code
                    .map_or_else(|| "?".to_owned(), |c| c.to_string())
            )?,
            (Some(sig), _) => write!(f, "the device worker was killed by {sig}{during}")?,
            (None, Some(code)) => write!(
                f,
                "the device worker exited with status {code} before reporting a result{during}"
            )?,
            (None, None) => write!(f, "the device worker ended without a result{during}")?,
        }
        if let Some(fault) = &self.fault {
            write!(f, ": {fault}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Span {
    off: u64,
    len: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct JobIncore {
    func_id: u32,
    core_type: u32,
    image: Span,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum FileArg {
    Tensor {
        name: String,
        direction: String,
        size: u64,
        dtype: u32,
        shape: Vec<u64>,
        input: Option<Span>,
    },
    Scalar {
        value: u64,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct JobFile {
    version: u32,
    runtime: PathBuf,
    options: String,
    orch_symbol: String,
    orch: Span,
    incores: Vec<JobIncore>,
    args: Vec<FileArg>,
    /// A level-3 rank group (absent for one card).
    #[serde(default)]
    group: Option<GroupJob>,
    /// Runs in the session (see [`DeviceJob::rounds`]).
    #[serde(default)]
    rounds: u32,
    /// Where every round's outputs go, round-major.
    #[serde(default)]
    round_outputs: Vec<Span>,
    /// `SCENE_RT_TRACE_*` flags (see [`DeviceJob::trace`]).
    #[serde(default)]
    trace: u32,
    /// `--dump-args`: see [`DeviceJob::args_dump`].
    #[serde(default)]
    args_dump: Option<PathBuf>,
}

#[derive(Debug, Serialize, Deserialize)]
struct ResultFile {
    /// Seconds from opening the card to closing it.
    session_s: f64,
    error: Option<SessionStepError>,
    /// A group's per-rank run seconds.
    #[serde(default)]
    ranks_s: Vec<f64>,
    /// Each round's run seconds (see [`SessionOutput::run_times`]).
    #[serde(default)]
    run_s: Vec<f64>,
}

const JOB: &str = "job.json";
const DATA: &str = "data";
const RESULT: &str = "result.json";
const CRASH: &str = "crash.txt";
/// `trace.<rank>.json`: the runtime's record of the traced run.
const TRACE_PREFIX: &str = "trace.";

fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::In => "in",
        Direction::Out => "out",
        Direction::InOut => "inout",
    }
}

fn parse_direction(s: &str) -> Option<Direction> {
    match s {
        "in" => Some(Direction::In),
        "out" => Some(Direction::Out),
        "inout" => Some(Direction::InOut),
        _ => None,
    }
}

/// Where job directories go: shared memory if the system has it.
fn job_parent() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Job directories are named `scene-job-XXXXXX`; the sweep goes by it.
const JOB_DIR_PREFIX: &str = "scene-job-";
/// Flocked by the supervisor for as long as its job directory is in use:
/// the kernel drops the lock when the process dies, even by `SIGKILL`, and
/// unlike a pid it cannot be recycled by another process.
const OWNER_LOCK: &str = "owner.lock";

/// A job directory and the lock that marks it as in use
/// ([`sweep_dead_job_dirs`]).
#[derive(Debug)]
struct JobDir {
    // Declared first: dropped (removed) while the lock is still held.
    dir: tempfile::TempDir,
    _owner: File,
}

impl JobDir {
    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Creates a job directory in `parent`, its owner lock held. The lock file
/// is locked under another name and renamed into place, so a sweeper
/// never sees an `owner.lock` that is not (yet) held.
fn create_job_dir(parent: &Path) -> std::io::Result<JobDir> {
    let dir = tempfile::Builder::new()
        .prefix(JOB_DIR_PREFIX)
        .tempdir_in(parent)?;
    let staging = dir.path().join(".owner.lock.new");
    let owner = File::create(&staging)?;
    owner.lock()?;
    std::fs::rename(&staging, dir.path().join(OWNER_LOCK))?;
    Ok(JobDir { dir, _owner: owner })
}

/// Removes the job directories in `parent` whose owner is gone (a run
/// killed by `SIGKILL` or a crash cannot remove its own): those whose
/// owner lock nobody holds. A directory without a lock file (being
/// created, or left by an older version) is kept, as is one this user may
/// not open. Returns how many were removed.
pub fn sweep_dead_job_dirs(parent: &Path) -> usize {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| n.starts_with(JOB_DIR_PREFIX))
            || !entry.file_type().is_ok_and(|t| t.is_dir())
        {
            continue;
        }
        let Ok(lock) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(entry.path().join(OWNER_LOCK))
        else {
            continue;
        };
        // Held while removing: an owner cannot come back to a directory.
        if lock.try_lock().is_ok() && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Sweeps [`job_parent`] once per process, before its first job.
fn sweep_job_dirs_once() {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        sweep_dead_job_dirs(&job_parent());
    });
}

/// A job written out for a worker, before any card is held.
#[derive(Debug)]
pub struct PreparedJob {
    dir: JobDir,
    outputs: Vec<Span>,
    names: Vec<Option<String>>,
}

/// A worker process waiting for its go; stopped and reaped if dropped
/// unused (the card could not be had, say).
#[derive(Debug)]
pub struct StartedWorker {
    /// In its own process group, registered with the run's [`Cancel`].
    child: Option<CancelChild>,
    stdin: Option<std::process::ChildStdin>,
    cancel: Cancel,
}

impl Drop for StartedWorker {
    fn drop(&mut self) {
        // Closing stdin without a go makes the worker exit by itself.
        drop(self.stdin.take());
        if let Some(mut child) = self.child.take() {
            let _ = reap_with_group(&mut child);
        }
    }
}

/// The outcome of one supervised session.
#[derive(Debug)]
pub struct WorkerRun {
    pub result: Result<Duration, WorkerError>,
    /// From the go to the worker's exit: runtime load, session, exit.
    pub elapsed: Duration,
    /// When `elapsed` began, in `CLOCK_MONOTONIC` nanoseconds
    /// ([`crate::monotonic_ns`]): where a trace puts the device phase.
    pub began_ns: u64,
}

fn setup(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> WorkerError {
    let path = path.to_path_buf();
    move |source| {
        WorkerError::Setup(WorkerSetupError::Io {
            action,
            path,
            source: Arc::new(source),
        })
    }
}

fn encode(e: serde_json::Error) -> WorkerError {
    WorkerError::Setup(WorkerSetupError::Encode(Arc::new(e)))
}

/// Writes `job` (callable, inputs, room for outputs) into a fresh job
/// directory. Done before acquiring the card: none of it is device work.
pub fn prepare(job: &DeviceJob<'_>, runtime: &Path) -> Result<PreparedJob, WorkerError> {
    sweep_job_dirs_once();
    let parent = job_parent();
    let dir =
        create_job_dir(&parent).map_err(setup("cannot create a job directory in", &parent))?;
    let data_path = dir.path().join(DATA);
    let mut data = std::io::BufWriter::new(
        File::create(&data_path).map_err(setup("cannot create", &data_path))?,
    );
    let mut at = 0u64;
    let mut put = |bytes: &[u8]| -> Result<Span, WorkerError> {
        data.write_all(bytes)
            .map_err(setup("cannot write", &data_path))?;
        let span = Span {
            off: at,
            len: bytes.len() as u64,
        };
        at += span.len;
        Ok(span)
    };
    let orch = put(job.callable.orch_so)?;
    let mut incores = Vec::with_capacity(job.callable.incores.len());
    for k in &job.callable.incores {
        incores.push(JobIncore {
            func_id: k.func_id,
            core_type: k.core_type,
            image: put(k.image)?,
        });
    }
    let mut args = Vec::with_capacity(job.args.len());
    let mut output_sizes = Vec::new();
    for a in &job.args {
        args.push(match a {
            JobArg::Scalar(value) => FileArg::Scalar { value: *value },
            JobArg::Tensor(t) => {
                let input = t.input.map(&mut put).transpose()?;
                if t.direction != Direction::In {
                    output_sizes.push(t.size);
                }
                FileArg::Tensor {
                    name: t.name.to_owned(),
                    direction: direction_name(t.direction).to_owned(),
                    size: t.size,
                    dtype: t.dtype,
                    shape: t.shape.clone(),
                    input,
                }
            }
        });
    }
    let mut file = data
        .into_inner()
        .map_err(|e| setup("cannot write", &data_path)(e.into_error()))?;
    // Output room is a hole at the end of the file: no bytes written now;
    // one set of outputs per round.
    let rounds = job.rounds.max(1);
    let mut outputs = Vec::with_capacity(output_sizes.len() * rounds as usize);
    for _ in 0..rounds {
        for &size in &output_sizes {
            let span = Span { off: at, len: size };
            at += size;
            outputs.push(span);
        }
    }
    file.set_len(at).map_err(setup("cannot size", &data_path))?;
    file.flush().map_err(setup("cannot write", &data_path))?;
    let spec = JobFile {
        version: JOB_VERSION,
        runtime: runtime.to_path_buf(),
        options: job.options.to_owned(),
        orch_symbol: job.callable.orch_symbol.to_owned(),
        orch,
        incores,
        args,
        group: job.group.clone(),
        rounds,
        round_outputs: outputs.clone(),
        trace: job.trace,
        args_dump: job.args_dump.map(Path::to_path_buf),
    };
    let job_path = dir.path().join(JOB);
    let text = serde_json::to_vec(&spec).map_err(encode)?;
    std::fs::write(&job_path, text).map_err(setup("cannot write", &job_path))?;
    Ok(PreparedJob {
        dir,
        outputs,
        names: job.arg_names(),
    })
}

impl PreparedJob {
    /// Starts a worker on the prepared job, before any card is held: it
    /// reads the job and its data, then waits for the supervisor's go (the
    /// held cards, on its stdin) before it loads the runtime. Starting it
    /// first keeps process start-up off the card, and the worker can never
    /// inherit a card's lock file (it was forked before the lock existed).
    ///
    /// The worker runs in a process group of its own, registered with
    /// `cancel`: cancelling terminates it, and [`PreparedJob::run`] then
    /// returns [`WorkerError::Cancelled`].
    pub fn start(
        &self,
        worker: &WorkerCommand,
        cancel: &Cancel,
    ) -> Result<StartedWorker, WorkerError> {
        if cancel.is_cancelled() {
            return Err(WorkerError::Cancelled);
        }
        // User code's `printf` goes to the supervisor's stderr: stdout may
        // carry a report (`--report-json -`) that must stay pure.
        let stdout = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map_err(setup("cannot pass stderr to", &worker.program))?;
        let mut child = cancel
            .spawn(
                Command::new(&worker.program)
                    .args(&worker.args)
                    .env(WORKER_ENV, self.dir.path())
                    .stdin(Stdio::piped())
                    .stdout(stdout),
            )
            .map_err(setup("cannot start the device worker", &worker.program))?;
        let stdin = child.child_mut().stdin.take();
        Ok(StartedWorker {
            child: Some(child),
            stdin,
            cancel: cancel.clone(),
        })
    }

    /// Tells the started worker to run on the held `cards` (the first is
    /// opened) and waits for it, at most `deadline` (then it is stopped).
    pub fn run(
        &self,
        mut worker: StartedWorker,
        cards: &dyn HeldCard,
        deadline: Option<Duration>,
    ) -> WorkerRun {
        let started = Instant::now();
        let began_ns = crate::runtime::monotonic_ns();
        let result = match self.supervise(&mut worker, cards, deadline) {
            // However the worker ended, a cancelled run's session did not
            // finish for its own reasons.
            Err(_) if worker.cancel.is_cancelled() => Err(WorkerError::Cancelled),
            other => other,
        };
        WorkerRun {
            result,
            elapsed: started.elapsed(),
            began_ns,
        }
    }

    fn supervise(
        &self,
        worker: &mut StartedWorker,
        cards: &dyn HeldCard,
        deadline: Option<Duration>,
    ) -> Result<Duration, WorkerError> {
        let mut go = serde_json::to_vec(cards.held_cards()).map_err(encode)?;
        go.push(b'\n');
        // Held open while the worker runs: closing it tells the worker to stop.
        let mut stdin = worker.stdin.take();
        let Some(mut child) = worker.child.take() else {
            return Err(WorkerSetupError::AlreadyUsed.into());
        };
        let sent = stdin
            .as_mut()
            .map(|s| s.write_all(&go).and_then(|()| s.flush()));
        if let Some(Err(e)) = sent {
            // The worker died before its go: say how, from its status.
            let status = child.kill().map_err(|kill| WorkerSetupError::Unstoppable {
                send: Arc::new(e),
                kill: Arc::new(kill),
            })?;
            return self.verdict(status);
        }
        // The watcher only observes the exit: the child stays unreaped, so
        // its process group can still be signalled here without any risk
        // of hitting a recycled id.
        let (tx, rx) = mpsc::channel();
        let watch = child.exit_watch();
        std::thread::spawn(move || {
            watch.wait();
            let _ = tx.send(());
        });
        let waited = match deadline {
            Some(d) => rx.recv_timeout(d),
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match waited {
            Ok(()) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(stop_late(child, stdin, &rx, deadline.unwrap_or_default()));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                child.kill_group();
                let _ = child.wait();
                return Err(WorkerSetupError::LostStatus.into());
            }
        }
        drop(stdin);
        let status =
            reap_with_group(&mut child).map_err(|e| WorkerSetupError::Wait(Arc::new(e)))?;
        self.verdict(status)
    }

    /// The worker's result file, if it wrote a readable one.
    fn result_file(&self) -> Option<ResultFile> {
        std::fs::read(self.dir.path().join(RESULT))
            .ok()
            .and_then(|b| serde_json::from_slice::<ResultFile>(&b).ok())
    }

    /// The worker's result file, else what its crash report and exit
    /// status say.
    fn verdict(&self, status: ExitStatus) -> Result<Duration, WorkerError> {
        if let Some(r) = self.result_file()
            && status.success()
        {
            return match r.error {
                Some(e) => Err(WorkerError::Session(e)),
                None => Ok(Duration::from_secs_f64(r.session_s.max(0.0))),
            };
        }
        let report = std::fs::read_to_string(self.dir.path().join(CRASH)).unwrap_or_default();
        Err(WorkerError::Crashed(crash_report(
            &report,
            status,
            &self.names,
        )))
    }

    /// A group's per-rank run times, from the worker's result (empty for
    /// one card or without a result).
    pub fn rank_times(&self) -> Vec<Duration> {
        self.result_file()
            .map(|r| durations(&r.ranks_s))
            .unwrap_or_default()
    }

    /// The runtime's trace records of the session (one per rank; empty
    /// when the job was not traced or the worker left none).
    pub fn traces(&self) -> Vec<String> {
        let mut out = Vec::new();
        for rank in 0.. {
            let path = self.dir.path().join(format!("{TRACE_PREFIX}{rank}.json"));
            match std::fs::read_to_string(&path) {
                Ok(t) => out.push(t),
                Err(_) => break,
            }
        }
        out
    }

    /// Each round's run time, from the worker's result (empty without one).
    pub fn run_times(&self) -> Vec<Duration> {
        self.result_file()
            .map(|r| durations(&r.run_s))
            .unwrap_or_default()
    }

    /// The output tensors' bytes, in argument order, every round in turn
    /// (see [`SessionOutput::outputs`]). Read after the card
    /// is released.
    pub fn outputs(&self) -> Result<Vec<Vec<u8>>, WorkerError> {
        let path = self.dir.path().join(DATA);
        let file = File::open(&path).map_err(setup("cannot open", &path))?;
        self.outputs
            .iter()
            .map(|s| {
                let mut buf = vec![0; s.len as usize];
                file.read_exact_at(&mut buf, s.off)
                    .map_err(setup("cannot read outputs from", &path))?;
                Ok(buf)
            })
            .collect()
    }
}

/// Waits for a worker to exit, then kills what is left of its process
/// group before reaping it: a daemon an orchestration forked dies with the
/// session instead of outliving the run (one that called `setsid()` left
/// the group and is out of reach). The group id is the unreaped worker's,
/// so it cannot have been recycled.
fn reap_with_group(child: &mut CancelChild) -> std::io::Result<ExitStatus> {
    child.exit_watch().wait();
    child.kill_group();
    child.wait()
}

/// Stops a worker past its deadline: closing stdin makes a live worker
/// abort; one that does not exit within [`STOP_GRACE`] (stopped by a
/// signal, stuck in the kernel or a driver) has its whole process group
/// killed, and is reaped before this returns, so the card's lock outlives
/// it. One that survives even `SIGKILL` for [`KILL_GRACE`] is left to a
/// thread that reaps it whenever it dies ([`WorkerError::Unkillable`]).
fn stop_late(
    mut child: CancelChild,
    stdin: Option<std::process::ChildStdin>,
    exited: &mpsc::Receiver<()>,
    deadline: Duration,
) -> WorkerError {
    drop(stdin);
    if exited.recv_timeout(STOP_GRACE).is_ok() {
        let _ = reap_with_group(&mut child);
        return WorkerError::TimedOut(deadline);
    }
    // Read before the kill: afterwards every process is a dying one.
    let state = process_state(child.id());
    child.kill_group();
    if exited.recv_timeout(KILL_GRACE).is_ok() {
        let _ = child.wait();
        return WorkerError::Unresponsive { deadline, state };
    }
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    WorkerError::Unkillable { deadline, state }
}

/// What a worker that ignored its deadline was doing, from its process
/// state (`/proc/<pid>/stat`), for the failure message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StuckState {
    /// `T`/`t`: stopped by a signal (`SIGSTOP`, `raise(SIGSTOP)`) or a
    /// debugger.
    Stopped,
    /// `D`: in an uninterruptible wait, typically inside a driver.
    Uninterruptible,
    /// Running or sleeping, or unknown: it just did not react.
    Unresponsive,
}

impl std::fmt::Display for StuckState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StuckState::Stopped => "process state T: stopped by a signal or a debugger",
            StuckState::Uninterruptible => {
                "process state D: in an uninterruptible wait, e.g. stuck in the driver"
            }
            StuckState::Unresponsive => "it did not react to its stdin closing",
        })
    }
}

fn process_state(pid: u32) -> StuckState {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // `pid (comm) S ...`: the name may hold spaces and parentheses.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    match state {
        Some("T" | "t") => StuckState::Stopped,
        Some("D") => StuckState::Uninterruptible,
        _ => StuckState::Unresponsive,
    }
}

/// Parses the runtime's `key=value` crash report and words it.
fn crash_report(text: &str, status: ExitStatus, names: &[Option<String>]) -> CrashReport {
    let get = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_owned)
    };
    let running = match get("who").as_deref() {
        Some("kernel") => Some(format!(
            "kernel func_id {} ({} core, block {} of {})",
            get("func_id").unwrap_or_default(),
            get("core").unwrap_or_default(),
            get("block").unwrap_or_default(),
            get("blocks").unwrap_or_default()
        )),
        Some("orchestration") => Some("the orchestration".to_owned()),
        Some(_) => Some("the runtime (no kernel or orchestration)".to_owned()),
        None => None,
    };
    let fault = get("fault").map(|f| {
        let f = job::name_run_args(&f, names);
        match get("address") {
            Some(a) if !f.contains(&a) => format!("{f} (address {a})"),
            _ => f,
        }
    });
    let signal = status.signal().map(signal_name).or_else(|| get("signal"));
    CrashReport {
        signal,
        exit_code: status.code(),
        running,
        fault,
        exit_called: get("exit").is_some() && status.signal().is_none(),
    }
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGSEGV => "SIGSEGV (segmentation fault)",
        libc::SIGBUS => "SIGBUS (bus error)",
        libc::SIGFPE => "SIGFPE (arithmetic exception, e.g. integer division by zero)",
        libc::SIGILL => "SIGILL (illegal instruction, e.g. a trap)",
        libc::SIGTRAP => "SIGTRAP (trap)",
        libc::SIGABRT => "SIGABRT (abort)",
        libc::SIGSYS => "SIGSYS (bad system call)",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        _ => return format!("signal {sig}"),
    };
    name.to_owned()
}

/// The worker side: runs the job in `dir` and exits. Returns the process
/// exit code (0 once a result is written, whatever the session's outcome).
pub fn serve(dir: &Path) -> i32 {
    match serve_job(dir) {
        Ok(()) => 0,
        Err(msg) => {
            eprintln!("scene device worker: {msg}");
            3
        }
    }
}

/// Why a worker could not run its job or hand back a result (the
/// session's own failures go into the result file instead).
#[derive(Debug, thiserror::Error)]
enum ServeError {
    #[error("cannot read `{}`: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("malformed job file: {0}")]
    MalformedJob(#[source] serde_json::Error),
    #[error("job version {found} but this worker speaks {JOB_VERSION}")]
    JobVersion { found: u32 },
    #[error("cannot open `{}`: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the job data: {0}")]
    ReadData(#[source] std::io::Error),
    #[error("unknown direction `{0}`")]
    Direction(String),
    #[error("reading the go from the supervisor: {0}")]
    ReadGo(#[source] std::io::Error),
    #[error("malformed card list `{line}`: {source}")]
    CardList {
        line: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the supervisor holds no card")]
    NoCard,
    #[error("the session returned {returned} output buffers, the job has room for {room}")]
    OutputCount { returned: usize, room: usize },
    #[error("cannot write outputs: {0}")]
    WriteOutputs(#[source] std::io::Error),
    #[error("{0}")]
    EncodeResult(#[source] serde_json::Error),
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn serve_job(dir: &Path) -> Result<(), ServeError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|source| ServeError::Read { path, source })
    };
    let spec: JobFile = serde_json::from_slice(&read(JOB)?).map_err(ServeError::MalformedJob)?;
    if spec.version != JOB_VERSION {
        return Err(ServeError::JobVersion {
            found: spec.version,
        });
    }
    let data_path = dir.join(DATA);
    let data = File::options()
        .read(true)
        .write(true)
        .open(&data_path)
        .map_err(|source| ServeError::Open {
            path: data_path.clone(),
            source,
        })?;
    let load = |s: Span| -> Result<Vec<u8>, ServeError> {
        let mut buf = vec![0; s.len as usize];
        data.read_exact_at(&mut buf, s.off)
            .map_err(ServeError::ReadData)?;
        Ok(buf)
    };
    let orch = load(spec.orch)?;
    let images = spec
        .incores
        .iter()
        .map(|k| load(k.image))
        .collect::<Result<Vec<_>, _>>()?;
    let inputs = spec
        .args
        .iter()
        .map(|a| match a {
            FileArg::Tensor { input: Some(s), .. } => load(*s).map(Some),
            _ => Ok(None),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut args = Vec::with_capacity(spec.args.len());
    for (a, input) in spec.args.iter().zip(&inputs) {
        args.push(match a {
            FileArg::Scalar { value } => JobArg::Scalar(*value),
            FileArg::Tensor {
                name,
                direction,
                size,
                dtype,
                shape,
                ..
            } => JobArg::Tensor(TensorArg {
                name,
                direction: parse_direction(direction)
                    .ok_or_else(|| ServeError::Direction(direction.clone()))?,
                size: *size,
                input: input.as_deref(),
                dtype: *dtype,
                shape: shape.clone(),
            }),
        });
    }
    let job = DeviceJob {
        card: 0,
        options: &spec.options,
        callable: CallableImage {
            orch_so: &orch,
            orch_symbol: &spec.orch_symbol,
            incores: spec
                .incores
                .iter()
                .zip(&images)
                .map(|(k, image)| IncoreImageRef {
                    func_id: k.func_id,
                    core_type: k.core_type,
                    image,
                })
                .collect(),
        },
        args,
        group: spec.group.clone(),
        rounds: spec.rounds,
        trace: spec.trace,
        args_dump: spec.args_dump.as_deref(),
    };
    let cards = wait_for_go()?;
    let card = *cards.first().ok_or(ServeError::NoCard)?;
    let group = job.group.clone().map(|g| GroupJob {
        cards: cards.iter().copied().take(g.ranks as usize).collect(),
        ..g
    });
    let job = DeviceJob { card, group, ..job };
    let held = SupervisedCard::new(cards);
    let outcome = Runtime::load(&held, &spec.runtime)
        .map_err(|e| SessionStepError {
            what: "loading the device runtime".into(),
            status: None,
            message: e.to_string(),
            device_fatal: false,
        })
        .and_then(|rt| {
            // A runtime without crash reports still runs; crashes are then
            // described by the exit status alone.
            let _ = rt.enable_crash_report(&dir.join(CRASH));
            let out = job::run_session(&rt, &job);
            // The runtime stays loaded until the process exits: unloading
            // it while detached threads of a timed-out run still execute
            // its code would crash the worker.
            std::mem::forget(rt);
            out
        });
    let result = match outcome {
        Ok(SessionOutput {
            outputs,
            run_times,
            session,
            ranks,
            traces,
        }) => {
            // Trace records (issue 19): one file per rank, read by the
            // supervisor with `PreparedJob::traces`.
            for (rank, text) in traces.iter().enumerate() {
                let path = dir.join(format!("{TRACE_PREFIX}{rank}.json"));
                std::fs::write(&path, text).map_err(|source| ServeError::Write {
                    path: path.clone(),
                    source,
                })?;
            }
            if outputs.len() != spec.round_outputs.len() {
                return Err(ServeError::OutputCount {
                    returned: outputs.len(),
                    room: spec.round_outputs.len(),
                });
            }
            for (bytes, span) in outputs.iter().zip(&spec.round_outputs) {
                data.write_all_at(bytes, span.off)
                    .map_err(ServeError::WriteOutputs)?;
            }
            ResultFile {
                session_s: session.as_secs_f64(),
                error: None,
                ranks_s: ranks.iter().map(Duration::as_secs_f64).collect(),
                run_s: run_times.iter().map(Duration::as_secs_f64).collect(),
            }
        }
        Err(e) => ResultFile {
            session_s: 0.0,
            error: Some(e),
            ranks_s: Vec::new(),
            run_s: Vec::new(),
        },
    };
    let text = serde_json::to_vec(&result).map_err(ServeError::EncodeResult)?;
    // Written aside and renamed in: the supervisor never reads half a result.
    let path = dir.join(RESULT);
    scene_util::write_atomically(&path, &text).map_err(|source| ServeError::Write { path, source })
}

/// Blocks until the supervisor holds the card and says so: one line on
/// stdin, the held card ids as JSON. From then on, stdin closing (the
/// supervisor died or gave up) ends this process at once.
fn wait_for_go() -> Result<Vec<u32>, ServeError> {
    let mut line = String::new();
    let n = std::io::stdin()
        .read_line(&mut line)
        .map_err(ServeError::ReadGo)?;
    if n == 0 {
        // The supervisor gave up before it had a card: nothing to do.
        std::process::exit(0);
    }
    std::thread::spawn(|| {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        std::process::abort();
    });
    serde_json::from_str(line.trim()).map_err(|source| ServeError::CardList {
        line: line.trim().to_owned(),
        source,
    })
}

/// Seconds from a result file as durations (negative ones as zero).
fn durations(secs: &[f64]) -> Vec<Duration> {
    secs.iter()
        .map(|s| Duration::from_secs_f64(s.max(0.0)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set in a child copy of this test binary: the parent directory in
    /// which [`job_dir_holder`] makes a job directory and holds it.
    const HOLDER_ENV: &str = "SCENE_TEST_JOB_DIR_HOLDER";

    /// Not a test of its own: run by
    /// `killed_runs_job_dirs_in_dev_shm_are_swept_and_live_ones_kept` in a
    /// child process, where it holds a job directory until its stdin closes.
    #[test]
    fn job_dir_holder() {
        let Some(parent) = std::env::var_os(HOLDER_ENV) else {
            return;
        };
        let dir = create_job_dir(Path::new(&parent)).expect("job dir");
        // Written, not printed: libtest captures `println!`.
        let mut out = std::io::stdout();
        writeln!(out, "JOBDIR={}", dir.path().display()).expect("stdout");
        out.flush().expect("stdout");
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
    }

    fn start_holder(parent: &Path) -> (std::process::Child, PathBuf) {
        use std::io::BufRead;
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "worker::tests::job_dir_holder",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(HOLDER_ENV, parent)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("holder");
        let out = child.stdout.take().expect("stdout");
        let dir = std::io::BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .find_map(|l| l.split_once("JOBDIR=").map(|(_, d)| PathBuf::from(d)))
            .expect("the holder names its job dir");
        (child, dir)
    }

    #[test]
    fn killed_runs_job_dirs_in_dev_shm_are_swept_and_live_ones_kept() {
        let parent = tempfile::tempdir().expect("tmp");
        let (mut live, live_dir) = start_holder(parent.path());
        let (mut killed, killed_dir) = start_holder(parent.path());
        killed.kill().expect("SIGKILL");
        killed.wait().expect("reap");
        // A directory being created (no lock file yet), or an older
        // version's, is not ours to judge.
        let lockless = parent.path().join(format!("{JOB_DIR_PREFIX}old"));
        std::fs::create_dir(&lockless).expect("mkdir");
        assert!(killed_dir.is_dir(), "SIGKILL left its job dir behind");

        assert_eq!(sweep_dead_job_dirs(parent.path()), 1);
        assert!(!killed_dir.exists(), "the dead run's job dir is swept");
        assert!(live_dir.join(OWNER_LOCK).is_file(), "a live run's is kept");
        assert!(lockless.is_dir());

        drop(live.stdin.take());
        // Its status is libtest's (its stdout is closed by now); the
        // directory is what counts.
        live.wait().expect("wait");
        assert!(!live_dir.exists(), "a run removes its own on the way out");
    }

    #[test]
    fn crash_reports_are_worded_from_report_and_status() {
        let names = vec![Some("a".to_owned()), Some("c".to_owned())];
        let text = "signal=SIGSEGV\nwho=kernel\nfunc_id=3\ncore=aiv\nblock=0\nblocks=2\naddress=0x7f00\nfault=write or read outside a buffer: run argument 1 (256 bytes at 0x10) at offset 256, past its end\narg=1\n";
        let r = crash_report(text, ExitStatus::from_raw(libc::SIGSEGV), &names);
        let msg = r.to_string();
        assert!(
            msg.starts_with("the device worker was killed by SIGSEGV"),
            "{msg}"
        );
        assert!(
            msg.contains("while kernel func_id 3 (aiv core, block 0 of 2) was running"),
            "{msg}"
        );
        assert!(
            msg.contains(
                "tensor `c` (run argument 1) (256 bytes at 0x10) at offset 256, past its end"
            ),
            "{msg}"
        );
        let exit = crash_report(
            "exit=called\nwho=orchestration\n",
            ExitStatus::from_raw(0),
            &names,
        );
        assert_eq!(
            exit.to_string(),
            "the orchestration called exit(0): the device worker ended before the run finished"
        );
        let bare = crash_report("", ExitStatus::from_raw(libc::SIGKILL), &names);
        assert_eq!(bare.to_string(), "the device worker was killed by SIGKILL");
    }
}
