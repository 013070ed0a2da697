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

use super::sched::{Access, KernelArgs, Shared, Task};
use super::{Callable, Incore, USER_STACK_BYTES, args_dump, comm, core_name, lock, orch_v2, trace};
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
};

pub(super) fn orch_thread(ctx: Arc<RunCtx>, args: Vec<SceneRunArg>) {
    let _guard = crash::enter_thread(USER_STACK_BYTES);
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
    let args = match task_args(rc, func_id, args, num_args) {
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
    match submit(rc, func_id, block_num, &args) {
        Ok(()) => SCENE_RT_OK,
        Err(e) => record(rc, e),
    }
}

/// The `num_args` task arguments at `args` (v1 or v2 layout), or the
/// status of the recorded error: too many, or NULL.
pub(super) fn task_args<'a, T>(
    rc: &RunCtx,
    func_id: u32,
    args: *const T,
    num_args: u32,
) -> Result<&'a [T], i32> {
    if num_args as usize > SCENE_MAX_ARGS {
        return Err(record(
            rc,
            RtError::Invalid(format!(
                "submit to func_id {func_id}: {num_args} arguments, the maximum is {SCENE_MAX_ARGS}"
            )),
        ));
    }
    if num_args == 0 {
        return Ok(&[]);
    }
    if args.is_null() {
        return Err(record(
            rc,
            RtError::Invalid(format!("submit to func_id {func_id}: args is NULL")),
        ));
    }
    #[allow(unsafe_code)]
    // SAFETY: the orchestration passes `num_args` (<= 32, checked) valid
    // task args, which the caller copies before the op returns.
    Ok(unsafe { std::slice::from_raw_parts(args, num_args as usize) })
}

/// One task submitted by the orchestration: check it, translate its
/// arguments for the kernel, and put it into the task graph.
pub(super) fn submit(
    rc: &RunCtx,
    func_id: u32,
    block_num: u32,
    args: &[SceneTaskArgV2],
) -> RtResult<()> {
    let begin = if rc.trace != 0 { trace::now_ns() } else { 0 };
    let recording = {
        let s = rc.shared.sched();
        if let Some(e) = &s.error {
            return Err(e.clone());
        }
        s.recorder.is_some()
    };
    let inc = runnable_incore(rc, func_id, block_num)?;
    let (mut payload, accesses, buffers) = kernel_args(rc, func_id, block_num, args)?;
    if inc.code.is_chip_tensor() {
        payload.chip = Some(Arc::new(chip_args(func_id, args, &payload)?));
    }
    let record = if recording {
        Some(args_dump::describe(
            &rc.shared, func_id, inc.core, block_num, args,
        )?)
    } else {
        None
    };
    let task = Task {
        func_id,
        core: inc.core as usize,
        code: inc.code.clone(),
        block_num,
        next_block: 0,
        blocks_done: 0,
        args: Some(payload),
        buffers,
        pending: 0,
        dependents: Vec::new(),
        done: false,
        record,
    };
    enqueue(rc, task, &accesses, (args, begin))
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
/// those ranges lie in.
fn kernel_args(
    rc: &RunCtx,
    func_id: u32,
    block_num: u32,
    args: &[SceneTaskArgV2],
) -> RtResult<(KernelArgs, Vec<ArenaAccess>, Vec<u64>)> {
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
    });
    let mut descs: Box<[SceneTensorDesc]> = args.iter().map(|a| a.desc).collect();
    let mut accesses = Vec::with_capacity(args.len());
    let mut buffers = Vec::with_capacity(args.len());
    let mem = lock(&rc.shared.mem);
    for (i, a) in args.iter().enumerate() {
        match a.direction {
            SCENE_DIR_SCALAR => kargs.args[i] = a.value,
            SCENE_DIR_IN | SCENE_DIR_OUT | SCENE_DIR_INOUT => {
                let what = format!("task func_id {func_id} argument {i}");
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
                if bytes > 0 {
                    accesses.push((off, off + bytes, a.direction != SCENE_DIR_IN));
                }
            }
            d => {
                return Err(RtError::Invalid(format!(
                    "task func_id {func_id} argument {i}: unknown direction {d}"
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
/// and is ready at once if there is none.
/// `submitted` is the task's arguments and when its submit began, for the
/// trace.
fn enqueue(
    rc: &RunCtx,
    mut task: Task,
    accesses: &[ArenaAccess],
    submitted: (&[SceneTaskArgV2], u64),
) -> RtResult<()> {
    let mut s = rc.shared.sched();
    if s.shutdown {
        return Err(RtError::Timeout(
            "submit after the run was abandoned".into(),
        ));
    }
    let sched = &mut *s;
    sched.accesses.retain(|a| !sched.tasks[a.task].done);
    let mut deps: Vec<usize> = Vec::new();
    for &(start, end, write) in accesses {
        for p in &sched.accesses {
            if p.start < end && start < p.end && (write || p.write) {
                deps.push(p.task);
            }
        }
    }
    deps.sort_unstable();
    deps.dedup();
    let tid = sched.tasks.len();
    for &d in &deps {
        sched.tasks[d].dependents.push(tid);
    }
    let core = task.core;
    if let Some(tr) = &mut sched.trace {
        let (args, begin) = submitted;
        let (func_id, block_num) = (task.func_id, task.block_num);
        tr.submit(
            tid,
            func_id,
            core as u32,
            block_num,
            args,
            accesses,
            &deps,
            begin,
        );
    }
    task.pending = deps.len();
    for &data in &task.buffers {
        *sched.users.entry(DEVICE_BASE + data).or_default() += 1;
    }
    sched.tasks.push(task);
    sched
        .accesses
        .extend(accesses.iter().map(|&(start, end, write)| Access {
            task: tid,
            start,
            end,
            write,
        }));
    if deps.is_empty() {
        sched.ready[core].push_back(tid);
        rc.shared.work_cv[core].notify_all();
    }
    Ok(())
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
