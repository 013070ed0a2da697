//! The scene harness: the scene model (`scene.toml`), the stage pipeline
//! (compile -> fixtures -> golden -> device -> compare), reports, and the
//! `scene` CLI and `cargo test` target as library functions.
//!
//! This is the only crate that sees the whole picture: it turns a [`Scene`]
//! into a compile plan for `scene-kernels`, fixtures and goldens with
//! `scene-golden`, and a device run with `scene-device`. It deliberately
//! holds no compiler logic, no numeric kernels and no `unsafe`: those live in
//! the crates whose job they are. Goldens themselves are registered by the
//! scenes package ([`GoldenRegistry`]).

pub mod bundle;
pub mod cache_cmd;
pub mod cli;
pub mod compile_cmd;
pub mod dump;
pub mod golden;
pub mod pipeline;
pub mod precompile_cmd;
pub mod report;
pub mod scene;
pub mod shape;
pub mod testing;

pub use cli::Layout;
pub use golden::{GoldenCtx, GoldenError, GoldenFn, GoldenOutputs, GoldenRegistry};
pub use pipeline::{RunConfig, SelectedCase, Session, select_cases};
pub use report::{CaseReport, CaseStatus, RunReport};
pub use scene::{Scene, SceneError};

/// Re-exported so goldens need only this crate and `scene-golden`.
pub use scene_golden as tensors;
