//! Rotary position embedding, rotate-half (GPT-NeoX / Llama / HF) convention.
//!
//! For a head vector `x` of even length `d`, with `x1 = x[..d/2]`,
//! `x2 = x[d/2..]` and per-pair angle `θ_i`:
//! `out[i] = x1[i] cos θ_i - x2[i] sin θ_i`,
//! `out[i + d/2] = x2[i] cos θ_i + x1[i] sin θ_i`.
//! (Not the interleaved GPT-J convention that rotates `(x[2i], x[2i+1])`.)

use super::check_len;

/// Cos/sin tables `[positions.len(), head_dim / 2]` for
/// `θ_i = pos * theta^(-2i / head_dim)` (theta is usually 10000), computed in
/// f64 and rounded to f32.
///
/// # Panics
/// If `head_dim` is odd.
pub fn rope_cos_sin(positions: &[usize], head_dim: usize, theta: f64) -> (Vec<f32>, Vec<f32>) {
    assert!(
        head_dim.is_multiple_of(2),
        "rope: head_dim {head_dim} must be even"
    );
    let half = head_dim / 2;
    let mut cos = Vec::with_capacity(positions.len() * half);
    let mut sin = Vec::with_capacity(positions.len() * half);
    for &p in positions {
        for i in 0..half {
            let inv_freq = theta.powf(-((2 * i) as f64) / head_dim as f64);
            let angle = p as f64 * inv_freq;
            cos.push(angle.cos() as f32);
            sin.push(angle.sin() as f32);
        }
    }
    (cos, sin)
}

/// Applies rotary embedding to `x` of shape `[tokens, heads, head_dim]` with
/// tables `cos`/`sin` of shape `[tokens, head_dim / 2]` (one row per token,
/// shared by all heads), in f64 rounded once to f32.
///
/// # Panics
/// If `head_dim` is odd or a length does not match.
pub fn rope(
    x: &[f32],
    cos: &[f32],
    sin: &[f32],
    tokens: usize,
    heads: usize,
    head_dim: usize,
) -> Vec<f32> {
    assert!(
        head_dim.is_multiple_of(2),
        "rope: head_dim {head_dim} must be even"
    );
    let half = head_dim / 2;
    check_len("x", x.len(), tokens * heads * head_dim);
    check_len("cos", cos.len(), tokens * half);
    check_len("sin", sin.len(), tokens * half);
    let mut out = vec![0f32; x.len()];
    if head_dim == 0 {
        return out;
    }
    for (t, (xt, ot)) in x
        .chunks_exact(heads * head_dim)
        .zip(out.chunks_exact_mut(heads * head_dim))
        .enumerate()
    {
        let (c, s) = (
            &cos[t * half..(t + 1) * half],
            &sin[t * half..(t + 1) * half],
        );
        for (xh, oh) in xt.chunks_exact(head_dim).zip(ot.chunks_exact_mut(head_dim)) {
            for i in 0..half {
                let (x1, x2) = (f64::from(xh[i]), f64::from(xh[i + half]));
                let (ci, si) = (f64::from(c[i]), f64::from(s[i]));
                oh[i] = (x1 * ci - x2 * si) as f32;
                oh[i + half] = (x2 * ci + x1 * si) as f32;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_hand_checked() {
        let (c, s) = rope_cos_sin(&[0, 1, 2], 4, 10000.0);
        // inv_freq = [1, 10000^-0.5 = 0.01]
        assert_eq!(&c[..2], [1.0, 1.0]);
        assert_eq!(&s[..2], [0.0, 0.0]);
        assert!((c[2] - 1f32.cos()).abs() < 1e-7 && (s[2] - 1f32.sin()).abs() < 1e-7);
        assert!((s[3] - 0.01f32.sin()).abs() < 1e-7);
        assert!((s[4] - 2f32.sin()).abs() < 1e-7 && (s[5] - 0.02f32.sin()).abs() < 1e-7);
    }

    #[test]
    fn rotate_half_by_quarter_turn() {
        // One token, two heads, head_dim 4; pair 0 rotated by 90°, pair 1 by 0°.
        let x = [1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 2.0, 8.0];
        let (cos, sin) = ([0.0, 1.0], [1.0, 0.0]);
        let y = rope(&x, &cos, &sin, 1, 2, 4);
        // pair (x[0], x[2]) = (1, 3) → (1*0 - 3*1, 3*0 + 1*1) = (-3, 1); pair (2, 4) unchanged.
        assert_eq!(&y[..4], [-3.0, 2.0, 1.0, 4.0]);
        assert_eq!(&y[4..], [-2.0, 0.5, -1.0, 8.0]);
    }

    #[test]
    fn rope_preserves_norm_and_position_zero_is_identity() {
        let x: Vec<f32> = (0..2 * 3 * 8).map(|i| (i as f32 * 0.37).sin()).collect();
        let (c, s) = rope_cos_sin(&[0, 5], 8, 10000.0);
        let y = rope(&x, &c, &s, 2, 3, 8);
        assert_eq!(&y[..24], &x[..24]);
        let n = |v: &[f32]| v.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>();
        for h in 0..3 {
            let r = 24 + h * 8..24 + (h + 1) * 8;
            assert!((n(&y[r.clone()]) - n(&x[r])).abs() < 1e-5);
        }
        assert_ne!(&y[24..], &x[24..]);
    }
}
