//! `hosted_names_small`, `hosted_names_large`: what a kernel reads of its
//! own objects, fresh (tag, tag + 1, tag + 2, counters 0, thread_local
//! tag + 3 then 0).

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let tag = ctx.param("tag")?;
    let seen = [tag, tag + 1, tag + 2, 0, 0, tag + 3, 0];
    Ok(GoldenOutputs::new().with("seen", Tensor::from_i64(DType::I64, &[7], &seen)?))
}
