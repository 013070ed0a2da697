//! The runtime's internal error type; every variant maps to one `SCENE_RT_E_*` status.

use scene_abi::*;

/// An error from a runtime entry point: status code plus message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RtError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NoDevice(String),
    #[error("{0}")]
    Oom(String),
    #[error("{0}")]
    OutOfBounds(String),
    #[error("{0}")]
    FuncId(String),
    #[error("{0}")]
    CoreType(String),
    #[error("{0}")]
    Load(String),
    #[error("{0}")]
    Orch(String),
    #[error("{0}")]
    Timeout(String),
    #[error("{0}")]
    DeviceFatal(String),
}

impl RtError {
    /// The `SCENE_RT_E_*` status for this error.
    pub fn status(&self) -> i32 {
        match self {
            RtError::Invalid(_) => SCENE_RT_E_INVALID,
            RtError::NoDevice(_) => SCENE_RT_E_NO_DEVICE,
            RtError::Oom(_) => SCENE_RT_E_OOM,
            RtError::OutOfBounds(_) => SCENE_RT_E_OUT_OF_BOUNDS,
            RtError::FuncId(_) => SCENE_RT_E_FUNC_ID,
            RtError::CoreType(_) => SCENE_RT_E_CORE_TYPE,
            RtError::Load(_) => SCENE_RT_E_LOAD,
            RtError::Orch(_) => SCENE_RT_E_ORCH,
            RtError::Timeout(_) => SCENE_RT_E_TIMEOUT,
            RtError::DeviceFatal(_) => SCENE_RT_E_DEVICE_FATAL,
        }
    }
}

pub type RtResult<T> = Result<T, RtError>;
