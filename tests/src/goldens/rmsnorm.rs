//! `rmsnorm`: y = x * (1 / sqrt(mean(x^2) + eps)) * weight per row, bf16
//! in and out, f32 math in the kernel's order, one RNE rounding to bf16.

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

use super::common::rms_inv;

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let (r, d) = (ctx.size("R")?, ctx.size("D")?);
    let x = ctx.tensor("x")?.to_f32_vec();
    let w = ctx.tensor("weight")?.to_f32_vec();
    // The kernel receives eps as f32 bits.
    let eps = ctx.scalar("eps")? as f32;
    let mut y = Vec::with_capacity(r * d);
    for row in x.chunks(d) {
        let inv = rms_inv(row, eps);
        y.extend(row.iter().zip(&w).map(|(&v, &wv)| v * inv * wv));
    }
    Ok(GoldenOutputs::new().with("y", Tensor::from_f32(DType::BF16, &[r, d], &y)?))
}
