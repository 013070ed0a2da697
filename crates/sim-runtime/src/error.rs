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
    /// A rank of a communication group failed, or a wait timed out.
    #[error("{0}")]
    Comm(String),
}

impl RtError {
    /// The same error with `note` appended to its message.
    pub fn with_note(self, note: &str) -> RtError {
        let add = |m: String| format!("{m}; {note}");
        match self {
            RtError::Invalid(m) => RtError::Invalid(add(m)),
            RtError::NoDevice(m) => RtError::NoDevice(add(m)),
            RtError::Oom(m) => RtError::Oom(add(m)),
            RtError::OutOfBounds(m) => RtError::OutOfBounds(add(m)),
            RtError::FuncId(m) => RtError::FuncId(add(m)),
            RtError::CoreType(m) => RtError::CoreType(add(m)),
            RtError::Load(m) => RtError::Load(add(m)),
            RtError::Orch(m) => RtError::Orch(add(m)),
            RtError::Timeout(m) => RtError::Timeout(add(m)),
            RtError::DeviceFatal(m) => RtError::DeviceFatal(add(m)),
            RtError::Comm(m) => RtError::Comm(add(m)),
        }
    }

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
            RtError::Comm(_) => SCENE_RT_E_COMM,
        }
    }
}

pub type RtResult<T> = Result<T, RtError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_keeps_the_status() {
        let e = RtError::Oom("full".into()).with_note("step 3");
        assert_eq!(e.status(), SCENE_RT_E_OOM);
        assert_eq!(e.to_string(), "full; step 3");
    }
}
