//! `pto_pipe` (the PTO-ISA TPUSH/TPOP test of
//! `crates/cli/tests/integration/hosted.rs`): y = 2 * x, tile by tile.

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let x = ctx.tensor("x")?;
    let y: Vec<f32> = x.to_f32_vec().iter().map(|&v| 2.0 * v).collect();
    Ok(GoldenOutputs::new().with("y", Tensor::from_f32(DType::F32, x.shape(), &y)?))
}
