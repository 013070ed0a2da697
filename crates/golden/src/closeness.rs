//! The comparison verdict: [`assert_close`] and its report.
//!
//! An element passes iff `|a - e| <= atol + rtol * |e|`, computed in `f64`
//! (narrower floats are widened exactly first), with these special cases:
//! NaN equals NaN only when `equal_nan`; NaN never equals a number; an
//! infinity equals only the same infinity; `-0 == +0`. Integer and bool
//! tensors compare exactly when both tolerances are 0, otherwise through the
//! same `f64` formula.
//!
//! The pass path is one streaming pass over both byte buffers, in chunks of
//! [`CHUNK_ELEMS`] elements spread over the current rayon pool, with no
//! allocation proportional to the tensor. Only chunks that contain a
//! suspicious element are scanned again, precisely, to count mismatches and
//! keep the worst and first few.

use std::fmt;

use half::{bf16, f16};
use rayon::prelude::*;

use crate::tensor::{read_f64, read_i64};
use crate::{DType, Tensor};

/// Elements per work item of [`assert_close`].
pub const CHUNK_ELEMS: usize = 1 << 16;
/// How many mismatches a report lists.
pub const MAX_LISTED: usize = 5;

/// Tolerances of [`assert_close`]. Deserializes from
/// `{ rtol, atol, equal_nan? }` (`equal_nan` defaults to false).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
    #[serde(default)]
    pub equal_nan: bool,
}

impl Tolerance {
    /// Exact comparison (`rtol = atol = 0`, NaN never equal).
    pub const EXACT: Tolerance = Tolerance {
        rtol: 0.0,
        atol: 0.0,
        equal_nan: false,
    };

    /// `rtol`/`atol` with `equal_nan = false`.
    pub fn new(rtol: f64, atol: f64) -> Tolerance {
        Tolerance {
            rtol,
            atol,
            equal_nan: false,
        }
    }

    /// The defaults per dtype: f16 (1e-3, 1e-5), bf16 (1.6e-2, 1e-5),
    /// f32 (1.3e-6, 1e-5), f64 (1e-7, 1e-7), integers and bool exact;
    /// `equal_nan` false.
    pub fn default_for(dtype: DType) -> Tolerance {
        match dtype {
            DType::F16 => Tolerance::new(1e-3, 1e-5),
            DType::BF16 => Tolerance::new(1.6e-2, 1e-5),
            DType::F32 => Tolerance::new(1.3e-6, 1e-5),
            DType::F64 => Tolerance::new(1e-7, 1e-7),
            _ => Tolerance::EXACT,
        }
    }

    pub fn with_equal_nan(self, equal_nan: bool) -> Tolerance {
        Tolerance { equal_nan, ..self }
    }

    /// Both tolerances are zero.
    pub fn is_exact(&self) -> bool {
        self.rtol == 0.0 && self.atol == 0.0
    }
}

/// The element rule of [`assert_close`] (module docs), on `f64` values.
#[inline]
pub fn is_close(actual: f64, expected: f64, tol: &Tolerance) -> bool {
    if actual.is_nan() || expected.is_nan() {
        return tol.equal_nan && actual.is_nan() && expected.is_nan();
    }
    if actual == expected {
        return true;
    }
    if actual.is_infinite() || expected.is_infinite() {
        return false;
    }
    (actual - expected).abs() <= tol.atol + tol.rtol * expected.abs()
}

/// One extreme mismatching element of a report.
#[derive(Clone, Debug, PartialEq)]
pub struct Worst {
    /// Multi-dimensional index.
    pub index: Vec<usize>,
    /// Row-major flat index.
    pub flat: usize,
    pub actual: f64,
    pub expected: f64,
    /// The absolute or relative difference this element is the worst of.
    pub diff: f64,
}

/// Why values differ: counts, extremes and the first mismatches.
///
/// `max_abs` / `max_rel` are taken over the *mismatching* elements only;
/// elements whose difference is NaN (a NaN on either side) are not ranked,
/// so both are `None` when every mismatch involves a NaN. The relative
/// difference is `|a - e| / |e|` (inf when `e == 0`, as in NumPy). Ties keep
/// the lowest index.
#[derive(Clone, Debug, PartialEq)]
pub struct MismatchReport {
    pub tensor: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub mismatched: usize,
    pub total: usize,
    pub max_abs: Option<Worst>,
    pub max_rel: Option<Worst>,
    pub tolerance: Tolerance,
    /// The first [`MAX_LISTED`] mismatches: (multi-index, actual, expected).
    pub first: Vec<(Vec<usize>, f64, f64)>,
    /// Judged bit for bit ([`assert_exact`]) rather than by `tolerance`.
    pub exact: bool,
}

/// Verdict of [`assert_close`] when the tensors differ. `Display` is the
/// human report.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Mismatch {
    #[error("tensor `{tensor}`: shape mismatch: actual {actual:?}, expected {expected:?}")]
    Shape {
        tensor: String,
        actual: Vec<usize>,
        expected: Vec<usize>,
    },
    #[error("tensor `{tensor}`: dtype mismatch: actual {actual}, expected {expected}")]
    DType {
        tensor: String,
        actual: DType,
        expected: DType,
    },
    #[error("{0}")]
    Values(Box<MismatchReport>),
}

/// Compares `actual` against `expected` (module docs for the rule).
pub fn assert_close(
    name: &str,
    actual: &Tensor,
    expected: &Tensor,
    tol: Tolerance,
) -> Result<(), Mismatch> {
    check_layout(name, actual, expected)?;
    let (a, e) = (actual.bytes(), expected.bytes());
    let dtype = actual.dtype();
    let found = match dtype {
        DType::F32 => scan(&FloatCheck::<F32>::new(tol), a, e),
        DType::F64 => scan(&FloatCheck::<F64>::new(tol), a, e),
        DType::F16 => scan(&FloatCheck::<F16>::new(tol), a, e),
        DType::BF16 => scan(&FloatCheck::<BF16>::new(tol), a, e),
        _ if tol.is_exact() => scan(&ExactInt { dtype }, a, e),
        _ => scan(&IntTol { dtype, tol }, a, e),
    };
    verdict(name, actual, found, tol, false)
}

/// Compares `actual` against `expected` bit for bit: every element's bytes
/// must be equal, except that a NaN equals any NaN (whatever its payload
/// or sign). So `-0` differs from `+0` and a float one ulp off fails even
/// where [`assert_close`] would accept it. Integers and bool compare by
/// value, as [`assert_close`] with zero tolerance does.
pub fn assert_exact(name: &str, actual: &Tensor, expected: &Tensor) -> Result<(), Mismatch> {
    check_layout(name, actual, expected)?;
    let dtype = actual.dtype();
    let found = scan(&BitExact { dtype }, actual.bytes(), expected.bytes());
    verdict(name, actual, found, Tolerance::EXACT, true)
}

/// Same shape and dtype, or the mismatch saying which differs.
pub fn check_layout(name: &str, actual: &Tensor, expected: &Tensor) -> Result<(), Mismatch> {
    if actual.shape() != expected.shape() {
        return Err(Mismatch::Shape {
            tensor: name.to_owned(),
            actual: actual.shape().to_vec(),
            expected: expected.shape().to_vec(),
        });
    }
    if actual.dtype() != expected.dtype() {
        return Err(Mismatch::DType {
            tensor: name.to_owned(),
            actual: actual.dtype(),
            expected: expected.dtype(),
        });
    }
    Ok(())
}

/// The verdict of a finished scan.
fn verdict(
    name: &str,
    actual: &Tensor,
    found: Found,
    tol: Tolerance,
    exact: bool,
) -> Result<(), Mismatch> {
    if found.mismatched == 0 {
        return Ok(());
    }
    let dtype = actual.dtype();
    let shape = actual.shape();
    let worst = |w: Option<Cand>| {
        w.map(|c| Worst {
            index: unravel(c.flat, shape),
            flat: c.flat,
            actual: c.actual,
            expected: c.expected,
            diff: c.diff,
        })
    };
    Err(Mismatch::Values(Box::new(MismatchReport {
        tensor: name.to_owned(),
        shape: shape.to_vec(),
        dtype,
        mismatched: found.mismatched,
        total: actual.numel(),
        max_abs: worst(found.max_abs),
        max_rel: worst(found.max_rel),
        tolerance: tol,
        first: found
            .first
            .into_iter()
            .map(|c| (unravel(c.flat, shape), c.actual, c.expected))
            .collect(),
        exact,
    })))
}

/// Multi-dimensional row-major index of `flat` in `shape`.
pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (i, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            idx[i] = flat % d;
            flat /= d;
        }
    }
    idx
}

// ---------------------------------------------------------------- kernels

/// Element decoding of one float dtype.
trait Decode: Sync {
    const SIZE: usize;
    /// The data is `f32`, so the all-`f32` prefilter applies.
    const IS_F32: bool = false;
    fn get(b: &[u8]) -> f64;
}

struct F32;
struct F64;
struct F16;
struct BF16;

impl Decode for F32 {
    const SIZE: usize = 4;
    const IS_F32: bool = true;
    #[inline(always)]
    fn get(b: &[u8]) -> f64 {
        f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}
impl Decode for F64 {
    const SIZE: usize = 8;
    #[inline(always)]
    fn get(b: &[u8]) -> f64 {
        f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}
impl Decode for F16 {
    const SIZE: usize = 2;
    #[inline(always)]
    fn get(b: &[u8]) -> f64 {
        f64::from(f16::from_le_bytes([b[0], b[1]]).to_f32())
    }
}
impl Decode for BF16 {
    const SIZE: usize = 2;
    #[inline(always)]
    fn get(b: &[u8]) -> f64 {
        f64::from(bf16::from_le_bytes([b[0], b[1]]).to_f32())
    }
}

/// A comparison strategy: a cheap whole-chunk test that may reject clean
/// chunks but never accepts a dirty one, and the exact element rule.
trait Check: Sync {
    fn size(&self) -> usize;
    /// True when every element of the chunk certainly passes.
    fn chunk_clean(&self, a: &[u8], e: &[u8]) -> bool;
    fn value(&self, b: &[u8]) -> f64;
    fn ok(&self, a: &[u8], e: &[u8]) -> bool;
}

struct FloatCheck<D> {
    tol: Tolerance,
    /// `(rtol, atol)` rounded down to `f32` when the `f32` prefilter is sound.
    fast32: Option<(f32, f32)>,
    _d: std::marker::PhantomData<D>,
}

impl<D: Decode> FloatCheck<D> {
    fn new(tol: Tolerance) -> Self {
        FloatCheck {
            tol,
            fast32: if D::IS_F32 { f32_bounds(&tol) } else { None },
            _d: std::marker::PhantomData,
        }
    }

    /// The exact-in-spirit `f64` lane test over one full block. A lane is
    /// clean iff `d <= min(atol + rtol*|e|, f64::MAX)` with `d = |a - e|`,
    /// i.e. within tolerance and finite: any NaN or infinity (even a
    /// matching one) is left to the exact rule.
    #[inline(always)]
    fn block_clean_f64(&self, x: &[u8], y: &[u8]) -> bool {
        let (atol, rtol) = (self.tol.atol, self.tol.rtol);
        let mut xs = [0f64; LANES];
        let mut ys = [0f64; LANES];
        for (j, (xv, yv)) in xs.iter_mut().zip(ys.iter_mut()).enumerate() {
            *xv = D::get(&x[j * D::SIZE..(j + 1) * D::SIZE]);
            *yv = D::get(&y[j * D::SIZE..(j + 1) * D::SIZE]);
        }
        let mut bad = 0u32;
        for j in 0..LANES {
            let d = (xs[j] - ys[j]).abs();
            let good = d <= (atol + rtol * ys[j].abs()).min(f64::MAX);
            bad |= u32::from(!good);
        }
        bad == 0
    }

    /// Same lane test for a partial block.
    fn tail_clean_f64(&self, x: &[u8], y: &[u8]) -> bool {
        let (atol, rtol) = (self.tol.atol, self.tol.rtol);
        x.chunks_exact(D::SIZE)
            .zip(y.chunks_exact(D::SIZE))
            .all(|(x, y)| {
                let (x, y) = (D::get(x), D::get(y));
                (x - y).abs() <= (atol + rtol * y.abs()).min(f64::MAX)
            })
    }
}

/// `x` rounded toward -inf to `f32`.
fn f32_down(x: f64) -> f32 {
    let r = x as f32;
    if f64::from(r) > x { r.next_down() } else { r }
}

/// Smallest `atol` for which the `f32` prefilter is used (keeps underflow in
/// `rtol * |e|` negligible against the bound).
const FAST32_MIN_ATOL: f64 = 7.888_609_052_210_118e-31; // 2^-100

/// `1 - 2^-20`: shrinks the `f32` bound by more than its rounding error.
const FAST32_MARGIN: f32 = 1.0 - 1.0 / 1_048_576.0;

/// When the all-`f32` lane test is sound: `rtol >= 0`, `atol >= 2^-100`,
/// both finite. Returns them rounded down.
fn f32_bounds(tol: &Tolerance) -> Option<(f32, f32)> {
    let ok = tol.rtol >= 0.0
        && tol.rtol.is_finite()
        && tol.atol >= FAST32_MIN_ATOL
        && tol.atol.is_finite();
    ok.then(|| (f32_down(tol.rtol), f32_down(tol.atol)))
}

/// Conservative all-`f32` lane test (twice the SIMD width of the `f64` one):
/// clean iff `fl|a - e| <= fl(min(atol' + rtol'*|e|, MAX) * (1 - 2^-20))`
/// with `rtol' <= rtol`, `atol' <= atol` in `f32`. With `u = 2^-24`:
/// `fl|a-e| >= d (1-u)` (subnormal differences are exact), the bound is at
/// most `b (1+u)^2 + 2^-150 <= b (1 + 2^-22)` since `b >= atol >= 2^-100`,
/// and the final product adds one more `(1+u)`; so a clean lane has
/// `d <= b (1+2^-22)(1-2^-20)(1+u)/(1-u) < b`. NaN and infinite `d` fail.
/// It may reject lanes within ~2^-20 of the bound; those blocks are
/// re-tested in `f64`.
#[inline(always)]
fn block_clean_f32(x: &[u8], y: &[u8], rtol: f32, atol: f32) -> bool {
    let mut xs = [0f32; LANES];
    let mut ys = [0f32; LANES];
    for (j, (xv, yv)) in xs.iter_mut().zip(ys.iter_mut()).enumerate() {
        let (p, q) = (&x[j * 4..j * 4 + 4], &y[j * 4..j * 4 + 4]);
        *xv = f32::from_le_bytes([p[0], p[1], p[2], p[3]]);
        *yv = f32::from_le_bytes([q[0], q[1], q[2], q[3]]);
    }
    let mut bad = 0u32;
    for j in 0..LANES {
        let d = (xs[j] - ys[j]).abs();
        let good = d <= (atol + rtol * ys[j].abs()).min(f32::MAX) * FAST32_MARGIN;
        bad |= u32::from(!good);
    }
    bad == 0
}

/// Lanes per block of the fast float tests.
const LANES: usize = 16;

impl<D: Decode> Check for FloatCheck<D> {
    fn size(&self) -> usize {
        D::SIZE
    }

    /// Block by block: the `f32` prefilter when sound, else (or when it
    /// rejects a block) the `f64` lane test. Stops at the first dirty block.
    #[inline]
    fn chunk_clean(&self, a: &[u8], e: &[u8]) -> bool {
        let block = D::SIZE * LANES;
        let mut ab = a.chunks_exact(block);
        let mut eb = e.chunks_exact(block);
        for (x, y) in (&mut ab).zip(&mut eb) {
            let fast = match self.fast32 {
                Some((rtol, atol)) => block_clean_f32(x, y, rtol, atol),
                None => false,
            };
            if !fast && !self.block_clean_f64(x, y) {
                return false;
            }
        }
        self.tail_clean_f64(ab.remainder(), eb.remainder())
    }

    #[inline]
    fn value(&self, b: &[u8]) -> f64 {
        D::get(b)
    }

    #[inline]
    fn ok(&self, a: &[u8], e: &[u8]) -> bool {
        is_close(D::get(a), D::get(e), &self.tol)
    }
}

/// Integers (and bool) with zero tolerance: exact.
struct ExactInt {
    dtype: DType,
}

impl Check for ExactInt {
    fn size(&self) -> usize {
        self.dtype.size_of()
    }
    fn chunk_clean(&self, a: &[u8], e: &[u8]) -> bool {
        a == e
    }
    fn value(&self, b: &[u8]) -> f64 {
        read_f64(self.dtype, b)
    }
    fn ok(&self, a: &[u8], e: &[u8]) -> bool {
        read_i64(self.dtype, a) == read_i64(self.dtype, e)
    }
}

/// Bit-for-bit equality; for float dtypes a NaN equals any NaN.
struct BitExact {
    dtype: DType,
}

impl Check for BitExact {
    fn size(&self) -> usize {
        self.dtype.size_of()
    }
    fn chunk_clean(&self, a: &[u8], e: &[u8]) -> bool {
        a == e
    }
    fn value(&self, b: &[u8]) -> f64 {
        read_f64(self.dtype, b)
    }
    fn ok(&self, a: &[u8], e: &[u8]) -> bool {
        if self.dtype == DType::Bool {
            return (a[0] != 0) == (e[0] != 0);
        }
        a == e || (self.dtype.is_float() && self.value(a).is_nan() && self.value(e).is_nan())
    }
}

/// Integers (and bool) with a tolerance: the `f64` formula.
struct IntTol {
    dtype: DType,
    tol: Tolerance,
}

impl Check for IntTol {
    fn size(&self) -> usize {
        self.dtype.size_of()
    }
    fn chunk_clean(&self, a: &[u8], e: &[u8]) -> bool {
        let s = self.size();
        a.chunks_exact(s)
            .zip(e.chunks_exact(s))
            .all(|(x, y)| self.ok(x, y))
    }
    fn value(&self, b: &[u8]) -> f64 {
        read_f64(self.dtype, b)
    }
    fn ok(&self, a: &[u8], e: &[u8]) -> bool {
        is_close(self.value(a), self.value(e), &self.tol)
    }
}

#[derive(Clone, Copy, Debug)]
struct Cand {
    flat: usize,
    actual: f64,
    expected: f64,
    diff: f64,
}

/// Mismatch summary of a range of elements.
#[derive(Debug, Default)]
struct Found {
    mismatched: usize,
    max_abs: Option<Cand>,
    max_rel: Option<Cand>,
    /// At most [`MAX_LISTED`], sorted by index.
    first: Vec<Cand>,
}

/// `b` replaces `a` when it is larger, or equal at a lower index.
fn better(a: Option<Cand>, b: Option<Cand>) -> Option<Cand> {
    match (a, b) {
        (Some(x), Some(y)) => {
            if y.diff > x.diff || (y.diff == x.diff && y.flat < x.flat) {
                Some(y)
            } else {
                Some(x)
            }
        }
        (x, None) => x,
        (None, y) => y,
    }
}

impl Found {
    /// Order-independent merge (so any rayon reduction order is fine).
    fn merge(mut self, other: Found) -> Found {
        self.mismatched += other.mismatched;
        self.max_abs = better(self.max_abs, other.max_abs);
        self.max_rel = better(self.max_rel, other.max_rel);
        if !other.first.is_empty() {
            self.first.extend(other.first);
            self.first.sort_by_key(|c| c.flat);
            self.first.truncate(MAX_LISTED);
        }
        self
    }
}

/// Exact scan of one chunk starting at flat index `base`.
fn scan_chunk<C: Check>(c: &C, a: &[u8], e: &[u8], base: usize) -> Found {
    let mut f = Found::default();
    if c.chunk_clean(a, e) {
        return f;
    }
    let s = c.size();
    for (i, (x, y)) in a.chunks_exact(s).zip(e.chunks_exact(s)).enumerate() {
        if c.ok(x, y) {
            continue;
        }
        let (actual, expected) = (c.value(x), c.value(y));
        let flat = base + i;
        f.mismatched += 1;
        let d = (actual - expected).abs();
        if !d.is_nan() {
            let cand = |diff| {
                Some(Cand {
                    flat,
                    actual,
                    expected,
                    diff,
                })
            };
            f.max_abs = better(f.max_abs, cand(d));
            f.max_rel = better(f.max_rel, cand(d / expected.abs()));
        }
        if f.first.len() < MAX_LISTED {
            f.first.push(Cand {
                flat,
                actual,
                expected,
                diff: d,
            });
        }
    }
    f
}

fn scan<C: Check>(c: &C, a: &[u8], e: &[u8]) -> Found {
    let step = CHUNK_ELEMS * c.size();
    if a.len() <= step {
        return scan_chunk(c, a, e, 0);
    }
    a.par_chunks(step)
        .zip(e.par_chunks(step))
        .enumerate()
        .map(|(i, (x, y))| scan_chunk(c, x, y, i * CHUNK_ELEMS))
        .reduce(Found::default, Found::merge)
}

// ---------------------------------------------------------------- report

/// Formats like Python's `repr`/`%g` family: plain decimals for moderate
/// magnitudes, `1e-05` / `1.5e+20` otherwise. `narrow` prints through `f32`
/// (for f32/f16/bf16 data) so values read as their shortest f32 form.
pub fn fmt_num(x: f64, narrow: bool) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let a = x.abs();
    let plain = x == 0.0 || (1e-4..1e16).contains(&a);
    let s = match (plain, narrow) {
        (true, true) => format!("{}", x as f32),
        (true, false) => format!("{x}"),
        (false, true) => format!("{:e}", x as f32),
        (false, false) => format!("{x:e}"),
    };
    match s.split_once('e') {
        Some((mant, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mant}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

fn fmt_index(idx: &[usize]) -> String {
    format!("{idx:?}")
}

impl fmt::Display for MismatchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let narrow = matches!(self.dtype, DType::F32 | DType::F16 | DType::BF16);
        let n = |x: f64| fmt_num(x, narrow);
        let pct = 100.0 * self.mismatched as f64 / self.total.max(1) as f64;
        if self.exact {
            writeln!(
                f,
                "tensor `{}` mismatch: {} / {} elements ({pct:.3}%) differ (exact: bit for bit, any NaN equals any NaN)",
                self.tensor, self.mismatched, self.total,
            )?;
        } else {
            write!(
                f,
                "tensor `{}` mismatch: {} / {} elements ({pct:.3}%) differ beyond tolerance (rtol={}, atol={}",
                self.tensor,
                self.mismatched,
                self.total,
                fmt_num(self.tolerance.rtol, false),
                fmt_num(self.tolerance.atol, false),
            )?;
            if self.tolerance.equal_nan {
                f.write_str(", equal_nan")?;
            }
            writeln!(f, ")")?;
        }
        write!(
            f,
            "  shape {}, dtype {}",
            fmt_index(&self.shape),
            self.dtype
        )?;
        for (label, w) in [("absolute", &self.max_abs), ("relative", &self.max_rel)] {
            if let Some(w) = w {
                write!(
                    f,
                    "\n  greatest {label} difference: {} at index {} (actual {}, expected {})",
                    n(w.diff),
                    fmt_index(&w.index),
                    n(w.actual),
                    n(w.expected)
                )?;
            }
        }
        f.write_str("\n  first mismatches:")?;
        for (idx, a, e) in &self.first {
            write!(
                f,
                "\n    {}: actual {}, expected {}",
                fmt_index(idx),
                n(*a),
                n(*e)
            )?;
        }
        if self.mismatched > self.first.len() {
            write!(
                f,
                "\n    ... and {} more",
                self.mismatched - self.first.len()
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32t(v: &[f32]) -> Tensor {
        Tensor::from_f32(DType::F32, &[v.len()], v).unwrap()
    }

    #[test]
    fn is_close_special_values() {
        let t = Tolerance::new(1e-3, 1e-3);
        assert!(is_close(f64::INFINITY, f64::INFINITY, &t));
        assert!(!is_close(f64::INFINITY, f64::NEG_INFINITY, &t));
        assert!(!is_close(
            1e300,
            f64::INFINITY,
            &Tolerance::new(1.0, f64::INFINITY)
        ));
        assert!(!is_close(f64::NAN, f64::NAN, &t));
        assert!(is_close(f64::NAN, f64::NAN, &t.with_equal_nan(true)));
        assert!(!is_close(f64::NAN, 1.0, &t.with_equal_nan(true)));
        assert!(is_close(-0.0, 0.0, &Tolerance::EXACT));
        assert!(is_close(1.0011, 1.0, &t)); // 0.0011 <= 0.001 + 0.001
        assert!(!is_close(1.0021, 1.0, &t));
        // rtol scales with |expected| not |actual|.
        assert!(!is_close(100.0, 1.0, &Tolerance::new(0.99, 0.0)));
    }

    #[test]
    fn shape_and_dtype_errors_name_the_tensor() {
        let a = f32t(&[1.0, 2.0]);
        let b = Tensor::zeros(DType::F32, &[1, 2]);
        let err = assert_close("out", &a, &b, Tolerance::EXACT).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tensor `out`: shape mismatch: actual [2], expected [1, 2]"
        );
        let c = a.cast(DType::F16);
        let err = assert_close("out", &c, &a, Tolerance::EXACT).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tensor `out`: dtype mismatch: actual f16, expected f32"
        );
    }

    #[test]
    fn counts_worst_and_first_across_chunks() {
        let n = 3 * CHUNK_ELEMS + 17;
        let e: Vec<f32> = (0..n).map(|i| (i % 100) as f32).collect();
        let mut a = e.clone();
        let bad = [
            5usize,
            CHUNK_ELEMS + 1,
            2 * CHUNK_ELEMS + 3,
            n - 1,
            n - 2,
            n - 3,
            70,
        ];
        for (k, &i) in bad.iter().enumerate() {
            a[i] += 1.0 + k as f32;
        }
        let err = assert_close(
            "x",
            &f32t(&a),
            &f32t(&e),
            Tolerance::default_for(DType::F32),
        )
        .unwrap_err();
        let Mismatch::Values(r) = err else {
            panic!("not a values mismatch")
        };
        assert_eq!(r.mismatched, bad.len());
        assert_eq!(r.total, n);
        let firsts: Vec<usize> = r.first.iter().map(|(i, _, _)| i[0]).collect();
        assert_eq!(firsts, [5, 70, CHUNK_ELEMS + 1, 2 * CHUNK_ELEMS + 3, n - 3]);
        let w = r.max_abs.as_ref().unwrap();
        assert_eq!((w.flat, w.diff), (70, 7.0));
        // Relative: expected[n-3] = 22 with diff 6 beats 1/5, 5/23, 4/24 ...
        let rel = r.max_rel.as_ref().unwrap();
        assert_eq!((rel.flat, rel.diff), (n - 3, 6.0 / 22.0));
        assert!(r.to_string().contains("... and 2 more"));
    }

    #[test]
    fn equal_nan_and_infinities_pass_through_fast_path() {
        let v = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 1.0];
        let w = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, 1.0];
        let tol = Tolerance::default_for(DType::F32);
        assert!(assert_close("a", &f32t(&v), &f32t(&w), tol.with_equal_nan(true)).is_ok());
        let Err(Mismatch::Values(r)) = assert_close("a", &f32t(&v), &f32t(&w), tol) else {
            panic!("NaN must mismatch without equal_nan")
        };
        assert_eq!(r.mismatched, 1);
        assert_eq!(r.max_abs, None, "NaN differences are not ranked");
        assert_eq!(r.first.len(), 1);
        assert!(r.first[0].1.is_nan());
    }

    #[test]
    fn exact_catches_one_ulp_that_allclose_accepts() {
        let e = f32t(&[0.1, 1.0, -3.5]);
        let mut v = e.to_f32_vec();
        v[1] = f32::from_bits(v[1].to_bits() + 1);
        let a = Tensor::from_f32(DType::F32, &[3], &v).unwrap();
        assert!(assert_close("t", &a, &e, Tolerance::default_for(DType::F32)).is_ok());
        let Err(Mismatch::Values(r)) = assert_exact("t", &a, &e) else {
            panic!("one ulp must fail exact")
        };
        assert_eq!((r.mismatched, r.exact), (1, true));
        assert_eq!(r.first[0].0, vec![1]);
        let text = r.to_string();
        assert!(
            text.contains("tensor `t` mismatch: 1 / 3 elements") && text.contains("bit for bit"),
            "{text}"
        );
        assert!(!text.contains("rtol"), "{text}");
        assert!(assert_exact("t", &e, &e).is_ok());
    }

    #[test]
    fn exact_signed_zero_nan_payloads_and_integers() {
        let pz = Tensor::from_f32(DType::F32, &[1], &[0.0]).unwrap();
        let nz = Tensor::from_f32(DType::F32, &[1], &[-0.0]).unwrap();
        assert!(assert_close("z", &nz, &pz, Tolerance::EXACT).is_ok());
        assert!(
            assert_exact("z", &nz, &pz).is_err(),
            "-0 is not +0 bit for bit"
        );
        // Two NaNs with different payloads and signs are equal.
        let n1 =
            Tensor::from_bytes(DType::F32, &[1], 0x7fc0_0001u32.to_le_bytes().to_vec()).unwrap();
        let n2 =
            Tensor::from_bytes(DType::F32, &[1], 0xffc0_0000u32.to_le_bytes().to_vec()).unwrap();
        assert!(assert_exact("n", &n1, &n2).is_ok());
        assert!(assert_exact("n", &n1, &pz).is_err());
        // f16 / bf16 / f64 go through the same bytes rule.
        for dt in [DType::F16, DType::BF16, DType::F64] {
            let a = Tensor::from_f32(dt, &[2], &[1.0, 2.0]).unwrap();
            let mut b = a.clone();
            b.bytes_mut()[0] ^= 1;
            assert!(assert_exact("h", &a, &a).is_ok(), "{dt}");
            assert!(assert_exact("h", &b, &a).is_err(), "{dt}");
        }
        let a = Tensor::from_i64(DType::I64, &[2], &[(1 << 60) + 1, 3]).unwrap();
        let e = Tensor::from_i64(DType::I64, &[2], &[1 << 60, 3]).unwrap();
        assert!(assert_exact("i", &a, &e).is_err());
        let a = Tensor::from_bytes(DType::Bool, &[2], vec![2, 0]).unwrap();
        let e = Tensor::from_bytes(DType::Bool, &[2], vec![1, 0]).unwrap();
        assert!(
            assert_exact("b", &a, &e).is_ok(),
            "bool compares by truth value"
        );
        let e = f32t(&[1.0, 2.0]);
        let Err(Mismatch::Shape { .. }) = assert_exact("s", &pz, &e) else {
            panic!("shape mismatch first")
        };
    }

    #[test]
    fn integers_exact_unless_tolerance() {
        let a = Tensor::from_i64(DType::I64, &[2], &[(1 << 60) + 1, 3]).unwrap();
        let e = Tensor::from_i64(DType::I64, &[2], &[1 << 60, 3]).unwrap();
        let Err(Mismatch::Values(r)) =
            assert_close("i", &a, &e, Tolerance::default_for(DType::I64))
        else {
            panic!("off by one above 2^53 must be caught exactly")
        };
        assert_eq!(r.mismatched, 1);
        let a = Tensor::from_i64(DType::I32, &[3], &[10, 20, 31]).unwrap();
        let e = Tensor::from_i64(DType::I32, &[3], &[10, 21, 30]).unwrap();
        assert!(assert_close("i", &a, &e, Tolerance::new(0.0, 1.0)).is_ok());
        assert!(assert_close("i", &a, &e, Tolerance::EXACT).is_err());
        // bool: any nonzero byte is true.
        let a = Tensor::from_bytes(DType::Bool, &[2], vec![2, 0]).unwrap();
        let e = Tensor::from_bytes(DType::Bool, &[2], vec![1, 0]).unwrap();
        assert!(assert_close("b", &a, &e, Tolerance::EXACT).is_ok());
    }

    #[test]
    fn f32_prefilter_constants() {
        assert_eq!(FAST32_MIN_ATOL, 2f64.powi(-100));
        assert_eq!(f64::from(FAST32_MARGIN), 1.0 - 2f64.powi(-20));
        assert_eq!(f32_down(0.1), 0.1f32.next_down());
        assert!(f64::from(f32_down(0.1)) <= 0.1 && f64::from(f32_down(1.3e-6)) <= 1.3e-6);
        assert_eq!(f32_down(0.5), 0.5);
        assert_eq!(f32_bounds(&Tolerance::new(1e-5, 0.0)), None);
        assert_eq!(f32_bounds(&Tolerance::new(-1.0, 1.0)), None);
        assert!(f32_bounds(&Tolerance::default_for(DType::F32)).is_some());
        // Exactly at the bound passes (via the f64 re-test), one ulp beyond fails.
        let tol = Tolerance::new(0.0, 0.25);
        assert!(assert_close("b", &f32t(&[1.25; 20]), &f32t(&[1.0; 20]), tol).is_ok());
        let beyond = 1.25f32.next_up();
        assert!(assert_close("b", &f32t(&[beyond; 20]), &f32t(&[1.0; 20]), tol).is_err());
    }

    #[test]
    fn tolerance_deserializes_with_default_equal_nan() {
        let t: Tolerance = serde_json::from_str(r#"{"rtol": 0.001, "atol": 1e-5}"#).unwrap();
        assert_eq!(t, Tolerance::new(1e-3, 1e-5));
        let t: Tolerance =
            serde_json::from_str(r#"{"rtol": 0, "atol": 0, "equal_nan": true}"#).unwrap();
        assert!(t.equal_nan && t.is_exact());
    }

    #[test]
    fn number_formatting() {
        assert_eq!(fmt_num(1e-5, false), "1e-05");
        assert_eq!(fmt_num(1.3e-6, false), "1.3e-06");
        assert_eq!(fmt_num(0.016, false), "0.016");
        assert_eq!(fmt_num(1.0, true), "1");
        assert_eq!(fmt_num(f64::from(0.1f32), true), "0.1");
        assert_eq!(fmt_num(-2.5e20, false), "-2.5e+20");
        assert_eq!(fmt_num(f64::NEG_INFINITY, false), "-inf");
        assert_eq!(fmt_num(0.0, false), "0");
    }

    #[test]
    fn unravel_row_major() {
        assert_eq!(unravel(0, &[]), Vec::<usize>::new());
        assert_eq!(unravel(7, &[2, 3, 4]), [0, 1, 3]);
        assert_eq!(unravel(23, &[2, 3, 4]), [1, 2, 3]);
    }
}
