//! acc + ITERS (the kernels add 1.0 ITERS times; with the scene's
//! fixture, acc = 0.5 everywhere, every partial sum is exact in f32).

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let iters = ctx.scalar_i64("iters")? as f64;
    let acc = ctx.tensor("acc")?;
    let out: Vec<f64> = acc.to_f64_vec().into_iter().map(|a| a + iters).collect();
    Ok(GoldenOutputs::new().with("acc", Tensor::from_f64(DType::F32, acc.shape(), &out)?))
}
