//! Device access for scene tests: which cards a run may use, exclusive
//! cross-process leases on them, and loading a device runtime behind the C
//! ABI in `include/scene_runtime.h`.
//!
//! - [`DeviceList`] parses card lists such as `0,2-4,7` and resolves the
//!   `--device` / `SCENE_DEVICES` / `TASK_DEVICE` precedence from values the
//!   entry point read (this crate reads no environment variable).
//! - [`CardPool`] hands out [`CardLease`]s: `k` cards locked atomically and
//!   deadlock-free with `flock`-style file locks, one file per card, so
//!   leases are released when dropped and when the holding process dies. The
//!   lock file records who holds it, so waiters can say whom they wait for.
//! - [`Runtime`] loads a runtime shared object (the simulator
//!   `libscene_sim_runtime.so` or a vendor runtime wrapped to the ABI) once a
//!   card is held, checks its ABI version, and wraps it in the safe
//!   [`DeviceSession`] API.
//! - [`DeviceJob`] is one session's work as data (open, register, upload,
//!   run, download, close); [`run_session`] runs it here, and [`worker`]
//!   runs it in a supervised worker process, so a kernel that crashes ends
//!   the worker and fails one case instead of the harness.
//!
//! What this crate deliberately does not know: compilers, kernels, scene
//! files, goldens or reports. It moves bytes and handles; callers decide what
//! they mean. All `unsafe` code lives in the runtime loader module. The ABI
//! constants and structs are `scene-abi`'s, re-exported as [`abi`].

pub use scene_abi as abi;

mod embedded;
mod error;
mod held;
mod holder;
mod job;
mod list;
mod lock;
mod runtime;
pub mod worker;

use std::path::PathBuf;

pub use embedded::{EmbeddedRuntime, RUNTIME_CACHE_SUBDIR, UnpackFailure, UnpackedRuntime};
pub use error::{DeviceError, RuntimeError};
pub use held::{HeldCard, SupervisedCard};
pub use holder::HolderInfo;
pub use job::{
    DeviceJob, GroupJob, JobArg, SessionOutput, SessionStepError, TensorArg, name_run_args,
    run_session,
};
pub use list::DeviceList;
pub use lock::{
    AcquireOptions, CardLease, CardPool, DEFAULT_LOCK_DIR, LOCK_DIR_MODE, LOCK_FILE_MODE,
    WaitStatus, default_lock_dir, resolve_lock_dir,
};
pub use runtime::{
    ArgsConvention, CallableHandle, CallableImage, CommDomain, DeviceBuffer, DeviceSession,
    Direction, IncoreImageRef, IncoreKind, RUNTIME_LIB_NAME, RunArg, Runtime, default_runtime_path,
    monotonic_ns,
};

/// Directory holding the C headers (`scene_runtime.h`, `scene_kernel.h`,
/// `scene_orch.h`) that kernels and orchestrations compile against.
pub fn include_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/include"))
}
