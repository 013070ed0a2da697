//! A resolved comparison ([`Comparison`]) and the interface of custom
//! ones: the context a registered function sees ([`ComparisonCtx`]) and
//! how it fails ([`ComparisonFailure`]).

use std::collections::BTreeMap;

use scene_golden::closeness::fmt_num;
use scene_golden::{Tensor, Tolerance};
use serde::Serialize;

/// How one output of one case is judged, resolved (arguments evaluated).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Comparison {
    /// `assert_close` with the tensor's tolerance.
    AllClose,
    /// `assert_exact`.
    Exact,
    /// A registered comparison with its arguments.
    Custom {
        name: String,
        args: BTreeMap<String, f64>,
    },
    /// A function of the scene's Python file (`compare = { python = ...
    /// }`), run in the scene's Python worker after the device stage, with
    /// its arguments.
    Python {
        function: String,
        args: BTreeMap<String, f64>,
    },
    /// `skip_golden`: not compared; checked for NaN/inf unless
    /// `allow_nonfinite`.
    Skipped,
}

impl Comparison {
    /// What the report calls it, e.g. `allclose(rtol=0.001, atol=1e-05)`,
    /// `exact`, `cosine(min=0.999)`, `python:first_valid(rows=3)`,
    /// `skip_golden`.
    pub fn describe(&self, tol: &Tolerance) -> String {
        match self {
            Comparison::AllClose => {
                let nan = if tol.equal_nan { ", equal_nan" } else { "" };
                format!(
                    "allclose(rtol={}, atol={}{nan})",
                    fmt_num(tol.rtol, false),
                    fmt_num(tol.atol, false)
                )
            }
            Comparison::Exact => "exact".to_string(),
            Comparison::Custom { name, args } => {
                format!("{name}({})", describe_args(args))
            }
            Comparison::Python { function, args } => {
                format!("python:{function}({})", describe_args(args))
            }
            Comparison::Skipped => "skip_golden".to_string(),
        }
    }

    /// Whether this is what a tensor gets when the scene says nothing
    /// (bundle keys hash a comparison only when it is not).
    pub fn is_default(&self) -> bool {
        matches!(self, Comparison::AllClose)
    }
}
/// `k=v, ...` in name order.
fn describe_args(args: &BTreeMap<String, f64>) -> String {
    let args: Vec<String> = args
        .iter()
        .map(|(k, v)| format!("{k}={}", fmt_num(*v, false)))
        .collect();
    args.join(", ")
}

// ---------------------------------------------------------------------------
// Custom comparisons: the registry's side.

/// What a custom comparison sees of one output.
#[derive(Debug)]
pub struct ComparisonCtx<'a> {
    pub scene: &'a str,
    pub case: &'a str,
    pub tensor: &'a str,
    /// What the device wrote.
    pub actual: &'a Tensor,
    /// The golden's value.
    pub expected: &'a Tensor,
    /// The tensor's resolved tolerance (per tensor, scene, dtype default).
    pub tolerance: Tolerance,
    /// The arguments of `compare = { custom = ..., ... }`, evaluated.
    pub args: &'a BTreeMap<String, f64>,
}

impl ComparisonCtx<'_> {
    /// Argument `name` (declared at registration, so present). Non-finite
    /// values are refused here too, not only when the scene is loaded: a
    /// NaN bound makes every `>=` / `<=` test false and an infinite one
    /// makes it true, so a comparison built on either judges nothing.
    pub fn arg(&self, name: &str) -> Result<f64, ComparisonFailure> {
        let v =
            self.args.get(name).copied().ok_or_else(|| {
                ComparisonFailure(format!("comparison argument `{name}` is missing"))
            })?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err(ComparisonFailure(format!(
                "comparison argument `{name}` = {v} is not finite"
            )))
        }
    }

    /// Argument `name` as a non-negative integer.
    pub fn arg_usize(&self, name: &str) -> Result<usize, ComparisonFailure> {
        let v = self.arg(name)?;
        if v >= 0.0 && v.fract() == 0.0 && v <= usize::MAX as f64 {
            Ok(v as usize)
        } else {
            Err(ComparisonFailure(format!(
                "comparison argument `{name}` = {} is not a non-negative integer",
                fmt_num(v, false)
            )))
        }
    }
}

/// Why a custom comparison failed an output: what was measured against
/// what was allowed (or why nothing could be measured). The report shows
/// it after the comparison's name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ComparisonFailure(pub String);

impl From<String> for ComparisonFailure {
    fn from(detail: String) -> Self {
        ComparisonFailure(detail)
    }
}

/// A custom comparison: `Ok(detail)` passes the output, `Err(failure)`
/// fails it; either says what was measured (it goes to the report).
pub type ComparisonFn = fn(&ComparisonCtx<'_>) -> Result<String, ComparisonFailure>;

/// A registered custom comparison: its function and the arguments it
/// takes (each required; any other is refused before the device stage).
#[derive(Clone, Copy, Debug)]
pub struct CustomComparison {
    pub args: &'static [&'static str],
    pub f: ComparisonFn,
}
