//! The runtime C ABI (`scene_runtime.h`, `scene_kernel.h`, `scene_orch.h` in
//! `crates/device/include`) as Rust: every constant and `#[repr(C)]` struct,
//! defined once.
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

/// `SCENE_RUNTIME_ABI_VERSION` (`scene_runtime.h`): what
/// `scene_rt_abi_version()` must return.
pub const SCENE_RUNTIME_ABI_VERSION: i32 = 1;
/// `SCENE_KERNEL_ABI_VERSION` (`scene_kernel.h`), in `SceneKernelArgs::abi_version`.
pub const SCENE_KERNEL_ABI_VERSION: u32 = 1;
/// `SCENE_ORCH_ABI_VERSION` (`scene_orch.h`), in `SceneOrchOps::abi_version`.
pub const SCENE_ORCH_ABI_VERSION: u32 = 1;
/// `SCENE_MAX_ARGS` (`scene_kernel.h`): arguments of one task.
pub const SCENE_MAX_ARGS: usize = 32;
/// `SCENE_MAX_FUNC_IDS` (`scene_runtime.h`): exclusive upper bound of `func_id`.
pub const SCENE_MAX_FUNC_IDS: u32 = 64;

// Status codes (`SCENE_RT_*`): 0 = ok, negative = error.
pub const SCENE_RT_OK: i32 = 0;
/// Bad argument, null pointer, bad handle.
pub const SCENE_RT_E_INVALID: i32 = -1;
/// ABI version mismatch.
pub const SCENE_RT_E_ABI: i32 = -2;
/// No such device id / device not open.
pub const SCENE_RT_E_NO_DEVICE: i32 = -3;
/// Device memory exhausted.
pub const SCENE_RT_E_OOM: i32 = -4;
/// Copy or access outside an allocation.
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
/// Any status `<=` this means the device is unusable: retire the card.
pub const SCENE_RT_E_DEVICE_FATAL: i32 = -100;

/// `SCENE_CORE_AIC`: cube core.
pub const SCENE_CORE_AIC: u32 = 0;
/// `SCENE_CORE_AIV`: vector core.
pub const SCENE_CORE_AIV: u32 = 1;

// Argument directions (`SCENE_DIR_*`) of run and task arguments.
pub const SCENE_DIR_IN: u32 = 0;
pub const SCENE_DIR_OUT: u32 = 1;
pub const SCENE_DIR_INOUT: u32 = 2;
pub const SCENE_DIR_SCALAR: u32 = 3;

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

/// `SceneRunArg`; identical layout to `SceneOrchArg` / `SceneTaskArg`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SceneRunArg {
    pub direction: u32,
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
}

/// `SceneOrchOps`: the runtime's services to an orchestration.
#[repr(C)]
#[derive(Debug)]
pub struct SceneOrchOps {
    pub abi_version: u32,
    pub alloc: extern "C" fn(ctx: *mut SceneOrchCtx, size: u64) -> u64,
    pub submit: extern "C" fn(
        ctx: *mut SceneOrchCtx,
        func_id: u32,
        block_num: u32,
        args: *const SceneOrchArg,
        num_args: u32,
    ) -> i32,
    pub fail: extern "C" fn(ctx: *mut SceneOrchCtx, message: *const c_char),
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
}
