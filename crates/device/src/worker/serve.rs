//! The worker side: a process that loads the runtime once, opens its
//! card(s) once, and runs case after case on them.
//!
//! ```text
//! stdin  (requests)  {"id":1,"job":"/dev/shm/scene-job-ab12","cards":[0]}
//! fd N   (replies)   {"id":1,"retire":false}
//! ```
//!
//! The reply channel is the pipe the supervisor gave as stdout, moved to a
//! descriptor of its own before any user code runs; stdout then points at
//! stderr, so a `printf` in an orchestration is visible but never mixes
//! into the protocol (or into a report on the supervisor's stdout).
//!
//! Each request names a job directory the supervisor wrote before it took
//! the card. The worker loads the runtime and opens the card(s) on its
//! first request (again when a request names other cards or options),
//! writes `open.json`, runs the session on the open devices, resets them
//! (`scene_rt_reset`: callables, memory, traces and counters back to the
//! state of a fresh open; a runtime without it has its devices closed and
//! reopened instead), writes the outputs and `result.json`, and replies.
//! After a failure that leaves the device unusable (a fatal status, a
//! timeout whose kernels may still run, a failed reset) it replies with
//! `retire` and exits without touching the device again.
//!
//! Stdin closing while a case runs (the supervisor died or gave up at the
//! deadline) aborts the process at once, hung kernels and all; closing
//! while idle is the end of the run: the devices are closed and the
//! process exits 0.

use std::fs::File;
use std::io::{BufRead, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use super::files::{
    CASE_CWD, CRASH, DATA, FileArg, JOB, JOB_VERSION, JobFile, OPEN, OpenFile, RESULT, Reply,
    Request, ResultFile, Span, TRACE_PREFIX, parse_direction,
};
use super::residue::Snapshot;
use crate::held::SupervisedCard;
use crate::job::{self, DeviceJob, GroupJob, JobArg, SessionOutput, SessionStepError, TensorArg};
use crate::runtime::{
    ArgsConvention, CallableImage, DeviceSession, IncoreImageRef, IncoreKind, Runtime,
};

/// The worker's entry point: serves requests until stdin closes. `dir` is
/// the worker's own directory (its crash report). Returns the process
/// exit code: 0 after an orderly end, 3 when the protocol broke.
pub fn serve(dir: &Path) -> i32 {
    match Server::start(dir).and_then(Server::run) {
        Ok(()) => 0,
        Err(msg) => {
            eprintln!("scene device worker: {msg}");
            3
        }
    }
}

/// Why a worker could not follow the protocol, run a job or hand back a
/// result (the session's own failures go into the result file instead).
#[derive(Debug, thiserror::Error)]
enum ServeError {
    #[error("cannot set up the reply channel: {0}")]
    ReplyChannel(#[source] std::io::Error),
    #[error("malformed request `{line}`: {source}")]
    Request {
        line: String,
        #[source]
        source: serde_json::Error,
    },
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
    #[error("hosted kernel func_id {func_id}: unknown argument convention {args}")]
    ArgsConvention { func_id: u32, args: u32 },
    #[error("the supervisor holds no card")]
    NoCard,
    #[error("the session returned {returned} output buffers, the job has room for {room}")]
    OutputCount { returned: usize, room: usize },
    #[error("cannot write outputs: {0}")]
    WriteOutputs(#[source] std::io::Error),
    #[error("{0}")]
    Encode(#[source] serde_json::Error),
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot reply to the supervisor: {0}")]
    Reply(#[source] std::io::Error),
}

/// The card(s) this worker has open, and how they were opened.
struct Opened {
    runtime: &'static Runtime,
    cards: Vec<u32>,
    options: String,
    devices: Vec<DeviceSession<'static>>,
}

struct Server {
    dir: PathBuf,
    reply: File,
    requests: mpsc::Receiver<String>,
    /// Set by the stdin reader when it hands over a request, cleared
    /// before the reply: stdin closing while it is set aborts the process.
    busy: Arc<AtomicBool>,
    /// Loaded on the first request and never unloaded: detached threads of
    /// a timed-out run may still execute its code.
    runtime: Option<&'static Runtime>,
    opened: Option<Opened>,
    /// The process as the next case on the open devices will find it,
    /// taken while idle after the last reply (so not in any case's card
    /// time); dropped when the devices are opened again.
    baseline: Option<Snapshot>,
}

impl Server {
    fn start(dir: &Path) -> Result<Server, ServeError> {
        // The supervisor's pipe becomes the reply channel (close-on-exec,
        // so a program user code runs does not inherit it); stdout becomes
        // stderr for user code's prints.
        let reply = File::from(
            std::io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .map_err(ServeError::ReplyChannel)?,
        );
        rustix::stdio::dup2_stdout(std::io::stderr().as_fd())
            .map_err(|e| ServeError::ReplyChannel(e.into()))?;
        let busy = Arc::new(AtomicBool::new(false));
        let (tx, requests) = mpsc::channel();
        let reader_busy = Arc::clone(&busy);
        std::thread::Builder::new()
            .name("scene-worker-stdin".into())
            .spawn(move || {
                let stdin = std::io::stdin();
                for line in stdin.lock().lines() {
                    let Ok(line) = line else { break };
                    reader_busy.store(true, Ordering::SeqCst);
                    if tx.send(line).is_err() {
                        return;
                    }
                }
                if reader_busy.load(Ordering::SeqCst) {
                    // The supervisor is gone or gave up on a running case.
                    std::process::abort();
                }
            })
            .map_err(ServeError::ReplyChannel)?;
        Ok(Server {
            dir: dir.to_path_buf(),
            reply,
            requests,
            busy,
            runtime: None,
            opened: None,
            baseline: None,
        })
    }

    fn run(mut self) -> Result<(), ServeError> {
        while let Ok(line) = self.requests.recv() {
            let request: Request =
                serde_json::from_str(line.trim()).map_err(|source| ServeError::Request {
                    line: line.trim().to_owned(),
                    source,
                })?;
            let (retire, left) = self.case(&request)?;
            let mut text = serde_json::to_vec(&Reply {
                id: request.id,
                retire,
                left,
            })
            .map_err(ServeError::Encode)?;
            text.push(b'\n');
            self.busy.store(false, Ordering::SeqCst);
            self.reply.write_all(&text).map_err(ServeError::Reply)?;
            if retire {
                // The device may be unusable, its kernels may still run:
                // no close, no destructors.
                std::process::exit(0);
            }
            // The card is being released meanwhile: this costs no case
            // card time.
            if self.opened.is_some() {
                self.baseline = Some(Snapshot::take());
            }
        }
        // Stdin closed while idle: the run is over.
        if let Some(opened) = self.opened.take() {
            close(opened);
        }
        Ok(())
    }

    /// One request: the job's session on the open card(s), its result
    /// written. Returns whether the worker must retire, and what the case
    /// left in this process when that is the reason.
    ///
    /// User code runs in a working directory of its own (`cwd/` of the job
    /// directory, removed with it), and the process is compared before and
    /// after the session ([`Snapshot`]): a case that leaves a thread, a
    /// signal handler, an environment change or an open file behind
    /// retires the worker, before the reset (which would unload the code a
    /// leftover thread or handler runs), so that no later case inherits it.
    fn case(&mut self, request: &Request) -> Result<(bool, Option<String>), ServeError> {
        let job_dir = &request.job;
        let loaded = LoadedJob::read(job_dir)?;
        let cards = request.cards.clone();
        let card = *cards.first().ok_or(ServeError::NoCard)?;
        let job = loaded.job(card, &cards)?;
        let home = self.dir.clone();
        // Still true of the process only if the devices stay open.
        let baseline = self.baseline.take().filter(|_| self.open_already(&job));
        let (outcome, retire, left) = match self.open_for(&loaded.spec, &job, job_dir)? {
            Err(e) => (Err(e), false, None),
            Ok(opened) => {
                // Made by the supervisor with the job (off the card).
                let cwd = job_dir.join(CASE_CWD);
                std::env::set_current_dir(&cwd)
                    .or_else(|_| {
                        std::fs::create_dir_all(&cwd)?;
                        std::env::set_current_dir(&cwd)
                    })
                    .map_err(|source| ServeError::Write {
                        path: cwd.clone(),
                        source,
                    })?;
                let before = baseline.unwrap_or_else(Snapshot::take);
                // The job's data file is the worker's, open for the case.
                let data = job_dir.join(DATA);
                let own = [std::fs::canonicalize(&data).unwrap_or(data)];
                // Looked at as soon as user code is done (the last run
                // returned), before the callables are unregistered: a
                // leftover thread or handler may run code of the library
                // unregistering would unload.
                let mut left = None;
                let outcome =
                    job::run_opened_then(opened.runtime, &mut opened.devices, &job, &mut || {
                        left = Snapshot::left_except(&before, &own);
                        left.is_some()
                    });
                if outcome.is_err() && left.is_none() {
                    // A failed session never reached that point; what it
                    // registered stays until the reset below.
                    left = Snapshot::left_except(&before, &own);
                }
                // Back out of the job directory before it is removed.
                let _ = std::env::set_current_dir(&home);
                let mut retire = matches!(&outcome, Err(e) if e.device_fatal || e.is_timeout());
                retire |= left.is_some();
                if !retire {
                    retire = !self.reset();
                }
                (outcome, retire, left)
            }
        };
        write_result(job_dir, &loaded, outcome)?;
        Ok((retire, left))
    }

    /// The devices `job` needs, open: the ones open already if they are
    /// the same cards with the same options, else opened now (loading the
    /// runtime first if this is the first case), with `open.json` written.
    #[allow(clippy::type_complexity)]
    fn open_for(
        &mut self,
        spec: &JobFile,
        job: &DeviceJob<'_>,
        job_dir: &Path,
    ) -> Result<Result<&mut Opened, SessionStepError>, ServeError> {
        let cards = job.cards();
        if !self.open_already(job) {
            self.baseline = None;
            if let Some(old) = self.opened.take() {
                close(old);
            }
            let started = Instant::now();
            let runtime = match self.runtime(&spec.runtime, &cards) {
                Ok(rt) => rt,
                Err(e) => return Ok(Err(e)),
            };
            let devices = match job::open_cards(runtime, &cards, job.options) {
                Ok(d) => d,
                Err(e) => return Ok(Err(e)),
            };
            let open = OpenFile {
                opens: u32::try_from(devices.len()).unwrap_or(u32::MAX),
                open_s: started.elapsed().as_secs_f64(),
            };
            let text = serde_json::to_vec(&open).map_err(ServeError::Encode)?;
            let path = job_dir.join(OPEN);
            std::fs::write(&path, text).map_err(|source| ServeError::Write { path, source })?;
            self.opened = Some(Opened {
                runtime,
                cards,
                options: job.options.to_owned(),
                devices,
            });
        }
        Ok(self.opened.as_mut().ok_or_else(|| SessionStepError {
            what: "opening the card".into(),
            status: None,
            message: "no open device".into(),
            device_fatal: false,
        }))
    }

    /// Whether the devices `job` needs are the open ones, opened with its
    /// options.
    fn open_already(&self, job: &DeviceJob<'_>) -> bool {
        self.opened
            .as_ref()
            .is_some_and(|o| o.cards == job.cards() && o.options == job.options)
    }

    /// The runtime, loaded on the first case (with crash reports into this
    /// worker's directory).
    fn runtime(
        &mut self,
        path: &Path,
        cards: &[u32],
    ) -> Result<&'static Runtime, SessionStepError> {
        let load_error = |message: String| SessionStepError {
            what: "loading the device runtime".into(),
            status: None,
            message,
            device_fatal: false,
        };
        if let Some(rt) = self.runtime {
            if rt.path() != path {
                return Err(load_error(format!(
                    "this worker serves `{}`, the job asks for `{}`",
                    rt.path().display(),
                    path.display()
                )));
            }
            return Ok(rt);
        }
        let held = SupervisedCard::new(cards.to_vec());
        let rt = Runtime::load(&held, path).map_err(|e| load_error(e.to_string()))?;
        let rt: &'static Runtime = Box::leak(Box::new(rt));
        // A runtime without crash reports still runs; crashes are then
        // described by the exit status alone.
        let _ = rt.enable_crash_report(&self.dir.join(CRASH));
        self.runtime = Some(rt);
        Ok(rt)
    }

    /// Returns the open devices to a fresh open's state for the next case:
    /// `scene_rt_reset`, or close them (the next case opens again) when
    /// the runtime lacks it. False when a reset failed: the worker retires.
    fn reset(&mut self) -> bool {
        let Some(opened) = &self.opened else {
            return true;
        };
        if !opened.runtime.has_reset() {
            if let Some(opened) = self.opened.take() {
                close(opened);
            }
            return true;
        }
        for (rank, device) in opened.devices.iter().enumerate() {
            if let Err(e) = device.reset() {
                eprintln!(
                    "scene device worker: resetting card {} after the case: {e}; this worker retires",
                    opened.cards.get(rank).copied().unwrap_or_default()
                );
                return false;
            }
        }
        true
    }
}

/// Closes the devices (the runtime's close may take a while on a card).
fn close(opened: Opened) {
    for device in opened.devices {
        let _ = device.close();
    }
}

/// A job directory's spec and data, read into memory.
struct LoadedJob {
    spec: JobFile,
    data: File,
    orch: Vec<u8>,
    images: Vec<Vec<u8>>,
    inputs: Vec<Option<Vec<u8>>>,
}

impl LoadedJob {
    fn read(dir: &Path) -> Result<LoadedJob, ServeError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| ServeError::Read { path, source })
        };
        let spec: JobFile =
            serde_json::from_slice(&read(JOB)?).map_err(ServeError::MalformedJob)?;
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
        Ok(LoadedJob {
            spec,
            data,
            orch,
            images,
            inputs,
        })
    }

    /// The job on the held `cards` (the first is the one card; a group
    /// takes as many as it has ranks).
    fn job(&self, card: u32, cards: &[u32]) -> Result<DeviceJob<'_>, ServeError> {
        let spec = &self.spec;
        let mut args = Vec::with_capacity(spec.args.len());
        for (a, input) in spec.args.iter().zip(&self.inputs) {
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
        Ok(DeviceJob {
            card,
            options: &spec.options,
            callable: CallableImage {
                orch_so: &self.orch,
                orch_symbol: &spec.orch_symbol,
                incores: spec
                    .incores
                    .iter()
                    .zip(&self.images)
                    .map(|(k, image)| {
                        let kind = match &k.hosted {
                            None => IncoreKind::Image,
                            Some(h) => IncoreKind::Hosted {
                                symbol: h.symbol.as_deref(),
                                args: ArgsConvention::from_abi(h.args).ok_or(
                                    ServeError::ArgsConvention {
                                        func_id: k.func_id,
                                        args: h.args,
                                    },
                                )?,
                            },
                        };
                        Ok(IncoreImageRef {
                            func_id: k.func_id,
                            core_type: k.core_type,
                            image,
                            kind,
                        })
                    })
                    .collect::<Result<_, ServeError>>()?,
            },
            args,
            group: spec.group.clone().map(|g| GroupJob {
                cards: cards.iter().copied().take(g.ranks as usize).collect(),
                ..g
            }),
            rounds: spec.rounds,
            trace: spec.trace,
            args_dump: spec.args_dump.as_deref(),
        })
    }
}

/// Writes a session's outputs (into the data file), traces and result.
fn write_result(
    dir: &Path,
    loaded: &LoadedJob,
    outcome: Result<SessionOutput, SessionStepError>,
) -> Result<(), ServeError> {
    let result = match outcome {
        Ok(SessionOutput {
            outputs,
            run_times,
            session,
            ranks,
            traces,
            ..
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
            let room = &loaded.spec.round_outputs;
            if outputs.len() != room.len() {
                return Err(ServeError::OutputCount {
                    returned: outputs.len(),
                    room: room.len(),
                });
            }
            for (bytes, span) in outputs.iter().zip(room) {
                loaded
                    .data
                    .write_all_at(bytes, span.off)
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
    let text = serde_json::to_vec(&result).map_err(ServeError::Encode)?;
    // Read by the supervisor only after the reply, which follows this
    // write: no rename, no sync needed.
    let path = dir.join(RESULT);
    std::fs::write(&path, &text).map_err(|source| ServeError::Write { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hosted incores (issue 29) keep their kind, entry symbol and
    /// convention through the job files; images stay images.
    #[test]
    fn hosted_incores_survive_the_job_files() {
        let job = DeviceJob {
            card: 0,
            options: "",
            callable: CallableImage {
                orch_so: b"orch",
                orch_symbol: "orch",
                incores: vec![
                    IncoreImageRef::image(0, 1, b"image"),
                    IncoreImageRef::hosted(1, 0, b"hosted", Some("entry")),
                    IncoreImageRef {
                        kind: IncoreKind::Hosted {
                            symbol: None,
                            args: ArgsConvention::ChipTensor,
                        },
                        ..IncoreImageRef::image(2, 1, b"chip")
                    },
                ],
            },
            args: Vec::new(),
            group: None,
            rounds: 0,
            trace: 0,
            args_dump: None,
        };
        let prepared = super::super::prepare(&job, Path::new("/nonexistent/runtime.so")).unwrap();
        let loaded = LoadedJob::read(prepared.dir()).unwrap();
        let back = loaded.job(0, &[0]).unwrap();
        let got: Vec<_> = back
            .callable
            .incores
            .iter()
            .map(|k| (k.func_id, k.core_type, k.image.to_vec(), k.kind))
            .collect();
        let want: Vec<_> = job
            .callable
            .incores
            .iter()
            .map(|k| (k.func_id, k.core_type, k.image.to_vec(), k.kind))
            .collect();
        assert_eq!(got, want);
    }
}
