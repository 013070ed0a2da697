//! Single-token decode attention (contiguous and paged KV caches).
//!
//! Layouts (row-major): `q` is `[q_heads, head_dim]`; a contiguous cache is
//! `[kv_len, kv_heads, head_dim]`; a paged cache is
//! `[num_blocks, block_size, kv_heads, head_dim]` with token `t` in block
//! `block_table[t / block_size]`, slot `t % block_size`. With grouped-query
//! attention, query head `h` reads kv head `h / (q_heads / kv_heads)`. The
//! output is `[q_heads, head_dim]`:
//! `out_h = softmax(scale * q_h · K_h^T) V_h`, with dot products, softmax
//! (max-subtracted) and the weighted sum in f64, rounded once to f32.

use rayon::prelude::*;

use super::check_len;

/// Sizes of a decode-attention call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionShape {
    pub q_heads: usize,
    /// Must divide `q_heads`.
    pub kv_heads: usize,
    pub kv_len: usize,
    pub head_dim: usize,
    /// Usually `1 / sqrt(head_dim)`.
    pub scale: f32,
}

/// A paged KV cache.
#[derive(Clone, Copy, Debug)]
pub struct PagedKv<'a> {
    /// `[num_blocks, block_size, kv_heads, head_dim]`.
    pub k_blocks: &'a [f32],
    /// Same layout as `k_blocks`.
    pub v_blocks: &'a [f32],
    /// Block of each group of `block_size` tokens; at least
    /// `ceil(kv_len / block_size)` entries.
    pub block_table: &'a [u32],
    pub block_size: usize,
}

/// Multi-head (not grouped) decode attention over a contiguous cache.
///
/// # Panics
/// If a length does not match the layout in the module docs.
pub fn attention_decode(
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    heads: usize,
    kv_len: usize,
    head_dim: usize,
    scale: f32,
) -> Vec<f32> {
    let shape = AttentionShape {
        q_heads: heads,
        kv_heads: heads,
        kv_len,
        head_dim,
        scale,
    };
    attention_decode_gqa(q, k_cache, v_cache, &shape)
}

/// Grouped-query decode attention over a contiguous cache.
///
/// # Panics
/// If `kv_heads` does not divide `q_heads` or a length does not match.
pub fn attention_decode_gqa(
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    s: &AttentionShape,
) -> Vec<f32> {
    let stride = s.kv_heads * s.head_dim;
    check_len("k_cache", k_cache.len(), s.kv_len * stride);
    check_len("v_cache", v_cache.len(), s.kv_len * stride);
    decode(q, s, |t, kvh| {
        let o = t * stride + kvh * s.head_dim;
        (&k_cache[o..o + s.head_dim], &v_cache[o..o + s.head_dim])
    })
}

/// Grouped-query decode attention over a paged cache.
///
/// # Panics
/// If `kv_heads` does not divide `q_heads`, the block table is too short or
/// names a block outside the cache, or a length does not match.
pub fn attention_decode_paged(q: &[f32], kv: &PagedKv<'_>, s: &AttentionShape) -> Vec<f32> {
    assert!(kv.block_size > 0, "attention_decode_paged: block_size is 0");
    let block = kv.block_size * s.kv_heads * s.head_dim;
    let num_blocks = kv.k_blocks.len().checked_div(block).unwrap_or(0);
    check_len("k_blocks", kv.k_blocks.len(), num_blocks * block);
    check_len("v_blocks", kv.v_blocks.len(), kv.k_blocks.len());
    let needed = s.kv_len.div_ceil(kv.block_size);
    assert!(
        kv.block_table.len() >= needed,
        "attention_decode_paged: block table has {} entries, {needed} needed for {} tokens",
        kv.block_table.len(),
        s.kv_len
    );
    for &b in &kv.block_table[..needed] {
        assert!(
            (b as usize) < num_blocks,
            "attention_decode_paged: block {b} out of range (cache has {num_blocks})"
        );
    }
    decode(q, s, |t, kvh| {
        let b = kv.block_table[t / kv.block_size] as usize;
        let o = b * block + ((t % kv.block_size) * s.kv_heads + kvh) * s.head_dim;
        (
            &kv.k_blocks[o..o + s.head_dim],
            &kv.v_blocks[o..o + s.head_dim],
        )
    })
}

fn decode<'c>(
    q: &[f32],
    s: &AttentionShape,
    kv_at: impl Fn(usize, usize) -> (&'c [f32], &'c [f32]) + Sync,
) -> Vec<f32> {
    assert!(
        s.kv_heads > 0 && s.q_heads.is_multiple_of(s.kv_heads),
        "attention: kv_heads {} must divide q_heads {}",
        s.kv_heads,
        s.q_heads
    );
    check_len("q", q.len(), s.q_heads * s.head_dim);
    let d = s.head_dim;
    let mut out = vec![0f32; s.q_heads * d];
    if d == 0 {
        return out;
    }
    let group = s.q_heads / s.kv_heads;
    out.par_chunks_mut(d).enumerate().for_each(|(h, o)| {
        let qh = &q[h * d..(h + 1) * d];
        let kvh = h / group;
        let scores: Vec<f64> = (0..s.kv_len)
            .map(|t| {
                let (k, _) = kv_at(t, kvh);
                let dot: f64 = qh
                    .iter()
                    .zip(k)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum();
                dot * f64::from(s.scale)
            })
            .collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = scores.iter().map(|&x| (x - max).exp()).collect();
        let sum: f64 = weights.iter().sum();
        let mut acc = vec![0f64; d];
        for (t, &w) in weights.iter().enumerate() {
            let (_, v) = kv_at(t, kvh);
            for (a, &x) in acc.iter_mut().zip(v) {
                *a += w * f64::from(x);
            }
        }
        for (ov, a) in o.iter_mut().zip(acc) {
            *ov = (a / sum) as f32;
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_head_hand_checked() {
        // q = [1, 0]; keys [ln3, 0] and [0, 0]; scale 1 → weights 3/4, 1/4.
        let q = [1.0, 0.0];
        let k = [3f32.ln(), 0.0, 0.0, 0.0];
        let v = [4.0, 8.0, 0.0, -4.0];
        let out = attention_decode(&q, &k, &v, 1, 2, 2, 1.0);
        assert!(
            (out[0] - 3.0).abs() < 1e-6 && (out[1] - 5.0).abs() < 1e-6,
            "{out:?}"
        );
        // One token: output is that token's value whatever the scores.
        let out = attention_decode(&[5.0, -5.0], &[1.0, 2.0], &[7.0, 9.0], 1, 1, 2, 0.7);
        assert_eq!(out, [7.0, 9.0]);
    }

    #[test]
    fn gqa_heads_share_kv() {
        // 4 query heads, 2 kv heads, head_dim 1, 2 tokens; scale 0 → mean of values.
        let s = AttentionShape {
            q_heads: 4,
            kv_heads: 2,
            kv_len: 2,
            head_dim: 1,
            scale: 0.0,
        };
        let k = [0.0; 4];
        let v = [1.0, 10.0, 3.0, 30.0]; // [t][kvh]
        let out = attention_decode_gqa(&[1.0; 4], &k, &v, &s);
        assert_eq!(out, [2.0, 2.0, 20.0, 20.0]);
    }

    #[test]
    fn paged_equals_contiguous() {
        let s = AttentionShape {
            q_heads: 4,
            kv_heads: 2,
            kv_len: 7,
            head_dim: 8,
            scale: 0.35,
        };
        let stride = s.kv_heads * s.head_dim;
        let k: Vec<f32> = (0..s.kv_len * stride)
            .map(|i| (i as f32 * 0.731).sin())
            .collect();
        let v: Vec<f32> = (0..s.kv_len * stride)
            .map(|i| (i as f32 * 0.377).cos())
            .collect();
        let q: Vec<f32> = (0..s.q_heads * s.head_dim)
            .map(|i| (i as f32 * 1.3).sin())
            .collect();
        let want = attention_decode_gqa(&q, &k, &v, &s);
        // Scatter into 5 blocks of 3 tokens in shuffled order: table [4, 0, 2].
        let bs = 3;
        let table = [4u32, 0, 2];
        let mut kb = vec![f32::NAN; 5 * bs * stride];
        let mut vb = vec![f32::NAN; 5 * bs * stride];
        for t in 0..s.kv_len {
            let dst = (table[t / bs] as usize * bs + t % bs) * stride;
            kb[dst..dst + stride].copy_from_slice(&k[t * stride..(t + 1) * stride]);
            vb[dst..dst + stride].copy_from_slice(&v[t * stride..(t + 1) * stride]);
        }
        let kv = PagedKv {
            k_blocks: &kb,
            v_blocks: &vb,
            block_table: &table,
            block_size: bs,
        };
        assert_eq!(attention_decode_paged(&q, &kv, &s), want);
    }

    #[test]
    #[should_panic(expected = "block 9 out of range")]
    fn paged_checks_table() {
        let s = AttentionShape {
            q_heads: 1,
            kv_heads: 1,
            kv_len: 1,
            head_dim: 1,
            scale: 1.0,
        };
        let kv = PagedKv {
            k_blocks: &[0.0],
            v_blocks: &[0.0],
            block_table: &[9],
            block_size: 1,
        };
        attention_decode_paged(&[1.0], &kv, &s);
    }
}
