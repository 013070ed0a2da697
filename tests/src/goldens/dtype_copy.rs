//! `dtype_copy`: a byte copy in any dtype (`y = x`, `lens_out = lens`).
//! The scene's tensors take their dtype from the case's `DT` param; the
//! golden checks that the fixture it was given has that dtype.

use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let x = ctx.tensor("x")?;
    let dt = ctx.param_str("DT")?;
    if x.dtype().to_string() != dt {
        return Err(GoldenError::Failed(format!(
            "tensor `x` is {}, the case's DT is {dt}",
            x.dtype()
        )));
    }
    let lens = ctx.tensor("lens")?;
    Ok(GoldenOutputs::new()
        .with("y", x.clone())
        .with("lens_out", lens.clone()))
}
