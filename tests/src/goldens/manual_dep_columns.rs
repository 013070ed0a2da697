//! `manual_dep_columns`: c = 2 * a, whichever way the blocks were ordered.

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let a = ctx.tensor("a")?;
    let c: Vec<f32> = a.to_f32_vec().iter().map(|&v| 2.0 * v).collect();
    Ok(GoldenOutputs::new().with("c", Tensor::from_f32(DType::F32, a.shape(), &c)?))
}
