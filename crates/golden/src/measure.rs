//! Whole-tensor measures for comparisons that are not element-wise
//! tolerances: cosine similarity, absolute-error statistics, and the first
//! non-finite element.
//!
//! Every measure reads elements as `f64` (narrower floats widened exactly)
//! and sums in row-major order, so a result is the same on every machine.

use crate::Tensor;
use crate::closeness::{Mismatch, check_layout, unravel};
use crate::tensor::read_f64;

/// The elements of `t` as `f64`, row-major.
fn values(t: &Tensor) -> impl Iterator<Item = f64> + '_ {
    let size = t.dtype().size_of();
    t.bytes()
        .chunks_exact(size)
        .map(move |b| read_f64(t.dtype(), b))
}

/// Cosine similarity `a.e / (|a| |e|)` of two tensors of one shape and
/// dtype, in `f64`. Two all-zero tensors are identical (1); one all-zero
/// tensor against a non-zero one is 0. A NaN or infinity in either tensor
/// makes the result NaN, which no `>=` bound accepts.
pub fn cosine_similarity(name: &str, actual: &Tensor, expected: &Tensor) -> Result<f64, Mismatch> {
    check_layout(name, actual, expected)?;
    let (mut dot, mut aa, mut ee) = (0.0f64, 0.0f64, 0.0f64);
    let mut finite = true;
    for (a, e) in values(actual).zip(values(expected)) {
        finite &= a.is_finite() && e.is_finite();
        dot += a * e;
        aa += a * a;
        ee += e * e;
    }
    if !finite {
        return Ok(f64::NAN);
    }
    Ok(match (aa == 0.0, ee == 0.0) {
        (true, true) => 1.0,
        (true, false) | (false, true) => 0.0,
        // Rounding can push |cos| a hair above 1; clamp to the true range.
        _ => (dot / (aa.sqrt() * ee.sqrt())).clamp(-1.0, 1.0),
    })
}

/// Absolute-error statistics of `actual` against `expected`.
#[derive(Clone, Debug, PartialEq)]
pub struct AbsError {
    /// The greatest `|a - e|` (NaN when any difference is NaN).
    pub max: f64,
    /// Where the greatest difference is (the first such element), if any
    /// element exists.
    pub max_at: Option<Vec<usize>>,
    /// The mean `|a - e|` (NaN when any difference is NaN; 0 for an empty
    /// tensor).
    pub mean: f64,
}

/// `max |a - e|` and `mean |a - e|` over all elements, in `f64`.
pub fn abs_error(name: &str, actual: &Tensor, expected: &Tensor) -> Result<AbsError, Mismatch> {
    check_layout(name, actual, expected)?;
    let (mut max, mut at, mut sum, mut n) = (0.0f64, None, 0.0f64, 0usize);
    for (i, (a, e)) in values(actual).zip(values(expected)).enumerate() {
        let d = if a == e { 0.0 } else { (a - e).abs() };
        n += 1;
        sum += d;
        if d.is_nan() {
            if !max.is_nan() {
                max = f64::NAN;
                at = Some(i);
            }
        } else if !max.is_nan() && (at.is_none() || d > max) {
            max = d;
            at = Some(i);
        }
    }
    Ok(AbsError {
        max,
        max_at: at.map(|i| unravel(i, actual.shape())),
        mean: if n == 0 { 0.0 } else { sum / n as f64 },
    })
}

/// The first non-finite element of a tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct NonFinite {
    /// Multi-dimensional index of the first one.
    pub index: Vec<usize>,
    /// Its value (NaN, inf or -inf).
    pub value: f64,
    /// How many elements are non-finite.
    pub count: usize,
}

/// The first NaN or infinity of `t` (row-major) and how many there are;
/// `None` when every element is finite (integer and bool tensors always).
pub fn first_nonfinite(t: &Tensor) -> Option<NonFinite> {
    if !t.dtype().is_float() {
        return None;
    }
    let mut first = None;
    let mut count = 0usize;
    for (i, v) in values(t).enumerate() {
        if !v.is_finite() {
            count += 1;
            if first.is_none() {
                first = Some((i, v));
            }
        }
    }
    first.map(|(i, value)| NonFinite {
        index: unravel(i, t.shape()),
        value,
        count,
    })
}

/// The first `rows` rows (along the leading dimension) of `t`, as a tensor
/// of shape `[rows, rest...]`; `None` when `t` has fewer rows or no
/// dimension.
pub fn leading_rows(t: &Tensor, rows: usize) -> Option<Tensor> {
    let (&lead, rest) = t.shape().split_first()?;
    if rows > lead {
        return None;
    }
    let row_elems: usize = rest.iter().product();
    let bytes = rows * row_elems * t.dtype().size_of();
    let mut shape = vec![rows];
    shape.extend_from_slice(rest);
    Tensor::from_bytes(t.dtype(), &shape, t.bytes()[..bytes].to_vec()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    fn f32t(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f32(DType::F32, shape, v).unwrap()
    }

    #[test]
    fn cosine_of_scaled_copy_is_one_and_of_opposite_is_minus_one() {
        let e = f32t(&[4], &[1.0, -2.0, 3.0, 0.5]);
        let scaled = f32t(&[4], &[2.0, -4.0, 6.0, 1.0]);
        let c = cosine_similarity("t", &scaled, &e).unwrap();
        assert!((c - 1.0).abs() < 1e-12, "{c}");
        let neg = f32t(&[4], &[-1.0, 2.0, -3.0, -0.5]);
        assert!((cosine_similarity("t", &neg, &e).unwrap() + 1.0).abs() < 1e-12);
        // Orthogonal.
        let a = f32t(&[2], &[1.0, 0.0]);
        let b = f32t(&[2], &[0.0, 1.0]);
        assert_eq!(cosine_similarity("t", &a, &b).unwrap(), 0.0);
    }

    #[test]
    fn cosine_zero_and_nonfinite_cases() {
        let z = f32t(&[3], &[0.0; 3]);
        let one = f32t(&[3], &[1.0, 0.0, 0.0]);
        assert_eq!(cosine_similarity("t", &z, &z).unwrap(), 1.0);
        assert_eq!(cosine_similarity("t", &z, &one).unwrap(), 0.0);
        assert_eq!(cosine_similarity("t", &one, &z).unwrap(), 0.0);
        let nan = f32t(&[3], &[1.0, f32::NAN, 0.0]);
        assert!(cosine_similarity("t", &nan, &one).unwrap().is_nan());
        let inf = f32t(&[3], &[f32::INFINITY, 0.0, 0.0]);
        assert!(cosine_similarity("t", &inf, &one).unwrap().is_nan());
    }

    #[test]
    fn measures_refuse_mismatched_layouts() {
        let a = f32t(&[4], &[0.0; 4]);
        let b = f32t(&[2, 2], &[0.0; 4]);
        let e = cosine_similarity("q", &a, &b).unwrap_err().to_string();
        assert!(e.contains("tensor `q`: shape mismatch"), "{e}");
        let c = Tensor::from_f32(DType::F16, &[4], &[0.0; 4]).unwrap();
        let e = abs_error("q", &a, &c).unwrap_err().to_string();
        assert!(e.contains("dtype mismatch"), "{e}");
    }

    #[test]
    fn abs_error_max_mean_and_position() {
        let e = f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
        let a = f32t(&[2, 2], &[1.0, 2.5, 2.0, 4.0]);
        let s = abs_error("t", &a, &e).unwrap();
        assert_eq!(s.max, 1.0);
        assert_eq!(s.max_at, Some(vec![1, 0]));
        assert_eq!(s.mean, 0.375);
        let same = abs_error("t", &e, &e).unwrap();
        assert_eq!((same.max, same.mean), (0.0, 0.0));
        assert_eq!(same.max_at, Some(vec![0, 0]));
        let n = f32t(&[2, 2], &[1.0, f32::NAN, 3.0, 4.0]);
        let s = abs_error("t", &n, &e).unwrap();
        assert!(s.max.is_nan() && s.mean.is_nan());
        assert_eq!(s.max_at, Some(vec![0, 1]));
        // Equal infinities are no error.
        let i = f32t(&[1], &[f32::INFINITY]);
        assert_eq!(abs_error("t", &i, &i).unwrap().max, 0.0);
    }

    #[test]
    fn first_nonfinite_finds_the_first_and_counts() {
        let t = f32t(
            &[2, 3],
            &[0.0, 1.0, f32::INFINITY, 2.0, f32::NAN, f32::NEG_INFINITY],
        );
        let nf = first_nonfinite(&t).unwrap();
        assert_eq!(nf.index, vec![0, 2]);
        assert_eq!(nf.value, f64::INFINITY);
        assert_eq!(nf.count, 3);
        assert_eq!(first_nonfinite(&f32t(&[2], &[1.0, -0.0])), None);
        let h = Tensor::from_f32(DType::BF16, &[2], &[1.0, f32::NAN]).unwrap();
        assert_eq!(first_nonfinite(&h).unwrap().index, vec![1]);
        let i = Tensor::zeros(DType::I32, &[3]);
        assert_eq!(first_nonfinite(&i), None);
    }

    #[test]
    fn leading_rows_slices_the_first_rows() {
        let t = f32t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let r = leading_rows(&t, 2).unwrap();
        assert_eq!(r.shape(), [2, 2]);
        assert_eq!(r.to_f32_vec(), [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(leading_rows(&t, 0).unwrap().shape(), [0, 2]);
        assert!(leading_rows(&t, 4).is_none());
    }
}
