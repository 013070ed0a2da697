//! `mixed_pipeline`: y = relu(x @ w + bias), in f32, each element of
//! x @ w summed in k order as the cube kernel does.

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

use super::common::matmul_f32;

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let x = ctx.tensor("x")?;
    let w = ctx.tensor("w")?;
    let bias = ctx.tensor("bias")?.to_f32_vec();
    let (&[m, k], &[_, n]) = (x.shape(), w.shape()) else {
        return Err(GoldenError::Failed("x and w must be matrices".into()));
    };
    let xw = matmul_f32(&x.to_f32_vec(), &w.to_f32_vec(), m, k, n);
    let y: Vec<f32> = xw
        .iter()
        .enumerate()
        .map(|(i, v)| (v + bias[i % n]).max(0.0))
        .collect();
    Ok(GoldenOutputs::new().with("y", Tensor::from_f32(DType::F32, &[m, n], &y)?))
}
