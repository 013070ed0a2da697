//! `paged_attention` (both ports of simpler's paged attention tests:
//! `paged_attention` and `paged_attention_unroll_4dims`): the math of
//! simpler's `simpler_setup/goldens/paged_attention.py` `compute_golden`.
//!
//! For every batch `b` and query head `h`, over the blocks
//! `bn < ceil(context_lens[b] / block_size)` of the batch, each block being
//! cache block `block_table[b][bn]` with its first
//! `min(block_size, context_lens[b] - bn * block_size)` rows valid, in f32:
//!
//! ```text
//! s   = scale * q . k_j            (valid rows j only; the rest is -inf)
//! mij = max_j s                    pij = bf16(exp(s - mij))   lij = sum_j pij
//! oi_new = pij @ v
//! first block: mi, li, oi = mij, lij, oi_new
//! then:  mi' = max(mi, mij); a = exp(mi - mi'); b = exp(mij - mi')
//!        li = a*li + b*lij;  oi = a*oi + b*oi_new;  mi = mi'
//! out[b, h] = oi / li
//! ```
//!
//! The original loops over the blocks of the longest batch and masks the
//! batches that have ended (their block adds `exp(-1e30 - mi) = 0` with
//! `a = 1`): the same numbers as stopping each batch at its own last block,
//! which is what this does. `kv_head_num` must be 1, as there. The output
//! takes the shape of the `out` tensor (`[batch, num_heads, head_dim]`, or
//! `[batch, 1, num_heads, head_dim]` in the 4-d port).

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

/// Rounds to bf16 and back (RNE, NaN kept quiet), as the kernels' and
/// torch's `.to(bfloat16)`.
fn bf16_round(x: f32) -> f32 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return f32::from_bits((u | 0x0040_0000) & 0xffff_0000);
    }
    let rounded = u.wrapping_add(0x7fff + ((u >> 16) & 1));
    f32::from_bits(rounded & 0xffff_0000)
}

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let batch = ctx.size("batch")?;
    let num_heads = ctx.size("num_heads")?;
    let kv_head_num = ctx.size("kv_head_num")?;
    let head_dim = ctx.size("head_dim")?;
    let block_size = ctx.size("block_size")?;
    let context_len = ctx.size("context_len")?;
    let max_model_len = ctx.size("max_model_len")?;
    let max_blocks = ctx.size("max_num_blocks_per_req")?;
    let total_blocks = ctx.size("total_blocks")?;
    let bad = |m: String| Err(GoldenError::Failed(m));
    if kv_head_num != 1 {
        return bad(format!("kv_head_num must be 1, got {kv_head_num}"));
    }
    if block_size == 0 || max_blocks != max_model_len / block_size {
        return bad(format!(
            "max_num_blocks_per_req {max_blocks} != max_model_len / block_size ({max_model_len} / {block_size})"
        ));
    }
    if total_blocks != batch * context_len.div_ceil(block_size) {
        return bad(format!(
            "total_blocks {total_blocks} != batch * ceil(context_len / block_size) ({batch} * ceil({context_len} / {block_size}))"
        ));
    }
    let scale = ctx.scalar("scale")? as f32;
    // The kernels are bf16 kernels (as the original's, whose every case
    // has dtype "bfloat16"); another dtype would be another kernel.
    for name in ["query", "key_cache", "value_cache"] {
        let dtype = ctx.tensor(name)?.dtype();
        if dtype != DType::BF16 {
            return bad(format!("tensor `{name}` is {dtype}: the kernels read bf16"));
        }
    }
    let q = ctx.tensor("query")?.to_f32_vec();
    let k = ctx.tensor("key_cache")?.to_f32_vec();
    let v = ctx.tensor("value_cache")?.to_f32_vec();
    let table: Vec<i64> = ctx
        .tensor("block_table")?
        .to_f64_vec()
        .iter()
        .map(|&x| x as i64)
        .collect();
    let lens: Vec<i64> = ctx
        .tensor("context_lens")?
        .to_f64_vec()
        .iter()
        .map(|&x| x as i64)
        .collect();
    let d = head_dim;
    let block = block_size * d;
    let mut out = vec![0.0f32; batch * num_heads * d];
    for b in 0..batch {
        let len = lens[b];
        if len < 1 || len as usize > max_blocks * block_size {
            return bad(format!(
                "context_lens[{b}] = {len} is out of 1..={}",
                max_blocks * block_size
            ));
        }
        let len = len as usize;
        let blocks: Vec<usize> = (0..len.div_ceil(block_size))
            .map(|bn| {
                let blk = table[b * max_blocks + bn];
                if blk < 0 || blk as usize >= total_blocks {
                    Err(GoldenError::Failed(format!(
                        "block_table[{b}][{bn}] = {blk} is out of 0..{total_blocks}"
                    )))
                } else {
                    Ok(blk as usize)
                }
            })
            .collect::<Result<_, _>>()?;
        for h in 0..num_heads {
            let qh = &q[(b * num_heads + h) * d..][..d];
            let (mut mi, mut li, mut oi) = (0.0f32, 0.0f32, vec![0.0f32; d]);
            for (bn, &blk) in blocks.iter().enumerate() {
                let valid = (len - bn * block_size).min(block_size);
                let kb = &k[blk * block..][..valid * d];
                let vb = &v[blk * block..][..valid * d];
                let s: Vec<f32> = kb
                    .chunks(d)
                    .map(|kj| qh.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>() * scale)
                    .collect();
                let mij = s
                    .iter()
                    .copied()
                    .fold(f32::NEG_INFINITY, f32::max)
                    .max(-1e30);
                let p: Vec<f32> = s.iter().map(|&x| bf16_round((x - mij).exp())).collect();
                let lij: f32 = p.iter().sum();
                let mut oi_new = vec![0.0f32; d];
                for (pj, vj) in p.iter().zip(vb.chunks(d)) {
                    for (o, &x) in oi_new.iter_mut().zip(vj) {
                        *o += pj * x;
                    }
                }
                if bn == 0 {
                    (mi, li, oi) = (mij, lij, oi_new);
                } else {
                    let mi_new = mi.max(mij);
                    let (alpha, beta) = ((mi - mi_new).exp(), (mij - mi_new).exp());
                    li = alpha * li + beta * lij;
                    for (o, n) in oi.iter_mut().zip(&oi_new) {
                        *o = alpha * *o + beta * n;
                    }
                    mi = mi_new;
                }
            }
            let dst = &mut out[(b * num_heads + h) * d..][..d];
            for (o, x) in dst.iter_mut().zip(&oi) {
                *o = x / li;
            }
        }
    }
    let shape = ctx.tensor("out")?.shape().to_vec();
    Ok(GoldenOutputs::new().with("out", Tensor::from_f32(DType::F32, &shape, &out)?))
}
