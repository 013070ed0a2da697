//! The runtime C ABI (`scene_abi.h`, `scene_runtime.h`, `scene_kernel.h`,
//! `scene_orch.h`, `scene_comm.h`, `scene_tensor.h` in
//! `crates/device/include`) as Rust: every constant and `#[repr(C)]` struct,
//! defined once. The conventions (statuses, last error, the one version
//! policy, deprecation) are the comment of `scene_abi.h`;
//! [`runtime_version_supported`] is that policy for the loader.
//!
//! Both sides of the ABI use it: the loader in `scene-device` (the caller)
//! and the simulator runtime `scene-sim-runtime` (the callee). It is its own
//! crate so the simulator does not depend on the loader, nor the loader on
//! the simulator. Names are the C names, so a grep for `SCENE_RT_E_TIMEOUT`
//! finds both the header and the Rust. `scene-device`'s `abi_headers` test
//! checks every `#define` and struct layout here against the headers, so
//! the two cannot drift.
//!
//! What it must not know: anything beyond the ABI (no loading, no devices,
//! no policy); it has no dependencies and no `unsafe` code.

use std::ffi::{c_char, c_void};

/// `SCENE_RUNTIME_ABI_VERSION` (`scene_runtime.h`): the runtime version
/// these definitions describe; `scene_rt_abi_version()` must report at
/// least this (see [`runtime_version_supported`]).
pub const SCENE_RUNTIME_ABI_VERSION: i32 = 2;
/// `SCENE_KERNEL_ABI_VERSION` (`scene_kernel.h`), in `SceneKernelArgs::abi_version`.
/// v4 added `slot`, `slot_mask` and `cluster` (mixed tasks).
pub const SCENE_KERNEL_ABI_VERSION: u32 = 4;
/// `SCENE_ORCH_ABI_VERSION` (`scene_orch.h`), in `SceneOrchOps::abi_version`.
/// v3 added `malloc` and `last_error`, v4 `submit_mixed`, v5 `comm_rank`,
/// v6 `submit_task`, `memory_window` and `core_counts`.
pub const SCENE_ORCH_ABI_VERSION: u32 = 6;

/// The version policy of `scene_abi.h` for a runtime reporting `found`:
/// versions only grow, by additions, so a runtime serves every user built
/// for its version or an older one. A user checks `found >= needed`, never
/// equality; the harness needs all of [`SCENE_RUNTIME_ABI_VERSION`].
pub fn runtime_version_supported(found: i32) -> bool {
    found >= SCENE_RUNTIME_ABI_VERSION
}
/// `SCENE_MAX_ARGS` (`scene_kernel.h`): arguments of one task.
pub const SCENE_MAX_ARGS: usize = 32;
/// `SCENE_MAX_FUNC_IDS` (`scene_runtime.h`): exclusive upper bound of `func_id`.
pub const SCENE_MAX_FUNC_IDS: u32 = 64;
pub const SCENE_MAX_RANK: usize = 8;

pub const SCENE_DTYPE_F32: u32 = 0;
pub const SCENE_DTYPE_F64: u32 = 1;
pub const SCENE_DTYPE_F16: u32 = 2;
pub const SCENE_DTYPE_BF16: u32 = 3;
pub const SCENE_DTYPE_I8: u32 = 4;
pub const SCENE_DTYPE_U8: u32 = 5;
pub const SCENE_DTYPE_I16: u32 = 6;
pub const SCENE_DTYPE_I32: u32 = 7;
pub const SCENE_DTYPE_I64: u32 = 8;
pub const SCENE_DTYPE_BOOL: u32 = 9;
pub const SCENE_DTYPE_BYTES: u32 = 255;

/// Bytes per element of a `SCENE_DTYPE_*` (1 for bytes, bool and unknown).
pub fn dtype_size(dtype: u32) -> u64 {
    match dtype {
        SCENE_DTYPE_F64 | SCENE_DTYPE_I64 => 8,
        SCENE_DTYPE_F32 | SCENE_DTYPE_I32 => 4,
        SCENE_DTYPE_F16 | SCENE_DTYPE_BF16 | SCENE_DTYPE_I16 => 2,
        _ => 1,
    }
}

/// `SceneTensorDesc` of scene_tensor.h: a tensor or a view of one; offset
/// and strides count elements.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SceneTensorDesc {
    pub dtype: u32,
    pub rank: u32,
    pub offset: u64,
    pub shape: [u64; SCENE_MAX_RANK],
    pub strides: [u64; SCENE_MAX_RANK],
}

impl SceneTensorDesc {
    /// Contiguous row-major `shape`.
    pub fn contiguous(dtype: u32, shape: &[u64]) -> Self {
        let mut d = SceneTensorDesc {
            dtype,
            rank: shape.len().min(SCENE_MAX_RANK) as u32,
            ..Default::default()
        };
        let mut stride = 1u64;
        for i in (0..d.rank as usize).rev() {
            d.shape[i] = shape[i];
            d.strides[i] = stride;
            stride = stride.saturating_mul(shape[i]);
        }
        d
    }

    /// The element range `[first, last + 1)` the view spans (relative to
    /// the buffer start), or `None` for an empty view or on overflow.
    pub fn element_span(&self) -> Option<(u64, u64)> {
        let rank = (self.rank as usize).min(SCENE_MAX_RANK);
        let mut last = self.offset;
        for i in 0..rank {
            if self.shape[i] == 0 {
                return None;
            }
            last = last.checked_add((self.shape[i] - 1).checked_mul(self.strides[i])?)?;
        }
        Some((self.offset, last.checked_add(1)?))
    }
}

/// `SceneTaskArgV2` of scene_orch.h.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SceneTaskArgV2 {
    pub direction: u32,
    /// 0; `1 + d` when `scene_task_view` made a view whose dimension `d`
    /// leaves its parent's shape (the runtime refuses the task). C also
    /// names it `reserved`, deprecated (an anonymous union).
    pub view_error: u32,
    pub value: u64,
    pub size: u64,
    pub desc: SceneTensorDesc,
}

// Status codes (`SCENE_RT_*`, `scene_abi.h`): 0 = ok, negative = error;
// every call of the runtime, orchestration and comm ABIs returns one.
pub const SCENE_RT_OK: i32 = 0;
/// Bad argument, null pointer, bad handle.
pub const SCENE_RT_E_INVALID: i32 = -1;
/// The implementation's ABI version lacks the call.
pub const SCENE_RT_E_ABI: i32 = -2;
/// No such device id / device not open.
pub const SCENE_RT_E_NO_DEVICE: i32 = -3;
/// Device memory exhausted.
pub const SCENE_RT_E_OOM: i32 = -4;
/// Copy or access outside an allocation or view.
pub const SCENE_RT_E_OUT_OF_BOUNDS: i32 = -5;
/// A task names a func_id not registered.
pub const SCENE_RT_E_FUNC_ID: i32 = -6;
/// A core type the platform lacks.
pub const SCENE_RT_E_CORE_TYPE: i32 = -7;
/// Orchestration / image could not be loaded.
pub const SCENE_RT_E_LOAD: i32 = -8;
/// The orchestration returned an error.
pub const SCENE_RT_E_ORCH: i32 = -9;
/// The run exceeded its deadline.
pub const SCENE_RT_E_TIMEOUT: i32 = -10;
/// A rank of a communication group failed, or a wait timed out (level 3).
pub const SCENE_RT_E_COMM: i32 = -11;
/// Any status `<=` this means the device is unusable: retire the card.
pub const SCENE_RT_E_DEVICE_FATAL: i32 = -100;

/// `SCENE_CORE_AIC`: cube core.
pub const SCENE_CORE_AIC: u32 = 0;
/// `SCENE_CORE_AIV`: vector core.
pub const SCENE_CORE_AIV: u32 = 1;

// Slots of a task on one cluster (`scene_kernel.h`, v4).
/// `SCENE_SLOT_AIC`: the cluster's cube core.
pub const SCENE_SLOT_AIC: u32 = 0;
/// `SCENE_SLOT_AIV0`: the cluster's first vector core.
pub const SCENE_SLOT_AIV0: u32 = 1;
/// `SCENE_SLOT_AIV1`: the cluster's second vector core.
pub const SCENE_SLOT_AIV1: u32 = 2;
/// `SCENE_SLOTS`: slots of one cluster.
pub const SCENE_SLOTS: u32 = 3;
/// `SCENE_CLUSTER_FLAGS`: cross-core flags per slot of one mixed block.
pub const SCENE_CLUSTER_FLAGS: u32 = 16;
/// `SCENE_NO_KERNEL` (`scene_orch.h`): a slot of [`SceneMixedKernels`]
/// that runs nothing.
pub const SCENE_NO_KERNEL: i32 = -1;

// Trace flags of `scene_rt_trace_enable` (optional ABI, issue 19).
/// `SCENE_RT_TRACE_TIMELINE`: record every task's blocks (core lane, start,
/// end) and the orchestration's operations, with timestamps of
/// `CLOCK_MONOTONIC` in nanoseconds.
pub const SCENE_RT_TRACE_TIMELINE: u32 = 1;
/// `SCENE_RT_TRACE_DEPS`: record every task's accesses and its complete
/// list of conflicting earlier accesses (RAW, WAR, WAW), each marked with
/// whether it was still pending at submit.
pub const SCENE_RT_TRACE_DEPS: u32 = 2;

// Argument directions (`SCENE_DIR_*`) of run and task arguments.
pub const SCENE_DIR_IN: u32 = 0;
pub const SCENE_DIR_OUT: u32 = 1;
pub const SCENE_DIR_INOUT: u32 = 2;
pub const SCENE_DIR_SCALAR: u32 = 3;
/// `SCENE_DIR_MANUAL_DEP` (`scene_orch.h`): OR'd into a v2 task argument's
/// direction, the access is not dependency-tracked (only ordered after the
/// bytes' tracked producers).
pub const SCENE_DIR_MANUAL_DEP: u32 = 0x100;

/// The `SCENE_RT_*` name of a status, for messages.
pub fn status_name(status: i32) -> &'static str {
    match status {
        SCENE_RT_OK => "SCENE_RT_OK",
        SCENE_RT_E_INVALID => "SCENE_RT_E_INVALID",
        SCENE_RT_E_ABI => "SCENE_RT_E_ABI",
        SCENE_RT_E_NO_DEVICE => "SCENE_RT_E_NO_DEVICE",
        SCENE_RT_E_OOM => "SCENE_RT_E_OOM",
        SCENE_RT_E_OUT_OF_BOUNDS => "SCENE_RT_E_OUT_OF_BOUNDS",
        SCENE_RT_E_FUNC_ID => "SCENE_RT_E_FUNC_ID",
        SCENE_RT_E_CORE_TYPE => "SCENE_RT_E_CORE_TYPE",
        SCENE_RT_E_LOAD => "SCENE_RT_E_LOAD",
        SCENE_RT_E_ORCH => "SCENE_RT_E_ORCH",
        SCENE_RT_E_TIMEOUT => "SCENE_RT_E_TIMEOUT",
        SCENE_RT_E_COMM => "SCENE_RT_E_COMM",
        s if s <= SCENE_RT_E_DEVICE_FATAL => "SCENE_RT_E_DEVICE_FATAL",
        _ => "unknown status",
    }
}

/// `SceneIncoreDesc`: one incore kernel, the raw `.text` image entered at offset 0.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SceneIncoreDesc {
    pub func_id: u32,
    pub core_type: u32,
    pub image: *const u8,
    pub image_len: u64,
}

/// `SceneCallableDesc`: an orchestration shared object plus its incore images.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SceneCallableDesc {
    pub orch_so: *const u8,
    pub orch_so_len: u64,
    pub orch_symbol: *const c_char,
    pub incores: *const SceneIncoreDesc,
    pub num_incores: u32,
}

// Incore kinds (`SceneIncoreDesc2::kind`; optional ABI, issue 29).
/// `SCENE_INCORE_IMAGE`: a raw position-independent `.text` image entered
/// at offset 0 (what [`SceneIncoreDesc`] describes).
pub const SCENE_INCORE_IMAGE: u32 = 0;
/// `SCENE_INCORE_HOSTED`: the bytes of an ELF shared object built for the
/// host, loaded with `dlopen`; its entry symbol is called once per block.
pub const SCENE_INCORE_HOSTED: u32 = 1;

// Entry conventions of a hosted kernel (`SceneIncoreDesc2::args_convention`).
/// `SCENE_KERNEL_ARGS_SCENE`: `void entry(const SceneKernelArgs *)`, as an
/// image kernel ([`KernelEntry`]).
pub const SCENE_KERNEL_ARGS_SCENE: u32 = 0;
/// `SCENE_KERNEL_ARGS_CHIP_TENSOR`: reserved for `void kernel_entry(int64_t
/// *args)` of the original project; a runtime may refuse it.
pub const SCENE_KERNEL_ARGS_CHIP_TENSOR: u32 = 1;

/// `SceneIncoreDesc2` (`scene_rt_register_callable2`, optional ABI, issue
/// 29): one incore kernel, an image or a hosted shared object.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SceneIncoreDesc2 {
    pub func_id: u32,
    pub core_type: u32,
    /// `SCENE_INCORE_IMAGE` or `SCENE_INCORE_HOSTED`.
    pub kind: u32,
    /// `SCENE_KERNEL_ARGS_*` (0 for images).
    pub args_convention: u32,
    /// Image: machine code; hosted: the shared object's bytes.
    pub image: *const u8,
    pub image_len: u64,
    /// Hosted: NUL-terminated entry symbol, NULL = `kernel_entry`.
    pub symbol: *const c_char,
    /// Padding: 0, carries nothing.
    pub reserved: [u64; 4],
}

/// `SceneCallableDesc2`: as [`SceneCallableDesc`], with [`SceneIncoreDesc2`]
/// incores.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SceneCallableDesc2 {
    pub orch_so: *const u8,
    pub orch_so_len: u64,
    pub orch_symbol: *const c_char,
    pub incores: *const SceneIncoreDesc2,
    pub num_incores: u32,
}

/// `SceneRunArg`; identical layout to `SceneOrchArg` / `SceneTaskArg`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SceneRunArg {
    pub direction: u32,
    /// Padding: 0, carries nothing.
    pub reserved: u32,
    pub value: u64,
    pub size: u64,
}

/// `SceneOrchArg` / `SceneTaskArg` (same layout as [`SceneRunArg`]).
pub type SceneOrchArg = SceneRunArg;

/// `SceneKernelArgs`, passed to every block invocation of an incore image.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SceneKernelArgs {
    pub abi_version: u32,
    pub block_idx: u32,
    pub block_num: u32,
    pub num_args: u32,
    pub args: [u64; SCENE_MAX_ARGS],
    pub arg_sizes: [u64; SCENE_MAX_ARGS],
    /// v2: `num_args` views (offset 0: `args[i]` points at element 0).
    pub descs: *const SceneTensorDesc,
    /// v3: the level-3 communication context (null outside a group).
    pub comm: *const SceneCommCtx,
    /// v4: the kernel's `SCENE_SLOT_*` in its task.
    pub slot: u32,
    /// v4: the task's active slots (bit `1 << slot`).
    pub slot_mask: u32,
    /// v4: the block's cross-core flags (mixed tasks; null otherwise).
    pub cluster: *const SceneClusterCtx,
}

/// `SceneClusterCtx` (`scene_kernel.h`, v4): one kernel's view of the
/// block of a mixed task it runs in.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SceneClusterCtx {
    pub slot: u32,
    pub slot_mask: u32,
    /// The runtime's.
    pub block: *mut c_void,
    /// Returns a status: `SCENE_RT_OK`, `SCENE_RT_E_INVALID` (a slot the
    /// block does not run, a bad flag).
    pub signal: extern "C" fn(ctx: *const SceneClusterCtx, to: u32, flag: u32) -> i32,
    /// Returns a status: `SCENE_RT_OK`, `SCENE_RT_E_INVALID` (a bad flag,
    /// or nobody left to signal), `SCENE_RT_E_TIMEOUT` (run abandoned).
    pub wait: extern "C" fn(ctx: *const SceneClusterCtx, flag: u32) -> i32,
}

/// `SceneMixedKernels` (`scene_orch.h`, v4): a func_id per slot, or
/// [`SCENE_NO_KERNEL`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SceneMixedKernels {
    pub aic: i32,
    pub aiv0: i32,
    pub aiv1: i32,
}

// Dispatch predicate operators (`SCENE_PRED_*`, `scene_orch.h`, v6): the
// predicate element OP target.
/// `SCENE_PRED_NONE`: no predicate, the task always runs.
pub const SCENE_PRED_NONE: u32 = 0;
/// `SCENE_PRED_EQ`: element == target.
pub const SCENE_PRED_EQ: u32 = 1;
/// `SCENE_PRED_NE`: element != target.
pub const SCENE_PRED_NE: u32 = 2;
/// `SCENE_PRED_GT`: element > target.
pub const SCENE_PRED_GT: u32 = 3;
/// `SCENE_PRED_LT`: element < target.
pub const SCENE_PRED_LT: u32 = 4;
/// `SCENE_PRED_GE`: element >= target.
pub const SCENE_PRED_GE: u32 = 5;
/// `SCENE_PRED_LE`: element <= target.
pub const SCENE_PRED_LE: u32 = 6;

/// `ScenePredicate` (`scene_orch.h`, v6): a task's dispatch predicate, the
/// signed `elem_size`-byte element at byte `offset` of buffer `addr`
/// compared with `target` when the task becomes ready.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScenePredicate {
    /// `SCENE_PRED_*`.
    pub op: u32,
    /// 1, 2, 4 or 8 (unused for `SCENE_PRED_NONE`).
    pub elem_size: u32,
    /// Device address of the buffer (0 for `SCENE_PRED_NONE`).
    pub addr: u64,
    /// Byte offset of the element in the buffer.
    pub offset: u64,
    pub target: i64,
}

/// `SceneSubmit` (`scene_orch.h`, v6): one task of `submit_task`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SceneSubmit {
    /// A func_id per slot or [`SCENE_NO_KERNEL`]: one set is a plain task,
    /// several a mixed one, none a dependency-only task.
    pub kernels: SceneMixedKernels,
    pub block_num: u32,
    pub num_args: u32,
    pub args: *const SceneTaskArgV2,
    /// Ids of earlier tasks of the run it runs after (NULL when
    /// `num_deps` is 0).
    pub deps: *const u64,
    pub num_deps: u32,
    /// 0.
    pub reserved: u32,
    pub predicate: ScenePredicate,
}

/// `SCENE_COMM_MAX_RANKS` (`scene_comm.h`): ranks of one group, at most.
pub const SCENE_COMM_MAX_RANKS: usize = 16;
/// `SCENE_COMM_SIGNAL_SLOTS` (`scene_comm.h`): int32 signal slots per rank.
pub const SCENE_COMM_SIGNAL_SLOTS: u32 = 1024;

/// `SceneCommCtx` (`scene_comm.h`): one rank's view of its group.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SceneCommCtx {
    pub rank: u32,
    pub nranks: u32,
    pub window_size: u64,
    /// Host-visible window base of every rank (0 past `nranks`).
    pub windows: [u64; SCENE_COMM_MAX_RANKS],
    /// Base of every rank's `i32` signal slots (0 past `nranks`).
    pub signals: [u64; SCENE_COMM_MAX_RANKS],
    pub num_signals: u32,
    /// Padding: 0, carries nothing.
    pub reserved: u32,
    pub domain: *mut c_void,
    /// Returns a status: `SCENE_RT_OK`, `SCENE_RT_E_COMM` (the group
    /// failed), `SCENE_RT_E_INVALID` (no such peer or slot).
    pub signal: extern "C" fn(ctx: *const SceneCommCtx, peer: u32, slot: u32, value: i32) -> i32,
    /// Returns a status: `SCENE_RT_OK`, `SCENE_RT_E_COMM` (timed out, or
    /// the group failed), `SCENE_RT_E_INVALID` (no such slot).
    pub wait: extern "C" fn(ctx: *const SceneCommCtx, from: i32, slot: u32, expected: i32) -> i32,
}

/// Opaque `SceneCommDomain` handle of `scene_rt_comm_create`.
pub type SceneCommDomain = c_void;

/// `SceneOrchOps`: the runtime's services to an orchestration.
#[repr(C)]
#[derive(Debug)]
pub struct SceneOrchOps {
    pub abi_version: u32,
    /// Deprecated (in-band failure: 0); v3's `malloc` returns a status.
    pub alloc: extern "C" fn(ctx: *mut SceneOrchCtx, size: u64) -> u64,
    pub submit: extern "C" fn(
        ctx: *mut SceneOrchCtx,
        func_id: u32,
        block_num: u32,
        args: *const SceneOrchArg,
        num_args: u32,
    ) -> i32,
    pub fail: extern "C" fn(ctx: *mut SceneOrchCtx, message: *const c_char),
    pub arg_desc: extern "C" fn(ctx: *mut SceneOrchCtx, index: u32) -> *const SceneTensorDesc,
    pub submit_v2: extern "C" fn(
        ctx: *mut SceneOrchCtx,
        func_id: u32,
        block_num: u32,
        args: *const SceneTaskArgV2,
        num_args: u32,
    ) -> i32,
    pub read: extern "C" fn(
        ctx: *mut SceneOrchCtx,
        addr: u64,
        offset: u64,
        dst: *mut c_void,
        size: u64,
    ) -> i32,
    pub write: extern "C" fn(
        ctx: *mut SceneOrchCtx,
        addr: u64,
        offset: u64,
        src: *const c_void,
        size: u64,
    ) -> i32,
    pub fill: extern "C" fn(
        ctx: *mut SceneOrchCtx,
        addr: u64,
        offset: u64,
        size: u64,
        pattern: *const c_void,
        pattern_size: u32,
    ) -> i32,
    pub free: extern "C" fn(ctx: *mut SceneOrchCtx, addr: u64) -> i32,
    pub begin_scope: extern "C" fn(ctx: *mut SceneOrchCtx) -> i32,
    pub end_scope: extern "C" fn(ctx: *mut SceneOrchCtx) -> i32,
    /// v3: allocates into `*out_addr` (0 on failure); returns a status.
    pub malloc: extern "C" fn(ctx: *mut SceneOrchCtx, size: u64, out_addr: *mut u64) -> i32,
    /// v3: the message of the last failed call on this thread; never NULL.
    pub last_error: extern "C" fn(ctx: *mut SceneOrchCtx) -> *const c_char,
    /// v4: submits one mixed task; returns a status.
    pub submit_mixed: extern "C" fn(
        ctx: *mut SceneOrchCtx,
        kernels: *const SceneMixedKernels,
        block_num: u32,
        args: *const SceneTaskArgV2,
        num_args: u32,
    ) -> i32,
    /// v5: this run's rank and group size in its communication domain
    /// (level 3); returns a status.
    pub comm_rank: extern "C" fn(ctx: *mut SceneOrchCtx, rank: *mut u32, nranks: *mut u32) -> i32,
    /// v6: submits `*task` with explicit dependencies and a dispatch
    /// predicate, its id into `*task_id` (may be NULL); returns a status.
    pub submit_task:
        extern "C" fn(ctx: *mut SceneOrchCtx, task: *const SceneSubmit, task_id: *mut u64) -> i32,
    /// v6: device memory's host mapping (device address `*device_base` + o
    /// is host address `*host_base` + o for o < `*len`); returns a status.
    pub memory_window: extern "C" fn(
        ctx: *mut SceneOrchCtx,
        device_base: *mut u64,
        host_base: *mut u64,
        len: *mut u64,
    ) -> i32,
    /// v6: the run's cores per type; returns a status.
    pub core_counts: extern "C" fn(ctx: *mut SceneOrchCtx, aic: *mut u32, aiv: *mut u32) -> i32,
}

/// `SceneOrchCtx`.
#[repr(C)]
#[derive(Debug)]
pub struct SceneOrchCtx {
    pub ops: *const SceneOrchOps,
    pub runtime: *mut c_void,
}

/// Signature of an orchestration entry (`SCENE_ORCH_ENTRY`).
pub type OrchEntry =
    unsafe extern "C" fn(ctx: *mut SceneOrchCtx, args: *const SceneOrchArg, nargs: u32) -> i32;

/// Signature of an incore image entered at offset 0 (`SCENE_KERNEL_ENTRY`).
pub type KernelEntry = unsafe extern "C" fn(args: *const SceneKernelArgs);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names() {
        assert_eq!(status_name(SCENE_RT_OK), "SCENE_RT_OK");
        assert_eq!(status_name(SCENE_RT_E_TIMEOUT), "SCENE_RT_E_TIMEOUT");
        assert_eq!(status_name(-100), "SCENE_RT_E_DEVICE_FATAL");
        assert_eq!(status_name(-150), "SCENE_RT_E_DEVICE_FATAL");
        assert_eq!(status_name(-42), "unknown status");
        assert_eq!(status_name(1), "unknown status");
    }

    #[test]
    fn a_runtime_of_this_version_or_newer_is_supported() {
        assert!(runtime_version_supported(SCENE_RUNTIME_ABI_VERSION));
        assert!(runtime_version_supported(SCENE_RUNTIME_ABI_VERSION + 1));
        assert!(!runtime_version_supported(SCENE_RUNTIME_ABI_VERSION - 1));
        assert!(!runtime_version_supported(0));
        assert!(!runtime_version_supported(-1));
    }
}
