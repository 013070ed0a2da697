//! Kernel compilation for scene tests.
//!
//! This crate turns C sources into what a device runs:
//!
//! - incore kernels become a single position-independent `.text` image with
//!   `kernel_entry` at offset 0 ([`IncoreImage`]), validated the way a device
//!   loader would ([`extract_text_image`]);
//! - orchestrations become host shared objects;
//! - both are grouped per callable ([`ChipCallable`]).
//!
//! The [`Builder`] flattens the units of many callables into one plan,
//! compiles each distinct unit once on a bounded pool of workers, and
//! assembles callables deterministically (incores ordered by `func_id`), so
//! the bytes do not depend on worker count or finish order.
//!
//! What this crate deliberately does NOT do: it knows nothing of devices,
//! runtimes or scene files. Callers describe units with paths relative to a
//! root ([`CallableSpec`]); loading, running and checking results belong to
//! other crates. Artifacts are shared across processes through the
//! persistent, content-addressed [`cache`] (enable it with
//! [`BuildOptions::cache`]), keyed by [`UnitKey`]s that include
//! [`COMPILE_LOGIC_TOKEN`].

mod bf16;
mod budget;
mod builder;
pub mod cache;
mod compile;
pub mod deps;
mod digests;
mod error;
pub mod image;
mod isa;
pub mod key;
mod link;
pub mod outline;
mod plan;
mod preamble;
mod process;
mod pto_fast;
mod report;
pub mod rules;
pub mod toolchain;
mod unique;
mod unit;

pub use bf16::{HostedBf16, SHIM_HEADER as BF16_SHIM_HEADER};
pub use builder::{BuildOptions, Builder};
pub use cache::{CacheConfig, InputChange, MissReason, PrunePolicy};
pub use compile::{HOSTED_PROBE_SOURCE, PTO_PROBE_SOURCE};
pub use error::{BuildError, BuildSetupError, CompileError, Stage, UnitFailure};
pub use image::{ImageError, extract_text_image};
pub use isa::{host_march_flag, host_march_flags};
pub use key::{CACHE_SCHEMA, UnitKey};
pub use outline::{
    PlanOutline, PlannedUnit, plan_outline, plan_outline_with_hosts, render_commands,
};
pub use pto_fast::{OVERLAY_HEADER as PTO_FAST_OVERLAY, REVIEWED as PTO_FAST_REVIEWED};
pub use report::{BuildOutput, Observer, UnitKind, UnitOutcome, UnitReport};
pub use toolchain::{BuiltinPlatform, Extraction, Toolchain, ToolchainError, UnknownExtraction};
pub use unique::{NO_GNU_UNIQUE, gnu_unique_symbols};
pub use unit::{
    ArgsConvention, CallableSpec, ChipCallable, CoreType, HostUnit, IncoreImage, IncoreKind,
    IncoreUnit, Language, OrchUnit, ParseArgsConventionError, ParseCoreTypeError,
};

/// Hash of this crate's compile/link/extract logic (see `build.rs`).
pub const COMPILE_LOGIC_TOKEN: &str = env!("SCENE_COMPILE_LOGIC_TOKEN");
