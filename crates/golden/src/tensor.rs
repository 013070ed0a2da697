//! Dense, contiguous, row-major tensors stored as little-endian bytes.
//!
//! Conversions into a dtype ([`Tensor::from_f64`], [`Tensor::from_f32`],
//! [`Tensor::cast`]) follow the hardware rules the goldens assume:
//!
//! * to `f16` / `bf16` / `f32`: IEEE round-to-nearest-even, one rounding
//!   (never via an intermediate format); overflow gives ±inf, NaN stays NaN;
//! * to an integer: round half to even, then saturate to the type's range;
//!   NaN becomes 0 (this is what Rust's saturating `as` does after rounding);
//! * to `bool`: `x != 0` (so NaN is `true`, as in NumPy's `astype(bool)`);
//! * integer to integer (including `bool` as 0/1): exact, saturating.

use half::{bf16, f16};

use crate::DType;

/// Errors building a tensor.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TensorError {
    #[error("{dtype} tensor of shape {shape:?} needs {expected} bytes, got {actual}")]
    ByteLength {
        dtype: DType,
        shape: Vec<usize>,
        expected: usize,
        actual: usize,
    },
    #[error("shape {shape:?} needs {expected} values, got {actual}")]
    ValueCount {
        shape: Vec<usize>,
        expected: usize,
        actual: usize,
    },
    #[error("shape {shape:?} of {dtype} is too large to address")]
    Overflow { dtype: DType, shape: Vec<usize> },
    #[error("cannot reshape {from:?} ({from_numel} elements) to {to:?} ({to_numel} elements)")]
    Reshape {
        from: Vec<usize>,
        from_numel: usize,
        to: Vec<usize>,
        to_numel: usize,
    },
}

/// A dense tensor: dtype, shape and contiguous little-endian row-major bytes.
///
/// A shape of `[]` is a scalar (one element).
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<usize>,
    data: Vec<u8>,
}

/// Number of elements of `shape`, `None` on overflow.
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

fn byte_len(dtype: DType, shape: &[usize]) -> Result<usize, TensorError> {
    checked_numel(shape)
        .and_then(|n| n.checked_mul(dtype.size_of()))
        .ok_or_else(|| TensorError::Overflow {
            dtype,
            shape: shape.to_vec(),
        })
}

impl Tensor {
    /// A tensor of zeros (all-zero bytes: `0`, `+0.0`, `false`).
    ///
    /// # Panics
    /// If the byte size of `shape` overflows `usize` (no allocation could
    /// hold it anyway).
    pub fn zeros(dtype: DType, shape: &[usize]) -> Tensor {
        let len = match byte_len(dtype, shape) {
            Ok(len) => len,
            Err(e) => panic!("Tensor::zeros: {e}"),
        };
        Tensor {
            dtype,
            shape: shape.to_vec(),
            data: vec![0; len],
        }
    }

    /// Wraps raw little-endian bytes; the length must match exactly.
    pub fn from_bytes(dtype: DType, shape: &[usize], data: Vec<u8>) -> Result<Tensor, TensorError> {
        let expected = byte_len(dtype, shape)?;
        if data.len() != expected {
            return Err(TensorError::ByteLength {
                dtype,
                shape: shape.to_vec(),
                expected,
                actual: data.len(),
            });
        }
        Ok(Tensor {
            dtype,
            shape: shape.to_vec(),
            data,
        })
    }

    /// Converts `values` into `dtype` (see the module docs for rounding).
    ///
    /// `f32 -> f64` widening is exact, so this is the same as
    /// [`Tensor::from_f64`] on the widened values: one rounding.
    pub fn from_f32(dtype: DType, shape: &[usize], values: &[f32]) -> Result<Tensor, TensorError> {
        Self::from_iter_f64(
            dtype,
            shape,
            values.len(),
            values.iter().map(|&v| f64::from(v)),
        )
    }

    /// Converts `values` into `dtype` (see the module docs for rounding).
    pub fn from_f64(dtype: DType, shape: &[usize], values: &[f64]) -> Result<Tensor, TensorError> {
        Self::from_iter_f64(dtype, shape, values.len(), values.iter().copied())
    }

    /// Converts integers into `dtype`: exact where representable, saturating
    /// for integer dtypes, round-to-nearest-even for float dtypes.
    pub fn from_i64(dtype: DType, shape: &[usize], values: &[i64]) -> Result<Tensor, TensorError> {
        check_count(shape, values.len())?;
        let size = dtype.size_of();
        let mut data = vec![0u8; values.len() * size];
        for (out, &v) in data.chunks_exact_mut(size).zip(values) {
            write_i64(dtype, v, out);
        }
        Self::from_bytes(dtype, shape, data)
    }

    pub(crate) fn from_iter_f64(
        dtype: DType,
        shape: &[usize],
        count: usize,
        values: impl Iterator<Item = f64>,
    ) -> Result<Tensor, TensorError> {
        check_count(shape, count)?;
        let size = dtype.size_of();
        let mut data = vec![0u8; byte_len(dtype, shape)?];
        for (out, v) in data.chunks_exact_mut(size).zip(values) {
            write_f64(dtype, v, out);
        }
        Self::from_bytes(dtype, shape, data)
    }

    /// All elements as `f32` (`f64` and large integers round to nearest even).
    pub fn to_f32_vec(&self) -> Vec<f32> {
        let b = &self.data;
        match self.dtype {
            DType::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            DType::F16 => b
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            DType::BF16 => b
                .chunks_exact(2)
                .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            DType::F64 => self.to_f64_vec().into_iter().map(|v| v as f32).collect(),
            DType::I8 | DType::U8 | DType::I16 | DType::I32 | DType::I64 | DType::Bool => {
                let size = self.dtype.size_of();
                b.chunks_exact(size)
                    .map(|c| read_i64(self.dtype, c) as f32)
                    .collect()
            }
        }
    }

    /// All elements as `f64` (exact except `i64` beyond 2^53).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        let size = self.dtype.size_of();
        self.data
            .chunks_exact(size)
            .map(|c| read_f64(self.dtype, c))
            .collect()
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements (1 for a scalar of shape `[]`).
    pub fn numel(&self) -> usize {
        self.data.len() / self.dtype.size_of()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// Consumes the tensor, returning its bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }

    /// Same bytes, new shape with the same number of elements.
    pub fn reshape(mut self, shape: &[usize]) -> Result<Tensor, TensorError> {
        let to_numel = checked_numel(shape).unwrap_or(usize::MAX);
        if to_numel != self.numel() || checked_numel(shape).is_none() {
            return Err(TensorError::Reshape {
                from: self.shape,
                from_numel: self.data.len() / self.dtype.size_of(),
                to: shape.to_vec(),
                to_numel,
            });
        }
        self.shape = shape.to_vec();
        Ok(self)
    }

    /// Converts to another dtype (see the module docs for rounding).
    /// Integer/bool sources going to integer/bool destinations convert
    /// exactly through `i64`; everything else goes through `f64`.
    pub fn cast(&self, to: DType) -> Tensor {
        if to == self.dtype {
            return self.clone();
        }
        let from = self.dtype;
        let (fs, ts) = (from.size_of(), to.size_of());
        let mut data = vec![0u8; self.numel() * ts];
        let via_int = !from.is_float() && !to.is_float();
        for (out, c) in data.chunks_exact_mut(ts).zip(self.data.chunks_exact(fs)) {
            if via_int {
                write_i64(to, read_i64(from, c), out);
            } else {
                write_f64(to, read_f64(from, c), out);
            }
        }
        Tensor {
            dtype: to,
            shape: self.shape.clone(),
            data,
        }
    }

    /// Hex blake3 of dtype, shape and bytes: a short identity for logs and
    /// cross-process comparisons.
    pub fn digest(&self) -> String {
        let mut h = blake3::Hasher::new();
        h.update(self.dtype.name().as_bytes());
        h.update(&[0]);
        for &d in &self.shape {
            h.update(&(d as u64).to_le_bytes());
        }
        h.update(&self.data);
        h.finalize().to_hex().to_string()
    }
}

fn check_count(shape: &[usize], actual: usize) -> Result<(), TensorError> {
    let expected = checked_numel(shape).unwrap_or(usize::MAX);
    if expected != actual {
        return Err(TensorError::ValueCount {
            shape: shape.to_vec(),
            expected,
            actual,
        });
    }
    Ok(())
}

/// Reads one element (`b.len() == dtype.size_of()`) as `f64`.
#[inline]
pub(crate) fn read_f64(dtype: DType, b: &[u8]) -> f64 {
    match dtype {
        DType::F32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        DType::F64 => f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        DType::F16 => f16::from_le_bytes([b[0], b[1]]).to_f64(),
        DType::BF16 => bf16::from_le_bytes([b[0], b[1]]).to_f64(),
        _ => read_i64(dtype, b) as f64,
    }
}

/// Reads one integer/bool element as `i64` (floats are truncated; callers
/// only use this for integer dtypes).
#[inline]
pub(crate) fn read_i64(dtype: DType, b: &[u8]) -> i64 {
    match dtype {
        DType::I8 => i64::from(b[0] as i8),
        DType::U8 => i64::from(b[0]),
        DType::Bool => i64::from(b[0] != 0),
        DType::I16 => i64::from(i16::from_le_bytes([b[0], b[1]])),
        DType::I32 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        DType::I64 => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => read_f64(dtype, b) as i64,
    }
}

/// Writes `v` rounded into `dtype` (module docs) into `out`.
#[inline]
pub(crate) fn write_f64(dtype: DType, v: f64, out: &mut [u8]) {
    match dtype {
        DType::F32 => out.copy_from_slice(&(v as f32).to_le_bytes()),
        DType::F64 => out.copy_from_slice(&v.to_le_bytes()),
        DType::F16 => out.copy_from_slice(&f16::from_f64(v).to_le_bytes()),
        DType::BF16 => out.copy_from_slice(&bf16::from_f64(v).to_le_bytes()),
        DType::Bool => out[0] = u8::from(v != 0.0),
        // `as` saturates and maps NaN to 0.
        DType::I8 => out[0] = (v.round_ties_even() as i8) as u8,
        DType::U8 => out[0] = v.round_ties_even() as u8,
        DType::I16 => out.copy_from_slice(&(v.round_ties_even() as i16).to_le_bytes()),
        DType::I32 => out.copy_from_slice(&(v.round_ties_even() as i32).to_le_bytes()),
        DType::I64 => out.copy_from_slice(&(v.round_ties_even() as i64).to_le_bytes()),
    }
}

/// Writes integer `v` into `dtype`, saturating (exact where representable).
#[inline]
pub(crate) fn write_i64(dtype: DType, v: i64, out: &mut [u8]) {
    fn sat<T: TryFrom<i64> + Copy>(v: i64, lo: T, hi: T) -> T {
        T::try_from(v).unwrap_or(if v < 0 { lo } else { hi })
    }
    match dtype {
        DType::I8 => out[0] = sat(v, i8::MIN, i8::MAX) as u8,
        DType::U8 => out[0] = sat(v, u8::MIN, u8::MAX),
        DType::Bool => out[0] = u8::from(v != 0),
        DType::I16 => out.copy_from_slice(&sat(v, i16::MIN, i16::MAX).to_le_bytes()),
        DType::I32 => out.copy_from_slice(&sat(v, i32::MIN, i32::MAX).to_le_bytes()),
        DType::I64 => out.copy_from_slice(&v.to_le_bytes()),
        // i64 -> f32/f16/bf16: `as f32` is RNE from the exact integer; the
        // 16-bit formats go through f64 (exact below 2^53), one rounding.
        DType::F32 => out.copy_from_slice(&(v as f32).to_le_bytes()),
        DType::F64 | DType::F16 | DType::BF16 => write_f64(dtype, v as f64, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_bytes_checks_length() {
        let err = Tensor::from_bytes(DType::F32, &[2, 3], vec![0; 23]).unwrap_err();
        assert_eq!(
            err,
            TensorError::ByteLength {
                dtype: DType::F32,
                shape: vec![2, 3],
                expected: 24,
                actual: 23
            }
        );
        let t = Tensor::from_bytes(DType::I16, &[2, 3], vec![1; 12]).unwrap();
        assert_eq!(t.numel(), 6);
        assert!(matches!(
            Tensor::from_bytes(DType::F64, &[usize::MAX, 2], vec![]),
            Err(TensorError::Overflow { .. })
        ));
    }

    #[test]
    fn scalar_and_empty() {
        let s = Tensor::zeros(DType::F32, &[]);
        assert_eq!(s.numel(), 1);
        assert_eq!(s.bytes().len(), 4);
        let e = Tensor::zeros(DType::F32, &[3, 0]);
        assert_eq!(e.numel(), 0);
        assert!(e.to_f32_vec().is_empty());
    }

    #[test]
    fn value_count_checked() {
        assert!(matches!(
            Tensor::from_f32(DType::F32, &[2, 2], &[1.0, 2.0, 3.0]),
            Err(TensorError::ValueCount {
                expected: 4,
                actual: 3,
                ..
            })
        ));
    }

    #[test]
    fn f16_bf16_round_to_nearest_even() {
        // 1 + 2^-11 is exactly halfway between two f16 values: ties to even (1.0).
        let t = Tensor::from_f64(
            DType::F16,
            &[2],
            &[1.0 + 2f64.powi(-11), 1.0 + 3.0 * 2f64.powi(-11)],
        )
        .unwrap();
        assert_eq!(t.to_f64_vec(), [1.0, 1.0 + 2.0 * 2f64.powi(-10)]);
        // bf16 has 8 significant bits: 1 + 2^-8 ties to 1.0, 1 + 3*2^-8 to 1 + 2^-6.
        let t = Tensor::from_f32(
            DType::BF16,
            &[2],
            &[1.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8)],
        )
        .unwrap();
        assert_eq!(t.to_f32_vec(), [1.0, 1.0 + 2f32.powi(-6)]);
        // Overflow goes to inf.
        let t = Tensor::from_f32(DType::F16, &[1], &[70000.0]).unwrap();
        assert_eq!(t.to_f32_vec(), [f32::INFINITY]);
        // Raw bytes are little-endian: bf16(1.0) = 0x3f80.
        let t = Tensor::from_f32(DType::BF16, &[1], &[1.0]).unwrap();
        assert_eq!(t.bytes(), [0x80, 0x3f]);
    }

    #[test]
    fn ints_round_half_even_and_saturate() {
        let t = Tensor::from_f64(
            DType::I8,
            &[7],
            &[0.5, 1.5, 2.5, -2.5, 300.0, -300.0, f64::NAN],
        )
        .unwrap();
        assert_eq!(t.to_f64_vec(), [0.0, 2.0, 2.0, -2.0, 127.0, -128.0, 0.0]);
        let t = Tensor::from_f64(DType::U8, &[3], &[-1.0, 255.5, 254.5]).unwrap();
        assert_eq!(t.bytes(), [0, 255, 254]);
        let t = Tensor::from_f64(DType::I64, &[1], &[f64::INFINITY]).unwrap();
        assert_eq!(t.to_f64_vec(), [i64::MAX as f64]);
        let t = Tensor::from_f64(DType::Bool, &[3], &[0.0, -0.0, f64::NAN]).unwrap();
        assert_eq!(t.bytes(), [0, 0, 1]);
    }

    #[test]
    fn cast_between_kinds() {
        let t = Tensor::from_i64(DType::I64, &[3], &[i64::MAX, -5, 300]).unwrap();
        assert_eq!(
            t.cast(DType::I32).to_f64_vec(),
            [i32::MAX as f64, -5.0, 300.0]
        );
        assert_eq!(t.cast(DType::U8).bytes(), [255, 0, 255]);
        assert_eq!(t.cast(DType::Bool).bytes(), [1, 1, 1]);
        // i64 -> i64 via cast of a clone stays exact above 2^53.
        let big = Tensor::from_i64(DType::I64, &[1], &[(1 << 60) + 1]).unwrap();
        assert_eq!(
            big.cast(DType::I64).bytes(),
            &((1i64 << 60) + 1).to_le_bytes()
        );
        let f = Tensor::from_f32(DType::F32, &[3], &[1.5, -2.5, 1e9]).unwrap();
        assert_eq!(f.cast(DType::I16).to_f64_vec(), [2.0, -2.0, 32767.0]);
        assert_eq!(
            f.cast(DType::BF16).cast(DType::F32).to_f32_vec(),
            [1.5, -2.5, 998244352.0]
        );
        assert_eq!(f.cast(DType::F64).to_f64_vec(), [1.5, -2.5, 1e9]);
        assert_eq!(f.cast(DType::F16).shape(), [3]);
    }

    #[test]
    fn reshape_and_digest() {
        let t = Tensor::from_f32(DType::F32, &[2, 3], &[1.0; 6]).unwrap();
        let d = t.digest();
        let r = t.clone().reshape(&[3, 2]).unwrap();
        assert_ne!(r.digest(), d, "shape is part of the digest");
        assert!(matches!(
            t.clone().reshape(&[4]),
            Err(TensorError::Reshape { .. })
        ));
    }
}
