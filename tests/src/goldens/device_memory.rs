//! `device_memory`: `y = x + pad[last]` (the scene is about the device
//! holding `pad`; its fixture is zeros, so `y` equals `x`).

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let last = ctx
        .tensor("pad")?
        .bytes()
        .last()
        .copied()
        .map_or(0.0, f32::from);
    let x = ctx.tensor("x")?;
    let y: Vec<f32> = x.to_f32_vec().iter().map(|v| v + last).collect();
    Ok(GoldenOutputs::new().with("y", Tensor::from_f32(DType::F32, x.shape(), &y)?))
}
