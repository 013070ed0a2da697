//! `rmsnorm`: y = x * (1 / sqrt(mean(x^2) + eps)) * weight per row, in
//! the case's dtype (bf16, f16 or f32: the tensors' dtype), f32 math in the
//! kernel's order, one RNE rounding to the dtype.

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

use super::common::rms_inv;

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let (r, d) = (ctx.size("R")?, ctx.size("D")?);
    let x = ctx.tensor("x")?;
    let dtype = x.dtype();
    if !matches!(dtype, DType::BF16 | DType::F16 | DType::F32) {
        return Err(GoldenError::Failed(format!(
            "rmsnorm runs bf16, f16 or f32, not {dtype}"
        )));
    }
    let x = x.to_f32_vec();
    let w = ctx.tensor("weight")?.to_f32_vec();
    // The kernel receives eps as f32 bits.
    let eps = ctx.scalar("eps")? as f32;
    let mut y = Vec::with_capacity(r * d);
    for row in x.chunks(d) {
        let inv = rms_inv(row, eps);
        y.extend(row.iter().zip(&w).map(|(&v, &wv)| v * inv * wv));
    }
    Ok(GoldenOutputs::new().with("y", Tensor::from_f32(dtype, &[r, d], &y)?))
}
