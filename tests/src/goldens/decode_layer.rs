//! `decode_layer`: one decoder step for one token, in f32, step by step in
//! the order the kernels compute it (see the scene's orchestration.c):
//! RMSNorm, Q/K/V, rotary embedding, KV-cache append, 4-head attention,
//! output projection, residual, RMSNorm, SwiGLU MLP, residual.
//!
//! Expected outputs: `y`, and both caches (row `pos` replaced by this
//! token's rotated key / value, every other row unchanged).

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

use super::common::{matmul_f32, rms_inv, scene_expf};

/// RoPE base, as the rope_table kernel hard-codes it (ln 10000 there).
const LN_ROPE_BASE: f64 = 9.210_340_371_976_184;

fn rmsnorm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let inv = rms_inv(x, eps);
    x.iter().zip(w).map(|(&v, &wv)| v * inv * wv).collect()
}

/// cos (first half) and sin (second half) for `pos`, computed in f64 like
/// the kernel and rounded to f32.
fn rope_table(pos: usize, hd: usize) -> Vec<f32> {
    let half = hd / 2;
    let mut cs = vec![0.0f32; hd];
    for i in 0..half {
        let inv_freq = (-((2 * i) as f64) / hd as f64 * LN_ROPE_BASE).exp();
        let a = pos as f64 * inv_freq;
        cs[i] = a.cos() as f32;
        cs[half + i] = a.sin() as f32;
    }
    cs
}

fn rope(x: &[f32], cs: &[f32], hd: usize) -> Vec<f32> {
    let half = hd / 2;
    let mut out = vec![0.0f32; x.len()];
    for (xh, oh) in x.chunks(hd).zip(out.chunks_mut(hd)) {
        for i in 0..half {
            let (c, s) = (cs[i], cs[half + i]);
            let (x1, x2) = (xh[i], xh[half + i]);
            oh[i] = x1 * c - x2 * s;
            oh[half + i] = x2 * c + x1 * s;
        }
    }
    out
}

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    // The kernels receive eps as f32 bits.
    let eps = ctx.scalar("eps")? as f32;
    let h = ctx.size("H")?;
    let nh = ctx.size("NH")?;
    let pos = ctx.size("P")?;
    let s_rows = ctx.size("S")?;
    let f = ctx.size("F")?;
    if nh == 0 || h % nh != 0 || pos >= s_rows {
        return Err(GoldenError::Failed(format!(
            "bad params H={h} NH={nh} P={pos} S={s_rows}"
        )));
    }
    let hd = h / nh;
    let tn = pos + 1;

    let x = ctx.tensor("x")?.to_f32_vec();
    let attn_norm_w = ctx.tensor("attn_norm_w")?.to_f32_vec();
    let wq = ctx.tensor("wq")?.to_f32_vec();
    let wk = ctx.tensor("wk")?.to_f32_vec();
    let wv = ctx.tensor("wv")?.to_f32_vec();
    let wo = ctx.tensor("wo")?.to_f32_vec();
    let mut k_cache = ctx.tensor("k_cache")?.to_f32_vec();
    let mut v_cache = ctx.tensor("v_cache")?.to_f32_vec();
    let ffn_norm_w = ctx.tensor("ffn_norm_w")?.to_f32_vec();
    let w_gate = ctx.tensor("w_gate")?.to_f32_vec();
    let w_up = ctx.tensor("w_up")?.to_f32_vec();
    let w_down = ctx.tensor("w_down")?.to_f32_vec();

    // Attention block.
    let xn = rmsnorm(&x, &attn_norm_w, eps);
    let q = matmul_f32(&xn, &wq, 1, h, h);
    let k = matmul_f32(&xn, &wk, 1, h, h);
    let v = matmul_f32(&xn, &wv, 1, h, h);
    let cs = rope_table(pos, hd);
    let q_rot = rope(&q, &cs, hd);
    let k_rot = rope(&k, &cs, hd);
    k_cache[pos * h..(pos + 1) * h].copy_from_slice(&k_rot);
    v_cache[pos * h..(pos + 1) * h].copy_from_slice(&v);

    let scale = 1.0f32 / (hd as f32).sqrt();
    let mut attn = vec![0.0f32; h];
    for head in 0..nh {
        let qh = &q_rot[head * hd..(head + 1) * hd];
        let scores: Vec<f32> = (0..tn)
            .map(|t| {
                let kr = &k_cache[t * h + head * hd..t * h + (head + 1) * hd];
                let mut acc = 0.0f32;
                for d in 0..hd {
                    acc += qh[d] * kr[d];
                }
                acc * scale
            })
            .collect();
        let mut m = scores[0];
        for &s in &scores[1..] {
            if s > m {
                m = s;
            }
        }
        let e: Vec<f32> = scores.iter().map(|&s| scene_expf(s - m)).collect();
        let mut z = 0.0f32;
        for &ev in &e {
            z += ev;
        }
        let p: Vec<f32> = e.iter().map(|&ev| ev / z).collect();
        for d in 0..hd {
            let mut acc = 0.0f32;
            for t in 0..tn {
                acc += p[t] * v_cache[t * h + head * hd + d];
            }
            attn[head * hd + d] = acc;
        }
    }
    let attn_o = matmul_f32(&attn, &wo, 1, h, h);
    let h1: Vec<f32> = x.iter().zip(&attn_o).map(|(&a, &b)| a + b).collect();

    // MLP block.
    let hn = rmsnorm(&h1, &ffn_norm_w, eps);
    let g = matmul_f32(&hn, &w_gate, 1, h, f);
    let u = matmul_f32(&hn, &w_up, 1, h, f);
    let act: Vec<f32> = g
        .iter()
        .zip(&u)
        .map(|(&gv, &uv)| gv / (1.0 + scene_expf(-gv)) * uv)
        .collect();
    let down = matmul_f32(&act, &w_down, 1, f, h);
    let y: Vec<f32> = h1.iter().zip(&down).map(|(&a, &b)| a + b).collect();

    Ok(GoldenOutputs::new()
        .with("y", Tensor::from_f32(DType::F32, &[1, h], &y)?)
        .with(
            "k_cache",
            Tensor::from_f32(DType::F32, &[s_rows, h], &k_cache)?,
        )
        .with(
            "v_cache",
            Tensor::from_f32(DType::F32, &[s_rows, h], &v_cache)?,
        ))
}
