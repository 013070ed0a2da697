//! The scheduler of a run and the emulated core threads: the state shared
//! with every thread of a device (arena, allocator, task graph), and the
//! loop that runs ready tasks' blocks and releases their dependents.
//!
//! `unsafe` (allowed per item): `Send` for a task's kernel arguments.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::{USER_STACK_BYTES, args_dump, core_name, lock, trace};
use crate::chip::ChipArgs;
use crate::crash::{self, Activity};
use crate::error::{RtError, RtResult};
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

#[derive(Debug)]
pub(super) struct Task {
    pub(super) func_id: u32,
    pub(super) core: usize,
    /// The kernel's code: an image or a hosted entry (both hold what they
    /// need loaded).
    pub(super) code: KernelCode,
    pub(super) block_num: u32,
    pub(super) next_block: u32,
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
    /// `--dump-args`: the task's arguments, when the run records them.
    pub(super) record: Option<Box<args_dump::TaskRecord>>,
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
    pub(super) func_id: u32,
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
    pub(super) ready: [VecDeque<usize>; 2],
    pub(super) completed: usize,
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
    /// The race check gave up for this run (too long a history).
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

    /// Marks one block of `tid` finished and releases dependents.
    fn complete_block(&self, s: &mut Sched, tid: usize) {
        let t = &mut s.tasks[tid];
        t.blocks_done += 1;
        if t.blocks_done < t.block_num {
            return;
        }
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
                let core = s.tasks[d].core;
                s.ready[core].push_back(d);
                self.work_cv[core].notify_all();
            }
        }
        self.done_cv.notify_all();
    }
}

/// Emulated core thread: runs blocks of ready tasks of one core type, and
/// checks the canaries around the task's buffers after each block.
pub(super) fn core_thread(shared: Arc<Shared>, core: usize, lane: u32) {
    let _guard = crash::enter_thread(USER_STACK_BYTES);
    let mut s = shared.sched();
    loop {
        if s.shutdown {
            return;
        }
        let sched = &mut *s;
        let Some(&tid) = sched.ready[core].front() else {
            s = shared.work_cv[core]
                .wait(s)
                .unwrap_or_else(|e| e.into_inner());
            continue;
        };
        let t = &mut sched.tasks[tid];
        let Some(payload) = &t.args else {
            // Unreachable: a ready task is not done.
            sched.ready[core].pop_front();
            continue;
        };
        let mut args = *payload.args;
        let chip = payload.chip.clone();
        // --- args dump (issue 19): inputs before the first block ---
        if t.next_block == 0
            && let (Some(rec), Some(recorder)) = (&t.record, &sched.recorder)
        {
            let r = args_dump::before_first_block(&shared, recorder, tid, rec);
            Shared::record_step(sched, r);
        }
        let t = &mut sched.tasks[tid];
        args.block_idx = t.next_block;
        t.next_block += 1;
        if t.next_block == t.block_num {
            sched.ready[core].pop_front();
        }
        let code = t.code.clone();
        let func_id = t.func_id;
        let buffers = t.buffers.clone();
        // Trace (issue 19): one branch when off; no clock read.
        let traced = sched.trace.as_ref().is_some_and(|t| t.timeline());
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
            hooks::in_block(args.block_idx, || code.call(&args, chip.as_deref()))
        });
        drop(chip);
        let end = if traced { trace::now_ns() } else { 0 };
        let damage = shared.damaged_canary(&buffers);
        s = shared.sched();
        if traced && let Some(tr) = &mut s.trace {
            tr.block(tid, args.block_idx, core as u32, lane, begin, end);
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
        shared.complete_block(&mut s, tid);
    }
}
