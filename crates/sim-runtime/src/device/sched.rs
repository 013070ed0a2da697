//! The scheduler of a run and the emulated core threads: the state shared
//! with every thread of a device (arena, allocator, task graph), and the
//! loop that runs ready tasks' blocks and releases their dependents.
//!
//! `unsafe` (allowed per item): `Send` for a task's kernel arguments.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::cluster::{self, ClusterBlock, Shape};
use super::{USER_STACK_BYTES, args_dump, core_name, lock, trace};
use crate::chip::{ChipArgs, ChipBlock};
use crate::crash::{self, Activity};
use crate::error::{RtError, RtResult};
use crate::fpenv::FpEnv;
use crate::hooks;
use crate::image::KernelCode;
use crate::memory::{Allocator, Arena, DEVICE_BASE, Place};
use scene_abi::*;
/// A task's kernel arguments: `args.descs` points into `descs`, which the
/// box keeps at a stable address for as long as the task holds both.
#[derive(Debug)]
pub(super) struct KernelArgs {
    pub(super) args: Box<SceneKernelArgs>,
    /// Only kept alive (and read by kernels through `args.descs`).
    pub(super) _descs: Box<[SceneTensorDesc]>,
    /// A `chip_tensor` kernel's argument words and tensor records (built
    /// once per task, shared by its blocks while they run).
    pub(super) chip: Option<Arc<ChipArgs>>,
}

#[allow(unsafe_code)]
// SAFETY: the only pointer inside is `args.descs`, into `descs`, which is
// owned by the same value, immutable after construction, and only read
// by kernels while the task (and so this value) is alive.
unsafe impl Send for KernelArgs {}

/// One kernel of a task: what runs in one slot of each of its blocks.
#[derive(Debug, Clone)]
pub(super) struct Lane {
    /// `SCENE_SLOT_*`.
    pub(super) slot: u32,
    pub(super) func_id: u32,
    /// `SCENE_CORE_*`.
    pub(super) core: usize,
    /// The kernel's code: an image or a hosted entry (both hold what they
    /// need loaded).
    pub(super) code: KernelCode,
}

/// A task's dispatch predicate (orchestration ABI v6), checked at submit:
/// the element lies in one live allocation, which the task counts among
/// its buffers (so it outlives a `free` until the task is done).
#[derive(Debug, Clone, Copy)]
pub(super) struct Predicate {
    /// `SCENE_PRED_EQ` .. `SCENE_PRED_LE`.
    pub(super) op: u32,
    /// 1, 2, 4 or 8.
    pub(super) elem_size: u32,
    /// Arena offset of the element.
    pub(super) off: u64,
    pub(super) target: i64,
}

impl Predicate {
    /// `value OP target`.
    pub(super) fn compare(&self, value: i64) -> bool {
        let t = self.target;
        match self.op {
            SCENE_PRED_EQ => value == t,
            SCENE_PRED_NE => value != t,
            SCENE_PRED_GT => value > t,
            SCENE_PRED_LT => value < t,
            SCENE_PRED_GE => value >= t,
            SCENE_PRED_LE => value <= t,
            // Refused at submit.
            _ => true,
        }
    }

    /// The element now: `elem_size` little-endian bytes, sign-extended.
    fn read(&self, arena: &Arena) -> i64 {
        let n = self.elem_size.clamp(1, 8) as usize;
        let mut b = [0u8; 8];
        arena.read(self.off, &mut b[..n]);
        if b[n - 1] & 0x80 != 0 {
            b[n..].fill(0xff);
        }
        i64::from_le_bytes(b)
    }
}

#[derive(Debug)]
pub(super) struct Task {
    /// The kernels of every block, one per active slot, slot order: one
    /// for a plain task; two or three for a mixed task, whose blocks each
    /// run all of them together on one cluster (`cluster.rs`); none for a
    /// dependency-only task (v6 `submit_task` with every slot
    /// `SCENE_NO_KERNEL`), which completes as soon as it is ready.
    pub(super) lanes: Vec<Lane>,
    pub(super) block_num: u32,
    pub(super) next_block: u32,
    /// Kernel calls finished: `block_num * lanes.len()` when done.
    pub(super) blocks_done: u32,
    /// Dropped when the task is done, so a long run keeps only small tasks.
    pub(super) args: Option<KernelArgs>,
    /// Arena offsets of the data of every buffer the task gets, for the
    /// canary check after each block.
    pub(super) buffers: Vec<u64>,
    pub(super) pending: usize,
    pub(super) dependents: Vec<usize>,
    /// The tasks it is ordered after, finished ones included (kept when
    /// done, unlike `dependents`): the happens-before the `manual_dep`
    /// race check follows.
    pub(super) parents: Vec<usize>,
    pub(super) done: bool,
    /// `--dump-args`: the task's arguments, when the run records them
    /// (never for a dependency-only task: it has no kernel to record).
    pub(super) record: Option<Box<args_dump::TaskRecord>>,
    /// v6: run only if this holds when the task is ready.
    pub(super) predicate: Option<Predicate>,
}

impl Task {
    pub(super) fn is_mixed(&self) -> bool {
        self.lanes.len() > 1
    }

    /// A dependency-only task: no kernel.
    pub(super) fn is_dummy(&self) -> bool {
        self.lanes.is_empty()
    }

    /// The first lane's func_id (the only one's, for a plain task); `None`
    /// for a dependency-only task.
    pub(super) fn func_id(&self) -> Option<u32> {
        self.lanes.first().map(|l| l.func_id)
    }

    /// The active slots (bit `1 << slot`).
    pub(super) fn slot_mask(&self) -> u32 {
        slot_mask(&self.lanes)
    }

    /// The first lane's core type (a plain task's); `None` for a
    /// dependency-only task.
    pub(super) fn core(&self) -> Option<usize> {
        self.lanes.first().map(|l| l.core)
    }
}

/// The slots `lanes` run (bit `1 << slot`).
pub(super) fn slot_mask(lanes: &[Lane]) -> u32 {
    lanes.iter().fold(0, |m, l| m | 1 << l.slot)
}

/// One kernel call a core thread is to make: block `block` of task
/// `task`, its lane `lane`; `cluster` is the block's shared state when
/// the task is mixed.
#[derive(Debug, Clone)]
pub(super) struct Work {
    task: usize,
    block: u32,
    lane: usize,
    cluster: Option<Arc<ClusterBlock>>,
}

/// A core thread as the scheduler sees it.
#[derive(Debug, Clone, Default)]
pub(super) struct CoreState {
    /// Running a kernel, or handed one to run.
    busy: bool,
    /// A mixed block's kernel the scheduler handed this thread.
    handed: Option<Work>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Access {
    pub(super) task: usize,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) write: bool,
}

/// A task's access through a `manual_dep` argument (`SCENE_DIR_MANUAL_DEP`):
/// not dependency-tracked, kept to find unordered overlapping ones.
#[derive(Debug, Clone)]
pub(super) struct ManualAccess {
    pub(super) task: usize,
    /// The task's (first) kernel; `None`: a dependency-only task.
    pub(super) func_id: Option<u32>,
    /// The task argument it is.
    pub(super) arg: usize,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) write: bool,
    /// The arena byte ranges its view covers, sorted (a strided view's
    /// rows are apart: two column blocks of one matrix do not overlap).
    pub(super) runs: Arc<Vec<(u64, u64)>>,
}

/// Scheduler state of the current run (runs on one device are serialised).
#[derive(Debug, Default)]
pub(super) struct Sched {
    pub(super) shutdown: bool,
    pub(super) tasks: Vec<Task>,
    /// Plain tasks with blocks left to start, per core type.
    pub(super) ready: [VecDeque<usize>; 2],
    /// Mixed tasks with blocks left to start, oldest first.
    pub(super) ready_mixed: VecDeque<usize>,
    /// Per core type, per thread.
    pub(super) threads: [Vec<CoreState>; 2],
    /// The cluster kept for the oldest mixed block waiting: its threads
    /// take no plain work until it starts, so a stream of plain blocks
    /// cannot starve it.
    pub(super) reserved: Option<u32>,
    /// Tasks done, dependency-only and skipped ones included.
    pub(super) completed: usize,
    /// Of those, tasks whose predicate was false (v6).
    pub(super) skipped: usize,
    pub(super) accesses: Vec<Access>,
    /// The run's `manual_dep` accesses, finished tasks' too (a race does
    /// not depend on which task happened to finish first; never in
    /// `accesses`): only the data-race check reads them.
    pub(super) manual: Vec<ManualAccess>,
    /// Every tracked access since the run's first `manual_dep` one,
    /// finished tasks' too: the race check orders tasks by the graph the
    /// accesses imply, not by which happened to finish first (`None`
    /// before any manual access, and once the check gave up past
    /// `MAX_RACE_HISTORY` accesses).
    pub(super) history: Option<Vec<Access>>,
    /// The race check is off for this run: not asked for (`race_check=1`),
    /// or it gave up (too long a history).
    pub(super) race_check_off: bool,
    pub(super) error: Option<RtError>,
    pub(super) fail_msgs: Vec<String>,
    pub(super) orch_rc: Option<i32>,
    /// Device addresses the orchestration allocated and has not freed.
    pub(super) intermediates: Vec<u64>,
    /// Open memory scopes, innermost last: what each allocated.
    pub(super) scopes: Vec<Vec<u64>>,
    /// Freed by the orchestration (or its scope), still used by unfinished
    /// tasks: freed when the last of them finishes.
    pub(super) released: HashSet<u64>,
    /// Freed during this run, for "freed twice" and "used after free".
    pub(super) freed: HashSet<u64>,
    /// Unfinished tasks per buffer (device address of its data).
    pub(super) users: HashMap<u64, usize>,
    /// The run's record when tracing is on (`scene_rt_trace_enable`);
    /// `None` (every hook one branch) when off.
    pub(super) trace: Option<Box<trace::TraceRun>>,
    /// `scene_rt_args_record`: where this run's task arguments go.
    pub(super) recorder: Option<Arc<args_dump::Recorder>>,
}

impl Sched {
    /// The state of a new run on a device with `cores` threads per core
    /// type (every thread idle).
    pub(super) fn for_run(cores: [u32; 2], recorder: Option<Arc<args_dump::Recorder>>) -> Sched {
        Sched {
            threads: cores.map(|n| vec![CoreState::default(); n as usize]),
            recorder,
            ..Sched::default()
        }
    }

    fn cores(&self) -> [u32; 2] {
        self.threads.each_ref().map(|t| t.len() as u32)
    }
}

/// State shared with the core threads and the orchestration thread. Threads
/// stuck in a hung kernel keep it (and so the arena) alive forever.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) arena: Arena,
    /// Shared with the crash handler (which only ever `try_lock`s it).
    pub(super) mem: Arc<Mutex<Allocator>>,
    /// `(device address, size)` of the current run's tensor arguments, for
    /// naming buffers in messages (also read by the crash handler).
    pub(super) run_args: Arc<Mutex<Vec<(u64, u64)>>>,
    pub(super) sched: Mutex<Sched>,
    pub(super) work_cv: [Condvar; 2],
    pub(super) done_cv: Condvar,
    /// Set with `Sched::shutdown` when a run is abandoned at its deadline,
    /// for kernels waiting on cross-core flags (which do not take the
    /// scheduler's lock).
    pub(super) abandoned: Arc<AtomicBool>,
}

impl Shared {
    pub(super) fn sched(&self) -> MutexGuard<'_, Sched> {
        lock(&self.sched)
    }

    /// Allocates `size` bytes between guards: exposes the data pages and
    /// fills the canaries around the data.
    pub(super) fn alloc(&self, size: u64) -> RtResult<u64> {
        let mut mem = lock(&self.mem);
        let block = mem.alloc(size)?;
        if let Err(e) = self.arena.expose(block.pages, block.pages_len) {
            let _ = mem.free(DEVICE_BASE + block.data);
            return Err(e);
        }
        for (start, end) in block.canaries() {
            self.arena.fill_canary(start, end);
        }
        Ok(DEVICE_BASE + block.data)
    }

    /// Frees an allocation; its pages turn inaccessible again.
    pub(super) fn free(&self, addr: u64) -> RtResult<()> {
        // Hidden under the allocator's lock: released earlier, the pages
        // could be handed out again and exposed before this hides them.
        let mut mem = lock(&self.mem);
        self.free_locked(&mut mem, addr)
    }

    /// Frees every live allocation as [`Shared::free`] does (pages hidden,
    /// so they read as zero when allocated again); returns how many.
    pub(super) fn free_all(&self) -> usize {
        let mut mem = lock(&self.mem);
        let addrs = mem.live_addrs();
        addrs
            .into_iter()
            .filter(|&a| self.free_locked(&mut mem, a).is_ok())
            .count()
    }

    fn free_locked(&self, mem: &mut Allocator, addr: u64) -> RtResult<()> {
        let block = mem.free(addr)?;
        self.arena.hide(block.pages, block.pages_len);
        Ok(())
    }

    /// The first damaged canary byte around the buffers whose data starts
    /// at `buffers` (arena offsets), described for a message.
    fn damaged_canary(&self, buffers: &[u64]) -> Option<String> {
        let mem = lock(&self.mem);
        for &data in buffers {
            let Place::Data { block, .. } = mem.place(data) else {
                continue;
            };
            for (start, end) in block.canaries() {
                if let Some(off) = self.arena.first_damaged(start, end) {
                    let mut msg = String::new();
                    crash::describe_place(&mut msg, mem.place(off), &lock(&self.run_args));
                    return Some(msg);
                }
            }
        }
        None
    }

    /// A failed args-dump write fails the run (first error wins).
    fn record_step(s: &mut Sched, r: RtResult<()>) {
        if let Err(e) = r
            && s.error.is_none()
        {
            s.error = Some(e);
        }
    }

    /// Marks one kernel call of `tid` finished; when it was the task's
    /// last, the task is done and its dependents are released.
    fn complete_block(&self, s: &mut Sched, tid: usize) {
        let t = &mut s.tasks[tid];
        t.blocks_done += 1;
        if t.blocks_done < t.block_num * t.lanes.len() as u32 {
            return;
        }
        self.finish(s, tid);
    }

    /// Task `tid` is done: its outputs are recorded (args dump), its
    /// buffers' user counts dropped (freeing those released meanwhile)
    /// and its dependents released. A dependent that runs nothing (a
    /// dependency-only task, or one whose predicate is false) is done at
    /// once too, in this loop rather than by recursion, so a long chain
    /// of them cannot overflow the stack. Wakes whoever waits for tasks
    /// to finish (`done_cv`: the run, the orchestration's reads, writes
    /// and allocations).
    fn finish(&self, s: &mut Sched, tid: usize) {
        let mut todo = vec![tid];
        while let Some(tid) = todo.pop() {
            let t = &mut s.tasks[tid];
            t.done = true;
            t.args = None;
            // --- args dump (issue 19): outputs before dependents may run ---
            if let (Some(rec), Some(recorder)) = (t.record.take(), s.recorder.clone()) {
                Self::record_step(s, args_dump::after_last_block(self, &recorder, tid, &rec));
            }
            let t = &mut s.tasks[tid];
            let dependents = std::mem::take(&mut t.dependents);
            let buffers = std::mem::take(&mut t.buffers);
            s.completed += 1;
            for data in buffers {
                let addr = DEVICE_BASE + data;
                let left = s.users.get_mut(&addr).map(|n| {
                    *n -= 1;
                    *n
                });
                if left == Some(0) {
                    s.users.remove(&addr);
                    if s.released.remove(&addr) {
                        let _ = self.free(addr);
                    }
                }
            }
            for d in dependents {
                let dt = &mut s.tasks[d];
                dt.pending -= 1;
                if dt.pending == 0 {
                    if self.runs_nothing(s, d) {
                        todo.push(d);
                    } else {
                        self.queue(s, d);
                    }
                }
            }
        }
        self.done_cv.notify_all();
    }

    /// Task `tid` waits for no unfinished task any more: its blocks may
    /// start, or, if it runs nothing, it is done now.
    pub(super) fn make_ready(&self, s: &mut Sched, tid: usize) {
        if self.runs_nothing(s, tid) {
            self.finish(s, tid);
        } else {
            self.queue(s, tid);
        }
    }

    /// Whether ready task `tid` runs no kernel: it is dependency-only, or
    /// its predicate is false now (then it is counted as skipped, marked
    /// so in the trace, and its argument record dropped: no block ran to
    /// record).
    fn runs_nothing(&self, s: &mut Sched, tid: usize) -> bool {
        let t = &mut s.tasks[tid];
        let read = t.predicate.map(|p| {
            let value = p.read(&self.arena);
            (p.compare(value), value)
        });
        if let Some((false, value)) = read {
            t.record = None;
            s.skipped += 1;
            if let Some(tr) = &mut s.trace {
                tr.skipped(tid, value);
            }
            return true;
        }
        s.tasks[tid].is_dummy()
    }

    /// Puts ready task `tid`, which has kernels to run, in line for its
    /// cores.
    fn queue(&self, s: &mut Sched, tid: usize) {
        if s.tasks[tid].is_mixed() {
            s.ready_mixed.push_back(tid);
            self.dispatch_mixed(s);
        } else if let Some(core) = s.tasks[tid].core() {
            s.ready[core].push_back(tid);
            self.work_cv[core].notify_all();
        }
    }

    /// The first block of `tid` is starting (scheduler lock held).
    fn first_block(&self, s: &mut Sched, tid: usize) {
        // --- args dump (issue 19): inputs before the first block ---
        if let (Some(rec), Some(recorder)) = (&s.tasks[tid].record, &s.recorder) {
            let r = args_dump::before_first_block(self, recorder, tid, rec);
            Self::record_step(s, r);
        }
    }

    /// The next kernel call of thread `lane` of core type `core`: one the
    /// scheduler handed it, else the next block of the oldest ready plain
    /// task of its type, unless its cluster is kept for a mixed block.
    fn next_work(&self, s: &mut Sched, core: usize, lane: u32) -> Option<Work> {
        if let Some(w) = s.threads[core][lane as usize].handed.take() {
            return Some(w);
        }
        if s.reserved == Some(cluster::cluster_of(core, lane)) {
            return None;
        }
        let &tid = s.ready[core].front()?;
        let t = &mut s.tasks[tid];
        let block = t.next_block;
        t.next_block += 1;
        if t.next_block >= t.block_num {
            s.ready[core].pop_front();
        }
        if block == 0 {
            self.first_block(s, tid);
        }
        s.threads[core][lane as usize].busy = true;
        Some(Work {
            task: tid,
            block,
            lane: 0,
            cluster: None,
        })
    }

    /// Starts the blocks of ready mixed tasks, oldest first, each on a
    /// cluster whose threads it needs are all idle: every kernel of the
    /// block is handed to its thread here, so they start together. The
    /// first block that finds no such cluster keeps the one closest to
    /// free (`Sched::reserved`) and the rest wait behind it.
    fn dispatch_mixed(&self, s: &mut Sched) {
        let reserved = s.reserved;
        self.start_mixed_blocks(s);
        if s.reserved != reserved {
            // Threads of a cluster no longer kept may have plain work.
            for cv in &self.work_cv {
                cv.notify_all();
            }
        }
    }

    /// [`Shared::dispatch_mixed`] but for waking threads of a cluster it
    /// stops keeping.
    fn start_mixed_blocks(&self, s: &mut Sched) {
        const AIC: usize = SCENE_CORE_AIC as usize;
        const AIV: usize = SCENE_CORE_AIV as usize;
        let cores = s.cores();
        while let Some(&tid) = s.ready_mixed.front() {
            let shape = Shape::of_mask(s.tasks[tid].slot_mask());
            let idle = |core: usize, lane: u32| !s.threads[core][lane as usize].busy;
            let mut found = None;
            let mut closest: Option<(u32, u32)> = None;
            for c in (0..cluster::clusters(cores)).filter(|&c| cluster::can_serve(cores, c, shape))
            {
                let free_vec: Vec<u32> = cluster::vector_lanes(cores, c)
                    .filter(|&l| idle(AIV, l))
                    .collect();
                let busy = u32::from(shape.aic && !idle(AIC, c))
                    + shape.aiv.saturating_sub(free_vec.len() as u32);
                if busy == 0 {
                    found = Some((c, free_vec));
                    break;
                }
                if closest.is_none_or(|(_, b)| busy < b) {
                    closest = Some((c, busy));
                }
            }
            let Some((c, free_vec)) = found else {
                s.reserved = closest.map(|(c, _)| c);
                return;
            };
            s.reserved = None;
            let t = &mut s.tasks[tid];
            let block = t.next_block;
            t.next_block += 1;
            if t.next_block >= t.block_num {
                s.ready_mixed.pop_front();
            }
            if block == 0 {
                self.first_block(s, tid);
            }
            let t = &s.tasks[tid];
            let mut func_ids = [0; SCENE_SLOTS as usize];
            for l in &t.lanes {
                func_ids[l.slot as usize] = l.func_id;
            }
            let shared_block =
                ClusterBlock::new(&self.abandoned, tid, block, t.slot_mask(), func_ids);
            // Lanes are in slot order, free vector threads ascending: AIV0
            // takes the cluster's first vector thread when it has both.
            let places: Vec<(usize, u32)> = {
                let mut vec_threads = free_vec.into_iter();
                t.lanes
                    .iter()
                    .map(|l| match l.core {
                        AIC => (AIC, c),
                        _ => (AIV, vec_threads.next().unwrap_or(0)),
                    })
                    .collect()
            };
            for (i, (core, lane)) in places.into_iter().enumerate() {
                let st = &mut s.threads[core][lane as usize];
                st.busy = true;
                st.handed = Some(Work {
                    task: tid,
                    block,
                    lane: i,
                    cluster: Some(Arc::clone(&shared_block)),
                });
            }
            if shape.aic {
                self.work_cv[AIC].notify_all();
            }
            if shape.aiv > 0 {
                self.work_cv[AIV].notify_all();
            }
        }
        s.reserved = None;
    }
}

/// Emulated core thread: makes the kernel calls the scheduler gives it
/// (blocks of ready plain tasks of its core type, and its slot of mixed
/// blocks), and checks the canaries around the task's buffers after each.
pub(super) fn core_thread(shared: Arc<Shared>, core: usize, lane: u32) {
    let _guard = crash::enter_thread(USER_STACK_BYTES);
    let mut s = shared.sched();
    loop {
        if s.shutdown {
            return;
        }
        let Some(work) = shared.next_work(&mut s, core, lane) else {
            s = shared.work_cv[core]
                .wait(s)
                .unwrap_or_else(|e| e.into_inner());
            continue;
        };
        s = run_kernel(&shared, s, (core, lane), work);
    }
}

/// Makes one kernel call on thread `lane` of core type `core` (the
/// scheduler's lock released meanwhile), then records it and completes it.
fn run_kernel<'a>(
    shared: &'a Shared,
    mut s: MutexGuard<'a, Sched>,
    (core, lane): (usize, u32),
    work: Work,
) -> MutexGuard<'a, Sched> {
    let t = &s.tasks[work.task];
    let Some(payload) = &t.args else {
        // Unreachable: a task with kernel calls to make is not done.
        s.threads[core][lane as usize].busy = false;
        return s;
    };
    let l = &t.lanes[work.lane];
    let mut args = *payload.args;
    args.block_idx = work.block;
    args.slot = l.slot;
    args.slot_mask = t.slot_mask();
    args.cluster = work
        .cluster
        .as_ref()
        .map_or(std::ptr::null(), |c| c.ctx(l.slot));
    let chip = payload.chip.clone();
    let code = l.code.clone();
    let (func_id, slot) = (l.func_id, l.slot);
    let buffers = t.buffers.clone();
    let mixed = t.is_mixed();
    // A vector kernel's lane among its block's vector kernels (PTO-ISA's
    // sub-block), as `scene_sub_block_id` / `scene_sub_block_num` say.
    let aiv_lanes = Shape::of_mask(t.slot_mask()).aiv;
    let sub_block = if mixed && core == SCENE_CORE_AIV as usize && aiv_lanes == 2 {
        (u32::from(slot == SCENE_SLOT_AIV1), 2)
    } else {
        (0, 1)
    };
    // Trace (issue 19): one branch when off; no clock read.
    let traced = s.trace.as_ref().is_some_and(|t| t.timeline());
    drop(s);
    let begin = if traced { trace::now_ns() } else { 0 };
    let activity = Activity::Kernel {
        func_id,
        core: core_name(core as u32),
        block: args.block_idx,
        blocks: args.block_num,
    };
    // The block is the thread's execution context while it runs (what
    // PTO-ISA's `get_block_idx()` asks `pto_cpu_sim_get_execution_context`).
    crash::running(activity, || {
        let pipes = work.cluster.as_ref().map(|c| c.pipes());
        hooks::in_block(args.block_idx, sub_block, pipes, || {
            // Whatever an earlier kernel on this thread left (a rounding
            // mode, FTZ/DAZ) is not this block's environment.
            FpEnv::reset();
            let block = ChipBlock {
                block_idx: args.block_idx,
                block_num: args.block_num,
                sub_block_id: sub_block.0,
            };
            code.call(&args, chip.as_deref(), block)
        })
    });
    drop(chip);
    let deadlock = work.cluster.as_ref().and_then(|c| c.returned(slot));
    let end = if traced { trace::now_ns() } else { 0 };
    let damage = shared.damaged_canary(&buffers);
    s = shared.sched();
    if traced && let Some(tr) = &mut s.trace {
        let kernel = mixed.then_some((slot, func_id));
        tr.block(
            work.task,
            args.block_idx,
            (core as u32, lane),
            kernel,
            begin,
            end,
        );
    }
    if let Some(place) = damage
        && s.error.is_none()
    {
        s.error = Some(RtError::OutOfBounds(format!(
            "kernel func_id {func_id} ({} core, block {} of {}) wrote outside its buffers: {place}",
            core_name(core as u32),
            args.block_idx,
            args.block_num
        )));
    }
    if let Some(msg) = deadlock
        && s.error.is_none()
    {
        s.error = Some(RtError::Invalid(msg));
    }
    s.threads[core][lane as usize].busy = false;
    shared.complete_block(&mut s, work.task);
    shared.dispatch_mixed(&mut s);
    s
}
