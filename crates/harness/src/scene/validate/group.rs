//! Level 3: the rank group (`ranks`, `[comm] window`) and the per-rank
//! tensors, declared once and resolved per case.

use super::{Checked, Validator};
use crate::scene::ranks::{CaseGroup, GroupSpec, MAX_RANKS};
use crate::scene::raw::{RawComm, RawDim};
use crate::scene::shape::Dim;
use crate::scene::{Case, TensorSpec};

impl Validator<'_> {
    /// Level 3's `ranks` and `[comm]`: required there, refused elsewhere,
    /// and every output tensor is per-rank. `None` on a problem, else
    /// the group (`Some(None)` below level 3).
    pub(super) fn group(
        &self,
        level: u32,
        ranks: Option<RawDim>,
        comm: Option<RawComm>,
        tensors: &[TensorSpec],
    ) -> Option<Option<GroupSpec>> {
        // `least`: 1 for ranks, 0 for the window (a group whose ranks do
        // not communicate needs none).
        let dim = |field: &str, d: RawDim, least| match d {
            RawDim::Fixed(n) if n >= least => Ok(Dim::Fixed(n as usize)),
            RawDim::Fixed(n) if least == 0 => {
                Err(self.err(field, format!("must be 0 or more, got {n}")))
            }
            RawDim::Fixed(n) => Err(self.err(field, format!("must be positive, got {n}"))),
            RawDim::Expr(e) => Dim::parse(&e).map_err(|e| self.err(field, e.to_string())),
        };
        if level != 3 {
            let mut ok = true;
            if ranks.is_some() {
                self.problem("ranks", "only a level-3 scene has ranks (level = 3)");
                ok = false;
            }
            if comm.is_some() {
                self.problem("comm", "only a level-3 scene has [comm] (level = 3)");
                ok = false;
            }
            if let Some(t) = tensors.iter().find(|t| t.per_rank) {
                self.problem(
                    "tensors.per_rank",
                    format!(
                        "tensor `{}` is per_rank but the scene is not level 3",
                        t.name
                    ),
                );
                ok = false;
            }
            return ok.then_some(None);
        }
        let ranks = match ranks {
            None => {
                self.problem("ranks", "a level-3 scene says how many ranks (ranks = 2, or an expression of the case params)");
                None
            }
            Some(r) => self.report(dim("ranks", r, 1)),
        };
        let window = match comm {
            None => {
                self.problem(
                    "comm",
                    "a level-3 scene needs [comm] window = \"<bytes expression>\"",
                );
                None
            }
            Some(c) => self.report(dim("comm.window", c.window, 0)),
        };
        let per_rank = match tensors
            .iter()
            .find(|t| t.direction.is_output() && !t.per_rank)
        {
            Some(t) => {
                self.problem(
                    "tensors.per_rank",
                    format!(
                        "output tensor `{}` of a level-3 scene must be per_rank = true (each rank writes its slice)",
                        t.name
                    ),
                );
                None
            }
            None => Some(()),
        };
        per_rank?;
        Some(Some(GroupSpec {
            ranks: ranks?,
            window: window?,
        }))
    }

    /// Case `i`'s ranks and window; per-rank tensors lead with `ranks`.
    pub(super) fn case_group(
        &self,
        i: usize,
        g: &GroupSpec,
        case: &Case,
        tensors: &[TensorSpec],
    ) -> Checked<CaseGroup> {
        let prefix = format!("case `{}`: ", case.name);
        let ranks = g
            .ranks
            .eval(&case.params)
            .map_err(|e| self.err("ranks", format!("{prefix}`{}`: {e}", g.ranks)))?;
        if !(1..=MAX_RANKS).contains(&ranks) {
            return Err(self.err(
                format!("cases[{i}].ranks"),
                format!("{prefix}{ranks} ranks; a group has 1 to {MAX_RANKS}"),
            ));
        }
        let window = g
            .window
            .eval_count(&case.params)
            .map_err(|e| self.err("comm.window", format!("{prefix}`{}`: {e}", g.window)))?;
        for (t, r) in tensors.iter().zip(&case.tensors) {
            if t.per_rank && r.shape.first() != Some(&ranks) {
                return Err(self.err(
                    "tensors.shape",
                    format!(
                        "{prefix}per-rank tensor `{}` has shape {:?}; its first dimension must be the {ranks} ranks",
                        t.name, r.shape
                    ),
                ));
            }
        }
        Ok(CaseGroup {
            ranks,
            window: window as u64,
        })
    }
}
