//! c = a + b over f32 tensors of any shape (PTO-ISA tile add, issue 29).

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let a = ctx.tensor("a")?.to_f32_vec();
    let b = ctx.tensor("b")?.to_f32_vec();
    let c: Vec<f32> = a.iter().zip(&b).map(|(&a, &b)| a + b).collect();
    let shape = ctx.tensor("c")?.shape().to_vec();
    Ok(GoldenOutputs::new().with("c", Tensor::from_f32(DType::F32, &shape, &c)?))
}
