//! `compare_demo`: every output is a copy of `x` (`y = x`, and `z = x`
//! when the scene declares `z`). The scenes that use it (built by
//! `crates/cli/tests/integration/compare.rs`) perturb the copy in their kernels to exercise
//! the comparisons.

use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let x = ctx.tensor("x")?;
    let mut out = GoldenOutputs::new().with("y", x.clone());
    if ctx.tensor("z").is_ok() {
        out = out.with("z", x.clone());
    }
    Ok(out)
}
