//! `hosted_pipe_state`: both vector kernels of block b read b + 1.

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let blocks = usize::try_from(ctx.param("blocks")?)
        .map_err(|_| GoldenError::Failed("blocks is negative".into()))?;
    let seen: Vec<i64> = (1..=blocks as i64).flat_map(|v| [v, v]).collect();
    Ok(GoldenOutputs::new().with("seen", Tensor::from_i64(DType::I64, &[blocks, 2], &seen)?))
}
