//! Orchestration ABI v6 operations: `submit_task` (one submit with
//! explicit dependencies on earlier tasks by id, dependency-only tasks
//! and a dispatch predicate), `memory_window` (device memory's host
//! mapping) and `core_counts`.
//!
//! A task's id is its index in the run's task list (`Sched::tasks`), so
//! tasks of the older submits have ids too (they just do not return
//! them). The graph side lives with the other submits (`submit.rs`:
//! `submit_with`, `enqueue`), the ready-time side with the scheduler
//! (`sched.rs`: a dependency-only task or one whose predicate is false
//! completes as soon as it is ready, releasing its dependents).
//!
//! `unsafe` (allowed per item): reading the orchestration's `SceneSubmit`
//! and dependency array, writing its out-parameters.

use super::submit::{Extras, Kernels, record, run_ctx, set_slots, submit_with, task_args};
use crate::error::RtError;
use crate::memory::DEVICE_BASE;
use scene_abi::*;

/// Most explicit dependencies of one task: far above any real graph, a
/// bound on what a corrupt `num_deps` makes the runtime read.
const MAX_DEPS: u32 = 1 << 20;

/// v6 `submit_task`.
pub(super) extern "C" fn op_submit_task(
    ctx: *mut SceneOrchCtx,
    task: *const SceneSubmit,
    task_id: *mut u64,
) -> i32 {
    let Some(rc) = run_ctx(ctx) else {
        return SCENE_RT_E_INVALID;
    };
    #[allow(unsafe_code)]
    // SAFETY: a non-NULL `task` points at the orchestration's `SceneSubmit`
    // for the duration of the call (scene_orch.h); it is copied at once.
    let Some(t) = (unsafe { task.as_ref() }).copied() else {
        return record(rc, RtError::Invalid("submit_task: task is NULL".into()));
    };
    let slots = match set_slots("submit_task", &t.kernels) {
        Ok(slots) => slots,
        Err(e) => return record(rc, e),
    };
    let who = || match slots.first() {
        Some(&(_, id)) => format!("submit_task to func_id {id}"),
        None => "submit_task of a dependency-only task".to_owned(),
    };
    let args = match task_args(rc, who, t.args, t.num_args) {
        Ok(args) => args,
        Err(status) => return status,
    };
    let deps: &[u64] = match (t.num_deps, t.deps.is_null()) {
        (0, _) => &[],
        (n, true) => {
            return record(
                rc,
                RtError::Invalid(format!("{}: deps is NULL but num_deps is {n}", who())),
            );
        }
        (n, false) if n > MAX_DEPS => {
            return record(
                rc,
                RtError::Invalid(format!(
                    "{}: num_deps is {n}, the maximum is {MAX_DEPS}",
                    who()
                )),
            );
        }
        #[allow(unsafe_code)]
        // SAFETY: the orchestration passes `num_deps` (bounded, checked)
        // readable ids at the non-NULL `deps` (scene_orch.h), read before
        // the op returns.
        (n, false) => unsafe { std::slice::from_raw_parts(t.deps, n as usize) },
    };
    let extras = Extras {
        deps,
        predicate: Some(t.predicate),
    };
    match submit_with(rc, Kernels::Slots(&slots), t.block_num, args, extras) {
        Ok(id) => {
            if !task_id.is_null() {
                #[allow(unsafe_code)]
                // SAFETY: a non-NULL `task_id` points at a writable
                // uint64_t for the call (scene_orch.h).
                unsafe {
                    task_id.write(id as u64);
                }
            }
            SCENE_RT_OK
        }
        Err(e) => record(rc, e),
    }
}

/// v6 `memory_window`: device address `DEVICE_BASE + o` is arena byte `o`.
pub(super) extern "C" fn op_memory_window(
    ctx: *mut SceneOrchCtx,
    device_base: *mut u64,
    host_base: *mut u64,
    len: *mut u64,
) -> i32 {
    let Some(rc) = run_ctx(ctx) else {
        return SCENE_RT_E_INVALID;
    };
    if device_base.is_null() || host_base.is_null() || len.is_null() {
        return record(
            rc,
            RtError::Invalid(
                "orchestration memory_window: device_base, host_base or len is NULL".into(),
            ),
        );
    }
    let arena = &rc.shared.arena;
    #[allow(unsafe_code)]
    // SAFETY: all three are non-NULL (checked) and, by scene_orch.h's
    // contract, point at writable uint64_t for the call.
    unsafe {
        device_base.write(DEVICE_BASE);
        host_base.write(arena.base_addr() as u64);
        len.write(arena.len());
    }
    SCENE_RT_OK
}

/// v6 `core_counts`: the run's emulated cores per type.
pub(super) extern "C" fn op_core_counts(
    ctx: *mut SceneOrchCtx,
    aic: *mut u32,
    aiv: *mut u32,
) -> i32 {
    let Some(rc) = run_ctx(ctx) else {
        return SCENE_RT_E_INVALID;
    };
    if aic.is_null() || aiv.is_null() {
        return record(
            rc,
            RtError::Invalid("orchestration core_counts: aic or aiv is NULL".into()),
        );
    }
    #[allow(unsafe_code)]
    // SAFETY: both are non-NULL (checked) and, by scene_orch.h's contract,
    // point at writable uint32_t for the call.
    unsafe {
        aic.write(rc.cores[SCENE_CORE_AIC as usize]);
        aiv.write(rc.cores[SCENE_CORE_AIV as usize]);
    }
    SCENE_RT_OK
}
