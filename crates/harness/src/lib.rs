//! The scene harness engine: the scene model (`scene.toml`), case
//! selection, the stages (compile -> fixtures -> golden -> device ->
//! compare), their schedule across cards, two-pass bundles, dumps and
//! reports.
//!
//! This crate sees the whole picture: it turns a [`Scene`] into a compile
//! plan for `scene-kernels`, fixtures and goldens with `scene-golden`, and a
//! device run with `scene-device`. It deliberately holds no compiler logic,
//! no numeric kernels and no `unsafe` (those live in the crates whose job
//! they are), and no command line: it takes one resolved [`RunConfig`] by
//! value, reads no environment variable, prints no progress bar and knows
//! no flag. The `scene` CLI and the `cargo test` target live in
//! `scene-cli`. Goldens are registered by the scenes package
//! ([`GoldenRegistry`]).
//!
//! Modules in stage order: [`scene`] (the model: load, validate, the
//! expression language, level-3 rank groups), [`select`], [`compile`],
//! [`prepare`] (the CPU stages, with [`golden`]: registry, stage, cache
//! and the Python worker), [`device`], [`judge`] (the compare stage, with
//! the rules, built-ins and report records in [`compare`]), then
//! [`schedule`] (the order across cases and cards), [`observe`] (what a
//! run writes for a person: traces, dependency graphs, argument dumps,
//! tensor dumps), [`replay`], [`bundle`] (two-pass runs) and [`report`];
//! [`config`] and [`platform`] are data used throughout.

pub mod bundle;
pub mod compare;
pub mod compile;
pub mod config;
pub mod device;
pub mod device_memory;
pub mod golden;
pub mod host_step;
pub mod judge;
pub mod observe;
pub mod platform;
pub mod prepare;
pub mod replay;
pub mod report;
pub mod scene;
pub mod schedule;
pub mod select;
pub mod simpler;
pub mod size;
pub mod steps;
pub mod testfiles;

pub use compare::{
    Comparison, ComparisonCtx, ComparisonFailure, ComparisonFn, OutputReport, Verdict,
};
pub use config::{DEFAULT_CASE_TIMEOUT, DumpPolicy, RunConfig};
pub use golden::{GoldenCtx, GoldenError, GoldenFn, GoldenOutputs, GoldenRegistry};
pub use platform::Platform;
pub use prepare::{CpuStages, Prepared, SetupError};
pub use report::{CaseFailure, CaseReport, CaseStatus, RunReport};
pub use scene::{Scene, SceneError};
pub use schedule::Session;
pub use select::{SelectedCase, distinct_scenes, select_cases};

/// Re-exported so goldens need only this crate and `scene-golden`.
pub use scene_golden as tensors;
