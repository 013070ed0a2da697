//! `gemm`: c = a @ b for the bf16 and the f16 operand pairs, f32 out.
//! The inputs are widened to f32 (exactly, as the kernel does); every
//! product of two bf16/f16 values is exact in f32, and the sum runs in k
//! order like the kernel's tile loop.

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

use super::common::matmul_f32;

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let (m, k, n) = (ctx.size("M")?, ctx.size("K")?, ctx.size("N")?);
    let mut out = GoldenOutputs::new();
    for (a, b, c) in [("a_bf16", "b_bf16", "c_bf16"), ("a_f16", "b_f16", "c_f16")] {
        let av = ctx.tensor(a)?.to_f32_vec();
        let bv = ctx.tensor(b)?.to_f32_vec();
        let cv = matmul_f32(&av, &bv, m, k, n);
        out = out.with(c, Tensor::from_f32(DType::F32, &[m, n], &cv)?);
    }
    Ok(out)
}
