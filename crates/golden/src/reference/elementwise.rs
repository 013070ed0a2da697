//! Elementwise ops on `f32` slices.

use super::check_len;

fn zip(a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) -> Vec<f32> {
    check_len("b", b.len(), a.len());
    a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
}

/// `a + b`.
pub fn add(a: &[f32], b: &[f32]) -> Vec<f32> {
    zip(a, b, |x, y| x + y)
}

/// `a - b`.
pub fn sub(a: &[f32], b: &[f32]) -> Vec<f32> {
    zip(a, b, |x, y| x - y)
}

/// `a * b`.
pub fn mul(a: &[f32], b: &[f32]) -> Vec<f32> {
    zip(a, b, |x, y| x * y)
}

/// `a / b`.
pub fn div(a: &[f32], b: &[f32]) -> Vec<f32> {
    zip(a, b, |x, y| x / y)
}

/// `a + s`.
pub fn add_scalar(a: &[f32], s: f32) -> Vec<f32> {
    a.iter().map(|&x| x + s).collect()
}

/// `a * s`.
pub fn mul_scalar(a: &[f32], s: f32) -> Vec<f32> {
    a.iter().map(|&x| x * s).collect()
}

/// `max(x, 0)`.
pub fn relu(a: &[f32]) -> Vec<f32> {
    a.iter().map(|&x| x.max(0.0)).collect()
}

fn sigmoid1(x: f32) -> f32 {
    // Computed in f64 so the reference is not itself a source of error.
    (1.0 / (1.0 + (-f64::from(x)).exp())) as f32
}

/// `1 / (1 + exp(-x))`.
pub fn sigmoid(a: &[f32]) -> Vec<f32> {
    a.iter().map(|&x| sigmoid1(x)).collect()
}

/// SiLU / swish: `x * sigmoid(x)` (evaluated in f64, rounded once).
pub fn silu(a: &[f32]) -> Vec<f32> {
    a.iter()
        .map(|&x| {
            let x = f64::from(x);
            (x / (1.0 + (-x).exp())) as f32
        })
        .collect()
}

/// SwiGLU gate: `silu(gate) * up`.
pub fn silu_mul(gate: &[f32], up: &[f32]) -> Vec<f32> {
    check_len("up", up.len(), gate.len());
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| {
            let g = f64::from(g);
            (g / (1.0 + (-g).exp()) * f64::from(u)) as f32
        })
        .collect()
}

/// GELU, tanh approximation:
/// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
pub fn gelu_tanh(a: &[f32]) -> Vec<f32> {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    a.iter()
        .map(|&x| {
            let x = f64::from(x);
            (0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())) as f32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic() {
        assert_eq!(add(&[1.0, 2.0], &[0.5, -2.0]), [1.5, 0.0]);
        assert_eq!(sub(&[1.0, 2.0], &[0.5, -2.0]), [0.5, 4.0]);
        assert_eq!(mul(&[1.5, 2.0], &[2.0, -3.0]), [3.0, -6.0]);
        assert_eq!(div(&[1.0, 3.0], &[4.0, -2.0]), [0.25, -1.5]);
        assert_eq!(add_scalar(&[1.0, -1.0], 0.5), [1.5, -0.5]);
        assert_eq!(mul_scalar(&[1.0, -1.0], 3.0), [3.0, -3.0]);
        assert_eq!(relu(&[-1.0, 0.0, 2.0]), [0.0, 0.0, 2.0]);
    }

    #[test]
    #[should_panic(expected = "`b` has 1 elements, expected 2")]
    fn length_mismatch_panics() {
        add(&[1.0, 2.0], &[1.0]);
    }

    #[test]
    fn activations() {
        // sigmoid(0) = 0.5, silu(0) = 0, silu(1) = 1/(1+e^-1) = 0.7310586.
        assert_eq!(sigmoid(&[0.0]), [0.5]);
        let s = silu(&[0.0, 1.0, -1.0, 20.0, -100.0]);
        assert_eq!(s[0], 0.0);
        assert!((s[1] - 0.731_058_6).abs() < 1e-7);
        assert!((s[2] + 0.268_941_4).abs() < 1e-7);
        assert!((s[3] - 20.0).abs() < 1e-6);
        assert!(s[4].abs() < 1e-40);
        assert_eq!(
            silu_mul(&[1.0, 0.0], &[2.0, 5.0]),
            [silu(&[1.0])[0] * 2.0, 0.0]
        );
        // gelu_tanh(1) = 0.841192 (PyTorch approximate='tanh').
        let g = gelu_tanh(&[1.0, 0.0, -3.0]);
        assert!((g[0] - 0.841_192).abs() < 1e-6, "{}", g[0]);
        assert_eq!(g[1], 0.0);
        assert!((g[2] + 0.003_637_392).abs() < 1e-6, "{}", g[2]);
    }
}
