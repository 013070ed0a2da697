//! Level 3: the rank group (`ranks`, `[comm] window` or
//! `[comm] window_tensor`) and the per-rank tensors, declared once and
//! resolved per case.

use super::{Checked, Validator};
use crate::scene::ranks::{CaseGroup, GroupSpec, MAX_RANKS, WindowSpec};
use crate::scene::raw::{RawComm, RawDim};
use crate::scene::shape::Dim;
use crate::scene::{ArgDirection, Case, ScalarSpec, TensorSpec};

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
        scalars: &[ScalarSpec],
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
                    "a level-3 scene needs [comm] window = \"<bytes expression>\" (or window_tensor = \"<per-rank tensor>\")",
                );
                None
            }
            Some(RawComm {
                window: Some(_),
                window_tensor: Some(t),
            }) => {
                self.problem(
                    "comm.window_tensor",
                    format!(
                        "[comm] gives both window and window_tensor = \"{t}\": the window tensor's slice is each rank's window, so its bytes are the window's size; remove window"
                    ),
                );
                None
            }
            Some(RawComm {
                window: None,
                window_tensor: None,
            }) => {
                self.problem(
                    "comm",
                    "[comm] needs window = \"<bytes expression>\" or window_tensor = \"<per-rank tensor>\"",
                );
                None
            }
            Some(RawComm {
                window: Some(w),
                window_tensor: None,
            }) => self.report(dim("comm.window", w, 0)).map(WindowSpec::Bytes),
            Some(RawComm {
                window: None,
                window_tensor: Some(name),
            }) => self.window_tensor(&name, tensors, scalars),
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

    /// `[comm] window_tensor = "name"`: a per-rank `inout` tensor of the
    /// scene (its index).
    fn window_tensor(
        &self,
        name: &str,
        tensors: &[TensorSpec],
        scalars: &[ScalarSpec],
    ) -> Option<WindowSpec> {
        let field = "comm.window_tensor";
        let Some(i) = tensors.iter().position(|t| t.name == name) else {
            if scalars.iter().any(|s| s.name == name) {
                self.problem(
                    field,
                    format!("`{name}` is a scalar; the window is a per-rank tensor"),
                );
            } else {
                let names: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
                self.problem(
                    field,
                    format!(
                        "`{name}` is not a tensor of the scene (tensors: {})",
                        names.join(", ")
                    ),
                );
            }
            return None;
        };
        let t = &tensors[i];
        if !t.per_rank {
            self.problem(
                field,
                format!(
                    "tensor `{name}` is the window, so it must be per_rank = true (rank r's slice is rank r's window)"
                ),
            );
            return None;
        }
        if t.direction != ArgDirection::Inout {
            self.problem(
                field,
                format!(
                    "tensor `{name}` is the window, so it must be `inout` in the orchestration signature (its init is the window's contents before the run, its slices after the run are downloaded), not `{}`",
                    t.direction
                ),
            );
            return None;
        }
        Some(WindowSpec::Tensor(i))
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
        let (window, window_tensor) = match &g.window {
            WindowSpec::Bytes(w) => (
                w.eval_count(&case.params)
                    .map_err(|e| self.err("comm.window", format!("{prefix}`{w}`: {e}")))?
                    as u64,
                None,
            ),
            WindowSpec::Tensor(k) => {
                // Rank r's slice: every dimension after the leading ranks
                // (checked below to be the ranks).
                let r = &case.tensors[*k];
                let elems: usize = r.shape.iter().skip(1).product();
                ((elems * r.dtype.size_of()) as u64, Some(*k))
            }
        };
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
            window,
            window_tensor,
        })
    }
}
