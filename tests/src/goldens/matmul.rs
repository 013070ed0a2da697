//! `matmul`: simpler's host_build_graph matmul diamond, its
//! `compute_golden`: with `a`, `w1`, `w2` viewed as 128x128 and widened to
//! f32, `b = sqrt(log(a))`, `c = b @ w1`, `d = b @ w2`,
//! `f = exp(c + d)`, flattened, all in f32 (the kernels round `b` to half
//! as the device does; the original's RTOL = ATOL = 1e-2 covers that).

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

use super::common::matmul_f32;

const ROWS: usize = 128;
const COLS: usize = 128;

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let a = ctx.tensor("a")?;
    let w1 = ctx.tensor("w1")?.to_f32_vec();
    let w2 = ctx.tensor("w2")?.to_f32_vec();
    for (name, n) in [("a", a.numel()), ("w1", w1.len()), ("w2", w2.len())] {
        if n != ROWS * COLS {
            return Err(GoldenError::Failed(format!(
                "tensor `{name}` has {n} elements, the diamond is one {ROWS}x{COLS} tile"
            )));
        }
    }
    let b: Vec<f32> = a.to_f32_vec().iter().map(|x| x.ln().sqrt()).collect();
    let c = matmul_f32(&b, &w1, ROWS, COLS, COLS);
    let d = matmul_f32(&b, &w2, ROWS, COLS, COLS);
    let f: Vec<f32> = c.iter().zip(&d).map(|(c, d)| (c + d).exp()).collect();
    Ok(GoldenOutputs::new().with("f", Tensor::from_f32(DType::F32, &[ROWS * COLS], &f)?))
}
