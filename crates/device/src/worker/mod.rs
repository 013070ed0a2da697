//! Device sessions in supervised worker processes, one per card, kept
//! for the run.
//!
//! User code (kernels, the orchestration) runs inside the runtime, and user
//! code can crash: a NULL dereference, an integer division by zero, a trap,
//! a stack overflow, `abort()`, `exit(0)`. In the harness process any of
//! those would end the whole run. So the supervisor (the harness, holding
//! the cards) runs sessions in worker processes and only workers load the
//! runtime. Opening a real runtime costs seconds, so a worker is not one
//! per case: [`WorkerPool`] keeps one per card (per card group for level
//! 3), which opens its card(s) once and serves case after case:
//!
//! ```text
//! supervisor                               worker (same executable, WORKER_ENV set)
//! prepare: job dir (job.json + data)
//! standby: a started worker (spare)
//! acquire the card
//! request {"id","job","cards"} ──────────► first case: load runtime, open
//!                                            card(s), open.json; session on
//!                                            the open devices, reset them,
//! wait (deadline)         ◄─────────────── outputs, result.json; reply {"id"}
//! release the card
//! read result / crash report / outputs
//! ...next case on this card: same worker, card still open
//! end of run: stdin closed ──────────────► close the card(s), exit 0
//! ```
//!
//! Process start-up is never card time: a spare worker is started before
//! a card is taken (unless every card a case could get has its worker).
//! Its first case on a card opens the runtime while the card is held, so
//! that open is card time, reported apart from the session
//! ([`WorkerRun::open`]). Between cases the devices are reset
//! (`scene_rt_reset`), so a case cannot see what the one before left on
//! the device; a runtime without reset has them closed and reopened.
//!
//! The job directory lives in shared memory (`/dev/shm` where it exists):
//! inputs are written once by the supervisor and read once by the worker,
//! outputs the other way, with no serialisation of tensor bytes.
//!
//! A worker that dies during a case fails that case, worded from the
//! runtime's crash report (`scene_rt_crash_report`: signal, which kernel
//! or the orchestration, the faulting buffer) and the exit status; the
//! next case on that card gets a new worker. A worker past its deadline
//! has its stdin closed and aborts at once, hung kernels and all. One
//! that cannot (stopped by `SIGSTOP`, stuck in a driver) is killed with
//! its process group after a short grace and reaped before the run goes
//! on, so the card's lock is never released under a live worker
//! ([`WorkerError::Unresponsive`]).
//!
//! The worker's stdout is the supervisor's stderr: a `printf` in user code
//! stays visible without mixing into a report written to stdout (replies
//! travel on the pipe that was its stdout, moved aside at start).
//!
//! Workers run in process groups of their own, registered with the run's
//! [`Cancel`](scene_util::Cancel) ([`Cancel::spawn`](scene_util::Cancel::spawn)): a terminal's Ctrl-C reaches the
//! supervisor alone, and cancelling the run terminates the workers; the
//! supervisor then releases the card as after any session
//! ([`WorkerError::Cancelled`]).

mod files;
mod pool;
mod residue;
mod serve;

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

pub use files::sweep_dead_job_dirs;
use files::{
    DATA, FileArg, JOB, JOB_VERSION, JobDir, JobFile, JobHosted, JobIncore, OPEN, OpenFile, RESULT,
    ResultFile, Span, TRACE_PREFIX, create_job_dir, direction_name, job_parent,
    sweep_job_dirs_once,
};
pub(crate) use files::{OwnedDir, create_owned_dir, sweep_dead_owned_dirs};
pub use pool::{Standby, WorkerPool};
pub use serve::serve;

use crate::job::{self, DeviceJob, JobArg, SessionStepError};
use crate::runtime::{Direction, IncoreKind};

/// The environment variable that turns an executable into a device worker:
/// its value is the worker's own directory. Entry points check it first
/// thing.
pub const WORKER_ENV: &str = "SCENE_DEVICE_WORKER";

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
    #[error("the device worker replied without writing a result")]
    NoResult,
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

/// A job written out for a worker, before any card is held.
#[derive(Debug)]
pub struct PreparedJob {
    dir: JobDir,
    outputs: Vec<Span>,
    names: Vec<Option<String>>,
}

/// The outcome of one supervised session.
#[derive(Debug)]
pub struct WorkerRun {
    /// The session's own time ([`crate::SessionOutput::session`]), or why
    /// there are no outputs.
    pub result: Result<Duration, WorkerError>,
    /// From the request to the reply (or the worker's end): runtime load
    /// and open when this case paid for them, the session, the reset.
    pub elapsed: Duration,
    /// Devices the worker opened for this case (0: its card(s) were open
    /// already), and how long loading and opening took (within `elapsed`).
    pub opens: u32,
    pub open: Duration,
    /// When `elapsed` began, in `CLOCK_MONOTONIC` nanoseconds
    /// ([`crate::monotonic_ns`]): where a trace puts the device phase.
    pub began_ns: u64,
    /// What this case's user code left in the worker's process (a thread
    /// still running, a signal handler, an environment change, an open
    /// file): the worker was replaced after it, so no later case inherits
    /// it. `None` when the process was as the case found it.
    pub left: Option<String>,
}

/// `path` made absolute against this process's working directory (as it
/// is, when that cannot be read).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
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
            hosted: match k.kind {
                IncoreKind::Image => None,
                IncoreKind::Hosted { symbol, args } => Some(JobHosted {
                    symbol: symbol.map(str::to_owned),
                    args: args.to_abi(),
                }),
            },
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
        // Absolute: the worker runs each case in a working directory of
        // its own, not the supervisor's.
        runtime: absolute(runtime),
        options: job.options.to_owned(),
        orch_symbol: job.callable.orch_symbol.to_owned(),
        orch,
        incores,
        args,
        group: job.group.clone(),
        rounds,
        round_outputs: outputs.clone(),
        trace: job.trace,
        args_dump: job.args_dump.map(absolute),
    };
    // The case's working directory, made here (before the card is taken).
    let cwd = dir.path().join(files::CASE_CWD);
    std::fs::create_dir(&cwd).map_err(setup("cannot create", &cwd))?;
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
    /// The job directory the worker is told to run.
    fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The tensor names by argument position, for crash reports.
    fn names(&self) -> &[Option<String>] {
        &self.names
    }

    /// What the worker wrote in `open.json`: how many devices it opened for
    /// this case and how long that took (none when its card was open).
    fn open_file(&self) -> OpenFile {
        std::fs::read(self.dir.path().join(OPEN))
            .ok()
            .and_then(|b| serde_json::from_slice::<OpenFile>(&b).ok())
            .unwrap_or_default()
    }

    /// What the worker's result file says of a case it replied to: the
    /// session's time, or its failure.
    fn verdict(&self) -> Result<Duration, WorkerError> {
        match self.result_file() {
            Some(r) => match r.error {
                Some(e) => Err(WorkerError::Session(e)),
                None => Ok(Duration::from_secs_f64(r.session_s.max(0.0))),
            },
            None => Err(WorkerError::Setup(WorkerSetupError::NoResult)),
        }
    }

    /// The worker's result file, if it wrote a readable one.
    fn result_file(&self) -> Option<ResultFile> {
        std::fs::read(self.dir.path().join(RESULT))
            .ok()
            .and_then(|b| serde_json::from_slice::<ResultFile>(&b).ok())
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
    /// (see [`crate::SessionOutput::outputs`]). Read after the card
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

/// Seconds from a result file as durations (negative ones as zero).
fn durations(secs: &[f64]) -> Vec<Duration> {
    secs.iter()
        .map(|s| Duration::from_secs_f64(s.max(0.0)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
