//! The files a supervisor and its workers share: a job directory per case
//! (`job.json`, the `data` file of images, inputs and room for outputs,
//! `open.json`, `result.json`, traces), a directory per worker (its crash
//! report), both in shared memory where the system has it, marked as in
//! use by an owner lock so that those of dead runs can be swept.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::job::{GroupJob, SessionStepError};
use crate::runtime::Direction;

/// Version of the job files; supervisor and worker are the same executable,
/// so a mismatch means a stale worker binary.
pub(super) const JOB_VERSION: u32 = 2;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct Span {
    pub(super) off: u64,
    pub(super) len: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct JobIncore {
    pub(super) func_id: u32,
    pub(super) core_type: u32,
    pub(super) image: Span,
    /// A hosted kernel (issue 29): `image` is a host shared object. Absent
    /// for images.
    #[serde(default)]
    pub(super) hosted: Option<JobHosted>,
}

/// The entry of a hosted incore ([`crate::IncoreKind::Hosted`]).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct JobHosted {
    /// `None`: `kernel_entry`.
    pub(super) symbol: Option<String>,
    /// `SCENE_KERNEL_ARGS_*`.
    pub(super) args: u32,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(super) enum FileArg {
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
pub(super) struct JobFile {
    pub(super) version: u32,
    pub(super) runtime: PathBuf,
    pub(super) options: String,
    pub(super) orch_symbol: String,
    pub(super) orch: Span,
    pub(super) incores: Vec<JobIncore>,
    pub(super) args: Vec<FileArg>,
    /// A level-3 rank group (absent for one card).
    #[serde(default)]
    pub(super) group: Option<GroupJob>,
    /// Runs in the session (see [`DeviceJob::rounds`]).
    #[serde(default)]
    pub(super) rounds: u32,
    /// Where every round's outputs go, round-major.
    #[serde(default)]
    pub(super) round_outputs: Vec<Span>,
    /// `SCENE_RT_TRACE_*` flags (see [`DeviceJob::trace`]).
    #[serde(default)]
    pub(super) trace: u32,
    /// `--dump-args`: see [`DeviceJob::args_dump`].
    #[serde(default)]
    pub(super) args_dump: Option<PathBuf>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct ResultFile {
    /// Seconds of the session's work on the open card(s) (register,
    /// upload, run, download, free; the open and the reset not in it).
    pub(super) session_s: f64,
    pub(super) error: Option<SessionStepError>,
    /// A group's per-rank run seconds.
    #[serde(default)]
    pub(super) ranks_s: Vec<f64>,
    /// Each round's run seconds (see [`SessionOutput::run_times`]).
    #[serde(default)]
    pub(super) run_s: Vec<f64>,
}

/// `open.json`: written by a worker right after it opened its card(s)
/// for a case, before any user code runs, so the open is known however
/// the case ends.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct OpenFile {
    /// Devices opened (one per card; a reopen counts again).
    pub(super) opens: u32,
    /// Seconds spent loading the runtime and opening them.
    pub(super) open_s: f64,
}

/// One line on a worker's stdin: run the job in `job` on `cards` (held
/// by the supervisor until the reply).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Request {
    pub(super) id: u64,
    pub(super) job: PathBuf,
    pub(super) cards: Vec<u32>,
}

/// One line on a worker's reply channel: the job of request `id` is done
/// (its result is in the job directory). `retire`: the worker exits now
/// and serves no more cases (its device may be unusable, or the case left
/// its process unclean: then `left` says what it left).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Reply {
    pub(super) id: u64,
    #[serde(default)]
    pub(super) retire: bool,
    /// What the case's user code left in the worker's process (a thread,
    /// a signal handler, an environment change, an open file): the reason
    /// the worker retires although its device is fine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) left: Option<String>,
}

/// The case's working directory inside its job directory: user code's
/// relative paths land here and are removed with the job.
pub(super) const CASE_CWD: &str = "cwd";

pub(super) const JOB: &str = "job.json";
pub(super) const OPEN: &str = "open.json";
pub(super) const DATA: &str = "data";
pub(super) const RESULT: &str = "result.json";
pub(super) const CRASH: &str = "crash.txt";
/// `trace.<rank>.json`: the runtime's record of the traced run.
pub(super) const TRACE_PREFIX: &str = "trace.";

pub(super) fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::In => "in",
        Direction::Out => "out",
        Direction::InOut => "inout",
    }
}

pub(super) fn parse_direction(s: &str) -> Option<Direction> {
    match s {
        "in" => Some(Direction::In),
        "out" => Some(Direction::Out),
        "inout" => Some(Direction::InOut),
        _ => None,
    }
}

/// Where job directories go: shared memory if the system has it.
pub(super) fn job_parent() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Job directories are named `scene-job-XXXXXX`; the sweep goes by it.
pub(super) const JOB_DIR_PREFIX: &str = "scene-job-";
/// Flocked by the supervisor for as long as its job directory is in use:
/// the kernel drops the lock when the process dies, even by `SIGKILL`, and
/// unlike a pid it cannot be recycled by another process.
pub(super) const OWNER_LOCK: &str = "owner.lock";

/// A directory and the lock that marks it as in use
/// ([`sweep_dead_owned_dirs`]): a job directory, or the private directory
/// an embedded runtime is unpacked into when the cache cannot take it.
#[derive(Debug)]
pub(crate) struct OwnedDir {
    // Declared first: dropped (removed) while the lock is still held.
    dir: tempfile::TempDir,
    _owner: File,
}

/// A job directory ([`create_job_dir`]).
pub(super) type JobDir = OwnedDir;

impl OwnedDir {
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Creates a job directory in `parent`, its owner lock held.
pub(super) fn create_job_dir(parent: &Path) -> std::io::Result<JobDir> {
    create_owned_dir(parent, JOB_DIR_PREFIX)
}

/// Creates a directory `<prefix>XXXXXX` in `parent`, mode 0700, its owner
/// lock held. The lock file is locked under another name and renamed into
/// place, so a sweeper never sees an `owner.lock` that is not (yet) held.
pub(crate) fn create_owned_dir(parent: &Path, prefix: &str) -> std::io::Result<OwnedDir> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)?;
    let staging = dir.path().join(".owner.lock.new");
    let owner = File::create(&staging)?;
    owner.lock()?;
    std::fs::rename(&staging, dir.path().join(OWNER_LOCK))?;
    Ok(OwnedDir { dir, _owner: owner })
}

/// Removes the job directories in `parent` whose owner is gone: those
/// whose owner lock nobody holds (`sweep_dead_owned_dirs`).
pub fn sweep_dead_job_dirs(parent: &Path) -> usize {
    sweep_dead_owned_dirs(parent, JOB_DIR_PREFIX)
}

/// Removes the directories `<prefix>*` in `parent` whose owner is gone (a
/// run killed by `SIGKILL` or a crash cannot remove its own): those whose
/// owner lock nobody holds. A directory without a lock file (being
/// created, or left by an older version) is kept, as is one this user may
/// not open. Returns how many were removed.
pub(crate) fn sweep_dead_owned_dirs(parent: &Path, prefix: &str) -> usize {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| n.starts_with(prefix))
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
pub(super) fn sweep_job_dirs_once() {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        sweep_dead_job_dirs(&job_parent());
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};

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
                "worker::files::tests::job_dir_holder",
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
}
