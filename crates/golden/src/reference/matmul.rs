//! Matrix multiplication.

use rayon::prelude::*;

use super::check_len;
use crate::{DType, Tensor, TensorError};

/// Errors of the checked, tensor-level reference entry points.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RefError {
    #[error("{op}: operand `{operand}` has shape {shape:?}, expected {expected}")]
    Shape {
        op: &'static str,
        operand: &'static str,
        shape: Vec<usize>,
        expected: String,
    },
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

/// Columns of `b`/`c` per tile (keeps a row tile of `c` in L1).
const NB: usize = 256;
/// Depth per tile (keeps a `KB x NB` tile of `b` in L2).
const KB: usize = 256;

/// `c[m, n] = a[m, k] @ b[k, n]`, all row-major `f32`, accumulated in `f32`.
///
/// Tiled over `n` and `k`, parallel over rows of `c`. Each `c[i, j]` sums
/// `a[i, p] * b[p, j]` in increasing `p`, so the result is identical for any
/// thread count (and equal to the naive triple loop).
///
/// # Panics
/// If `a.len() != m * k` or `b.len() != k * n`.
pub fn matmul(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    check_len("a", a.len(), m * k);
    check_len("b", b.len(), k * n);
    let mut c = vec![0f32; m * n];
    if n == 0 {
        return c;
    }
    // Rows per task: enough work to amortize scheduling.
    let rows = (4096 / n.max(1)).clamp(1, 64);
    c.par_chunks_mut(rows * n)
        .enumerate()
        .for_each(|(blk, c_rows)| {
            let i0 = blk * rows;
            for j0 in (0..n).step_by(NB) {
                let j1 = (j0 + NB).min(n);
                for p0 in (0..k).step_by(KB) {
                    let p1 = (p0 + KB).min(k);
                    for (r, c_row) in c_rows.chunks_exact_mut(n).enumerate() {
                        let a_row = &a[(i0 + r) * k..(i0 + r + 1) * k];
                        let c_tile = &mut c_row[j0..j1];
                        for p in p0..p1 {
                            let s = a_row[p];
                            let b_tile = &b[p * n + j0..p * n + j1];
                            for (cv, &bv) in c_tile.iter_mut().zip(b_tile) {
                                *cv += s * bv;
                            }
                        }
                    }
                }
            }
        });
    c
}

/// Matmul of two 2-D float tensors `[m, k] @ [k, n]` (any float dtype,
/// e.g. f16/bf16 converted to `f32` first), returning an `f32` tensor
/// `[m, n]`; cast the result to round it into the device's output dtype.
pub fn matmul_tensors(a: &Tensor, b: &Tensor) -> Result<Tensor, RefError> {
    let bad = |operand, t: &Tensor, expected: String| RefError::Shape {
        op: "matmul",
        operand,
        shape: t.shape().to_vec(),
        expected,
    };
    let (m, k) = match *a.shape() {
        [m, k] if a.dtype().is_float() => (m, k),
        _ => return Err(bad("a", a, "a 2-D float tensor".into())),
    };
    let n = match *b.shape() {
        [kb, n] if kb == k && b.dtype().is_float() => n,
        _ => return Err(bad("b", b, format!("[{k}, n] of a float dtype"))),
    };
    let c = matmul(&a.to_f32_vec(), &b.to_f32_vec(), m, k, n);
    Ok(Tensor::from_f32(DType::F32, &[m, n], &c)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0f32;
                for p in 0..k {
                    s += a[i * k + p] * b[p * n + j];
                }
                c[i * n + j] = s;
            }
        }
        c
    }

    #[test]
    fn hand_checked_2x3_3x2() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
        assert_eq!(matmul(&a, &b, 2, 3, 2), [58.0, 64.0, 139.0, 154.0]);
        assert_eq!(matmul(&[], &[], 0, 0, 0), Vec::<f32>::new());
        assert_eq!(matmul(&[], &[], 2, 0, 3), [0.0; 6]);
    }

    #[test]
    fn tiled_parallel_equals_naive_bitwise() {
        // Odd sizes crossing tile edges; data with rounding so order matters.
        let (m, k, n) = (67, 300, 270);
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 7919) % 1000) as f32 / 997.0 - 0.5)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 104_729) % 1000) as f32 / 991.0 - 0.5)
            .collect();
        let want = naive(&a, &b, m, k, n);
        let one = super::super::with_thread_cap(1, || matmul(&a, &b, m, k, n));
        let two = super::super::with_thread_cap(2, || matmul(&a, &b, m, k, n));
        assert_eq!(one, want);
        assert_eq!(two, want);
    }

    #[test]
    fn tensor_entry_point() {
        let a = Tensor::from_f32(DType::BF16, &[1, 2], &[1.5, 2.0]).unwrap();
        let b = Tensor::from_f32(DType::F16, &[2, 1], &[2.0, 0.25]).unwrap();
        let c = matmul_tensors(&a, &b).unwrap();
        assert_eq!((c.dtype(), c.shape()), (DType::F32, &[1, 1][..]));
        assert_eq!(c.to_f32_vec(), [3.5]);
        let err = matmul_tensors(&a, &a).unwrap_err();
        assert!(
            err.to_string()
                .contains("operand `b` has shape [1, 2], expected [2, n]"),
            "{err}"
        );
        let i = Tensor::zeros(DType::I32, &[1, 2]);
        assert!(matmul_tensors(&i, &b).is_err());
    }
}
