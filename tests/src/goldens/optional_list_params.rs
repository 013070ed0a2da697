//! `optional_list_params`: y = x + tokens over [total_blocks, block_size].
//!
//! The sizes are recomputed here from the case's own params, in Rust, not
//! read from the scene's `[derived]`: the scene's expressions (`get`, `len`,
//! `max`, `sum`) are what this golden checks, so a wrong one fails the case
//! instead of agreeing with itself.

use scene_harness::scene::expr::Value;
use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

/// The requests' lengths: `context_lens` when the case gives it, else one
/// request of `context_len` (as the original's golden.py falls back).
fn lengths(ctx: &GoldenCtx<'_>) -> Result<Vec<i64>, GoldenError> {
    match ctx.value("context_lens") {
        Ok(Value::List(items)) => items
            .iter()
            .map(|v| match v {
                Value::Int(i) => Ok(*i),
                v => Err(GoldenError::Failed(format!(
                    "`context_lens` holds {v}, not an integer length"
                ))),
            })
            .collect(),
        Ok(v) => Err(GoldenError::Failed(format!(
            "`context_lens` is {}, not a list",
            v.kind()
        ))),
        Err(GoldenError::MissingParam(_)) => Ok(vec![ctx.param("context_len")?]),
        Err(e) => Err(e),
    }
}

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let lens = lengths(ctx)?;
    let block = ctx.param("block_size")?;
    let longest = lens.iter().copied().max().unwrap_or(0);
    let rows = lens.len() as i64 * ((longest + block - 1) / block);
    let tokens: i64 = lens.iter().sum();
    let x = ctx.tensor("x")?;
    let want = [rows as usize, block as usize];
    if x.shape() != want {
        return Err(GoldenError::Failed(format!(
            "tensor `x` has shape {:?}; the case's lengths {lens:?} in blocks of {block} \
             make {want:?}",
            x.shape()
        )));
    }
    let offset = tokens as f32;
    let y: Vec<f32> = x.to_f32_vec().iter().map(|&v| v + offset).collect();
    Ok(GoldenOutputs::new().with("y", Tensor::from_f32(DType::F32, &want, &y)?))
}
