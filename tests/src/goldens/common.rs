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

/// Port of `scene_expf` from `scene_math.h` (Cody-Waite range reduction +
/// degree-7 polynomial, the same f32 operations in the same order), so
/// goldens see the same exp the kernels use.
pub fn scene_expf(x: f32) -> f32 {
    if x.is_nan() {
        return x + x;
    }
    if x > 88.722_84 {
        return f32::INFINITY;
    }
    if x < -103.972_084 {
        return 0.0;
    }
    let t = x * std::f32::consts::LOG2_E;
    let k = (t + if t >= 0.0 { 0.5 } else { -0.5 }) as i32;
    let kf = k as f32;
    let r = (x - kf * 0.693_145_75) - kf * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    let pow2 = |e: i32| f32::from_bits(((e + 127) as u32) << 23);
    if k > 127 {
        return p * 2.0 * pow2(k - 1);
    }
    if k < -126 {
        // p * 2^(k+126) is exact and normal; one rounding into the subnormals.
        return p * pow2(k + 126) * pow2(-126);
    }
    p * pow2(k)
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

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// The port is bit-for-bit the header's `scene_expf` (compiled as the
    /// kernels are, `-O2 -fno-math-errno`) over every 4096th f32 bit
    /// pattern and a dense sweep of the softmax range.
    #[test]
    fn scene_expf_port_matches_the_header_bit_for_bit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = dir.path().join("expf.c");
        std::fs::write(
            &src,
            r#"#include <stdio.h>
#include <string.h>
#include "scene_math.h"
int main(void) {
    for (unsigned long long u = 0; u < (1ull << 32); u += 4096) {
        unsigned b = (unsigned)u; float x; memcpy(&x, &b, 4);
        float y = scene_expf(x); unsigned r; memcpy(&r, &y, 4);
        printf("%u %u\n", b, r);
    }
    for (int i = 0; i <= 200000; i++) {
        float x = -100.0f + (float)i * 0.0005f; unsigned b, r; float y = scene_expf(x);
        memcpy(&b, &x, 4); memcpy(&r, &y, 4);
        printf("%u %u\n", b, r);
    }
    return 0;
}
"#,
        )
        .expect("write");
        let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")));
        let include = manifest.join("../crates/device/include");
        let exe = dir.path().join("expf");
        let out = Command::new("cc")
            .args(["-O2", "-fno-math-errno", "-I"])
            .arg(&include)
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .output()
            .expect("cc");
        assert!(out.status.success(), "{out:?}");
        let run = Command::new(&exe).output().expect("run");
        assert!(run.status.success());
        let text = String::from_utf8_lossy(&run.stdout);
        let mut checked = 0;
        for line in text.lines() {
            let mut it = line.split(' ').map(|v| v.parse::<u32>().expect("u32"));
            let (x, want) = (f32::from_bits(it.next().expect("x")), it.next().expect("y"));
            let got = super::scene_expf(x).to_bits();
            let both_nan =
                x.is_nan() && f32::from_bits(want).is_nan() && f32::from_bits(got).is_nan();
            assert!(
                got == want || both_nan,
                "scene_expf({x:e}): port {:e}, header {:e}",
                f32::from_bits(got),
                f32::from_bits(want)
            );
            checked += 1;
        }
        assert!(checked > 1_200_000, "{checked}");
    }
}
