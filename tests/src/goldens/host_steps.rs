//! Goldens of level-3 scenes with host steps (`[[steps]]`): the whole step
//! sequence, computed as the chip and host functions do (f32, each
//! intermediate rounded, the ranks summed in order).

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

/// `l3_host_dependency`: f = (a+b+1)*(a+b+2)+(a+b) on every rank, then on
/// the host g[r] = f[r] - mean over ranks of f, then y[r] = g[r] * a[r].
pub fn l3_host_dependency(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let a_t = ctx.tensor("a")?;
    let shape = a_t.shape().to_vec();
    let (ranks, n) = (shape[0], shape[1]);
    let a = a_t.to_f32_vec();
    let b = ctx.tensor("b")?.to_f32_vec();
    let f: Vec<f32> = a
        .iter()
        .zip(&b)
        .map(|(&a, &b)| {
            let s = a + b;
            (s + 1.0) * (s + 2.0) + s
        })
        .collect();
    let mut g = vec![0f32; f.len()];
    for i in 0..n {
        let mut sum = 0f32;
        for r in 0..ranks {
            sum += f[r * n + i];
        }
        let mean = sum / ranks as f32;
        for r in 0..ranks {
            g[r * n + i] = f[r * n + i] - mean;
        }
    }
    let y: Vec<f32> = g.iter().zip(&a).map(|(&g, &a)| g * a).collect();
    Ok(GoldenOutputs::new()
        .with("f", Tensor::from_f32(DType::F32, &shape, &f)?)
        .with("g", Tensor::from_f32(DType::F32, &shape, &g)?)
        .with("y", Tensor::from_f32(DType::F32, &shape, &y)?))
}
