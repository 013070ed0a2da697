//! `#[repr(C)]` mirrors of the structs and constants in `scene_runtime.h`,
//! `scene_kernel.h` and `scene_orch.h` (in `crates/device/include`).

use std::ffi::{c_char, c_void};

pub const SCENE_RUNTIME_ABI_VERSION: i32 = 1;
pub const SCENE_KERNEL_ABI_VERSION: u32 = 1;
pub const SCENE_ORCH_ABI_VERSION: u32 = 1;
pub const SCENE_MAX_ARGS: usize = 32;
/// Exclusive upper bound of `func_id`.
pub const SCENE_MAX_FUNC_IDS: u32 = 64;

pub const SCENE_RT_OK: i32 = 0;
pub const SCENE_RT_E_INVALID: i32 = -1;
pub const SCENE_RT_E_ABI: i32 = -2;
pub const SCENE_RT_E_NO_DEVICE: i32 = -3;
pub const SCENE_RT_E_OOM: i32 = -4;
pub const SCENE_RT_E_OUT_OF_BOUNDS: i32 = -5;
pub const SCENE_RT_E_FUNC_ID: i32 = -6;
pub const SCENE_RT_E_CORE_TYPE: i32 = -7;
pub const SCENE_RT_E_LOAD: i32 = -8;
pub const SCENE_RT_E_ORCH: i32 = -9;
pub const SCENE_RT_E_TIMEOUT: i32 = -10;
pub const SCENE_RT_E_DEVICE_FATAL: i32 = -100;

pub const SCENE_CORE_AIC: u32 = 0;
pub const SCENE_CORE_AIV: u32 = 1;

pub const SCENE_DIR_IN: u32 = 0;
pub const SCENE_DIR_OUT: u32 = 1;
pub const SCENE_DIR_INOUT: u32 = 2;
pub const SCENE_DIR_SCALAR: u32 = 3;

/// `SceneIncoreDesc`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SceneIncoreDesc {
    pub func_id: u32,
    pub core_type: u32,
    pub image: *const u8,
    pub image_len: u64,
}

/// `SceneCallableDesc`.
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

/// `SceneOrchOps`.
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

/// Signature of an incore image entered at offset 0.
pub type KernelEntry = unsafe extern "C" fn(args: *const SceneKernelArgs);

// Layout checks against the C headers (x86_64 / aarch64 LP64).
const _: () = assert!(std::mem::size_of::<SceneKernelArgs>() == 16 + 2 * 8 * SCENE_MAX_ARGS);
const _: () = assert!(std::mem::size_of::<SceneRunArg>() == 24);
const _: () = assert!(std::mem::size_of::<SceneIncoreDesc>() == 24);
const _: () = assert!(std::mem::size_of::<SceneCallableDesc>() == 40);
