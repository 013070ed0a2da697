//! `scalar_data`: result = a + b (f32, one rounding per element, as
//! kernel_add computes it), and the nine values the orchestration writes
//! into `check`, one per step (see the scene's orchestration.c).

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

/// check[i] as the orchestration's steps leave it, given a = 2 everywhere
/// and b = arange.
pub const CHECK: [f32; 9] = [
    2.0,   // c[0] = a[0] + b[0]
    102.0, // c[100] = a[100] + b[100]
    77.0,  // the initial value of the one-element tensor
    77.0,  // still 77 after a noop used it inout
    79.0,  // c[0] + 77, computed by the orchestration
    42.0,  // written, then read back
    12.0,  // d[0] = 10 written, then e = d + a computed by a kernel
    88.0,  // c[0] = 88 written after a kernel read c
    55.0,  // b[0] = 55 written after a noop wrote b
];

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let a = ctx.tensor("a")?.to_f32_vec();
    let b = ctx.tensor("b")?.to_f32_vec();
    let result: Vec<f32> = a.iter().zip(&b).map(|(&a, &b)| a + b).collect();
    let result_shape = ctx.tensor("result")?.shape().to_vec();
    let check_shape = ctx.tensor("check")?.shape().to_vec();
    if check_shape != [CHECK.len()] {
        return Err(GoldenError::Failed(format!(
            "scalar_data: `check` must have shape [{}], not {check_shape:?}",
            CHECK.len()
        )));
    }
    Ok(GoldenOutputs::new()
        .with(
            "result",
            Tensor::from_f32(DType::F32, &result_shape, &result)?,
        )
        .with("check", Tensor::from_f32(DType::F32, &check_shape, &CHECK)?))
}
