//! f = (a + b + 1) * (a + b + 2) + (a + b), in f32 exactly as the kernels
//! compute it (each intermediate rounded to f32).

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let a = ctx.tensor("a")?.to_f32_vec();
    let b = ctx.tensor("b")?.to_f32_vec();
    let f: Vec<f32> = a
        .iter()
        .zip(&b)
        .map(|(&a, &b)| {
            let s = a + b;
            (s + 1.0) * (s + 2.0) + s
        })
        .collect();
    let shape = ctx.tensor("f")?.shape().to_vec();
    Ok(GoldenOutputs::new().with("f", Tensor::from_f32(DType::F32, &shape, &f)?))
}
