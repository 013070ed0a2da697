//! One open simulated device: memory, registered callables and its runs
//! (argument checks, starting the orchestration, waiting for the task
//! graph, deadlines and injected faults). The scheduler and core threads
//! are in `device/sched.rs`, the orchestration side of a run in
//! `device/submit.rs`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

mod args_dump;
mod cluster;
pub mod comm;
mod orch_v2;
mod orch_v6;
mod sched;
mod submit;
pub(crate) mod trace;

use sched::{Sched, Shared, core_thread};
use submit::{RunCtx, orch_thread, run_descs};

use crate::crash;
use crate::error::{RtError, RtResult};
use crate::image::{Convention, ExecImage, HostedLib, KernelCode, OrchLib};
use crate::memory::{Allocator, Arena, DEVICE_BASE, Place, page_size};
use crate::options::Options;
use scene_abi::*;

/// Locks a mutex, ignoring poisoning (no code path leaves state half-updated
/// across a panic point that matters; kernels run with no lock held).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn core_name(core: u32) -> &'static str {
    match core {
        SCENE_CORE_AIC => "aic",
        SCENE_CORE_AIV => "aiv",
        _ => "unknown core type",
    }
}

/// One incore kernel of a callable.
#[derive(Debug)]
pub struct Incore {
    pub core: u32,
    /// An image entered at offset 0, or a hosted kernel's entry.
    pub code: KernelCode,
}

/// A registered callable.
#[derive(Debug)]
pub struct Callable {
    /// Keeps the orchestration library loaded while `entry` may be called.
    pub _orch: Arc<OrchLib>,
    pub entry: OrchEntry,
    pub symbol: String,
    pub incores: BTreeMap<u32, Incore>,
}

/// An incore description after copying out of the C struct.
#[derive(Debug)]
pub struct IncoreSpec<'a> {
    pub func_id: u32,
    pub core_type: u32,
    /// The image's machine code, or the hosted kernel's shared object.
    pub image: &'a [u8],
    pub kind: IncoreKind<'a>,
}

/// What the bytes of an [`IncoreSpec`] are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncoreKind<'a> {
    /// `SCENE_INCORE_IMAGE`: a raw `.text` image entered at offset 0.
    Image,
    /// `SCENE_INCORE_HOSTED`: a host shared object whose `symbol` takes
    /// its arguments by `convention` (`const SceneKernelArgs *`, or the
    /// `chip_tensor` `int64_t *`).
    Hosted {
        symbol: &'a str,
        convention: Convention,
    },
}

/// Stack of an emulated core thread (kernels) and the orchestration thread.
const USER_STACK_BYTES: usize = 8 << 20;

/// A simulated device.
#[derive(Debug)]
pub struct Device {
    pub id: i32,
    pub opts: Options,
    shared: Arc<Shared>,
    callables: Mutex<BTreeMap<u32, Arc<Callable>>>,
    next_handle: AtomicU64,
    /// Serialises runs and host copies.
    exec: Mutex<()>,
    fatal: AtomicBool,
    fatal_reason: Mutex<String>,
    runs: AtomicU64,
    workers: Mutex<Vec<JoinHandle<()>>>,
    /// The communication domain this device is a rank of (level 3).
    comm: Mutex<Option<(Arc<comm::Domain>, u32)>>,
    /// `scene_rt_trace_enable` flags for the next runs, and the record of
    /// the last traced run (`scene_rt_trace_take`).
    trace_flags: AtomicU32,
    last_trace: Mutex<Option<String>>,
    /// `scene_rt_args_record`: record every run's task arguments here.
    args_dir: Mutex<Option<std::path::PathBuf>>,
}

impl Device {
    pub fn open(id: i32, opts: Options) -> RtResult<Device> {
        if id < 0 {
            return Err(RtError::NoDevice(format!(
                "no device {id}: device ids are >= 0"
            )));
        }
        let arena = Arena::new(opts.arena_bytes)?;
        let mem = Arc::new(Mutex::new(Allocator::new(
            arena.len(),
            opts.arena_bytes,
            page_size(),
        )));
        let run_args = Arc::new(Mutex::new(Vec::new()));
        if crash::active() {
            crash::watch(crash::MemoryView {
                mem: Arc::clone(&mem),
                run_args: Arc::clone(&run_args),
                arena_base: arena.base_addr(),
                arena_len: arena.len(),
            });
        }
        let shared = Arc::new(Shared {
            mem,
            run_args,
            arena,
            sched: Mutex::new(Sched::for_run(opts.cores, None)),
            work_cv: [Condvar::new(), Condvar::new()],
            abandoned: Arc::new(AtomicBool::new(false)),
            done_cv: Condvar::new(),
        });
        let dev = Device {
            id,
            opts,
            shared,
            callables: Mutex::new(BTreeMap::new()),
            next_handle: AtomicU64::new(1),
            exec: Mutex::new(()),
            fatal: AtomicBool::new(false),
            fatal_reason: Mutex::new(String::new()),
            runs: AtomicU64::new(0),
            workers: Mutex::new(Vec::new()),
            comm: Mutex::new(None),
            trace_flags: AtomicU32::new(0),
            last_trace: Mutex::new(None),
            args_dir: Mutex::new(None),
        };
        for core in [SCENE_CORE_AIC, SCENE_CORE_AIV] {
            for i in 0..dev.opts.cores[core as usize] {
                let shared = Arc::clone(&dev.shared);
                let h = std::thread::Builder::new()
                    .name(format!("scene-dev{id}-{}{i}", core_name(core)))
                    .stack_size(USER_STACK_BYTES)
                    .spawn(move || core_thread(shared, core as usize, i))
                    .map_err(|e| RtError::Invalid(format!("cannot start a core thread: {e}")))?;
                lock(&dev.workers).push(h);
            }
        }
        Ok(dev)
    }

    /// Makes this device rank `rank` of `domain`: its runs' kernels get
    /// the rank's context.
    pub fn attach_comm(&self, domain: Arc<comm::Domain>, rank: u32) -> RtResult<()> {
        let mut slot = lock(&self.comm);
        if slot.is_some() {
            return Err(RtError::Invalid(format!(
                "device {} is a rank of another communication domain already",
                self.id
            )));
        }
        *slot = Some((domain, rank));
        Ok(())
    }

    /// Records the following runs (`SCENE_RT_TRACE_*` flags; 0 = off).
    pub fn trace_enable(&self, flags: u32) {
        self.trace_flags.store(flags, Ordering::SeqCst);
    }

    /// The record of the last traced run, if not taken yet; kept when it
    /// does not fit `cap` bytes. Returns `(record length, copied)`.
    pub fn trace_take(&self, out: Option<&mut [u8]>) -> (usize, bool) {
        let mut slot = lock(&self.last_trace);
        let Some(text) = slot.as_ref() else {
            return (0, false);
        };
        let len = text.len();
        match out {
            Some(buf) if buf.len() >= len => {
                buf[..len].copy_from_slice(text.as_bytes());
                *slot = None;
                (len, true)
            }
            _ => (len, false),
        }
    }

    /// Records the task arguments of every later run into `dir` (`None`:
    /// stop recording). See `device/args_dump.rs`.
    pub fn record_args(&self, dir: Option<std::path::PathBuf>) {
        *lock(&self.args_dir) = dir;
    }

    /// Ends this device's membership of a domain.
    pub fn detach_comm(&self) {
        *lock(&self.comm) = None;
    }

    fn set_fatal(&self, reason: String) {
        *lock(&self.fatal_reason) = reason;
        self.fatal.store(true, Ordering::SeqCst);
    }

    fn check_alive(&self) -> RtResult<()> {
        if self.fatal.load(Ordering::SeqCst) {
            return Err(RtError::DeviceFatal(format!(
                "device {} is unusable after a fatal error ({}); close it and retire the card",
                self.id,
                lock(&self.fatal_reason)
            )));
        }
        Ok(())
    }

    pub fn malloc(&self, size: u64) -> RtResult<u64> {
        self.check_alive()?;
        self.shared.alloc(size)
    }

    pub fn free(&self, addr: u64) -> RtResult<()> {
        self.check_alive()?;
        if let Some((domain, rank)) = lock(&self.comm).as_ref()
            && domain.device_window(*rank) == Some(addr)
        {
            return Err(RtError::Invalid(format!(
                "device {}: the allocation at {addr:#x} is rank {rank}'s communication window: destroy the communication domain before freeing it",
                self.id
            )));
        }
        self.shared.free(addr)
    }

    /// Rank `rank`'s window in this device's memory: `[addr, addr +
    /// size)` must lie in one live allocation (`scene_rt_comm_create2`).
    pub fn window_at(&self, addr: u64, size: u64, rank: u32) -> RtResult<comm::WindowAt> {
        self.check_alive()?;
        let mem = lock(&self.shared.mem);
        let what = format!("rank {rank}'s window ({size} bytes) on device {}", self.id);
        let off = mem.check(addr, size, &what)?;
        let device = match mem.place(off) {
            Place::Data { block, .. } | Place::After { block, .. } => DEVICE_BASE + block.data,
            Place::Before { .. } | Place::Nowhere => {
                return Err(RtError::OutOfBounds(format!(
                    "{what}: {addr:#x} is not in a live allocation"
                )));
            }
        };
        Ok(comm::WindowAt::Device {
            host: self.shared.arena.host_ptr(off),
            device,
        })
    }

    /// Checks that `[addr, addr+size)` lies in one live allocation.
    pub fn check_range(&self, addr: u64, size: u64, what: &str) -> RtResult<()> {
        self.check_alive()?;
        lock(&self.shared.mem).check(addr, size, what).map(drop)
    }

    pub fn copy_to_device(&self, dst: u64, src: &[u8]) -> RtResult<()> {
        self.check_alive()?;
        let _g = lock(&self.exec);
        let off = lock(&self.shared.mem).check(dst, src.len() as u64, "copy to device")?;
        self.shared.arena.write(off, src);
        Ok(())
    }

    pub fn copy_from_device(&self, dst: &mut [u8], src: u64) -> RtResult<()> {
        self.check_alive()?;
        let _g = lock(&self.exec);
        let off = lock(&self.shared.mem).check(src, dst.len() as u64, "copy from device")?;
        self.shared.arena.read(off, dst);
        Ok(())
    }

    pub fn register(
        &self,
        orch_so: &[u8],
        symbol: &str,
        incores: &[IncoreSpec<'_>],
    ) -> RtResult<u32> {
        self.check_alive()?;
        let mut map = BTreeMap::new();
        for (i, inc) in incores.iter().enumerate() {
            if inc.func_id >= SCENE_MAX_FUNC_IDS {
                return Err(RtError::FuncId(format!(
                    "incore #{i}: func_id {} is out of range (must be < {SCENE_MAX_FUNC_IDS})",
                    inc.func_id
                )));
            }
            if inc.core_type > SCENE_CORE_AIV {
                return Err(RtError::CoreType(format!(
                    "incore #{i} (func_id {}): core_type {} is neither SCENE_CORE_AIC (0) nor SCENE_CORE_AIV (1)",
                    inc.func_id, inc.core_type
                )));
            }
            if map.contains_key(&inc.func_id) {
                return Err(RtError::FuncId(format!(
                    "incore #{i}: func_id {} is registered twice in one callable",
                    inc.func_id
                )));
            }
            let code = match inc.kind {
                IncoreKind::Image => {
                    KernelCode::Image(Arc::new(ExecImage::map(inc.image).map_err(|e| {
                        RtError::Load(format!("incore func_id {}: {e}", inc.func_id))
                    })?))
                }
                IncoreKind::Hosted { symbol, convention } => {
                    let lib = HostedLib::load(inc.image).map_err(|e| {
                        RtError::Load(format!("incore func_id {}: {e}", inc.func_id))
                    })?;
                    // A chip_tensor kernel learns its block only from the
                    // execution-context hook (hooks.rs): without it every
                    // block would compute block 0's share.
                    if convention == Convention::ChipTensor
                        && let Err(why) = crate::hooks::promote_to_global()
                    {
                        return Err(RtError::Load(format!(
                            "incore func_id {} (chip_tensor): its block index would come from pto_cpu_sim_get_execution_context, which hosted kernels cannot find with dlsym(RTLD_DEFAULT): {why}",
                            inc.func_id
                        )));
                    }
                    KernelCode::Hosted(Arc::new(lib.entry(inc.func_id, symbol, convention)?))
                }
            };
            map.insert(
                inc.func_id,
                Incore {
                    core: inc.core_type,
                    code,
                },
            );
        }
        let orch = OrchLib::load(orch_so)?;
        let entry = orch.entry(symbol)?;
        let callable = Callable {
            _orch: orch,
            entry,
            symbol: symbol.to_owned(),
            incores: map,
        };
        let handle = u32::try_from(self.next_handle.fetch_add(1, Ordering::SeqCst))
            .map_err(|_| RtError::Invalid("callable handles exhausted".into()))?;
        lock(&self.callables).insert(handle, Arc::new(callable));
        Ok(handle)
    }

    pub fn unregister(&self, handle: u32) -> RtResult<()> {
        self.check_alive()?;
        lock(&self.callables)
            .remove(&handle)
            .map(drop)
            .ok_or_else(|| RtError::Invalid(format!("unknown callable handle {handle}")))
    }

    /// `scene_rt_reset`: returns the device to the state `open` left it in,
    /// without closing it. Every callable is unregistered (dropping the
    /// last reference to an orchestration or hosted-kernel library unloads
    /// it, so the next registration of the same bytes starts with fresh
    /// globals; tasks of past runs, which also hold kernels, are cleared at
    /// the end of each run); every
    /// allocation is freed (pages hidden: they read as zero when allocated
    /// again); tracing is switched off and the pending record dropped;
    /// argument recording stops; the run counter (`fault=fatal_on_run:K`,
    /// `corrupt_on_run:K`) starts again. Callable handles are not reused:
    /// one from before the reset stays unknown. Refused for a rank of a
    /// live communication domain; a fatal device stays fatal. Takes the
    /// lock runs take, so it waits for a run in progress.
    pub fn reset(&self) -> RtResult<()> {
        self.check_alive()?;
        let _g = lock(&self.exec);
        self.check_alive()?;
        if lock(&self.comm).is_some() {
            return Err(RtError::Invalid(format!(
                "device {} is a rank of a live communication domain: destroy the communication domain first",
                self.id
            )));
        }
        // Dropped outside the table's lock: unloading a library runs its
        // destructors.
        let callables = std::mem::take(&mut *lock(&self.callables));
        drop(callables);
        self.shared.free_all();
        lock(&self.shared.run_args).clear();
        self.trace_flags.store(0, Ordering::SeqCst);
        *lock(&self.last_trace) = None;
        *lock(&self.args_dir) = None;
        self.runs.store(0, Ordering::SeqCst);
        Ok(())
    }

    /// Host address of a registered incore image, or of a hosted kernel's
    /// entry (for diagnostics and tests).
    pub fn image_addr(&self, handle: u32, func_id: u32) -> Option<usize> {
        let c = lock(&self.callables).get(&handle).cloned()?;
        c.incores.get(&func_id).map(|i| i.code.addr())
    }

    /// Runs callable `handle` to completion: count the run (and fail it if
    /// a fault is injected), check the arguments, start the orchestration,
    /// wait for it and every task it submitted (or the deadline), then clean
    /// up and report.
    pub fn run(
        &self,
        handle: u32,
        args: &[SceneRunArg],
        descs: Option<&[SceneTensorDesc]>,
    ) -> RtResult<()> {
        let result = self.run_alone(handle, args, descs);
        // A rank's every failure (a timeout or a bad argument too) fails its
        // group, so the peers' waits return at once.
        match lock(&self.comm).as_ref() {
            Some((domain, rank)) => group_result(domain, *rank, result),
            None => result,
        }
    }

    fn run_alone(
        &self,
        handle: u32,
        args: &[SceneRunArg],
        descs: Option<&[SceneTensorDesc]>,
    ) -> RtResult<()> {
        self.check_alive()?;
        let _g = lock(&self.exec);
        self.check_alive()?;
        let run_no = self.count_run()?;
        let callable = self.callable(handle)?;
        self.check_run_args(args)?;
        let descs = run_descs(args, descs)?;
        // Indexed like the arguments, so messages say `run argument N`;
        // scalars cover no bytes.
        *lock(&self.shared.run_args) = args
            .iter()
            .map(|a| match a.direction {
                SCENE_DIR_SCALAR => (0, 0),
                _ => (a.value, a.size),
            })
            .collect();
        let recorder = args_dump::Recorder::for_run(lock(&self.args_dir).as_deref())?;
        {
            let mut s = self.shared.sched();
            *s = Sched::for_run(self.opts.cores, recorder);
            s.race_check_off = !self.opts.race_check;
        }
        let trace_flags = self.trace_flags.load(Ordering::SeqCst);
        if trace_flags != 0 {
            // Built before the scheduler is locked: one lock at a time.
            let record = Box::new(trace::TraceRun::new(
                trace_flags,
                self.id,
                self.opts.cores,
                &lock(&self.shared.run_args),
            ));
            self.shared.sched().trace = Some(record);
        }
        let deadline = self.opts.timeout.map(|t| Instant::now() + t);
        let orch_thread =
            self.start_orchestration(&callable, args, descs, deadline, trace_flags)?;
        let outcome = self.wait_for_run(&callable, run_no, deadline)?;
        if let Some(tr) = self.shared.sched().trace.take() {
            *lock(&self.last_trace) = Some(tr.finish(trace::now_ns()));
        }
        if let Some(h) = orch_thread {
            // The thread has published its result and is about to exit.
            let _ = h.join();
        }
        self.free_intermediates(&outcome.intermediates);
        outcome.into_result(&callable.symbol)?;
        if self.opts.faults.corrupt_on_run == Some(run_no) {
            self.corrupt_first_output(args);
        }
        Ok(())
    }

    /// `fault=corrupt_on_run:K`: flips every bit of the first (up to) 8
    /// bytes of the run's first output tensor, as a kernel that went wrong
    /// would: sign and exponent included, whatever the dtype, so no
    /// tolerance hides it.
    fn corrupt_first_output(&self, args: &[SceneRunArg]) {
        let first = args
            .iter()
            .find(|a| matches!(a.direction, SCENE_DIR_OUT | SCENE_DIR_INOUT) && a.size > 0);
        if let Some(a) = first {
            let n = a.size.min(8);
            if let Ok(off) = lock(&self.shared.mem).check(a.value, n, "corrupt_on_run") {
                let mut b = [0u8; 8];
                let b = &mut b[..n as usize];
                self.shared.arena.read(off, b);
                b.iter_mut().for_each(|x| *x = !*x);
                self.shared.arena.write(off, b);
            }
        }
    }

    /// Numbers this run (from 1); fails it, and the device, if
    /// `fault=fatal_on_run:K` names it.
    fn count_run(&self) -> RtResult<u64> {
        let run_no = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        if self.opts.faults.fatal_on_run == Some(run_no) {
            let msg = format!(
                "injected fault: run #{run_no} of device {} failed fatally (fault=fatal_on_run:{run_no})",
                self.id
            );
            self.set_fatal(msg.clone());
            return Err(RtError::DeviceFatal(msg));
        }
        Ok(run_no)
    }

    fn callable(&self, handle: u32) -> RtResult<Arc<Callable>> {
        lock(&self.callables)
            .get(&handle)
            .cloned()
            .ok_or_else(|| RtError::Invalid(format!("run: unknown callable handle {handle}")))
    }

    /// Every tensor argument lies in a live allocation; directions are known.
    fn check_run_args(&self, args: &[SceneRunArg]) -> RtResult<()> {
        let mem = lock(&self.shared.mem);
        for (i, a) in args.iter().enumerate() {
            match a.direction {
                SCENE_DIR_SCALAR => {}
                SCENE_DIR_IN | SCENE_DIR_OUT | SCENE_DIR_INOUT => {
                    mem.check(a.value, a.size, &format!("run argument {i}"))?;
                }
                d => {
                    return Err(RtError::Invalid(format!(
                        "run argument {i}: unknown direction {d}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Starts the orchestration on its own thread (none under `fault=hang`,
    /// so the run can only end by its deadline).
    fn start_orchestration(
        &self,
        callable: &Arc<Callable>,
        args: &[SceneRunArg],
        descs: Vec<Option<SceneTensorDesc>>,
        deadline: Option<Instant>,
        trace: u32,
    ) -> RtResult<Option<JoinHandle<()>>> {
        if self.opts.faults.hang {
            return Ok(None);
        }
        let ctx = Arc::new(RunCtx {
            comm: lock(&self.comm).clone(),
            shared: Arc::clone(&self.shared),
            callable: Arc::clone(callable),
            cores: self.opts.cores,
            platform: self.opts.platform.name(),
            descs,
            deadline,
            trace,
        });
        let args = args.to_vec();
        let h = std::thread::Builder::new()
            .name(format!("scene-dev{}-orch", self.id))
            .stack_size(USER_STACK_BYTES)
            .spawn(move || orch_thread(ctx, args))
            .map_err(|e| RtError::Invalid(format!("cannot start the orchestration thread: {e}")))?;
        Ok(Some(h))
    }

    /// Waits until the orchestration has returned and every task it
    /// submitted has completed, then takes the run's results out of the
    /// scheduler. Past `deadline` the run is abandoned and the device turns
    /// fatal.
    fn wait_for_run(
        &self,
        callable: &Callable,
        run_no: u64,
        deadline: Option<Instant>,
    ) -> RtResult<RunOutcome> {
        let mut s = self.shared.sched();
        while s.orch_rc.is_none() || s.completed != s.tasks.len() {
            s = match deadline {
                None => self
                    .shared
                    .done_cv
                    .wait(s)
                    .unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(self.abandon_run(s, callable, run_no));
                    }
                    self.shared
                        .done_cv
                        .wait_timeout(s, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
        let outcome = RunOutcome {
            rc: s.orch_rc.unwrap_or(0),
            error: s.error.take(),
            fails: std::mem::take(&mut s.fail_msgs),
            intermediates: std::mem::take(&mut s.intermediates),
        };
        s.tasks.clear();
        s.accesses.clear();
        s.manual.clear();
        s.history = None;
        s.race_check_off = false;
        Ok(outcome)
    }

    /// Gives up on a run past its deadline: stops handing out work, marks
    /// the device fatal and describes how far the run got. Threads stuck in
    /// a kernel are detached and keep the shared state alive.
    fn abandon_run(
        &self,
        mut s: MutexGuard<'_, Sched>,
        callable: &Callable,
        run_no: u64,
    ) -> RtError {
        let msg = format!(
            "run of `{}` on device {} exceeded timeout_ms={} (orchestration {}, {} of {} tasks completed{}{}); the device is now unusable",
            callable.symbol,
            self.id,
            self.opts.timeout.map_or(0, |t| t.as_millis()),
            if s.orch_rc.is_some() {
                "finished"
            } else {
                "still running"
            },
            s.completed,
            s.tasks.len(),
            match s.skipped {
                0 => String::new(),
                n => format!(", {n} of them skipped by their predicate"),
            },
            if self.opts.faults.hang {
                ", fault=hang"
            } else {
                ""
            },
        );
        s.shutdown = true;
        self.shared.abandoned.store(true, Ordering::SeqCst);
        for cv in &self.shared.work_cv {
            cv.notify_all();
        }
        drop(s);
        self.set_fatal(format!("timeout in run #{run_no}"));
        RtError::Timeout(msg)
    }

    /// Frees what the orchestration allocated with `alloc` during the run.
    fn free_intermediates(&self, addrs: &[u64]) {
        for &a in addrs {
            // Buffers freed during the run are gone already: an error here
            // is that, not damage.
            let _ = self.shared.free(a);
        }
    }
}

/// A rank's run result within its group: a failed rank fails the group
/// (its peers' waits return at once) and keeps its own error (a timeout
/// stays a timeout); a rank that ran to the end in a failed group fails
/// with the group's first message, so each rank says what went wrong.
fn group_result(domain: &comm::Domain, rank: u32, result: RtResult<()>) -> RtResult<()> {
    match result {
        Err(e) if !matches!(e, RtError::Comm(_)) => {
            domain.fail(format!("rank {rank} failed: {e}"));
            Err(e)
        }
        other => match domain.failure() {
            Some(msg) => Err(RtError::Comm(msg)),
            None => other,
        },
    }
}

/// What a finished run left in the scheduler.
#[derive(Debug)]
struct RunOutcome {
    /// The orchestration's return value.
    rc: i32,
    /// The first error a task submission or allocation recorded.
    error: Option<RtError>,
    /// Messages of the orchestration's `fail` calls.
    fails: Vec<String>,
    /// Device addresses the orchestration allocated.
    intermediates: Vec<u64>,
}

impl RunOutcome {
    /// The run's result: a recorded error first, else a non-zero return
    /// or any `fail` message makes it an orchestration error.
    fn into_result(self, symbol: &str) -> RtResult<()> {
        if let Some(e) = self.error {
            // What the orchestration said about it comes along.
            return Err(if self.fails.is_empty() {
                e
            } else {
                e.with_note(&format!(
                    "orchestration `{symbol}`: {}",
                    self.fails.join("; ")
                ))
            });
        }
        if self.rc != 0 || !self.fails.is_empty() {
            let mut msg = format!("orchestration `{symbol}` returned {}", self.rc);
            if !self.fails.is_empty() {
                msg.push_str(": ");
                msg.push_str(&self.fails.join("; "));
            }
            return Err(RtError::Orch(msg));
        }
        Ok(())
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        lock(&self.shared.sched).shutdown = true;
        for cv in &self.shared.work_cv {
            cv.notify_all();
        }
        let workers = std::mem::take(&mut *lock(&self.workers));
        if !self.fatal.load(Ordering::SeqCst) {
            for w in workers {
                let _ = w.join();
            }
        }
        // On a fatal device the workers are detached: one may be stuck in a
        // kernel forever, holding `Shared` (and the arena) alive.
    }
}
