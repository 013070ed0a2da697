//! The device stage: acquire card(s), load the runtime, upload, run,
//! download, release. Nothing else happens while a card is held.
//!
//! [`DeviceStage`] owns the card pool. A device fault that makes a card
//! unusable retires it for the rest of the process and the case is tried
//! once more on a healthy card; a timeout retires the card too (the hung
//! kernel keeps running) but is not retried (it would hang again).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use scene_device::{
    AcquireOptions, CallableImage, CardLease, CardPool, DeviceSession, Direction, IncoreImageRef,
    RunArg, Runtime, RuntimeError, WaitStatus,
};
use scene_golden::Tensor;
use scene_kernels::ChipCallable;

use crate::config::RunConfig;
use crate::report::{CaseReport, LockInterval, unix_seconds};
use crate::scene::{ArgDirection, Scene};
use crate::select::SelectedCase;

/// What the card needs for one case.
#[derive(Clone, Copy, Debug)]
pub struct DeviceWork<'a> {
    pub sel: &'a SelectedCase,
    pub callable: &'a ChipCallable,
    /// Every tensor argument, in signature order.
    pub inputs: &'a [(String, Tensor)],
    pub scalars: &'a [u64],
}

/// The result of the device stage of one case.
#[derive(Debug, Default)]
pub struct DeviceOutcome {
    /// The output tensors in declaration order; `None` if no attempt ran
    /// to the end.
    pub outputs: Option<Vec<Tensor>>,
    /// What went wrong on the way (failed attempts, retries), in order.
    pub notes: Vec<String>,
}

/// The card pool and how to drive a runtime on it.
#[derive(Debug)]
pub struct DeviceStage {
    pool: CardPool,
    runtime_lib: Option<PathBuf>,
    runtime_path: Mutex<Option<Result<PathBuf, String>>>,
    open_options: String,
    lock_timeout: Option<Duration>,
    verbose: bool,
}

impl DeviceStage {
    pub fn new(config: &RunConfig) -> Result<Self, scene_device::DeviceError> {
        let pool = CardPool::new(config.devices.clone(), config.lock_dir.clone())?;
        Ok(Self {
            pool,
            runtime_lib: config
                .runtime_lib
                .clone()
                .or_else(|| config.platform.runtime().map(Path::to_path_buf)),
            runtime_path: Mutex::new(None),
            open_options: open_options(config),
            lock_timeout: config.lock_timeout,
            verbose: config.verbose,
        })
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
            match self.attempt(work, report, held) {
                Ok(o) => {
                    outcome.outputs = Some(o);
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
        outcome
    }

    /// One attempt: acquire, run the session, release, account.
    fn attempt(
        &self,
        work: DeviceWork<'_>,
        report: &mut CaseReport,
        held: Option<&CardLease>,
    ) -> Result<Vec<Tensor>, DeviceFailure> {
        let runtime_path = self.runtime_path().map_err(DeviceFailure::plain)?;
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

        let (result, device_time) = self.session(lease, &runtime_path, work);

        // A held lease is released, and its hold accounted, by the run.
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
        result.map_err(|e| self.classify(e, &report.devices))
    }

    /// Waits for the scene's cards, narrating long waits.
    fn acquire(&self, sel: &SelectedCase) -> Result<CardLease, DeviceFailure> {
        let id = sel.id();
        let cards = sel.scene.devices;
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
            .map_err(|e| DeviceFailure::plain(format!("acquiring {cards} card(s): {e}")))
    }

    /// Load the runtime, open the card, run, close. Returns the outcome and
    /// the device time: the whole device session, since opening the card is
    /// device work too (a real runtime initialises the card there).
    fn session(
        &self,
        lease: &CardLease,
        runtime_path: &std::path::Path,
        work: DeviceWork<'_>,
    ) -> (Result<Vec<Tensor>, SessionError>, Duration) {
        let runtime = match Runtime::load(lease, runtime_path) {
            Ok(r) => r,
            Err(e) => return (Err(SessionError::from(e.to_string())), Duration::ZERO),
        };
        let card = lease.cards()[0];
        let device_start = Instant::now();
        let device = match runtime.open(card, &self.open_options) {
            Ok(d) => d,
            Err(e) => {
                return (
                    Err(SessionError::from(format!("opening card {card}: {e}"))),
                    device_start.elapsed(),
                );
            }
        };
        let image = CallableImage {
            orch_so: &work.callable.orch_so,
            orch_symbol: &work.callable.orch_symbol,
            incores: work
                .callable
                .incores
                .iter()
                .map(|k| IncoreImageRef {
                    func_id: k.func_id,
                    core_type: k.core.as_abi(),
                    image: &k.text,
                })
                .collect(),
        };
        let outcome = run_on_device(&device, &image, &work.sel.scene, work.inputs, work.scalars);
        drop(device);
        (outcome, device_start.elapsed())
    }

    /// Retires the cards of a fatal failure and words the failure.
    fn classify(&self, e: SessionError, cards: &[u32]) -> DeviceFailure {
        if e.fatal {
            for &c in cards {
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

    fn runtime_path(&self) -> Result<PathBuf, String> {
        let mut slot = self.runtime_path.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert_with(|| match &self.runtime_lib {
            Some(p) => Ok(p.clone()),
            None => scene_device::default_runtime_path().map_err(|e| e.to_string()),
        })
        .clone()
    }
}

/// Options string for the runtime's `open`.
fn open_options(config: &RunConfig) -> String {
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

/// An error of the device session.
struct SessionError {
    message: String,
    /// The card is unusable for the rest of the process.
    fatal: bool,
    /// The card, not the case, is to blame (a device fault, not a timeout:
    /// a kernel that hung once would hang on the next card too).
    retryable: bool,
}

impl From<String> for SessionError {
    fn from(message: String) -> Self {
        Self {
            message,
            fatal: false,
            retryable: false,
        }
    }
}

fn session_error(what: String, e: RuntimeError) -> SessionError {
    let timed_out = e.status() == Some(scene_device::abi::SCENE_RT_E_TIMEOUT);
    SessionError {
        message: if timed_out {
            format!("{what}: case timeout: the device run did not finish in time ({e})")
        } else {
            format!("{what}: {e}")
        },
        // A timed-out device keeps running the hung kernel: unusable too.
        fatal: e.is_device_fatal() || timed_out,
        retryable: e.is_device_fatal(),
    }
}

/// Upload, register, run, download, free: everything that happens on the card.
fn run_on_device(
    device: &DeviceSession<'_>,
    image: &CallableImage<'_>,
    scene: &Scene,
    inputs: &[(String, Tensor)],
    scalars: &[u64],
) -> Result<Vec<Tensor>, SessionError> {
    let handle = device
        .register(image)
        .map_err(|e| session_error("registering the callable".into(), e))?;
    let (mut args, addrs) = upload(device, scene, inputs)?;
    args.extend(scalars.iter().map(|&s| RunArg::Scalar(s)));
    device
        .run(handle, &args)
        .map_err(|e| session_error("run".into(), e))?;
    let outputs = download(device, scene, inputs, &addrs)?;
    for addr in addrs {
        device
            .free(addr)
            .map_err(|e| session_error("freeing device memory".into(), e))?;
    }
    let _ = device.unregister(handle);
    Ok(outputs)
}

/// Allocates every tensor argument and uploads those the kernels read.
fn upload(
    device: &DeviceSession<'_>,
    scene: &Scene,
    inputs: &[(String, Tensor)],
) -> Result<(Vec<RunArg>, Vec<u64>), SessionError> {
    let mut args = Vec::with_capacity(inputs.len());
    let mut addrs = Vec::with_capacity(inputs.len());
    for ((name, tensor), spec) in inputs.iter().zip(&scene.tensors) {
        let size = tensor.bytes().len() as u64;
        let addr = device
            .malloc(size)
            .map_err(|e| session_error(format!("allocating tensor `{name}` ({size} bytes)"), e))?
            .addr;
        addrs.push(addr);
        if spec.direction != ArgDirection::Out {
            device
                .copy_to(addr, tensor.bytes())
                .map_err(|e| session_error(format!("uploading tensor `{name}`"), e))?;
        }
        let direction = match spec.direction {
            ArgDirection::In => Direction::In,
            ArgDirection::Out => Direction::Out,
            _ => Direction::InOut,
        };
        args.push(RunArg::Tensor {
            direction,
            addr,
            size,
        });
    }
    Ok((args, addrs))
}

/// Reads back every output tensor, in declaration order.
fn download(
    device: &DeviceSession<'_>,
    scene: &Scene,
    inputs: &[(String, Tensor)],
    addrs: &[u64],
) -> Result<Vec<Tensor>, SessionError> {
    let mut outputs = Vec::new();
    for (((name, tensor), spec), &addr) in inputs.iter().zip(&scene.tensors).zip(addrs) {
        if spec.direction.is_output() {
            let mut out = Tensor::zeros(tensor.dtype(), tensor.shape());
            device
                .copy_from(addr, out.bytes_mut())
                .map_err(|e| session_error(format!("downloading tensor `{name}`"), e))?;
            outputs.push(out);
        }
    }
    Ok(outputs)
}
