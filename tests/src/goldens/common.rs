//! Small f32 helpers shared by the goldens, written to follow the kernels'
//! order of operations (so most results match bit for bit).

/// `c[M,N] = a[M,K] @ b[K,N]` in f32, each element summed in k order.
pub fn matmul_f32(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        let row = &mut c[i * n..(i + 1) * n];
        for kk in 0..k {
            let av = a[i * k + kk];
            for (j, cv) in row.iter_mut().enumerate() {
                *cv += av * b[kk * n + j];
            }
        }
    }
    c
}

/// Port of `scene_expf` from `scene_kernel.h` (range reduction + degree-6
/// polynomial), so goldens see the same exp the kernels use.
pub fn scene_expf(x: f32) -> f32 {
    if x > 88.72 {
        return f32::INFINITY;
    }
    if x < -103.97 {
        return 0.0;
    }
    // Same f32 as the C literal 0.69314718056f.
    let ln2 = std::f32::consts::LN_2;
    let t = x * (1.0f32 / ln2);
    let k = (t + if t >= 0.0 { 0.5 } else { -0.5 }) as i32;
    let kf = k as f32;
    let r = x - kf * ln2;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    if k < -126 {
        let s = f32::from_bits(((k + 126 + 127) as u32) << 23);
        return p * s * 1.175_494_4e-38;
    }
    let s = f32::from_bits(((k + 127) as u32) << 23);
    p * s
}

/// Numerically stable softmax of one row, as the kernels compute it:
/// max, then `e = exp(x - max)` summed left to right, then `e / sum`.
pub fn softmax_row(x: &[f32]) -> Vec<f32> {
    let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = x.iter().map(|&v| scene_expf(v - m)).collect();
    let mut s = 0.0f32;
    for &v in &e {
        s += v;
    }
    e.iter().map(|&v| v / s).collect()
}

/// `1 / sqrt(sum(x^2) / n + eps)`, summing squares left to right.
pub fn rms_inv(x: &[f32], eps: f32) -> f32 {
    let mut ss = 0.0f32;
    for &v in x {
        ss += v * v;
    }
    1.0f32 / (ss / x.len() as f32 + eps).sqrt()
}
