//! Row-wise normalizations.

use super::check_len;

/// Softmax over each row of a `[rows, cols]` matrix, numerically stable:
/// `exp(x - max(row)) / sum`, exponentials in f64 summed in f64. A row of
/// all `-inf` gives NaN (0/0), as in PyTorch.
///
/// # Panics
/// If `x.len() != rows * cols`.
pub fn softmax_rows(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    check_len("x", x.len(), rows * cols);
    let mut out = vec![0f32; x.len()];
    if cols == 0 {
        return out;
    }
    for (row, o) in x.chunks_exact(cols).zip(out.chunks_exact_mut(cols)) {
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let max = f64::from(max);
        let sum: f64 = row.iter().map(|&v| (f64::from(v) - max).exp()).sum();
        for (ov, &v) in o.iter_mut().zip(row) {
            *ov = ((f64::from(v) - max).exp() / sum) as f32;
        }
    }
    out
}

/// RMSNorm over each row of `[rows, cols]`:
/// `y = x / sqrt(mean(x^2) + eps) * weight`, the mean in f64.
///
/// # Panics
/// If `x.len() != rows * cols` or `weight.len() != cols`.
pub fn rmsnorm(x: &[f32], weight: &[f32], rows: usize, cols: usize, eps: f32) -> Vec<f32> {
    check_len("x", x.len(), rows * cols);
    check_len("weight", weight.len(), cols);
    let mut out = vec![0f32; x.len()];
    if cols == 0 {
        return out;
    }
    for (row, o) in x.chunks_exact(cols).zip(out.chunks_exact_mut(cols)) {
        let ms = row
            .iter()
            .map(|&v| f64::from(v) * f64::from(v))
            .sum::<f64>()
            / cols as f64;
        let inv = 1.0 / (ms + f64::from(eps)).sqrt();
        for ((ov, &v), &w) in o.iter_mut().zip(row).zip(weight) {
            *ov = (f64::from(v) * inv * f64::from(w)) as f32;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_hand_checked() {
        // [ln1, ln2, ln3, ln4] → [0.1, 0.2, 0.3, 0.4].
        let x: Vec<f32> = [1.0f32, 2.0, 3.0, 4.0].iter().map(|v| v.ln()).collect();
        let y = softmax_rows(&x, 1, 4);
        for (got, want) in y.iter().zip([0.1, 0.2, 0.3, 0.4]) {
            assert!((got - want).abs() < 1e-7, "{got} vs {want}");
        }
        // Stable for huge inputs; rows independent.
        let y = softmax_rows(&[1000.0, 1000.0, -5.0, f32::NEG_INFINITY], 2, 2);
        assert_eq!(y, [0.5, 0.5, 1.0, 0.0]);
        assert!(softmax_rows(&[f32::NEG_INFINITY; 2], 1, 2)[0].is_nan());
    }

    #[test]
    fn rmsnorm_hand_checked() {
        // Row [3, 4]: mean square 12.5, rms 3.5355; weight [1, 2].
        let y = rmsnorm(&[3.0, 4.0, 0.0, 0.0], &[1.0, 2.0], 2, 2, 0.0);
        let r = 12.5f64.sqrt();
        assert!((f64::from(y[0]) - 3.0 / r).abs() < 1e-6);
        assert!((f64::from(y[1]) - 8.0 / r).abs() < 1e-6);
        assert!(y[2].is_nan(), "0/0 with eps = 0");
        let y = rmsnorm(&[0.0, 0.0], &[1.0, 1.0], 1, 2, 1e-6);
        assert_eq!(y, [0.0, 0.0]);
        // eps enters under the root: x = [1], eps = 3 → 1/2.
        assert_eq!(rmsnorm(&[1.0], &[1.0], 1, 1, 3.0), [0.5]);
    }

    #[test]
    #[should_panic(expected = "`weight` has 3 elements, expected 2")]
    fn rmsnorm_weight_checked() {
        rmsnorm(&[1.0, 2.0], &[1.0; 3], 1, 2, 1e-5);
    }
}
