//! Orchestration ABI v2 and v3 operations: allocation (v1 `alloc`, v3
//! `malloc` with a status, v3 `last_error`), run-argument metadata,
//! submits with views, ordered reads and writes of device data, and
//! memory scopes.
//!
//! Ordering is exact and derived from the same access list the task graph
//! uses: a read waits for every unfinished task that *writes* an
//! overlapping byte range (and only for those); a write or fill waits for
//! every unfinished task that reads or writes one. The orchestration thread
//! is the only submitter and it is blocked while it waits, so no new
//! conflicting task can appear meanwhile; tasks submitted afterwards depend
//! on the memory as written.
//!
//! Scopes and `free` release a buffer: it is freed at once when no
//! unfinished task uses it, else when the last such task finishes (see
//! `Shared::complete_block`). An allocation that finds memory full waits
//! while released buffers are pending, so a loop with a scoped temporary
//! runs in bounded memory however far the orchestration runs ahead.
//!
//! `unsafe` (allowed per item): reading the orchestration's pointer
//! arguments (task argument arrays, host buffers for read/write/fill).

use std::ffi::{c_char, c_void};
use std::time::{Duration, Instant};

use super::sched::Sched;
use super::submit::{Kernels, RunCtx, record, run_ctx, submit, task_args};
use super::trace::now_ns;
use crate::error::{RtError, RtResult};
use scene_abi::*;

/// How often a waiting orchestration re-checks the run's deadline.
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// Waits (sched lock released while waiting) until `busy` is false.
fn wait_until<'a>(
    rc: &'a RunCtx,
    mut s: std::sync::MutexGuard<'a, Sched>,
    what: &str,
    mut busy: impl FnMut(&Sched) -> bool,
) -> RtResult<std::sync::MutexGuard<'a, Sched>> {
    while busy(&s) {
        if s.shutdown || rc.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(RtError::Timeout(format!(
                "{what}: the run ended (deadline) while the orchestration was waiting"
            )));
        }
        s = rc
            .shared
            .done_cv
            .wait_timeout(s, WAIT_SLICE)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    Ok(s)
}

/// Records a read, write or fill in the trace: waited from `begin` to
/// `waited`, done now.
fn trace_data(rc: &RunCtx, op: &'static str, off: u64, size: u64, begin: u64, waited: u64) {
    if rc.trace == 0 {
        return;
    }
    let end = now_ns();
    if let Some(tr) = &mut rc.shared.sched().trace {
        tr.data_op(op, off, size, (begin, waited, end));
    }
}

/// Whether an unfinished task touches `[start, end)` (only its writes
/// when `writes_only`), through a tracked or a `manual_dep` argument: the
/// orchestration's own reads and writes wait for manual accesses too.
fn conflicts(s: &Sched, start: u64, end: u64, writes_only: bool) -> bool {
    let tracked = s.accesses.iter().map(|a| (a.task, a.start, a.end, a.write));
    let manual = s.manual.iter().map(|m| (m.task, m.start, m.end, m.write));
    tracked.chain(manual).any(|(task, a_start, a_end, write)| {
        !s.tasks[task].done && a_start < end && start < a_end && (write || !writes_only)
    })
}

/// The arena range `[off, off + size)` of `size` bytes at byte `offset` of
/// the buffer at `addr`, checked against live allocations.
fn data_range(rc: &RunCtx, addr: u64, offset: u64, size: u64, what: &str) -> RtResult<u64> {
    let start = addr
        .checked_add(offset)
        .ok_or_else(|| RtError::OutOfBounds(format!("{what}: offset overflows")))?;
    let checked = super::lock(&rc.shared.mem).check(start, size, what);
    checked.map_err(|e| {
        if rc.shared.sched().freed.contains(&addr) {
            RtError::OutOfBounds(format!("{what}: buffer {addr:#x} was freed"))
        } else {
            e
        }
    })
}

/// Allocates, waiting for pending frees while memory is full.
pub(crate) fn alloc_waiting(rc: &RunCtx, size: u64) -> RtResult<u64> {
    let mut first = rc.shared.alloc(size);
    loop {
        match first {
            Ok(addr) => {
                rc.shared.sched().freed.remove(&addr);
                return Ok(addr);
            }
            Err(RtError::Oom(_)) => {}
            Err(e) => return Err(e),
        }
        // Frees happen under the scheduler's lock, so with it held the
        // answer cannot change between trying again and deciding to wait.
        let s = rc.shared.sched();
        match rc.shared.alloc(size) {
            Err(RtError::Oom(msg)) if s.released.is_empty() => return Err(RtError::Oom(msg)),
            Err(RtError::Oom(_)) => {
                let pending = s.released.len();
                drop(wait_until(rc, s, "orchestration alloc", |s| {
                    s.released.len() >= pending
                })?);
                first = rc.shared.alloc(size);
            }
            other => {
                drop(s);
                first = other;
            }
        }
    }
}

/// The deprecated v1 `alloc`: `op_malloc` with failure in-band (0).
pub(super) extern "C" fn op_alloc(ctx: *mut SceneOrchCtx, size: u64) -> u64 {
    alloc(ctx, size).unwrap_or(0)
}

/// v3 `malloc`: the address through `out_addr`, failure as a status.
pub(super) extern "C" fn op_malloc(ctx: *mut SceneOrchCtx, size: u64, out_addr: *mut u64) -> i32 {
    if out_addr.is_null() {
        return match run_ctx(ctx) {
            Some(rc) => record(
                rc,
                RtError::Invalid("orchestration malloc: out_addr is NULL".into()),
            ),
            None => SCENE_RT_E_INVALID,
        };
    }
    let (addr, status) = match alloc(ctx, size) {
        Ok(a) => (a, SCENE_RT_OK),
        Err(status) => (0, status),
    };
    #[allow(unsafe_code)]
    // SAFETY: `out_addr` is non-NULL and, by scene_orch.h's contract,
    // points at a writable uint64_t for the call.
    unsafe {
        out_addr.write(addr);
    }
    status
}

/// v3 `last_error`: this thread's last error (the orchestration runs on
/// its own thread, so it is the last failed call of this orchestration).
pub(super) extern "C" fn op_last_error(_ctx: *mut SceneOrchCtx) -> *const c_char {
    crate::last_error_ptr()
}

/// An orchestration allocation, kept until the run (or its scope) ends,
/// or the status of the recorded error.
fn alloc(ctx: *mut SceneOrchCtx, size: u64) -> Result<u64, i32> {
    let Some(rc) = run_ctx(ctx) else {
        return Err(SCENE_RT_E_INVALID);
    };
    let begin = if rc.trace != 0 { now_ns() } else { 0 };
    let r = alloc_waiting(rc, size);
    match r {
        Ok(a) => {
            let mut s = rc.shared.sched();
            if let Some(tr) = &mut s.trace {
                tr.alloc(a, size, begin);
            }
            s.intermediates.push(a);
            if let Some(scope) = s.scopes.last_mut() {
                scope.push(a);
            }
            Ok(a)
        }
        Err(e) => Err(record(
            rc,
            RtError::Oom(format!("orchestration alloc: {e}")),
        )),
    }
}

/// Frees `addr` now if no unfinished task uses it, else when the last one
/// finishes.
fn release(rc: &RunCtx, s: &mut Sched, addr: u64) {
    s.intermediates.retain(|&a| a != addr);
    for scope in &mut s.scopes {
        scope.retain(|&a| a != addr);
    }
    s.freed.insert(addr);
    if let Some(tr) = &mut s.trace {
        tr.free(addr);
    }
    if s.users.get(&addr).copied().unwrap_or(0) == 0 {
        let _ = rc.shared.free(addr);
    } else {
        s.released.insert(addr);
    }
}

/// v5: the run's rank and group size (level 3). Not a failure of the
/// run at level 2: the orchestration asked a question.
pub(super) extern "C" fn op_comm_rank(
    ctx: *mut SceneOrchCtx,
    rank: *mut u32,
    nranks: *mut u32,
) -> i32 {
    let Some(rc) = run_ctx(ctx) else {
        return SCENE_RT_E_INVALID;
    };
    if rank.is_null() || nranks.is_null() {
        crate::set_last_error("orchestration comm_rank: rank or nranks is NULL");
        return SCENE_RT_E_INVALID;
    }
    let Some((domain, r)) = &rc.comm else {
        crate::set_last_error(
            "orchestration comm_rank: the device is not a rank of a communication domain (level 3 only)",
        );
        return SCENE_RT_E_INVALID;
    };
    #[allow(unsafe_code)]
    // SAFETY: both are non-NULL and, by scene_orch.h's contract, point at
    // writable uint32_t for the call.
    unsafe {
        rank.write(*r);
        nranks.write(domain.nranks());
    }
    SCENE_RT_OK
}

pub(super) extern "C" fn op_arg_desc(ctx: *mut SceneOrchCtx, index: u32) -> *const SceneTensorDesc {
    let Some(rc) = run_ctx(ctx) else {
        return std::ptr::null();
    };
    match rc.descs.get(index as usize) {
        Some(Some(d)) => d,
        _ => std::ptr::null(),
    }
}

pub(super) extern "C" fn op_submit_v2(
    ctx: *mut SceneOrchCtx,
    func_id: u32,
    block_num: u32,
    args: *const SceneTaskArgV2,
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
    match submit(rc, Kernels::One(func_id), block_num, args) {
        Ok(()) => SCENE_RT_OK,
        Err(e) => record(rc, e),
    }
}

fn status(rc: &RunCtx, r: RtResult<()>) -> i32 {
    match r {
        Ok(()) => SCENE_RT_OK,
        Err(e) => record(rc, e),
    }
}

pub(super) extern "C" fn op_read(
    ctx: *mut SceneOrchCtx,
    addr: u64,
    offset: u64,
    dst: *mut c_void,
    size: u64,
) -> i32 {
    let Some(rc) = run_ctx(ctx) else {
        return SCENE_RT_E_INVALID;
    };
    let r = (|| {
        let what = format!("orchestration read of {size} bytes at {addr:#x}+{offset}");
        let off = data_range(rc, addr, offset, size, &what)?;
        if size > 0 && dst.is_null() {
            return Err(RtError::Invalid(format!("{what}: dst is NULL")));
        }
        let begin = if rc.trace != 0 { now_ns() } else { 0 };
        let s = rc.shared.sched();
        let s = wait_until(rc, s, &what, |s| conflicts(s, off, off + size, true))?;
        drop(s);
        let waited = if rc.trace != 0 { now_ns() } else { 0 };
        if size > 0 {
            #[allow(unsafe_code)]
            // SAFETY: the orchestration passes `size` writable bytes at `dst`
            // (scene_orch.h), non-NULL (checked).
            let dst = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), size as usize) };
            rc.shared.arena.read(off, dst);
        }
        trace_data(rc, "read", off, size, begin, waited);
        Ok(())
    })();
    status(rc, r)
}

/// The shared part of write and fill: wait for every task touching the
/// range, then `put` the bytes.
fn ordered_write(
    rc: &RunCtx,
    op: &'static str,
    addr: u64,
    offset: u64,
    size: u64,
    what: &str,
    put: impl FnOnce(u64),
) -> RtResult<()> {
    let off = data_range(rc, addr, offset, size, what)?;
    let begin = if rc.trace != 0 { now_ns() } else { 0 };
    let s = rc.shared.sched();
    let s = wait_until(rc, s, what, |s| conflicts(s, off, off + size, false))?;
    drop(s);
    let waited = if rc.trace != 0 { now_ns() } else { 0 };
    put(off);
    trace_data(rc, op, off, size, begin, waited);
    Ok(())
}

pub(super) extern "C" fn op_write(
    ctx: *mut SceneOrchCtx,
    addr: u64,
    offset: u64,
    src: *const c_void,
    size: u64,
) -> i32 {
    let Some(rc) = run_ctx(ctx) else {
        return SCENE_RT_E_INVALID;
    };
    let what = format!("orchestration write of {size} bytes at {addr:#x}+{offset}");
    if size > 0 && src.is_null() {
        return record(rc, RtError::Invalid(format!("{what}: src is NULL")));
    }
    let r = ordered_write(rc, "write", addr, offset, size, &what, |off| {
        if size > 0 {
            #[allow(unsafe_code)]
            // SAFETY: the orchestration passes `size` readable bytes at
            // `src` (scene_orch.h), non-NULL (checked).
            let src = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), size as usize) };
            rc.shared.arena.write(off, src);
        }
    });
    status(rc, r)
}

pub(super) extern "C" fn op_fill(
    ctx: *mut SceneOrchCtx,
    addr: u64,
    offset: u64,
    size: u64,
    pattern: *const c_void,
    pattern_size: u32,
) -> i32 {
    let Some(rc) = run_ctx(ctx) else {
        return SCENE_RT_E_INVALID;
    };
    let what = format!("orchestration fill of {size} bytes at {addr:#x}+{offset}");
    if pattern.is_null() || pattern_size == 0 {
        return record(
            rc,
            RtError::Invalid(format!("{what}: the pattern is empty or NULL")),
        );
    }
    #[allow(unsafe_code)]
    // SAFETY: the orchestration passes `pattern_size` readable bytes at
    // `pattern` (scene_orch.h), non-NULL (checked).
    let pattern =
        unsafe { std::slice::from_raw_parts(pattern.cast::<u8>(), pattern_size as usize) };
    let r = ordered_write(rc, "fill", addr, offset, size, &what, |off| {
        // Doubling copies: memcpy speed, whatever the pattern length.
        let mut bytes = Vec::with_capacity(size as usize);
        bytes.extend_from_slice(&pattern[..pattern.len().min(size as usize)]);
        while bytes.len() < size as usize {
            let more = bytes.len().min(size as usize - bytes.len());
            bytes.extend_from_within(..more);
        }
        rc.shared.arena.write(off, &bytes);
    });
    status(rc, r)
}

pub(super) extern "C" fn op_free(ctx: *mut SceneOrchCtx, addr: u64) -> i32 {
    let Some(rc) = run_ctx(ctx) else {
        return SCENE_RT_E_INVALID;
    };
    let mut s = rc.shared.sched();
    let r = if s.freed.contains(&addr) {
        Err(RtError::Invalid(format!(
            "orchestration freed buffer {addr:#x} twice"
        )))
    } else if !s.intermediates.contains(&addr) {
        Err(RtError::Invalid(format!(
            "orchestration free of {addr:#x}: not a buffer it allocated (run arguments and addresses inside a buffer cannot be freed)"
        )))
    } else {
        release(rc, &mut s, addr);
        Ok(())
    };
    drop(s);
    status(rc, r)
}

pub(super) extern "C" fn op_begin_scope(ctx: *mut SceneOrchCtx) -> i32 {
    let Some(rc) = run_ctx(ctx) else {
        return SCENE_RT_E_INVALID;
    };
    let mut s = rc.shared.sched();
    s.scopes.push(Vec::new());
    if let Some(tr) = &mut s.trace {
        tr.scope("begin_scope");
    }
    SCENE_RT_OK
}

pub(super) extern "C" fn op_end_scope(ctx: *mut SceneOrchCtx) -> i32 {
    let Some(rc) = run_ctx(ctx) else {
        return SCENE_RT_E_INVALID;
    };
    let mut s = rc.shared.sched();
    let Some(scope) = s.scopes.pop() else {
        drop(s);
        return record(
            rc,
            RtError::Invalid("end_scope without a matching begin_scope".into()),
        );
    };
    if let Some(tr) = &mut s.trace {
        tr.scope("end_scope");
    }
    for addr in scope {
        release(rc, &mut s, addr);
    }
    SCENE_RT_OK
}
