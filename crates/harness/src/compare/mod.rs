//! Comparisons: how each output of a case is judged.
//!
//! A tensor's `compare` in `scene.toml` picks the rule:
//!
//! * `"allclose"` (the default): `|a - e| <= atol + rtol * |e|` with the
//!   tensor's resolved tolerance ([`scene_golden::assert_close`]); integer
//!   and bool outputs default to tolerance 0, i.e. exact;
//! * `"exact"`: bit for bit, any NaN equal to any NaN
//!   ([`scene_golden::assert_exact`]);
//! * `{ custom = "NAME", arg = number | "expression", ... }`: a function
//!   registered under `NAME` ([`crate::golden::GoldenRegistry::register_comparison`]),
//!   given the output, its golden, its tolerance and its arguments resolved
//!   in the case. The harness ships [`BUILTIN_COMPARISONS`];
//! * `{ python = "FUNCTION", arg = ... }`: `FUNCTION(name, actual,
//!   expected, params) -> (ok, detail)` of the scene's Python file, run in
//!   its Python worker ([`crate::golden::python::PythonRunner::compare`]).
//!
//! `skip_golden` (on a case, a case's list of outputs, or a tensor) leaves
//! an output unjudged against the golden; it is still dumped and must hold
//! only finite values unless the tensor says `allow_nonfinite = true`.
//!
//! This module holds the runtime side. Reading `compare` / `skip_golden`
//! from `scene.toml` and checking them is the scene validator's
//! (`crate::scene::validate::compare`); the check that a case's custom
//! comparisons are registered is the CPU stages'
//! (`crate::prepare::check_custom_comparisons`).
//!
//! Files: [`rule`] (a resolved [`Comparison`] and the custom-comparison
//! interface), [`builtin`] (the shipped custom comparisons) and [`report`]
//! (what the report says of an output). Judging a case's outputs after
//! the card is released is the compare stage, [`crate::judge`]: it needs
//! the golden registry, which needs these types, so it lives above both.

pub mod builtin;
pub mod report;
pub mod rule;

pub use builtin::BUILTIN_COMPARISONS;
pub use report::{OutputReport, Verdict};
pub use rule::{Comparison, ComparisonCtx, ComparisonFailure, ComparisonFn, CustomComparison};

#[cfg(test)]
mod tests;
