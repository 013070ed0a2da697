//! `softmax`: y = softmax(scale * x) per row, for the f32 and the f16
//! tensors. f32 math with the kernels' exp (`scene_expf`), the f16 result
//! rounded once at the end (RNE), like the kernel's store.

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

use super::common::softmax_row;

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let (r, c) = (ctx.size("R")?, ctx.size("C")?);
    let scale = ctx.param("SCALE")? as f32;
    let mut out = GoldenOutputs::new();
    for (x, y, dt) in [("x", "y", DType::F32), ("x_f16", "y_f16", DType::F16)] {
        let xv = ctx.tensor(x)?.to_f32_vec();
        let mut yv = Vec::with_capacity(r * c);
        for row in xv.chunks(c) {
            let v: Vec<f32> = row.iter().map(|&e| scale * e).collect();
            yv.extend(softmax_row(&v));
        }
        out = out.with(y, Tensor::from_f32(dt, &[r, c], &yv)?);
    }
    Ok(out)
}
