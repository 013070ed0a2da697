//! The orchestration side of a run: its thread, the context and v1 ops it
//! calls back through `ctx->ops`, and turning each submitted task (v1 or
//! v2) into a node of the task graph: checked views, kernel arguments and
//! dependencies on earlier overlapping accesses.
//!
//! `unsafe` (allowed per item): calling the orchestration's entry and reading
//! the context, arguments and messages it passes back through `ctx->ops`.

use std::ffi::{CStr, c_char, c_void};
use std::sync::Arc;
use std::time::Instant;

use super::cluster::{self, Shape, slot_name};
use super::sched::{Access, KernelArgs, Lane, ManualAccess, Predicate, Shared, Task, slot_mask};
use super::{
    Callable, Incore, USER_STACK_BYTES, args_dump, comm, core_name, lock, orch_v2, orch_v6, trace,
};
use crate::chip::{ChipArgs, ChipTensorRecord};
use crate::crash::{self, Activity};
use crate::error::{RtError, RtResult};
use crate::memory::{Allocator, DEVICE_BASE, Place};
use scene_abi::*;

/// What the orchestration's `ctx->runtime` points at during a run.
#[derive(Debug)]
pub(super) struct RunCtx {
    pub(super) shared: Arc<Shared>,
    pub(super) callable: Arc<Callable>,
    pub(super) cores: [u32; 2],
    pub(super) platform: &'static str,
    /// One per run argument: what `arg_desc` returns (tensors only).
    pub(super) descs: Vec<Option<SceneTensorDesc>>,
    /// Run arguments' device addresses: not the orchestration's to free.
    pub(super) deadline: Option<Instant>,
    /// The communication domain and this device's rank in it (level 3).
    pub(super) comm: Option<(Arc<comm::Domain>, u32)>,
    /// `SCENE_RT_TRACE_*` flags of this run (0: off), read without a lock.
    pub(super) trace: u32,
}

static OPS: SceneOrchOps = SceneOrchOps {
    abi_version: SCENE_ORCH_ABI_VERSION,
    alloc: orch_v2::op_alloc,
    submit: op_submit,
    fail: op_fail,
    arg_desc: orch_v2::op_arg_desc,
    submit_v2: orch_v2::op_submit_v2,
    read: orch_v2::op_read,
    write: orch_v2::op_write,
    fill: orch_v2::op_fill,
    free: orch_v2::op_free,
    begin_scope: orch_v2::op_begin_scope,
    end_scope: orch_v2::op_end_scope,
    malloc: orch_v2::op_malloc,
    last_error: orch_v2::op_last_error,
    submit_mixed: op_submit_mixed,
    comm_rank: orch_v2::op_comm_rank,
    submit_task: orch_v6::op_submit_task,
    memory_window: orch_v6::op_memory_window,
    core_counts: orch_v6::op_core_counts,
};

pub(super) fn orch_thread(ctx: Arc<RunCtx>, args: Vec<SceneRunArg>) {
    let _guard = crash::enter_thread(USER_STACK_BYTES);
    // A new thread inherits its creator's floating-point environment.
    crate::fpenv::FpEnv::reset();
    let mut c = SceneOrchCtx {
        ops: &OPS,
        runtime: Arc::as_ptr(&ctx).cast_mut().cast::<c_void>(),
    };
    let nargs = args.len() as u32;
    if ctx.trace != 0
        && let Some(tr) = &mut ctx.shared.sched().trace
    {
        tr.orch_begin();
    }
    #[allow(unsafe_code)]
    // SAFETY: `entry` was resolved from the orchestration library, which
    // `ctx.callable._orch` keeps loaded; `c` and `args` outlive the call, and
    // `c.runtime` points at `ctx`, which this thread owns until after the call.
    let rc = crash::running(Activity::Orchestration, || unsafe {
        (ctx.callable.entry)(&mut c, args.as_ptr(), nargs)
    });
    let mut s = ctx.shared.sched();
    if let Some(tr) = &mut s.trace {
        tr.orch_end();
    }
    if !s.scopes.is_empty() && s.error.is_none() {
        s.error = Some(RtError::Orch(format!(
            "orchestration `{}` returned with {} memory scope(s) still open (begin_scope without end_scope)",
            ctx.callable.symbol,
            s.scopes.len()
        )));
    }
    s.orch_rc = Some(rc);
    ctx.shared.done_cv.notify_all();
}

pub(super) fn run_ctx<'a>(ctx: *mut SceneOrchCtx) -> Option<&'a RunCtx> {
    #[allow(unsafe_code)]
    // SAFETY: orchestrations receive `ctx` from `orch_thread`, where it points
    // at a live `SceneOrchCtx` whose `runtime` is a live `RunCtx` for the whole
    // entry call; ops are only valid during that call (scene_orch.h).
    unsafe {
        ctx.as_ref()?.runtime.cast::<RunCtx>().cast_const().as_ref()
    }
}

/// Records a failed orchestration call: its status is returned, its
/// message becomes the thread's last error (`scene_orch_last_error`), and
/// the first such error fails the run.
pub(super) fn record(rc: &RunCtx, e: RtError) -> i32 {
    let status = e.status();
    crate::set_last_error(&e.to_string());
    let mut s = rc.shared.sched();
    if s.error.is_none() {
        s.error = Some(e);
    }
    status
}

extern "C" fn op_fail(ctx: *mut SceneOrchCtx, message: *const c_char) {
    let Some(rc) = run_ctx(ctx) else { return };
    let msg = if message.is_null() {
        "(null message)".to_owned()
    } else {
        #[allow(unsafe_code)]
        // SAFETY: the orchestration passes a NUL-terminated string (scene_orch.h).
        unsafe { CStr::from_ptr(message) }
            .to_string_lossy()
            .into_owned()
    };
    rc.shared.sched().fail_msgs.push(msg);
}

extern "C" fn op_submit(
    ctx: *mut SceneOrchCtx,
    func_id: u32,
    block_num: u32,
    args: *const SceneOrchArg,
    num_args: u32,
) -> i32 {
    let Some(rc) = run_ctx(ctx) else {
        return SCENE_RT_E_INVALID;
    };
    let args = match task_args(
        rc,
        || format!("submit to func_id {func_id}"),
        args,
        num_args,
    ) {
        Ok(args) => args,
        Err(status) => return status,
    };
    // A v1 argument is a byte view of its whole range.
    let args: Vec<SceneTaskArgV2> = args
        .iter()
        .map(|a| SceneTaskArgV2 {
            direction: a.direction,
            view_error: 0,
            value: a.value,
            size: a.size,
            desc: SceneTensorDesc::contiguous(SCENE_DTYPE_BYTES, &[a.size]),
        })
        .collect();
    match submit(rc, Kernels::One(func_id), block_num, &args) {
        Ok(()) => SCENE_RT_OK,
        Err(e) => record(rc, e),
    }
}

/// v4 `submit_mixed`: one task whose blocks run a kernel per set slot of
/// `kernels` together on one cluster.
extern "C" fn op_submit_mixed(
    ctx: *mut SceneOrchCtx,
    kernels: *const SceneMixedKernels,
    block_num: u32,
    args: *const SceneTaskArgV2,
    num_args: u32,
) -> i32 {
    let Some(rc) = run_ctx(ctx) else {
        return SCENE_RT_E_INVALID;
    };
    #[allow(unsafe_code)]
    // SAFETY: a non-NULL `kernels` points at the orchestration's
    // `SceneMixedKernels` for the duration of the call (scene_orch.h); it
    // is copied at once.
    let kernels = unsafe { kernels.as_ref() }.copied();
    let slots = match kernels.map(|k| mixed_slots("submit_mixed", &k)) {
        Some(Ok(slots)) => slots,
        Some(Err(e)) => return record(rc, e),
        None => {
            return record(rc, RtError::Invalid("submit_mixed: kernels is NULL".into()));
        }
    };
    let func_id = slots.first().map_or(0, |s| s.1);
    let args = match task_args(
        rc,
        || format!("submit to func_id {func_id}"),
        args,
        num_args,
    ) {
        Ok(args) => args,
        Err(status) => return status,
    };
    match submit(rc, Kernels::Slots(&slots), block_num, args) {
        Ok(()) => SCENE_RT_OK,
        Err(e) => record(rc, e),
    }
}

/// The `(slot, func_id)` of every set slot of a mixed submit, slot order
/// (at least one: `submit_task`'s dependency-only tasks are its own).
fn mixed_slots(op: &str, k: &SceneMixedKernels) -> RtResult<Vec<(u32, u32)>> {
    let slots = set_slots(op, k)?;
    if slots.is_empty() {
        return Err(RtError::Invalid(format!(
            "{op}: every slot is SCENE_NO_KERNEL; a task runs at least one kernel"
        )));
    }
    Ok(slots)
}

/// The `(slot, func_id)` of every set slot of `k`, slot order (none:
/// every slot is `SCENE_NO_KERNEL`).
pub(super) fn set_slots(op: &str, k: &SceneMixedKernels) -> RtResult<Vec<(u32, u32)>> {
    let mut slots = Vec::with_capacity(SCENE_SLOTS as usize);
    for (slot, id) in [
        (SCENE_SLOT_AIC, k.aic),
        (SCENE_SLOT_AIV0, k.aiv0),
        (SCENE_SLOT_AIV1, k.aiv1),
    ] {
        match u32::try_from(id) {
            Ok(id) => slots.push((slot, id)),
            Err(_) if id == SCENE_NO_KERNEL => {}
            Err(_) => {
                return Err(RtError::Invalid(format!(
                    "{op}: slot {} names func_id {id}; a slot takes a func_id (>= 0) or SCENE_NO_KERNEL (-1)",
                    slot_name(slot)
                )));
            }
        }
    }
    Ok(slots)
}

/// The kernels a submit names: one (v1 and v2 submits: its slot follows
/// from its core type), or a `(slot, func_id)` per set slot of a mixed
/// submit (none: a dependency-only task, v6 `submit_task` only).
#[derive(Debug, Clone, Copy)]
pub(super) enum Kernels<'a> {
    One(u32),
    Slots(&'a [(u32, u32)]),
}

/// The `num_args` task arguments at `args` (v1 or v2 layout), or the
/// status of the recorded error: too many, or NULL. `who` names the
/// submit in messages (`submit to func_id 3`).
pub(super) fn task_args<'a, T>(
    rc: &RunCtx,
    who: impl Fn() -> String,
    args: *const T,
    num_args: u32,
) -> Result<&'a [T], i32> {
    if num_args as usize > SCENE_MAX_ARGS {
        return Err(record(
            rc,
            RtError::Invalid(format!(
                "{}: {num_args} arguments, the maximum is {SCENE_MAX_ARGS}",
                who()
            )),
        ));
    }
    if num_args == 0 {
        return Ok(&[]);
    }
    if args.is_null() {
        return Err(record(
            rc,
            RtError::Invalid(format!("{}: args is NULL", who())),
        ));
    }
    #[allow(unsafe_code)]
    // SAFETY: the orchestration passes `num_args` (<= 32, checked) valid
    // task args, which the caller copies before the op returns.
    Ok(unsafe { std::slice::from_raw_parts(args, num_args as usize) })
}

/// One task submitted by the orchestration (v1 to v4 ops): check it,
/// translate its arguments for the kernel, and put it into the task graph.
pub(super) fn submit(
    rc: &RunCtx,
    kernels: Kernels<'_>,
    block_num: u32,
    args: &[SceneTaskArgV2],
) -> RtResult<()> {
    submit_with(rc, kernels, block_num, args, Extras::default()).map(drop)
}

/// What a v6 `submit_task` adds to a submit: explicit dependencies and a
/// dispatch predicate.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Extras<'a> {
    /// Ids of earlier tasks of the run (indices in `Sched::tasks`) the
    /// task runs after, on top of those its arguments imply.
    pub(super) deps: &'a [u64],
    /// Checked at submit, read when the task is ready (`None`: always run).
    pub(super) predicate: Option<ScenePredicate>,
}

/// How messages name a task by its kernel: `task func_id 3` (a mixed
/// task by its first kernel's), or `dependency-only task`.
fn task_name(func_id: Option<u32>) -> String {
    match func_id {
        Some(id) => format!("task func_id {id}"),
        None => "dependency-only task".to_owned(),
    }
}

/// [`submit`] with `extras`; returns the new task's id. With no kernels
/// (`Kernels::Slots(&[])`) the task is dependency-only: its arguments
/// create dependencies like any task's, it runs nothing, and it completes
/// as soon as it is ready (`block_num` is ignored).
pub(super) fn submit_with(
    rc: &RunCtx,
    kernels: Kernels<'_>,
    block_num: u32,
    args: &[SceneTaskArgV2],
    extras: Extras<'_>,
) -> RtResult<usize> {
    let begin = if rc.trace != 0 { trace::now_ns() } else { 0 };
    let (recording, tid) = {
        let s = rc.shared.sched();
        if let Some(e) = &s.error {
            return Err(e.clone());
        }
        // The orchestration thread is the only submitter: the id holds.
        (s.recorder.is_some(), s.tasks.len())
    };
    let lanes = task_lanes(rc, kernels, block_num)?;
    let dummy = lanes.is_empty();
    let block_num = if dummy { 0 } else { block_num };
    let (func_id, core) = (
        lanes.first().map(|l| l.func_id),
        lanes.first().map(|l| l.core),
    );
    let name = task_name(func_id);
    // A mixed task's kernels, for records (a plain task has none).
    let mixed: Vec<trace::Kernel> = match kernels {
        Kernels::Slots(slots) if slots.len() > 1 => slots.to_vec(),
        _ => Vec::new(),
    };
    let (args, manual) = &split_manual(&name, args)?;
    let args = args.as_slice();
    let (mut payload, accesses, manual_accesses, mut buffers) =
        kernel_args(rc, (&name, func_id), block_num, args, manual)?;
    if let Some(func_id) = func_id
        && lanes.iter().any(|l| l.code.is_chip_tensor())
    {
        payload.chip = Some(Arc::new(chip_args(func_id, args, &payload)?));
    }
    let predicate = match extras.predicate {
        Some(p) if p.op != SCENE_PRED_NONE => {
            let who = format!("submit_task: task {tid} ({name})");
            Some(checked_predicate(rc, &who, &p, &mut buffers)?)
        }
        _ => None,
    };
    let record = match (recording, func_id, core) {
        (true, Some(func_id), Some(core)) => Some(args_dump::describe(
            &rc.shared,
            (func_id, core as u32, &mixed),
            block_num,
            args,
        )?),
        _ => None,
    };
    let task = Task {
        lanes,
        block_num,
        next_block: 0,
        blocks_done: 0,
        // A dependency-only task has no kernel to hand them to.
        args: (!dummy).then_some(payload),
        buffers,
        pending: 0,
        dependents: Vec::new(),
        parents: Vec::new(),
        done: false,
        record,
        predicate,
    };
    enqueue(
        rc,
        task,
        (&accesses, manual_accesses, extras.deps),
        (args, manual, &mixed, begin),
    )
}

/// A v6 dispatch predicate checked at submit: a known operator, an
/// element size of 1, 2, 4 or 8 bytes, and the element inside one live
/// allocation, whose data offset joins the task's `buffers` (so a `free`
/// waits for the task). Every failure is `SCENE_RT_E_INVALID`, named by
/// `who`.
fn checked_predicate(
    rc: &RunCtx,
    who: &str,
    p: &ScenePredicate,
    buffers: &mut Vec<u64>,
) -> RtResult<Predicate> {
    if p.op > SCENE_PRED_LE {
        return Err(RtError::Invalid(format!(
            "{who}: predicate op {} is not a SCENE_PRED_* operator (SCENE_PRED_NONE = 0 .. SCENE_PRED_LE = 6)",
            p.op
        )));
    }
    if !matches!(p.elem_size, 1 | 2 | 4 | 8) {
        return Err(RtError::Invalid(format!(
            "{who}: predicate elem_size {} is not 1, 2, 4 or 8 bytes",
            p.elem_size
        )));
    }
    let what = format!(
        "{who}: predicate element ({} bytes at byte {} of buffer {:#x})",
        p.elem_size, p.offset, p.addr
    );
    let Some(addr) = p.addr.checked_add(p.offset) else {
        return Err(RtError::Invalid(format!("{what}: the offset overflows")));
    };
    let mem = lock(&rc.shared.mem);
    let checked = mem.check(addr, u64::from(p.elem_size), &what);
    let place = checked.as_ref().ok().map(|&off| mem.place(off));
    // The allocator lock is never held while taking the scheduler's.
    drop(mem);
    let off = match checked {
        Ok(off) => off,
        Err(e) if rc.shared.sched().freed.contains(&p.addr) => {
            return Err(RtError::Invalid(format!(
                "{what}: buffer {:#x} was freed ({e})",
                p.addr
            )));
        }
        Err(e) => return Err(RtError::Invalid(e.to_string())),
    };
    if let Some(Place::Data { block, .. }) = place
        && !buffers.contains(&block.data)
    {
        buffers.push(block.data);
    }
    Ok(Predicate {
        op: p.op,
        elem_size: p.elem_size,
        off,
        target: p.target,
    })
}

/// The kernels of a task as its blocks run them, each checked: registered,
/// of the slot's core type, and, for a mixed task, a cluster of this
/// device has the cores they need.
fn task_lanes(rc: &RunCtx, kernels: Kernels<'_>, block_num: u32) -> RtResult<Vec<Lane>> {
    let lane = |slot: Option<u32>, func_id: u32| -> RtResult<Lane> {
        let inc = runnable_incore(rc, func_id, block_num)?;
        let core_slot = if inc.core == SCENE_CORE_AIC {
            SCENE_SLOT_AIC
        } else {
            SCENE_SLOT_AIV0
        };
        let slot = slot.unwrap_or(core_slot);
        if (slot == SCENE_SLOT_AIC) != (inc.core == SCENE_CORE_AIC) {
            return Err(RtError::CoreType(format!(
                "mixed task: slot {} names func_id {func_id}, an {} kernel; slot aic takes a cube (aic) kernel, slots aiv0 and aiv1 vector (aiv) kernels",
                slot_name(slot),
                core_name(inc.core)
            )));
        }
        Ok(Lane {
            slot,
            func_id,
            core: inc.core as usize,
            code: inc.code.clone(),
        })
    };
    let slots = match kernels {
        Kernels::One(func_id) => return Ok(vec![lane(None, func_id)?]),
        // A dependency-only task (submit_task only).
        Kernels::Slots([]) => return Ok(Vec::new()),
        Kernels::Slots(slots) => slots,
    };
    let lanes = slots
        .iter()
        .map(|&(slot, func_id)| lane(Some(slot), func_id))
        .collect::<RtResult<Vec<Lane>>>()?;
    let shape = Shape::of_mask(slot_mask(&lanes));
    if lanes.len() > 1 && !cluster::fits(rc.cores, shape) {
        let names: Vec<&str> = lanes.iter().map(|l| slot_name(l.slot)).collect();
        return Err(RtError::CoreType(format!(
            "mixed task ({}) needs one cluster with {} aic and {} aiv core(s), but no cluster of this {} device has them (aic={}, aiv={}: cluster c is aic core c with aiv cores 2c and 2c+1; raise `aiv` / `aic` in SCENE_RUNTIME_OPTIONS)",
            names.join("+"),
            u32::from(shape.aic),
            shape.aiv,
            rc.platform,
            rc.cores[SCENE_CORE_AIC as usize],
            rc.cores[SCENE_CORE_AIV as usize]
        )));
    }
    Ok(lanes)
}

/// The arguments with `SCENE_DIR_MANUAL_DEP` taken out of their
/// directions, and which had it (tensors only).
fn split_manual(name: &str, args: &[SceneTaskArgV2]) -> RtResult<(Vec<SceneTaskArgV2>, Vec<bool>)> {
    let mut plain = args.to_vec();
    let mut manual = Vec::with_capacity(args.len());
    for (i, a) in plain.iter_mut().enumerate() {
        let flagged = a.direction & SCENE_DIR_MANUAL_DEP != 0;
        a.direction &= !SCENE_DIR_MANUAL_DEP;
        if flagged && a.direction == SCENE_DIR_SCALAR {
            return Err(RtError::Invalid(format!(
                "{name} argument {i}: SCENE_DIR_MANUAL_DEP on a scalar (only tensors have dependencies)"
            )));
        }
        manual.push(flagged);
    }
    Ok((plain, manual))
}

/// Tracked accesses the `manual_dep` race check keeps per run (from the
/// first manual access on); past them it is off for the rest of the run.
const MAX_RACE_HISTORY: usize = 1 << 16;

/// Most runs a manual view is split into for the race check; a view with
/// more is checked by its whole span (which may report a race between
/// interleaved views that never touch the same byte).
const MAX_VIEW_RUNS: u64 = 1 << 16;

/// The arena byte ranges a view covers, sorted and merged: one per
/// innermost row when that dimension is contiguous, else one per element.
/// `off` is the arena offset of its first element ([`view_span`]).
fn view_runs(d: &SceneTensorDesc, off: u64, bytes: u64) -> Vec<(u64, u64)> {
    let rank = (d.rank as usize).min(SCENE_MAX_RANK);
    let es = dtype_size(d.dtype);
    let shape = &d.shape[..rank];
    let strides = &d.strides[..rank];
    let (outer, run_elems) = match (shape.last(), strides.last()) {
        (Some(&n), Some(&1)) => (rank - 1, n),
        _ => (rank, 1),
    };
    let count: u64 = shape[..outer].iter().product();
    if rank == 0 || count > MAX_VIEW_RUNS || shape.contains(&0) {
        return vec![(off, off + bytes)];
    }
    let mut runs = Vec::with_capacity(count as usize);
    let mut idx = vec![0u64; outer];
    for _ in 0..count {
        let elem: u64 = idx.iter().zip(strides).map(|(i, s)| i * s).sum();
        let start = off + elem * es;
        runs.push((start, start + run_elems * es));
        for dim in (0..outer).rev() {
            idx[dim] += 1;
            if idx[dim] < shape[dim] {
                break;
            }
            idx[dim] = 0;
        }
    }
    runs.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
    for (a, b) in runs {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

/// Whether two sorted, merged run lists share a byte.
fn runs_meet(a: &[(u64, u64)], b: &[(u64, u64)]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].0 < b[j].1 && b[j].0 < a[i].1 {
            return true;
        }
        if a[i].1 <= b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

/// Whether task `p` is ordered before a task whose direct dependencies
/// are `deps`: it is one of them, or an ancestor of one (through `parents`,
/// which finished tasks keep). Ids grow along edges, so nothing below `p`
/// can lead back to it.
fn ordered_before<'a>(parents: impl Fn(usize) -> &'a [usize], p: usize, deps: &[usize]) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut todo: Vec<usize> = deps.iter().copied().filter(|&d| d >= p).collect();
    while let Some(t) = todo.pop() {
        if t == p {
            return true;
        }
        for &q in parents(t) {
            if q >= p && seen.insert(q) {
                todo.push(q);
            }
        }
    }
    false
}

/// The incore a task for `func_id` runs, if this device can run it.
fn runnable_incore(rc: &RunCtx, func_id: u32, block_num: u32) -> RtResult<&Incore> {
    let inc = rc.callable.incores.get(&func_id).ok_or_else(|| {
        let known: Vec<String> = rc.callable.incores.keys().map(u32::to_string).collect();
        RtError::FuncId(format!(
            "orchestration `{}` submitted a task to func_id {func_id}, which the callable does not register (registered func_ids: [{}])",
            rc.callable.symbol,
            known.join(", ")
        ))
    })?;
    if rc.cores[inc.core as usize] == 0 {
        return Err(RtError::CoreType(format!(
            "task for func_id {func_id} needs a {} core, but this {} device has 0 {} cores",
            core_name(inc.core),
            rc.platform,
            core_name(inc.core)
        )));
    }
    if block_num == 0 {
        return Err(RtError::Invalid(format!(
            "submit to func_id {func_id}: block_num is 0"
        )));
    }
    Ok(inc)
}

/// A byte range of the arena a task touches: `(start, end, writes)`.
type ArenaAccess = (u64, u64, bool);

/// A task's arguments as [`kernel_args`] translates them: the kernel's
/// view, the tracked accesses, the `manual_dep` ones, and the data offsets
/// of the buffers they lie in.
type Translated = (KernelArgs, Vec<ArenaAccess>, Vec<ManualAccess>, Vec<u64>);

/// Where a tensor argument's view lies: the arena offset of its element 0
/// and the byte length of the range it spans (its bounding range).
pub(super) fn view_span(mem: &Allocator, a: &SceneTaskArgV2, what: &str) -> RtResult<(u64, u64)> {
    let d = &a.desc;
    if a.view_error != 0 {
        return Err(view_outside_parent(a, what));
    }
    if d.rank as usize > SCENE_MAX_RANK {
        return Err(RtError::Invalid(format!(
            "{what}: rank {} is more than {SCENE_MAX_RANK}",
            d.rank
        )));
    }
    let es = dtype_size(d.dtype);
    let (first, end) = d.element_span().unwrap_or((d.offset, d.offset));
    let bytes = (end - first).checked_mul(es);
    let start = first.checked_mul(es);
    let (Some(start), Some(bytes)) = (start, bytes) else {
        return Err(RtError::OutOfBounds(format!("{what}: the view overflows")));
    };
    if start.checked_add(bytes).is_none_or(|e| e > a.size) {
        return Err(RtError::OutOfBounds(format!(
            "{what}: the view (offset {} elements, shape {:?}, strides {:?}) spans bytes [{start}, {}) of a {}-byte buffer",
            d.offset,
            &d.shape[..d.rank as usize],
            &d.strides[..d.rank as usize],
            start.saturating_add(bytes),
            a.size
        )));
    }
    let addr = a.value.wrapping_add(start);
    mem.check(addr, bytes, what)?;
    Ok((addr - DEVICE_BASE, bytes))
}

/// The kernel's view of a task's arguments (device addresses become host
/// pointers into the arena at each view's first element), the arena
/// ranges the task reads and writes, and the data offsets of the buffers
/// those ranges lie in. `name` names the task in messages (`task func_id
/// 3`), `func_id` is its (first) kernel's (`None`: dependency-only).
fn kernel_args(
    rc: &RunCtx,
    (name, func_id): (&str, Option<u32>),
    block_num: u32,
    args: &[SceneTaskArgV2],
    manual: &[bool],
) -> RtResult<Translated> {
    let mut kargs = Box::new(SceneKernelArgs {
        abi_version: SCENE_KERNEL_ABI_VERSION,
        block_idx: 0,
        block_num,
        num_args: args.len() as u32,
        args: [0; SCENE_MAX_ARGS],
        arg_sizes: [0; SCENE_MAX_ARGS],
        descs: std::ptr::null(),
        comm: rc
            .comm
            .as_ref()
            .map_or(std::ptr::null(), |(d, rank)| d.ctx(*rank)),
        // Set per kernel call (`sched.rs`).
        slot: 0,
        slot_mask: 0,
        cluster: std::ptr::null(),
    });
    let mut descs: Box<[SceneTensorDesc]> = args.iter().map(|a| a.desc).collect();
    let mut accesses = Vec::with_capacity(args.len());
    let mut manual_accesses = Vec::new();
    let mut buffers = Vec::with_capacity(args.len());
    let mem = lock(&rc.shared.mem);
    for (i, a) in args.iter().enumerate() {
        match a.direction {
            SCENE_DIR_SCALAR => kargs.args[i] = a.value,
            SCENE_DIR_IN | SCENE_DIR_OUT | SCENE_DIR_INOUT => {
                let what = format!("{name} argument {i}");
                let (off, bytes) = match view_span(&mem, a, &what) {
                    Ok(span) => span,
                    Err(e) => {
                        // The allocator lock is never held while taking the
                        // scheduler's (the scheduler frees under its lock).
                        drop(mem);
                        return Err(if rc.shared.sched().freed.contains(&a.value) {
                            RtError::OutOfBounds(format!(
                                "{what}: uses buffer {:#x} after it was freed",
                                a.value
                            ))
                        } else {
                            e
                        });
                    }
                };
                kargs.args[i] = rc.shared.arena.host_ptr(off) as u64;
                kargs.arg_sizes[i] = bytes;
                descs[i].offset = 0;
                if let Place::Data { block, .. } = mem.place(off)
                    && !buffers.contains(&block.data)
                {
                    buffers.push(block.data);
                }
                let write = a.direction != SCENE_DIR_IN;
                if bytes > 0 && manual.get(i).copied().unwrap_or(false) {
                    manual_accesses.push(ManualAccess {
                        task: 0,
                        func_id,
                        arg: i,
                        start: off,
                        end: off + bytes,
                        write,
                        runs: Arc::new(view_runs(&a.desc, off, bytes)),
                    });
                } else if bytes > 0 {
                    accesses.push((off, off + bytes, write));
                }
            }
            d => {
                return Err(RtError::Invalid(format!(
                    "{name} argument {i}: unknown direction {d}"
                )));
            }
        }
    }
    kargs.descs = descs.as_ptr();
    Ok((
        KernelArgs {
            args: kargs,
            _descs: descs,
            chip: None,
        },
        accesses,
        manual_accesses,
        buffers,
    ))
}

/// The `chip_tensor` arguments of a task (`SCENE_KERNEL_ARGS_CHIP_TENSOR`):
/// a record per tensor, describing exactly what the `scene` convention
/// hands a kernel (`payload`: the view's origin as host address, the bytes
/// its view spans, the view's dtype, shape and strides with the offset
/// already applied, so `start_offset` is 0), and each scalar's bits.
fn chip_args(func_id: u32, args: &[SceneTaskArgV2], payload: &KernelArgs) -> RtResult<ChipArgs> {
    let ka = &payload.args;
    let words = args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            if a.direction == SCENE_DIR_SCALAR {
                return Ok(Err(a.value));
            }
            let mut view = a.desc;
            view.offset = 0;
            let what = format!("task func_id {func_id} argument {i}");
            ChipTensorRecord::of_view(&view, ka.args[i], ka.arg_sizes[i], &what).map(Ok)
        })
        .collect::<RtResult<Vec<_>>>()?;
    Ok(ChipArgs::new(words))
}

/// Adds the task to the graph: it depends on every unfinished task whose
/// accesses overlap its own with a write on either side (RAW, WAR, WAW),
/// and is ready at once if there is none. Its `manual_dep` accesses only
/// wait for the unfinished tasks that wrote those bytes through tracked
/// arguments (their producers), are not tracked for later tasks, and must
/// not overlap another manual access of the run with a write on either
/// side unless a dependency path orders the two: that is a data race, and
/// fails the submit (whichever task happened to finish first).
/// `explicit` are the ids of earlier tasks it must also follow (v6
/// `submit_task`'s deps): it waits for the unfinished ones, and all of
/// them order it for the race check. Returns the task's id.
/// `submitted` is the task's arguments, which are manual, and when its
/// submit began, for the trace.
fn enqueue(
    rc: &RunCtx,
    mut task: Task,
    (accesses, mut manual, explicit): (&[ArenaAccess], Vec<ManualAccess>, &[u64]),
    submitted: (&[SceneTaskArgV2], &[bool], &[trace::Kernel], u64),
) -> RtResult<usize> {
    let mut s = rc.shared.sched();
    if s.shutdown {
        return Err(RtError::Timeout(
            "submit after the run was abandoned".into(),
        ));
    }
    let sched = &mut *s;
    let tid = sched.tasks.len();
    let explicit = explicit_deps(tid, &task, explicit)?;
    sched.accesses.retain(|a| !sched.tasks[a.task].done);
    let mut deps = must_follow(&sched.accesses, accesses, &manual);
    let implied = deps.len();
    deps.extend(explicit.iter().filter(|&&d| !sched.tasks[d].done));
    if deps.len() > implied {
        deps.sort_unstable();
        deps.dedup();
    }
    if !manual.is_empty() && sched.history.is_none() && !sched.race_check_off {
        sched.history = Some(Vec::new());
    }
    // What the task is ordered after whether or not those tasks finished:
    // its unfinished dependencies, its explicit ones, and the history's
    // conflicting accesses.
    let parents = {
        let mut parents = match &sched.history {
            Some(history) => must_follow(history, accesses, &manual),
            None => Vec::new(),
        };
        parents.extend_from_slice(&deps);
        parents.extend_from_slice(&explicit);
        parents.sort_unstable();
        parents.dedup();
        parents
    };
    for m in &mut manual {
        m.task = tid;
        if sched.race_check_off {
            continue;
        }
        for p in &sched.manual {
            if (m.write || p.write)
                && p.start < m.end
                && m.start < p.end
                && runs_meet(&m.runs, &p.runs)
                && !ordered_before(|t| &sched.tasks[t].parents, p.task, &parents)
            {
                return Err(manual_race(m, p));
            }
        }
    }
    for &d in &deps {
        sched.tasks[d].dependents.push(tid);
    }
    task.parents = parents;
    if let Some(tr) = &mut sched.trace {
        let (args, manual_args, kernels, begin) = submitted;
        let kernel = task.func_id().zip(task.core().map(|c| c as u32));
        let manual_spans: Vec<ArenaAccess> =
            manual.iter().map(|m| (m.start, m.end, m.write)).collect();
        tr.submit(
            tid,
            (kernel, task.block_num, kernels),
            (args, manual_args),
            (accesses, &manual_spans),
            (&deps, &explicit),
            begin,
        );
    }
    task.pending = deps.len();
    for &data in &task.buffers {
        *sched.users.entry(DEVICE_BASE + data).or_default() += 1;
    }
    sched.tasks.push(task);
    sched.manual.extend(manual);
    if let Some(history) = &mut sched.history {
        history.extend(accesses.iter().map(|&(start, end, write)| Access {
            task: tid,
            start,
            end,
            write,
        }));
        // Past this, each submit would scan too long a history: the check
        // stops for the run (never a false report from a truncated one).
        if history.len() > MAX_RACE_HISTORY {
            sched.history = None;
            sched.race_check_off = true;
            sched.manual.clear();
        }
    }
    sched
        .accesses
        .extend(accesses.iter().map(|&(start, end, write)| Access {
            task: tid,
            start,
            end,
            write,
        }));
    if deps.is_empty() {
        rc.shared.make_ready(sched, tid);
    }
    Ok(tid)
}

/// A `submit_task`'s explicit dependencies as task ids, sorted and
/// deduplicated: each must name a task submitted before task `tid`.
fn explicit_deps(tid: usize, task: &Task, ids: &[u64]) -> RtResult<Vec<usize>> {
    let mut deps = Vec::with_capacity(ids.len());
    for (i, &id) in ids.iter().enumerate() {
        match usize::try_from(id) {
            Ok(d) if d < tid => deps.push(d),
            _ => {
                let before = match tid {
                    0 => "no task was submitted before it".to_owned(),
                    n => format!("only tasks 0 to {} were submitted before it", n - 1),
                };
                return Err(RtError::Invalid(format!(
                    "submit_task: task {tid} ({}): deps[{i}] is task id {id}, but {before} (a dependency is the id an earlier submit of this run returned)",
                    task_name(task.func_id()),
                )));
            }
        }
    }
    deps.sort_unstable();
    deps.dedup();
    Ok(deps)
}

/// The tasks of `earlier` a task with tracked `accesses` and `manual`
/// ones must follow, sorted: every one overlapping a tracked access with a
/// write on either side, and every writer of a manual access's bytes (its
/// producers).
fn must_follow(
    earlier: &[Access],
    accesses: &[ArenaAccess],
    manual: &[ManualAccess],
) -> Vec<usize> {
    let mut tasks: Vec<usize> = earlier
        .iter()
        .filter(|p| {
            accesses
                .iter()
                .any(|&(start, end, write)| p.start < end && start < p.end && (write || p.write))
                || (p.write && manual.iter().any(|m| p.start < m.end && m.start < p.end))
        })
        .map(|p| p.task)
        .collect();
    tasks.sort_unstable();
    tasks.dedup();
    tasks
}

/// The error of two unordered tasks' overlapping manual accesses.
fn manual_race(m: &ManualAccess, p: &ManualAccess) -> RtError {
    let verb = |write| if write { "writes" } else { "reads" };
    let (start, end) = (m.start.max(p.start), m.end.min(p.end));
    let kernel = |id: Option<u32>| match id {
        Some(id) => format!("func_id {id}"),
        None => "dependency-only".to_owned(),
    };
    RtError::Invalid(format!(
        "data race: task {} ({}, argument {}) {} arena bytes in [{start:#x}, {end:#x}) that task {} ({}, argument {}) {}, and no dependency orders the two: both are manual_dep (SCENE_DIR_MANUAL_DEP), which the runtime does not track; order them (pass the tensor tracked to one of them, or to a task between, or name the earlier task in submit_task's deps) or leave manual_dep off",
        m.task,
        kernel(m.func_id),
        m.arg,
        verb(m.write),
        p.task,
        kernel(p.func_id),
        p.arg,
        verb(p.write),
    ))
}

/// The run arguments' metadata: given (checked against each tensor's
/// size) or, without any, each tensor as a byte buffer.
pub(super) fn run_descs(
    args: &[SceneRunArg],
    descs: Option<&[SceneTensorDesc]>,
) -> RtResult<Vec<Option<SceneTensorDesc>>> {
    args.iter()
        .enumerate()
        .map(|(i, a)| {
            if a.direction == SCENE_DIR_SCALAR {
                return Ok(None);
            }
            let Some(d) = descs.and_then(|d| d.get(i)) else {
                return Ok(Some(SceneTensorDesc::contiguous(SCENE_DTYPE_BYTES, &[a.size])));
            };
            let es = dtype_size(d.dtype);
            let fits = d.rank as usize <= SCENE_MAX_RANK
                && d.element_span()
                    .is_none_or(|(_, end)| end.checked_mul(es).is_some_and(|e| e <= a.size));
            if !fits {
                return Err(RtError::Invalid(format!(
                    "run argument {i}: its description (dtype {}, shape {:?}) does not fit its {} bytes",
                    d.dtype,
                    &d.shape[..(d.rank as usize).min(SCENE_MAX_RANK)],
                    a.size
                )));
            }
            Ok(Some(*d))
        })
        .collect()
}

/// The error for a task argument `scene_task_view` marked: its dimension
/// `view_error - 1` leaves the parent's shape (even when the buffer holds it).
fn view_outside_parent(a: &SceneTaskArgV2, what: &str) -> RtError {
    let d = &a.desc;
    let rank = (d.rank as usize).min(SCENE_MAX_RANK);
    RtError::OutOfBounds(format!(
        "{what}: dimension {} of the view (offset {} elements, shape {:?}) lies outside its parent's shape in that dimension (scene_task_view: offsets + shape exceed the parent's extent)",
        a.view_error - 1,
        d.offset,
        &d.shape[..rank],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(shape: &[u64], strides: &[u64]) -> SceneTensorDesc {
        let mut d = SceneTensorDesc {
            dtype: SCENE_DTYPE_F32,
            rank: shape.len() as u32,
            ..Default::default()
        };
        d.shape[..shape.len()].copy_from_slice(shape);
        d.strides[..strides.len()].copy_from_slice(strides);
        d
    }

    /// Column blocks of a 4 x 16 f32 matrix: rows apart, so two blocks
    /// never meet though their spans overlap; a block meets itself.
    #[test]
    fn column_blocks_are_runs_that_do_not_meet() {
        let block = desc(&[4, 8], &[16, 1]);
        let left = view_runs(&block, 0, (3 * 16 + 8) * 4);
        let right = view_runs(&block, 8 * 4, (3 * 16 + 8) * 4);
        assert_eq!(left, vec![(0, 32), (64, 96), (128, 160), (192, 224)]);
        assert!(!runs_meet(&left, &right));
        assert!(runs_meet(&left, &left));
        // A whole contiguous matrix is one run.
        assert_eq!(view_runs(&desc(&[4, 16], &[16, 1]), 0, 256), vec![(0, 256)]);
        // A column (innermost stride 16): one run per element.
        assert_eq!(view_runs(&desc(&[4], &[16]), 4, 4 * 49).len(), 4);
    }

    /// 0 -> 1 -> 3, 2 alone: 0 is ordered before a task waiting for 3,
    /// 2 is not; nothing is ordered before a task that waits for none.
    #[test]
    fn ordering_follows_parents_through_finished_tasks() {
        let parents: Vec<Vec<usize>> = vec![vec![], vec![0], vec![], vec![1]];
        let of = |t: usize| parents[t].as_slice();
        assert!(ordered_before(of, 0, &[3]));
        assert!(ordered_before(of, 1, &[1]));
        assert!(!ordered_before(of, 2, &[3]));
        assert!(!ordered_before(of, 0, &[]));
    }
}
