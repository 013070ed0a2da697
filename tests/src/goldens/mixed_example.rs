//! `mixed_example`: simpler's `TestMixedExample.compute_golden`: every
//! iteration's tile of C, J and N is A @ B (128x128, f32), of F, K, L and O
//! is D + E, of I and M is G * H.

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

use super::common::matmul_f32;

const DIM: usize = 128;
const TILE: usize = DIM * DIM;

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let iters = usize::try_from(ctx.param("num_iters")?)
        .map_err(|_| GoldenError::Failed("num_iters is negative".into()))?;
    let input = |name: &str| -> Result<Vec<f32>, GoldenError> {
        let v = ctx.tensor(name)?.to_f32_vec();
        if v.len() != TILE {
            return Err(GoldenError::Failed(format!(
                "tensor `{name}` has {} elements, the example's tiles have {TILE}",
                v.len()
            )));
        }
        Ok(v)
    };
    let (a, b, d, e, g, h) = (
        input("A")?,
        input("B")?,
        input("D")?,
        input("E")?,
        input("G")?,
        input("H")?,
    );
    let matmul = matmul_f32(&a, &b, DIM, DIM, DIM);
    let add: Vec<f32> = d.iter().zip(&e).map(|(x, y)| x + y).collect();
    let mul: Vec<f32> = g.iter().zip(&h).map(|(x, y)| x * y).collect();
    let repeated = |tile: &[f32]| -> Result<Tensor, GoldenError> {
        let all: Vec<f32> = tile.iter().copied().cycle().take(iters * TILE).collect();
        Ok(Tensor::from_f32(DType::F32, &[iters * TILE], &all)?)
    };
    let mut out = GoldenOutputs::new();
    for name in ["C", "J", "N"] {
        out = out.with(name, repeated(&matmul)?);
    }
    for name in ["F", "K", "L", "O"] {
        out = out.with(name, repeated(&add)?);
    }
    for name in ["I", "M"] {
        out = out.with(name, repeated(&mul)?);
    }
    Ok(out)
}
