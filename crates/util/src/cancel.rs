//! Cancellation of a run (issue 25 item 5, "Signals"), and the child
//! processes it must end.
//!
//! A [`Cancel`] is a process-wide token, cloned into every stage that can
//! take long. The entry point (the CLI's signal handler, a test) calls
//! [`Cancel::cancel`] once; the stages poll [`Cancel::is_cancelled`] at
//! their boundaries (before starting a compiler, a case, a card wait) and
//! unwind normally, so `Drop` removes temp directories and releases locks.
//!
//! Child processes (compilers, device workers, the Python worker) are
//! started through [`Cancel::spawn`]: each runs in its own process group
//! (so a terminal's Ctrl-C reaches the harness alone, which then decides,
//! instead of racing it) and is registered with the token while it runs.
//! [`Cancel::cancel`] sends `SIGTERM` to every registered group (a
//! compiler driver removes its own temp files on `SIGTERM`);
//! [`Cancel::kill_all`] sends `SIGKILL`. A group is unregistered before its
//! leader is reaped ([`CancelChild::wait`] waits with `WNOWAIT` first), so
//! a signal never reaches a recycled process id.

use std::collections::HashMap;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Output};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};

/// `SIGINT`'s number (what Ctrl-C sends).
pub const SIGINT: i32 = 2;
/// `SIGTERM`'s number (what `kill` and CI runners send).
pub const SIGTERM: i32 = 15;

/// A cancellation token shared by every stage of a run; cheap to clone
/// (clones share the state). [`Cancel::default`] is never cancelled unless
/// someone calls [`Cancel::cancel`] on it or a clone.
#[derive(Clone, Default)]
pub struct Cancel(Arc<Inner>);

#[derive(Default)]
struct Inner {
    /// 0: not cancelled; else the signal number given to `cancel`.
    signal: AtomicI32,
    groups: Mutex<Groups>,
}

#[derive(Default)]
struct Groups {
    next: u64,
    /// Registered child process groups (the leader's pid = the group id).
    live: HashMap<u64, Pid>,
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel")
            .field("signal", &self.signal())
            .finish_non_exhaustive()
    }
}

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.signal.load(Ordering::SeqCst) != 0
    }

    /// The signal the run was cancelled by (`Some(0)` is impossible).
    pub fn signal(&self) -> Option<i32> {
        match self.0.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// Cancels the run, naming the signal that asked for it (a positive
    /// number; another value counts as `SIGTERM`), and sends `SIGTERM` to
    /// every registered child process group. Returns `false` (and does
    /// nothing) when the run was already cancelled.
    pub fn cancel(&self, signal: i32) -> bool {
        let signal = if signal > 0 { signal } else { SIGTERM };
        let first = self
            .0
            .signal
            .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if first {
            self.signal_groups(Signal::TERM);
        }
        first
    }

    /// Sends `SIGKILL` to every registered child process group (a second
    /// signal: no more waiting for anyone to clean up).
    pub fn kill_all(&self) {
        self.signal_groups(Signal::KILL);
    }

    fn signal_groups(&self, signal: Signal) {
        let groups = self.0.groups.lock().unwrap_or_else(PoisonError::into_inner);
        for pid in groups.live.values() {
            // ESRCH: the group is gone already; nothing else can fail here.
            let _ = rustix::process::kill_process_group(*pid, signal);
        }
    }

    /// Starts `cmd` in a process group of its own, registered with this
    /// token until it is waited for: cancelling sends `SIGTERM` to the
    /// group (the child and whatever it started). A token cancelled
    /// already terminates the child at once (the caller sees it end by
    /// `SIGTERM`).
    pub fn spawn(&self, cmd: &mut Command) -> io::Result<CancelChild> {
        let child = cmd.process_group(0).spawn()?;
        let pid = Pid::from_child(&child);
        let id = {
            let mut groups = self.0.groups.lock().unwrap_or_else(PoisonError::into_inner);
            groups.next += 1;
            let id = groups.next;
            groups.live.insert(id, pid);
            id
        };
        // Cancelled between the spawn and the registration: `cancel` may
        // not have seen this group.
        if self.is_cancelled() {
            let _ = rustix::process::kill_process_group(pid, Signal::TERM);
        }
        Ok(CancelChild {
            child,
            id,
            pid,
            cancel: self.clone(),
        })
    }

    fn unregister(&self, id: u64) {
        self.0
            .groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .live
            .remove(&id);
    }
}

/// A child started by [`Cancel::spawn`]. Dropped before it was waited
/// for, its group is killed (`SIGKILL`) and the child reaped.
#[derive(Debug)]
pub struct CancelChild {
    child: Child,
    id: u64,
    pid: Pid,
    cancel: Cancel,
}

impl CancelChild {
    /// The child, e.g. to take its pipes.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// The child's process id (also its process group's).
    pub fn id(&self) -> u32 {
        self.pid.as_raw_nonzero().get().unsigned_abs()
    }

    /// Waits for the child to exit, then unregisters its group and reaps
    /// it (in that order: a registered group id is never recycled).
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        // Reaped already (by `std` itself): `wait` below returns the
        // status it kept.
        self.exit_watch().wait();
        self.cancel.unregister(self.id);
        self.child.wait()
    }

    /// Kills the child's whole group (`SIGKILL`) and reaps the child.
    pub fn kill(&mut self) -> io::Result<ExitStatus> {
        self.kill_group();
        self.wait()
    }

    /// Sends `SIGKILL` to the child's whole group without waiting: a
    /// stopped process dies of it too. The group id stays valid until the
    /// child is reaped, and only this handle reaps it.
    pub fn kill_group(&self) {
        // ESRCH: the whole group is gone already.
        let _ = rustix::process::kill_process_group(self.pid, Signal::KILL);
    }

    /// A handle that waits for the child's exit, from any thread, without
    /// reaping it (so the owner can still signal the group, then reap).
    pub fn exit_watch(&self) -> ExitWatch {
        ExitWatch { pid: self.pid }
    }

    /// Collects stdout and stderr (as [`Child::wait_with_output`]; pipe
    /// them first), then waits.
    pub fn wait_with_output(mut self) -> io::Result<Output> {
        use std::io::Read;
        let stdout = self.child.stdout.take();
        let stderr = self.child.stderr.take();
        let reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut s) = stderr {
                let _ = s.read_to_end(&mut buf);
            }
            buf
        });
        let mut out = Vec::new();
        if let Some(mut s) = stdout {
            let _ = s.read_to_end(&mut out);
        }
        let err = reader.join().unwrap_or_default();
        let status = self.wait()?;
        Ok(Output {
            status,
            stdout: out,
            stderr: err,
        })
    }
}

/// Waits for a [`CancelChild`] to exit without reaping it
/// ([`CancelChild::exit_watch`]).
#[derive(Debug, Clone, Copy)]
pub struct ExitWatch {
    pid: Pid,
}

impl ExitWatch {
    /// Blocks until the child has exited (or was reaped already).
    pub fn wait(&self) {
        loop {
            match rustix::process::waitid(
                WaitId::Pid(self.pid),
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
            ) {
                Err(rustix::io::Errno::INTR) => continue,
                // Ok: it exited; ECHILD: reaped already.
                _ => return,
            }
        }
    }
}

impl Drop for CancelChild {
    fn drop(&mut self) {
        // Unregistered first: only this handle can reap the child, so the
        // group id stays valid for the kill below.
        self.cancel.unregister(self.id);
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            let _ = rustix::process::kill_process_group(self.pid, Signal::KILL);
            let _ = self.child.wait();
        }
    }
}

/// Whether a process with id `pid` exists (it may be another user's). A
/// recycled id reads as alive: use it to clean up after dead processes,
/// never to decide that one is still working.
pub fn process_alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

/// The conventional exit status of a process ended by `signal`: 128 + its
/// number (130 for `SIGINT`, 143 for `SIGTERM`).
pub fn exit_status_for(signal: i32) -> u8 {
    u8::try_from(128 + signal.clamp(1, 127)).unwrap_or(u8::MAX)
}

/// `SIGINT`, `SIGTERM`, else `signal N`.
pub fn signal_name(signal: i32) -> String {
    match signal {
        SIGINT => "SIGINT".to_owned(),
        SIGTERM => "SIGTERM".to_owned(),
        n => format!("signal {n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;

    #[test]
    fn cancel_terminates_registered_children_and_says_by_what() {
        let cancel = Cancel::new();
        assert!(!cancel.is_cancelled());
        let mut child = cancel
            .spawn(Command::new("sleep").arg("600").stdin(Stdio::null()))
            .expect("sleep");
        assert!(cancel.cancel(SIGINT));
        assert!(!cancel.cancel(SIGTERM), "the first signal wins");
        assert_eq!(cancel.signal(), Some(SIGINT));
        let status = child.wait().expect("wait");
        assert_eq!(status.signal(), Some(SIGTERM));
        // Spawned after the cancel: terminated at once.
        let mut late = cancel
            .spawn(Command::new("sleep").arg("600").stdin(Stdio::null()))
            .expect("sleep");
        assert_eq!(late.wait().expect("wait").signal(), Some(SIGTERM));
    }

    #[test]
    fn a_child_is_in_its_own_group_and_dropping_kills_it() {
        let cancel = Cancel::new();
        let child = cancel
            .spawn(Command::new("sleep").arg("600").stdin(Stdio::null()))
            .expect("sleep");
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid")).expect("pid");
        assert_eq!(rustix::process::getpgid(Some(pid)).expect("pgid"), pid);
        drop(child);
        assert!(
            rustix::process::getpgid(Some(pid)).is_err(),
            "the child is gone and reaped"
        );
        let out = cancel
            .spawn(
                Command::new("sh")
                    .args(["-c", "echo out; echo err >&2; exit 3"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped()),
            )
            .expect("sh")
            .wait_with_output()
            .expect("output");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
    }

    #[test]
    fn a_stopped_child_dies_of_kill_group_and_is_watched_without_reaping() {
        let cancel = Cancel::new();
        let mut child = cancel
            .spawn(Command::new("sleep").arg("600").stdin(Stdio::null()))
            .expect("sleep");
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid")).expect("pid");
        rustix::process::kill_process(pid, Signal::STOP).expect("SIGSTOP");
        let watch = child.exit_watch();
        let watcher = std::thread::spawn(move || watch.wait());
        child.kill_group();
        watcher
            .join()
            .expect("the watch returns once the child died");
        assert!(
            rustix::process::getpgid(Some(pid)).is_ok(),
            "watched, not reaped: the group id stays the child's"
        );
        assert_eq!(child.wait().expect("wait").signal(), Some(9));
        assert!(rustix::process::getpgid(Some(pid)).is_err(), "reaped");
    }

    #[test]
    fn a_reaped_process_is_not_alive() {
        assert!(process_alive(std::process::id()));
        let mut child = Command::new("true").spawn().expect("true");
        let pid = child.id();
        child.wait().expect("wait");
        assert!(!process_alive(pid));
        assert!(!process_alive(0));
    }

    #[test]
    fn exit_statuses_follow_the_shell_convention() {
        assert_eq!(exit_status_for(SIGINT), 130);
        assert_eq!(exit_status_for(SIGTERM), 143);
        assert_eq!(signal_name(SIGINT), "SIGINT");
    }
}
