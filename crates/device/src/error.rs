//! Error types of the device crate.

use std::path::PathBuf;
use std::time::Duration;

use crate::holder::HolderInfo;

/// Why the embedded runtime could not be made a file at one place
/// (`EmbeddedRuntime::unpack_for_run`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} ({reason})", path.display())]
pub struct UnpackFailure {
    /// The file (in a cache) or the directory (a private one's parent).
    pub path: PathBuf,
    pub reason: String,
}

/// Errors of device lists and card locks.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("invalid device list `{input}`: {reason}")]
    InvalidList { input: String, reason: String },
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "card lock directory {} is not usable: {reason}; it must be a directory every user of \
         the cards can create files in (mode 1777, like /tmp), or set SCENE_LOCK_DIR to one",
        dir.display()
    )]
    LockDirUnusable { dir: PathBuf, reason: String },
    #[error("cannot lease {requested} card(s) from a pool of {available}")]
    TooManyCards { requested: usize, available: usize },
    #[error(
        "cannot lease {requested} card(s): only {healthy} healthy (retired after device faults: {retired:?})"
    )]
    NotEnoughHealthyCards {
        requested: usize,
        healthy: usize,
        retired: Vec<u32>,
    },
    #[error("timed out after {waited:.1?} waiting for card {card}{}", holder_suffix(.holder))]
    LockTimeout {
        card: u32,
        holder: Option<HolderInfo>,
        waited: Duration,
    },
    /// The run was cancelled (a signal) while waiting for a card.
    #[error("interrupted while waiting for a card")]
    Cancelled,
}

fn holder_suffix(h: &Option<HolderInfo>) -> String {
    h.as_ref()
        .map(|h| format!(" held by {h}"))
        .unwrap_or_default()
}

/// Errors of loading and calling a device runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(
        "cannot find the device runtime {name}; set SCENE_RUNTIME_LIB or build scene-sim-runtime. Looked in: {}",
        fmt_paths(searched)
    )]
    NotFound {
        name: String,
        searched: Vec<PathBuf>,
    },
    #[error(
        "cannot unpack the simulator runtime embedded in this binary to {}: {reason}; \
         make the cache directory writable (--cache-dir, SCENE_CACHE_DIR) or name a runtime \
         with SCENE_RUNTIME_LIB",
        path.display()
    )]
    Unpack { path: PathBuf, reason: String },
    /// Neither the cache nor a private directory could take the embedded
    /// runtime (`EmbeddedRuntime::unpack_for_run`).
    #[error(
        "cannot unpack the simulator runtime embedded in this binary into {}; make the cache \
         directory (--cache-dir, SCENE_CACHE_DIR) or the temp directory (TMPDIR) writable, or \
         name a runtime with SCENE_RUNTIME_LIB",
        tried.iter().map(ToString::to_string).collect::<Vec<_>>().join(" nor into ")
    )]
    UnpackNowhere { tried: Vec<UnpackFailure> },
    #[error("cannot load the device runtime {}: {}", path.display(), with_cause(source))]
    Load {
        path: PathBuf,
        #[source]
        source: libloading::Error,
    },
    #[error("{} is not a device runtime: missing symbol `{symbol}` ({})", path.display(), with_cause(source))]
    MissingSymbol {
        path: PathBuf,
        symbol: &'static str,
        #[source]
        source: libloading::Error,
    },
    #[error(
        "device runtime ABI version {found}, but this harness needs version {expected} or newer"
    )]
    AbiMismatch { found: i32, expected: i32 },
    #[error("{call} failed with {status} ({}): {message}", scene_abi::status_name(*status))]
    Call {
        call: &'static str,
        status: i32,
        message: String,
    },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// A loader error with the system's reason: libloading's `Display` says
/// only "dlopen failed" and keeps `dlerror()`'s text in its source.
fn with_cause(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

fn fmt_paths(p: &[PathBuf]) -> String {
    p.iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl RuntimeError {
    /// True when the runtime reported the device unusable (status `<=
    /// SCENE_RT_E_DEVICE_FATAL`): close it and retire the card.
    pub fn is_device_fatal(&self) -> bool {
        matches!(self, RuntimeError::Call { status, .. } if *status <= scene_abi::SCENE_RT_E_DEVICE_FATAL)
    }

    /// The runtime status code, for [`RuntimeError::Call`].
    pub fn status(&self) -> Option<i32> {
        match self {
            RuntimeError::Call { status, .. } => Some(*status),
            _ => None,
        }
    }
}
