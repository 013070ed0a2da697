//! The supervisor side: worker processes kept for the run, one per card
//! (per card group), and the spares that become them.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use scene_util::Cancel;
use scene_util::cancel::CancelChild;

use super::files::{
    CRASH, JobDir, Reply, Request, create_job_dir, job_parent, sweep_job_dirs_once,
};
use super::{
    KILL_GRACE, PreparedJob, STOP_GRACE, WORKER_ENV, WorkerCommand, WorkerError, WorkerRun,
    WorkerSetupError, crash_report, process_state, setup,
};
use crate::held::HeldCard;

/// Worker processes for a run's cards: started before cards are taken,
/// each bound to the card(s) of its first case and kept, card(s) open,
/// for every later case on them. Dropping the pool ends them all (their
/// stdin closes: they close their devices and exit; stragglers are
/// killed with their process groups).
#[derive(Debug)]
pub struct WorkerPool {
    command: WorkerCommand,
    cancel: Cancel,
    state: Mutex<PoolState>,
}

#[derive(Debug, Default)]
struct PoolState {
    /// Idle workers that opened card(s), by those cards in rank order.
    bound: HashMap<Vec<u32>, Worker>,
    /// Started workers that have opened nothing yet.
    spares: Vec<Worker>,
}

/// A worker set aside for a case before its card is taken (see
/// [`WorkerPool::standby`]); back among the spares if unused.
#[derive(Debug)]
pub struct Standby<'p> {
    pool: &'p WorkerPool,
    worker: Option<Worker>,
}

impl Drop for Standby<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.worker.take() {
            self.pool.lock().spares.push(w);
        }
    }
}

/// What the supervisor hears from a worker.
#[derive(Debug)]
enum Event {
    /// A line on the reply channel.
    Line(String),
    /// The reply channel closed (the worker, and anything that inherited
    /// the pipe, is gone or closed it).
    Closed,
    /// The worker exited (not reaped yet).
    Exited,
}

/// One worker process.
#[derive(Debug)]
struct Worker {
    /// In its own process group, registered with the run's [`Cancel`].
    child: CancelChild,
    /// Requests; closing it ends the worker.
    stdin: Option<ChildStdin>,
    events: mpsc::Receiver<Event>,
    /// The worker's own directory (its crash report); removed when the
    /// worker is dropped, after it was reaped.
    dir: JobDir,
    next_id: u64,
}

/// How a case on a worker ended, before it is judged.
enum CaseEnd {
    Replied {
        retire: bool,
        /// What the case left in the worker's process (why it retires).
        left: Option<String>,
    },
    /// The worker ended without replying; it has been reaped.
    Died(ExitStatus),
    /// The worker was stopped (deadline) or could not be talked to.
    Failed(WorkerError),
}

impl WorkerPool {
    pub fn new(command: WorkerCommand, cancel: Cancel) -> WorkerPool {
        WorkerPool {
            command,
            cancel,
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called before a case takes `cards` card(s) out of `healthy`: a
    /// started worker to run it on if no worker is bound to the card(s) it
    /// gets, so that process start-up is never card time. None is started
    /// when every healthy card already has its own (one-card cases).
    pub fn standby(&self, cards: usize, healthy: &[u32]) -> Result<Standby<'_>, WorkerError> {
        if self.cancel.is_cancelled() {
            return Err(WorkerError::Cancelled);
        }
        let spare = {
            let mut state = self.lock();
            let covered = cards == 1
                && !healthy.is_empty()
                && healthy.iter().all(|c| state.bound.contains_key(&vec![*c]));
            if covered {
                return Ok(Standby {
                    pool: self,
                    worker: None,
                });
            }
            state.spares.pop()
        };
        let worker = match spare {
            Some(w) => w,
            None => Worker::spawn(&self.command, &self.cancel)?,
        };
        Ok(Standby {
            pool: self,
            worker: Some(worker),
        })
    }

    /// Runs `job` on `cards` (held, as `held` proves): on the worker bound
    /// to exactly those cards, else on the standby (which opens them),
    /// waiting at most `deadline` (then the worker is stopped). A worker
    /// that finished its case cleanly is kept for the next one on these
    /// cards; one that died, was stopped or retired is reaped before this
    /// returns.
    pub fn run(
        &self,
        mut standby: Standby<'_>,
        job: &PreparedJob,
        _held: &dyn HeldCard,
        cards: &[u32],
        deadline: Option<Duration>,
    ) -> WorkerRun {
        let started = Instant::now();
        let began_ns = crate::runtime::monotonic_ns();
        let bound = self.lock().bound.remove(cards).filter(Worker::alive);
        let worker = bound.or_else(|| standby.worker.take().filter(Worker::alive));
        drop(standby);
        let (result, keep, left) = self.serve(worker, job, cards, deadline);
        if let Some(w) = keep {
            self.lock().bound.insert(cards.to_vec(), w);
        }
        let open = job.open_file();
        WorkerRun {
            result: match result {
                // However the worker ended, a cancelled run's session did
                // not finish for its own reasons.
                Err(_) if self.cancel.is_cancelled() => Err(WorkerError::Cancelled),
                other => other,
            },
            elapsed: started.elapsed(),
            began_ns,
            opens: open.opens,
            open: Duration::from_secs_f64(open.open_s.max(0.0)),
            left,
        }
    }

    /// The case on `worker` (a new one when there is none: no standby was
    /// set aside because the card had its worker, and that one was gone):
    /// its outcome, the worker when it may serve the next case, and what
    /// the case left in the worker's process when it did.
    #[allow(clippy::type_complexity)]
    fn serve(
        &self,
        worker: Option<Worker>,
        job: &PreparedJob,
        cards: &[u32],
        deadline: Option<Duration>,
    ) -> (
        Result<Duration, WorkerError>,
        Option<Worker>,
        Option<String>,
    ) {
        let mut worker = match worker.map_or_else(|| Worker::spawn(&self.command, &self.cancel), Ok)
        {
            Ok(w) => w,
            Err(e) => return (Err(e), None, None),
        };
        let (result, keep) = match worker.case(job, cards, deadline) {
            CaseEnd::Replied {
                retire: false,
                left,
            } => return (job.verdict(), Some(worker), left),
            CaseEnd::Replied { retire: true, left } => {
                worker.retire();
                return (job.verdict(), None, left);
            }
            CaseEnd::Died(status) => {
                let report =
                    std::fs::read_to_string(worker.dir.path().join(CRASH)).unwrap_or_default();
                let crash = crash_report(&report, status, job.names());
                (Err(WorkerError::Crashed(crash)), None)
            }
            CaseEnd::Failed(e @ WorkerError::Unkillable { .. }) => {
                // Reaped (after one more SIGKILL) whenever it dies; the run
                // goes on meanwhile.
                std::thread::spawn(move || drop(worker));
                (Err(e), None)
            }
            CaseEnd::Failed(e) => (Err(e), None),
        };
        (result, keep, None)
    }

    /// Ends every worker: stdin closed (each closes its devices and
    /// exits), then, past a grace, their process groups killed; all reaped.
    pub fn shutdown(&self) {
        let workers: Vec<Worker> = {
            let mut state = self.lock();
            let mut all: Vec<Worker> = state.bound.drain().map(|(_, w)| w).collect();
            all.append(&mut state.spares);
            all
        };
        let mut workers = workers;
        for w in &mut workers {
            drop(w.stdin.take());
        }
        let until = Instant::now() + KILL_GRACE;
        for mut w in workers {
            let left = until.saturating_duration_since(Instant::now());
            w.wait_exit(left);
            w.child.kill_group();
            let _ = w.child.wait();
        }
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Worker {
    /// Starts a worker in a directory of its own, its stdin and stdout
    /// piped (requests, replies); its stderr is the supervisor's.
    fn spawn(command: &WorkerCommand, cancel: &Cancel) -> Result<Worker, WorkerError> {
        sweep_job_dirs_once();
        let parent = job_parent();
        let dir = create_job_dir(&parent)
            .map_err(setup("cannot create a worker directory in", &parent))?;
        let mut child = cancel
            .spawn(
                Command::new(&command.program)
                    .args(&command.args)
                    .env(WORKER_ENV, dir.path())
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped()),
            )
            .map_err(setup("cannot start the device worker", &command.program))?;
        let stdin = child.child_mut().stdin.take();
        let stdout = child.child_mut().stdout.take();
        let (tx, events) = mpsc::channel();
        if let Some(out) = stdout {
            let tx = tx.clone();
            std::thread::Builder::new()
                .name("scene-worker-replies".into())
                .spawn(move || {
                    for line in BufReader::new(out).lines() {
                        let Ok(line) = line else { break };
                        if tx.send(Event::Line(line)).is_err() {
                            return;
                        }
                    }
                    let _ = tx.send(Event::Closed);
                })
                .map_err(setup("cannot follow the device worker", &command.program))?;
        }
        // Only observes the exit: the child stays unreaped, so its process
        // group can still be signalled without any risk of hitting a
        // recycled id.
        let watch = child.exit_watch();
        std::thread::Builder::new()
            .name("scene-worker-exit".into())
            .spawn(move || {
                watch.wait();
                let _ = tx.send(Event::Exited);
            })
            .map_err(setup("cannot follow the device worker", &command.program))?;
        Ok(Worker {
            child,
            stdin,
            events,
            dir,
            next_id: 1,
        })
    }

    /// Whether the idle worker is still there; one that is not is reaped.
    fn alive(w: &Worker) -> bool {
        loop {
            match w.events.try_recv() {
                Ok(Event::Line(_)) => continue,
                Ok(Event::Closed | Event::Exited) | Err(mpsc::TryRecvError::Disconnected) => {
                    w.child.kill_group();
                    return false;
                }
                Err(mpsc::TryRecvError::Empty) => return true,
            }
        }
    }

    /// Sends the request for `job` on `cards` and waits for its reply, the
    /// worker's end or the deadline.
    fn case(&mut self, job: &PreparedJob, cards: &[u32], deadline: Option<Duration>) -> CaseEnd {
        let id = self.next_id;
        self.next_id += 1;
        let request = Request {
            id,
            job: job.dir().to_path_buf(),
            cards: cards.to_vec(),
        };
        let mut line = match serde_json::to_vec(&request) {
            Ok(l) => l,
            Err(e) => return CaseEnd::Failed(WorkerSetupError::Encode(Arc::new(e)).into()),
        };
        line.push(b'\n');
        let sent = match self.stdin.as_mut() {
            Some(s) => s.write_all(&line).and_then(|()| s.flush()),
            None => Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe)),
        };
        if sent.is_err() {
            // It died before the request: say how, from its status.
            return self.died();
        }
        let until = deadline.map(|d| Instant::now() + d);
        loop {
            let event = match until {
                Some(t) => self
                    .events
                    .recv_timeout(t.saturating_duration_since(Instant::now())),
                None => self
                    .events
                    .recv()
                    .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            };
            match event {
                Ok(Event::Line(text)) => match reply_to(id, &text) {
                    Some(r) => {
                        return CaseEnd::Replied {
                            retire: r.retire,
                            left: r.left,
                        };
                    }
                    // Not a reply to this request: stray output on the
                    // channel is ignored.
                    None => continue,
                },
                Ok(Event::Closed) => continue,
                Ok(Event::Exited) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // A retiring worker replies, then exits at once: its
                    // exit can be heard before the reply's line is read.
                    // With the group gone (nothing else can hold the
                    // pipe), the pipe is read to its end first.
                    self.child.kill_group();
                    if let Some(r) = late_reply(&self.events, id, STOP_GRACE) {
                        // Gone either way: never kept for another case.
                        return CaseEnd::Replied {
                            retire: true,
                            left: r.left,
                        };
                    }
                    return self.died();
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return CaseEnd::Failed(self.stop_late(deadline.unwrap_or_default()));
                }
            }
        }
    }

    /// The worker ended without a reply: what is left of its process group
    /// is killed (a daemon user code forked dies with it), then it is
    /// reaped.
    fn died(&mut self) -> CaseEnd {
        self.child.exit_watch().wait();
        self.child.kill_group();
        match self.child.wait() {
            Ok(status) => CaseEnd::Died(status),
            Err(e) => CaseEnd::Failed(WorkerSetupError::Wait(Arc::new(e)).into()),
        }
    }

    /// A worker that said it retires: it exits by itself at once; its
    /// group is killed and it is reaped before the card is released.
    fn retire(mut self) {
        drop(self.stdin.take());
        self.wait_exit(STOP_GRACE);
        self.child.kill_group();
        let _ = self.child.wait();
    }

    /// Waits up to `grace` for the worker's exit event.
    fn wait_exit(&self, grace: Duration) -> bool {
        let until = Instant::now() + grace;
        loop {
            match self
                .events
                .recv_timeout(until.saturating_duration_since(Instant::now()))
            {
                Ok(Event::Exited) | Err(mpsc::RecvTimeoutError::Disconnected) => return true,
                Ok(_) => continue,
                Err(mpsc::RecvTimeoutError::Timeout) => return false,
            }
        }
    }

    /// Stops a worker past its deadline: closing stdin makes a busy worker
    /// abort; one that does not exit within [`STOP_GRACE`] (stopped by a
    /// signal, stuck in the kernel or a driver) has its whole process
    /// group killed, and is reaped before this returns, so the card's lock
    /// outlives it. One that survives even `SIGKILL` for [`KILL_GRACE`] is
    /// left to a thread that reaps it whenever it dies
    /// ([`WorkerError::Unkillable`]).
    fn stop_late(&mut self, deadline: Duration) -> WorkerError {
        drop(self.stdin.take());
        if self.wait_exit(STOP_GRACE) {
            self.child.kill_group();
            let _ = self.child.wait();
            return WorkerError::TimedOut(deadline);
        }
        // Read before the kill: afterwards every process is a dying one.
        let state = process_state(self.child.id());
        self.child.kill_group();
        if self.wait_exit(KILL_GRACE) {
            let _ = self.child.wait();
            return WorkerError::Unresponsive { deadline, state };
        }
        WorkerError::Unkillable { deadline, state }
    }
}

/// `line` as the reply to request `id`, if it is that.
fn reply_to(id: u64, line: &str) -> Option<Reply> {
    match serde_json::from_str::<Reply>(line.trim()) {
        Ok(r) if r.id == id => Some(r),
        _ => None,
    }
}

/// After the worker's exit: the reply to `id` among the lines still on
/// its reply channel, read until the channel closes (waiting at most
/// `grace` for that).
fn late_reply(events: &mpsc::Receiver<Event>, id: u64, grace: Duration) -> Option<Reply> {
    let until = Instant::now() + grace;
    loop {
        match events.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(Event::Line(text)) => {
                if let Some(reply) = reply_to(id, &text) {
                    return Some(reply);
                }
            }
            Ok(Event::Exited) => continue,
            Ok(Event::Closed) | Err(_) => return None,
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        drop(self.stdin.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flake this guards against: a worker that replied `retire` and
    /// exited was failed as "exited with status 0 before reporting a
    /// result" whenever its exit was heard before its reply's line.
    #[test]
    fn a_reply_heard_after_the_exit_still_counts() {
        let (tx, events) = mpsc::channel();
        tx.send(Event::Exited).unwrap();
        tx.send(Event::Line("scene: stray output".into())).unwrap();
        tx.send(Event::Line(r#"{"id":6,"retire":false}"#.into()))
            .unwrap();
        tx.send(Event::Line(r#"{"id":7,"retire":true}"#.into()))
            .unwrap();
        tx.send(Event::Closed).unwrap();
        let reply = late_reply(&events, 7, KILL_GRACE).expect("the reply");
        assert!(reply.retire);
    }

    #[test]
    fn no_reply_before_the_channel_closed_is_none() {
        let (tx, events) = mpsc::channel();
        tx.send(Event::Line(r#"{"id":6,"retire":false}"#.into()))
            .unwrap();
        tx.send(Event::Closed).unwrap();
        assert!(late_reply(&events, 7, KILL_GRACE).is_none());
        tx.send(Event::Exited).unwrap();
        drop(tx);
        assert!(late_reply(&events, 7, KILL_GRACE).is_none());
    }
}
