//! Constants of the runtime C ABI (`include/scene_runtime.h`).

/// `SCENE_RUNTIME_ABI_VERSION`: the version this crate speaks.
pub const SCENE_RUNTIME_ABI_VERSION: i32 = 1;
/// `SCENE_MAX_ARGS` of `scene_kernel.h`.
pub const SCENE_MAX_ARGS: usize = 32;

/// Status codes (`SCENE_RT_*`).
pub mod status {
    pub const OK: i32 = 0;
    pub const E_INVALID: i32 = -1;
    pub const E_ABI: i32 = -2;
    pub const E_NO_DEVICE: i32 = -3;
    pub const E_OOM: i32 = -4;
    pub const E_OUT_OF_BOUNDS: i32 = -5;
    pub const E_FUNC_ID: i32 = -6;
    pub const E_CORE_TYPE: i32 = -7;
    pub const E_LOAD: i32 = -8;
    pub const E_ORCH: i32 = -9;
    pub const E_TIMEOUT: i32 = -10;
    /// Any status `<=` this means the device is unusable.
    pub const E_DEVICE_FATAL: i32 = -100;

    /// The `SCENE_RT_*` name of a status, for messages.
    pub fn name(status: i32) -> &'static str {
        match status {
            OK => "SCENE_RT_OK",
            E_INVALID => "SCENE_RT_E_INVALID",
            E_ABI => "SCENE_RT_E_ABI",
            E_NO_DEVICE => "SCENE_RT_E_NO_DEVICE",
            E_OOM => "SCENE_RT_E_OOM",
            E_OUT_OF_BOUNDS => "SCENE_RT_E_OUT_OF_BOUNDS",
            E_FUNC_ID => "SCENE_RT_E_FUNC_ID",
            E_CORE_TYPE => "SCENE_RT_E_CORE_TYPE",
            E_LOAD => "SCENE_RT_E_LOAD",
            E_ORCH => "SCENE_RT_E_ORCH",
            E_TIMEOUT => "SCENE_RT_E_TIMEOUT",
            s if s <= E_DEVICE_FATAL => "SCENE_RT_E_DEVICE_FATAL",
            _ => "unknown status",
        }
    }
}

/// `SCENE_CORE_AIC`: cube core.
pub const CORE_AIC: u32 = 0;
/// `SCENE_CORE_AIV`: vector core.
pub const CORE_AIV: u32 = 1;

pub const DIR_IN: u32 = 0;
pub const DIR_OUT: u32 = 1;
pub const DIR_INOUT: u32 = 2;
pub const DIR_SCALAR: u32 = 3;
