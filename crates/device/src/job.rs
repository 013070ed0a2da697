//! One device session's work as data: open a card, register a callable,
//! upload the inputs, run, download the outputs, free, close. A persistent
//! worker opens once ([`open_cards`]) and runs case after case on the open
//! devices ([`run_opened`]).
//!
//! The same [`DeviceJob`] runs in this process ([`run_session`]) or in a
//! supervised worker process (`crate::worker`); either way the steps, their
//! order and their error messages are these.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::RuntimeError;
use scene_abi::SceneTensorDesc;

use crate::runtime::{CallableHandle, CallableImage, DeviceSession, Direction, RunArg, Runtime};

/// A tensor argument of a run.
#[derive(Debug, Clone)]
pub struct TensorArg<'a> {
    /// Names the tensor in messages.
    pub name: &'a str,
    pub direction: Direction,
    /// Bytes to allocate on the device.
    pub size: u64,
    /// Bytes to upload first (`In` and `InOut` tensors).
    pub input: Option<&'a [u8]>,
    /// `SCENE_DTYPE_*` and shape: the metadata the orchestration reads
    /// (contiguous, row-major).
    pub dtype: u32,
    pub shape: Vec<u64>,
}

/// One argument of a run, in orchestration-signature order.
#[derive(Debug, Clone)]
pub enum JobArg<'a> {
    Tensor(TensorArg<'a>),
    Scalar(u64),
}

/// Everything one device session needs.
#[derive(Debug, Clone)]
pub struct DeviceJob<'a> {
    /// The card to open (the first of the held ones; a worker takes it
    /// from its supervisor's lease instead).
    pub card: u32,
    /// The runtime's `key=value;...` open options.
    pub options: &'a str,
    pub callable: CallableImage<'a>,
    /// The arguments (of every rank, for a group: see [`GroupJob`]).
    pub args: Vec<JobArg<'a>>,
    /// A level-3 rank group instead of one card: `None` for level 2.
    pub group: Option<GroupJob>,
    /// How many times to run the callable in this one session (`0` counts
    /// as 1): before every run after the first the inputs are uploaded
    /// again and the outputs zeroed (as the first run found them), and
    /// after every run the outputs are downloaded, so every round's
    /// outputs come back and are that round's own.
    pub rounds: u32,
    /// `SCENE_RT_TRACE_*` flags (0: off): the last run of the session is
    /// recorded by the runtime (`scene_rt_trace_enable`) and its record
    /// comes back in [`SessionOutput::traces`].
    pub trace: u32,
    /// `--dump-args`: record every task's arguments into this directory
    /// (`rank<R>/` under it for each rank of a group); the runtime must
    /// offer `scene_rt_args_record`. With several rounds the last run's
    /// record remains.
    pub args_dump: Option<&'a Path>,
}

/// A level-3 job: `ranks` cards, one chip callable per rank, run
/// concurrently in one communication domain.
///
/// [`DeviceJob::args`] holds every rank's arguments, rank-major: rank r's
/// are `args[r * per_rank .. (r + 1) * per_rank]` with `per_rank =
/// args.len() / ranks`. Outputs come back rank-major too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupJob {
    pub ranks: u32,
    /// Bytes of every rank's window.
    pub window_size: u64,
    /// The window as a tensor (`[comm] window_tensor`): the index, among a
    /// rank's arguments, of the tensor argument that is the rank's window
    /// (`scene_rt_comm_create2` with each rank's allocation of it); `None`:
    /// the runtime's own zeroed windows.
    #[serde(default)]
    pub window_arg: Option<u32>,
    /// The domain's `key=value;...` options (`timeout_ms=`).
    pub comm_options: String,
    /// The cards, rank r on `cards[r]` (set once they are held).
    pub cards: Vec<u32>,
}

impl DeviceJob<'_> {
    /// The cards the session opens: the group's, rank by rank, or the one
    /// card.
    pub fn cards(&self) -> Vec<u32> {
        match &self.group {
            Some(g) => g.cards.clone(),
            None => vec![self.card],
        }
    }

    /// Names of the arguments by position (`None` for scalars), for naming
    /// `run argument N` in runtime messages.
    pub fn arg_names(&self) -> Vec<Option<String>> {
        self.args
            .iter()
            .map(|a| match a {
                JobArg::Tensor(t) => Some(t.name.to_owned()),
                JobArg::Scalar(_) => None,
            })
            .collect()
    }
}

/// What a finished session produced.
#[derive(Debug, Clone, Default)]
pub struct SessionOutput {
    /// One buffer per `Out`/`InOut` tensor, in argument order, for every
    /// round in turn (round-major: round 0's outputs, then round 1's, ...).
    pub outputs: Vec<Vec<u8>>,
    /// Each round's run time: the run call alone (upload and download
    /// excluded) for one card, the whole group session for a rank group.
    pub run_times: Vec<Duration>,
    /// The session's work on the open card(s): register, upload, run,
    /// download, free, every round. Opening and closing are not in it.
    pub session: Duration,
    /// Opening the card(s), for [`run_session`] (zero for `run_opened`:
    /// the devices were open already).
    pub open: Duration,
    /// A group's per-rank run time (empty for one card).
    pub ranks: Vec<Duration>,
    /// With [`DeviceJob::trace`]: the runtime's record of the last run,
    /// JSON text, one per rank (one for one card).
    pub traces: Vec<String>,
}

/// A runtime call of the session failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{what}: {message}")]
pub struct SessionStepError {
    /// The step: `opening card 0`, `uploading tensor `a``, `run`, ...
    pub what: String,
    /// The runtime's `SCENE_RT_E_*` status, when a call returned one.
    pub status: Option<i32>,
    pub message: String,
    /// The runtime says the device is unusable.
    pub device_fatal: bool,
}

impl SessionStepError {
    fn new(what: impl Into<String>, e: RuntimeError, names: &[Option<String>]) -> Self {
        SessionStepError {
            what: what.into(),
            status: e.status(),
            device_fatal: e.is_device_fatal(),
            message: name_run_args(&e.to_string(), names),
        }
    }

    pub fn is_timeout(&self) -> bool {
        self.status == Some(scene_abi::SCENE_RT_E_TIMEOUT)
    }
}

/// Rewrites `run argument N` in a runtime message as `tensor `x` (run
/// argument N)`, so a message names what the user wrote.
pub fn name_run_args(message: &str, names: &[Option<String>]) -> String {
    const TOKEN: &str = "run argument ";
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(TOKEN) {
        let after = &rest[at + TOKEN.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let name = after[..digits]
            .parse::<usize>()
            .ok()
            .and_then(|i| names.get(i).cloned().flatten());
        out.push_str(&rest[..at]);
        match name {
            Some(name) => out.push_str(&format!("tensor `{name}` ({TOKEN}{})", &after[..digits])),
            None => out.push_str(&rest[at..at + TOKEN.len() + digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

/// Runs `job` on a loaded runtime: open, register, upload, run, download,
/// free, close. [`SessionOutput::open`] is the time the open took.
pub fn run_session(
    runtime: &Runtime,
    job: &DeviceJob<'_>,
) -> Result<SessionOutput, SessionStepError> {
    let started = Instant::now();
    let mut devices = open_cards(runtime, &job.cards(), job.options)?;
    let open = started.elapsed();
    let mut out = run_opened(runtime, &mut devices, job)?;
    drop(devices);
    out.open = open;
    Ok(out)
}

/// Opens `cards` with `options`: one device per card (rank r on
/// `cards[r]` for a group). What a persistent worker keeps between cases.
/// A group's cards are opened at once, one thread each: a real runtime's
/// open takes seconds a card, and k of them in a row would hold k cards
/// for k opens.
pub fn open_cards<'rt>(
    runtime: &'rt Runtime,
    cards: &[u32],
    options: &str,
) -> Result<Vec<DeviceSession<'rt>>, SessionStepError> {
    let open = |rank: usize, card: u32| {
        let what = if cards.len() > 1 {
            format!("opening card {card} (rank {rank})")
        } else {
            format!("opening card {card}")
        };
        runtime
            .open(card, options)
            .map_err(|e| SessionStepError::new(what, e, &[]))
    };
    if let [card] = cards {
        return Ok(vec![open(0, *card)?]);
    }
    let opened: Vec<Result<DeviceSession<'rt>, SessionStepError>> = std::thread::scope(|s| {
        let threads: Vec<_> = cards
            .iter()
            .enumerate()
            .map(|(rank, &card)| s.spawn(move || open(rank, card)))
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join().unwrap_or_else(|_| {
                    Err(SessionStepError {
                        what: "opening the group's cards".into(),
                        status: None,
                        message: "an opening thread panicked".into(),
                        device_fatal: false,
                    })
                })
            })
            .collect()
    });
    // The first failure, lowest rank first; devices that did open are
    // closed when the vector drops.
    opened.into_iter().collect()
}

/// Runs `job` on devices [`open_cards`] opened for [`DeviceJob::cards`]:
/// register, upload, run, download, free, every round. The devices stay
/// open; a failed session may leave buffers and callables behind (a
/// persistent worker resets the devices after every case).
pub fn run_opened(
    runtime: &Runtime,
    devices: &mut [DeviceSession<'_>],
    job: &DeviceJob<'_>,
) -> Result<SessionOutput, SessionStepError> {
    run_opened_then(runtime, devices, job, &mut || false)
}

/// [`run_opened`], with `after_runs` called once the last run has
/// returned and its outputs are downloaded, before anything is freed or
/// unregistered. When it returns true nothing is: the callables (and the
/// code of user libraries, which unregistering the last callable would
/// unload) stay as they are, because the caller is about to end the
/// process (a persistent worker that found a thread user code left
/// running: unloading the code under it would crash the worker before it
/// could reply).
pub fn run_opened_then(
    runtime: &Runtime,
    devices: &mut [DeviceSession<'_>],
    job: &DeviceJob<'_>,
    after_runs: &mut dyn FnMut() -> bool,
) -> Result<SessionOutput, SessionStepError> {
    // The caller's check is not the session's work: timed apart and
    // left out of `SessionOutput::session`.
    let mut checking = Duration::ZERO;
    let mut after_runs = || {
        let t = Instant::now();
        let keep = after_runs();
        checking += t.elapsed();
        keep
    };
    let rounds = job.rounds.max(1);
    if let Some(group) = &job.group {
        // A group's domain lives for one run: each round is a group run.
        let started = Instant::now();
        let mut all = SessionOutput::default();
        for round in 1..=rounds {
            let t = Instant::now();
            // Traced: the last round only.
            let trace = if round == rounds { job.trace } else { 0 };
            let keep = |_: ()| round == rounds && after_runs();
            let out = run_group(runtime, devices, job, group, trace, keep)
                .map_err(|e| in_round(e, round, rounds))?;
            all.run_times.push(t.elapsed());
            all.outputs.extend(out.outputs);
            all.ranks = out.ranks;
            all.traces = out.traces;
        }
        all.session = started.elapsed().saturating_sub(checking);
        return Ok(all);
    }
    let names = job.arg_names();
    let started = Instant::now();
    let [device] = devices else {
        return Err(SessionStepError {
            what: format!("opening card {}", job.card),
            status: None,
            message: format!("one card's job on {} open devices", devices.len()),
            device_fatal: false,
        });
    };
    if let Some(dir) = job.args_dump {
        device
            .record_args(dir)
            .map_err(|e| SessionStepError::new("recording task arguments", e, &names))?;
    }
    let (outputs, run_times, traces) = on_device(device, job, rounds, &names, &mut after_runs)?;
    Ok(SessionOutput {
        outputs,
        run_times,
        session: started.elapsed().saturating_sub(checking),
        open: Duration::ZERO,
        ranks: Vec::new(),
        traces,
    })
}

/// Stages once, then runs `rounds` times (inputs uploaded again and
/// outputs zeroed before each run after the first, outputs downloaded
/// after each), then frees (unless `after_runs` says not to: see
/// [`run_opened_then`]).
/// With `job.trace`, the last run is recorded and its record returned.
#[allow(clippy::type_complexity)]
fn on_device(
    device: &DeviceSession<'_>,
    job: &DeviceJob<'_>,
    rounds: u32,
    names: &[Option<String>],
    after_runs: &mut dyn FnMut() -> bool,
) -> Result<(Vec<Vec<u8>>, Vec<Duration>, Vec<String>), SessionStepError> {
    let staged = stage(device, &job.callable, &job.args, names)?;
    let mut outputs = Vec::new();
    let mut times = Vec::with_capacity(rounds as usize);
    let mut traces = Vec::new();
    for round in 1..=rounds {
        if round > 1 {
            reupload(device, &staged, names).map_err(|e| in_round(e, round, rounds))?;
        }
        // Trace (issue 19): the last round only, so earlier rounds run
        // untraced.
        if round == rounds && job.trace != 0 {
            device
                .trace_enable(job.trace)
                .map_err(|e| SessionStepError::new("enabling the trace", e, names))?;
        }
        let t = Instant::now();
        device
            .run_described(staged.handle, &staged.args, &staged.descs)
            .map_err(|e| in_round(SessionStepError::new("run", e, names), round, rounds))?;
        times.push(t.elapsed());
        if round == rounds && job.trace != 0 {
            let taken = device
                .trace_take()
                .map_err(|e| SessionStepError::new("taking the trace", e, names))?;
            traces.extend(taken);
        }
        outputs.extend(download(device, &staged, names).map_err(|e| in_round(e, round, rounds))?);
    }
    if !after_runs() {
        release(device, staged, names)?;
    }
    Ok((outputs, times, traces))
}

/// Names the round of a multi-round session in its error.
fn in_round(mut e: SessionStepError, round: u32, rounds: u32) -> SessionStepError {
    if rounds > 1 {
        e.what = format!("round {round} of {rounds}: {}", e.what);
    }
    e
}

/// Puts every tensor back as the first round found it, so each round's
/// outputs are its own: inputs (and `InOut` tensors) uploaded again, and
/// `Out` tensors, which the first round found as freshly allocated
/// memory (zeros), zeroed again. Without the zeroing a run that writes
/// nothing (an orchestration that submits only on its first call) would
/// hand back the first round's results and pass every later round.
fn reupload(
    device: &DeviceSession<'_>,
    staged: &Staged<'_>,
    names: &[Option<String>],
) -> Result<(), SessionStepError> {
    let mut zeros: Vec<u8> = Vec::new();
    for &(t, addr) in &staged.buffers {
        let bytes = match t.input {
            Some(bytes) => bytes,
            None => {
                let len = usize::try_from(t.size).unwrap_or(usize::MAX);
                if zeros.len() < len {
                    zeros.resize(len, 0);
                }
                &zeros[..len]
            }
        };
        device.copy_to(addr, bytes).map_err(|e| {
            SessionStepError::new(format!("resetting tensor `{}`", t.name), e, names)
        })?;
    }
    Ok(())
}

/// A callable registered and its arguments uploaded on one device.
#[derive(Debug)]
struct Staged<'j> {
    handle: CallableHandle,
    args: Vec<RunArg>,
    descs: Vec<SceneTensorDesc>,
    buffers: Vec<(&'j TensorArg<'j>, u64)>,
}

/// Registers `callable` and allocates and uploads `args` on `device`.
fn stage<'j>(
    device: &DeviceSession<'_>,
    callable: &CallableImage<'_>,
    job_args: &'j [JobArg<'j>],
    names: &[Option<String>],
) -> Result<Staged<'j>, SessionStepError> {
    let err = |what: String| move |e| SessionStepError::new(what, e, names);
    let handle = device
        .register(callable)
        .map_err(err("registering the callable".into()))?;
    let mut args = Vec::with_capacity(job_args.len());
    let mut descs = Vec::with_capacity(job_args.len());
    let mut buffers = Vec::new();
    for a in job_args {
        match a {
            JobArg::Scalar(v) => {
                args.push(RunArg::Scalar(*v));
                descs.push(SceneTensorDesc::default());
            }
            JobArg::Tensor(t) => {
                let addr = device
                    .malloc(t.size)
                    .map_err(err(format!(
                        "allocating tensor `{}` ({} bytes)",
                        t.name, t.size
                    )))?
                    .addr;
                buffers.push((t, addr));
                if let Some(bytes) = t.input {
                    device
                        .copy_to(addr, bytes)
                        .map_err(err(format!("uploading tensor `{}`", t.name)))?;
                }
                args.push(RunArg::Tensor {
                    direction: t.direction,
                    addr,
                    size: t.size,
                });
                descs.push(SceneTensorDesc::contiguous(t.dtype, &t.shape));
            }
        }
    }
    Ok(Staged {
        handle,
        args,
        descs,
        buffers,
    })
}

/// Downloads the outputs of a staged run, in argument order.
fn download(
    device: &DeviceSession<'_>,
    staged: &Staged<'_>,
    names: &[Option<String>],
) -> Result<Vec<Vec<u8>>, SessionStepError> {
    let mut outputs = Vec::new();
    for &(t, addr) in &staged.buffers {
        if t.direction != Direction::In {
            let mut out = vec![0; t.size as usize];
            device.copy_from(addr, &mut out).map_err(|e| {
                SessionStepError::new(format!("downloading tensor `{}`", t.name), e, names)
            })?;
            outputs.push(out);
        }
    }
    Ok(outputs)
}

/// Frees a staged run's buffers and unregisters its callable.
fn release(
    device: &DeviceSession<'_>,
    staged: Staged<'_>,
    names: &[Option<String>],
) -> Result<(), SessionStepError> {
    let err = |what: String| move |e| SessionStepError::new(what, e, names);
    for &(_, addr) in &staged.buffers {
        device
            .free(addr)
            .map_err(err("freeing device memory".into()))?;
    }
    let _ = device.unregister(staged.handle);
    Ok(())
}

// ---- level 3: rank groups ------------------------------------------------
//
// A level-3 session: one device per rank, a communication domain over
// them, every rank's run on its own thread at the same time.
//
// Open and stage every rank (register, upload), create the domain, run
// the ranks concurrently (a rank that waits for a peer cannot block the
// peer: each has its own thread and its own emulated cores), destroy the
// domain, then download and close. The runtime makes every rank of a
// failed group fail: the failed rank with its own error, the others with
// the group's first message; the session's error is a card failure
// (timeout, fatal) if any, else that message.

/// Runs `job` as the rank group `group` (see [`GroupJob`]). `keep` is
/// asked once the ranks have run: true leaves the callables registered
/// and the buffers allocated (see [`run_opened_then`]).
fn run_group(
    runtime: &Runtime,
    devices: &mut [DeviceSession<'_>],
    job: &DeviceJob<'_>,
    group: &GroupJob,
    trace: u32,
    mut keep: impl FnMut(()) -> bool,
) -> Result<SessionOutput, SessionStepError> {
    let ranks = group.ranks as usize;
    let setup = |message: String| SessionStepError {
        what: "setting up the rank group".into(),
        status: None,
        message,
        device_fatal: false,
    };
    if ranks == 0 || !job.args.len().is_multiple_of(ranks) {
        return Err(setup(format!(
            "{} arguments do not split into {ranks} ranks",
            job.args.len()
        )));
    }
    if group.cards.len() != ranks {
        return Err(setup(format!(
            "{ranks} ranks but {} cards held ({:?})",
            group.cards.len(),
            group.cards
        )));
    }
    let per_rank = job.args.len() / ranks;
    let rank_args: Vec<_> = job.args.chunks(per_rank).collect();
    let all_names = job.arg_names();
    let names: Vec<&[Option<String>]> = all_names.chunks(per_rank).collect();
    if devices.len() != ranks {
        return Err(setup(format!(
            "{ranks} ranks but {} devices open",
            devices.len()
        )));
    }
    let started = Instant::now();
    if let Some(dir) = job.args_dump {
        for (rank, device) in devices.iter().enumerate() {
            device
                .record_args(&dir.join(format!("rank{rank}")))
                .map_err(|e| {
                    SessionStepError::new(format!("recording task arguments (rank {rank})"), e, &[])
                })?;
        }
    }
    let mut staged = Vec::with_capacity(ranks);
    for (rank, device) in devices.iter().enumerate() {
        staged.push(
            stage(device, &job.callable, rank_args[rank], names[rank])
                .map_err(|e| in_rank(e, rank))?,
        );
    }
    if trace != 0 {
        for (rank, device) in devices.iter().enumerate() {
            device.trace_enable(trace).map_err(|e| {
                in_rank(
                    SessionStepError::new("enabling the trace", e, names[rank]),
                    rank,
                )
            })?;
        }
    }
    let window_addrs = match group.window_arg {
        None => None,
        Some(i) => Some(
            staged
                .iter()
                .enumerate()
                .map(|(rank, st)| match st.args.get(i as usize) {
                    Some(RunArg::Tensor { addr, .. }) => Ok(*addr),
                    _ => Err(setup(format!(
                        "rank {rank}: argument {i} (the window tensor) is not a tensor argument"
                    ))),
                })
                .collect::<Result<Vec<u64>, _>>()?,
        ),
    };
    let refs: Vec<&DeviceSession<'_>> = devices.iter().collect();
    let comm = runtime
        .comm_create_at(
            &refs,
            group.window_size,
            window_addrs.as_deref(),
            &group.comm_options,
        )
        .map_err(|e| SessionStepError::new("creating the communication domain", e, &[]))?;
    let results: Vec<(Result<(), SessionStepError>, Duration)> = std::thread::scope(|s| {
        let threads: Vec<_> = devices
            .iter_mut()
            .zip(&staged)
            .zip(&names)
            .enumerate()
            .map(|(rank, ((device, st), names))| {
                let device: &mut DeviceSession<'_> = device;
                std::thread::Builder::new()
                    .name(format!("scene-rank{rank}"))
                    .spawn_scoped(s, move || {
                        let t = Instant::now();
                        let r = device
                            .run_described(st.handle, &st.args, &st.descs)
                            .map_err(|e| {
                                SessionStepError::new(format!("rank {rank}: run"), e, names)
                            });
                        (r, t.elapsed())
                    })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| match t {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    (Err(setup("a rank thread panicked".into())), Duration::ZERO)
                }),
                Err(e) => (
                    Err(setup(format!("cannot start a rank thread: {e}"))),
                    Duration::ZERO,
                ),
            })
            .collect()
    });
    let _ = comm.destroy();
    let times: Vec<Duration> = results.iter().map(|(_, t)| *t).collect();
    let mut errors: Vec<SessionStepError> =
        results.into_iter().filter_map(|(r, _)| r.err()).collect();
    // A card's failure first (a timeout or a fatal device: the harness
    // retires the card), then the group's communication message (it names
    // the first cause), then the rest; lowest rank first within each.
    errors.sort_by_key(|e| {
        if e.device_fatal || e.is_timeout() {
            0
        } else if e.status == Some(scene_abi::SCENE_RT_E_COMM) {
            1
        } else {
            2
        }
    });
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    let mut traces = Vec::new();
    if trace != 0 {
        for (rank, device) in devices.iter().enumerate() {
            let taken = device.trace_take().map_err(|e| {
                in_rank(
                    SessionStepError::new("taking the trace", e, names[rank]),
                    rank,
                )
            })?;
            traces.push(taken.unwrap_or_default());
        }
    }
    let keep = keep(());
    let mut outputs = Vec::new();
    for (rank, (device, st)) in devices.iter().zip(staged).enumerate() {
        let names = names[rank];
        outputs.extend(download(device, &st, names).map_err(|e| in_rank(e, rank))?);
        if !keep {
            release(device, st, names).map_err(|e| in_rank(e, rank))?;
        }
    }
    Ok(SessionOutput {
        outputs,
        run_times: Vec::new(),
        session: started.elapsed(),
        open: Duration::ZERO,
        ranks: times,
        traces,
    })
}

fn in_rank(mut e: SessionStepError, rank: usize) -> SessionStepError {
    e.what = format!("rank {rank}: {}", e.what);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_arguments_are_named() {
        let names = vec![Some("a".into()), None, Some("c".into())];
        assert_eq!(
            name_run_args(
                "wrote past run argument 2 (256 bytes); run argument 1; run argument 12",
                &names
            ),
            "wrote past tensor `c` (run argument 2) (256 bytes); run argument 1; run argument 12"
        );
        assert_eq!(name_run_args("nothing here", &names), "nothing here");
        assert_eq!(name_run_args("run argument ", &names), "run argument ");
    }
}
