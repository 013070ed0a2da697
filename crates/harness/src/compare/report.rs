//! What the report says of one output: its [`Verdict`] and the
//! [`OutputReport`] (a `--report-json` contract: add fields, never rename).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Whether an output passed, failed or was not compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Skipped,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Skipped => "skipped",
        })
    }
}

/// One output of a case in the report: which comparison judged it and
/// what it said.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputReport {
    pub name: String,
    /// e.g. `allclose(rtol=0.001, atol=1e-05)`, `exact`,
    /// `cosine(min=0.999)`, `skip_golden`.
    pub comparison: String,
    pub verdict: Verdict,
    /// What was measured (custom comparisons), or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}
