//! Seeded, platform-independent input fixtures.
//!
//! The generator is ChaCha8 (`rand_chacha`) keyed by
//! `blake3("scene-golden fixture v1" ‖ len‖scene ‖ len‖case ‖ len‖tensor ‖ seed)`
//! (lengths and seed as little-endian `u64`), so every tensor of every case
//! has its own stream and renaming a tensor changes its data.
//!
//! Values are produced one per element in row-major order as `f64` and then
//! rounded into the dtype like [`Tensor::from_f64`] (RNE; integers round
//! half-even and saturate). Sampling uses only the raw ChaCha words and
//! IEEE-754 basic operations (`+ - * / sqrt`, plus a local `ln` built from
//! them), never the platform `libm` nor `rand`'s distribution code, so the
//! bytes are the same on every machine, process and crate-version bump.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{DType, Tensor};

/// How a fixture's values are drawn.
#[derive(Clone, Debug, PartialEq)]
pub enum Init {
    /// Every element `value`.
    Const { value: f64 },
    /// Uniform in `[low, high)` before rounding into the dtype (rounding
    /// may reach `high`).
    Uniform { low: f64, high: f64 },
    /// Normal (Marsaglia polar method).
    Normal { mean: f64, std: f64 },
    /// `start + i * step` for flat index `i`.
    Arange { start: f64, step: f64 },
    /// All zeros.
    Zeros,
    /// Uniform integers in `[low, high)` (high exclusive), unbiased. Allowed
    /// on float dtypes (integers stored as floats). If `high <= low` every
    /// element is `low` (scene loading rejects such a range).
    Randint { low: i64, high: i64 },
    /// Seeded shuffles of `0..n` dealt like cards, column by column: the
    /// last dimension is the column, the leading dimensions flattened are
    /// the rows; the first shuffle fills column 0 of every row, then column
    /// 1, ..., and after `n` elements a fresh shuffle starts. With
    /// `n = rows * k`, the first `k` columns hold `n` distinct values (a
    /// block table whose requests never share a block); a 1-D tensor of
    /// `n` elements is one permutation. `n == 0` fills zeros.
    Permutation { n: u64 },
    /// The given values in row-major order (a list param of the case);
    /// integers are exact. Elements beyond the list stay zero (scene
    /// loading requires one value per element).
    List { values: Vec<ListItem> },
}

/// One value of an [`Init::List`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ListItem {
    Int(i64),
    Float(f64),
}

/// Identity of a fixture: the seed stream is derived from all four fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FixtureSeed<'a> {
    pub scene: &'a str,
    pub case: &'a str,
    pub tensor: &'a str,
    pub seed: u64,
}

impl FixtureSeed<'_> {
    /// The 32-byte ChaCha key for this fixture.
    pub fn key(&self) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        h.update(b"scene-golden fixture v1");
        for part in [self.scene, self.case, self.tensor] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        h.update(&self.seed.to_le_bytes());
        *h.finalize().as_bytes()
    }
}

/// Builds a deterministic fixture (see the module docs).
pub fn make_fixture(dtype: DType, shape: &[usize], init: &Init, seed: &FixtureSeed<'_>) -> Tensor {
    let mut t = Tensor::zeros(dtype, shape);
    let n = t.numel();
    if matches!(init, Init::Zeros) {
        return t;
    }
    let mut rng = ChaCha8Rng::from_seed(seed.key());
    let size = dtype.size_of();
    let out = t.bytes_mut();
    let mut put = |i: usize, v: Value| {
        let slot = &mut out[i * size..(i + 1) * size];
        match v {
            Value::F(v) => crate::tensor::write_f64(dtype, v, slot),
            Value::I(v) => crate::tensor::write_i64(dtype, v, slot),
        }
    };
    match *init {
        Init::List { ref values } => {
            for (i, v) in values.iter().take(n).enumerate() {
                put(
                    i,
                    match *v {
                        ListItem::Int(v) => Value::I(v),
                        ListItem::Float(v) => Value::F(v),
                    },
                );
            }
        }
        Init::Zeros => {}
        Init::Const { value } => (0..n).for_each(|i| put(i, Value::F(value))),
        Init::Arange { start, step } => {
            (0..n).for_each(|i| put(i, Value::F(start + i as f64 * step)))
        }
        Init::Uniform { low, high } => {
            for i in 0..n {
                put(i, Value::F(low + (high - low) * unit_f64(&mut rng)));
            }
        }
        Init::Normal { mean, std } => {
            let mut spare = None;
            for i in 0..n {
                let z = match spare.take() {
                    Some(z) => z,
                    None => {
                        let (a, b) = normal_pair(&mut rng);
                        spare = Some(b);
                        a
                    }
                };
                put(i, Value::F(mean + std * z));
            }
        }
        Init::Randint { low, high } => {
            let span = i128::from(high) - i128::from(low);
            for i in 0..n {
                let v = if span <= 0 {
                    low
                } else {
                    // span <= 2^64 - 1 fits u64 because high, low are i64.
                    let off = uniform_below(&mut rng, span as u64);
                    (i128::from(low) + i128::from(off)) as i64
                };
                // Exact into integers; one RNE rounding into floats.
                put(i, Value::I(v));
            }
        }
        Init::Permutation { n: span } => {
            let cols = shape.last().copied().unwrap_or(1).max(1);
            let rows = n / cols;
            let mut deck = Deck::new(span);
            // Element (r, c) is dealt (c * rows + r)-th: walk the deal
            // order and place each value at its row-major slot.
            for k in 0..n {
                let v = if span == 0 { 0 } else { deck.draw(&mut rng) };
                let (c, r) = (k / rows, k % rows);
                put(r * cols + c, Value::I(i64::try_from(v).unwrap_or(i64::MAX)));
            }
        }
    }
    t
}

/// Draws `0..n` without replacement in a seeded random order, starting a
/// fresh shuffle once all `n` are drawn: a partial Fisher-Yates shuffle
/// whose swapped-out slots live in a map, so memory is proportional to the
/// draws, not to `n`.
struct Deck {
    n: u64,
    next: u64,
    moved: std::collections::HashMap<u64, u64>,
}

impl Deck {
    fn new(n: u64) -> Self {
        Self {
            n,
            next: 0,
            moved: Default::default(),
        }
    }

    /// `n > 0`.
    fn draw(&mut self, rng: &mut ChaCha8Rng) -> u64 {
        if self.next == self.n {
            self.next = 0;
            self.moved.clear();
        }
        let i = self.next;
        let j = i + uniform_below(rng, self.n - i);
        let at = |m: &std::collections::HashMap<u64, u64>, k: u64| m.get(&k).copied().unwrap_or(k);
        let (vi, vj) = (at(&self.moved, i), at(&self.moved, j));
        self.moved.insert(j, vi);
        self.moved.remove(&i);
        self.next += 1;
        vj
    }
}

enum Value {
    F(f64),
    I(i64),
}

/// Uniform in `[0, 1)` with 53 random bits.
fn unit_f64(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Unbiased uniform integer in `[0, span)` (Lemire's widening multiply with
/// rejection); `span > 0`.
fn uniform_below(rng: &mut ChaCha8Rng, span: u64) -> u64 {
    let threshold = span.wrapping_neg() % span;
    loop {
        let m = u128::from(rng.next_u64()) * u128::from(span);
        if (m as u64) >= threshold {
            return (m >> 64) as u64;
        }
    }
}

/// Two independent standard normals (Marsaglia polar method).
fn normal_pair(rng: &mut ChaCha8Rng) -> (f64, f64) {
    loop {
        let u = 2.0 * unit_f64(rng) - 1.0;
        let v = 2.0 * unit_f64(rng) - 1.0;
        let s = u * u + v * v;
        if s > 0.0 && s < 1.0 {
            let f = (-2.0 * portable_ln(s) / s).sqrt();
            return (u * f, v * f);
        }
    }
}

/// Natural log for `x` in `(0, 1)` using only basic IEEE operations, so the
/// result is bit-identical on every platform. Accurate to ~1 ulp.
pub(crate) fn portable_ln(x: f64) -> f64 {
    // x = m * 2^k with m in [sqrt(1/2), sqrt(2)).
    let bits = x.to_bits();
    let mut k = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if (bits >> 52) & 0x7ff == 0 {
        // Subnormal: scale up first (not reachable from unit_f64 squares
        // above 2^-106, but keep it correct).
        return portable_ln(x * 2f64.powi(64)) - 64.0 * std::f64::consts::LN_2;
    }
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        k += 1;
    }
    // ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.1716.
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut term = s;
    let mut sum = 0.0;
    let mut j = 1.0;
    // s^2 < 0.0295; 13 odd terms reach below 2^-60 relative.
    for _ in 0..13 {
        sum += term / j;
        term *= s2;
        j += 2.0;
    }
    2.0 * sum + k as f64 * std::f64::consts::LN_2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(tensor: &str) -> FixtureSeed<'_> {
        FixtureSeed {
            scene: "s",
            case: "c",
            tensor,
            seed: 7,
        }
    }

    #[test]
    fn portable_ln_matches_std() {
        for &x in &[
            1e-300,
            1e-10,
            0.001,
            0.1,
            0.25,
            0.5,
            0.707,
            0.9,
            0.999999,
            1.0 - 1e-16,
        ] {
            let (a, b) = (portable_ln(x), x.ln());
            assert!(
                (a - b).abs() <= 4.0 * f64::EPSILON * b.abs().max(1e-300),
                "{x}: {a} vs {b}"
            );
        }
        assert!((portable_ln(5e-324) - 5e-324f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn uniform_stays_in_range_and_varies() {
        let t = make_fixture(
            DType::F32,
            &[1000],
            &Init::Uniform {
                low: -2.0,
                high: 3.0,
            },
            &seed("x"),
        );
        let v = t.to_f32_vec();
        assert!(v.iter().all(|&x| (-2.0..=3.0).contains(&x)));
        let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / 1000.0;
        assert!((mean - 0.5).abs() < 0.2, "mean {mean}");
        let distinct: std::collections::HashSet<u32> = v.iter().map(|x| x.to_bits()).collect();
        assert!(distinct.len() > 990);
    }

    #[test]
    fn normal_moments() {
        let t = make_fixture(
            DType::F64,
            &[20000],
            &Init::Normal {
                mean: 1.0,
                std: 2.0,
            },
            &seed("n"),
        );
        let v = t.to_f64_vec();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
        assert!((mean - 1.0).abs() < 0.06, "mean {mean}");
        assert!((var.sqrt() - 2.0).abs() < 0.06, "std {}", var.sqrt());
    }

    #[test]
    fn randint_bounds_all_values_hit() {
        let t = make_fixture(
            DType::I32,
            &[2000],
            &Init::Randint { low: -3, high: 4 },
            &seed("r"),
        );
        let v = t.to_f64_vec();
        for k in -3..4 {
            assert!(v.contains(&f64::from(k)), "value {k} never drawn");
        }
        assert!(v.iter().all(|&x| (-3.0..4.0).contains(&x)));
        // On a float dtype the values are integers.
        let f = make_fixture(
            DType::BF16,
            &[100],
            &Init::Randint { low: 0, high: 10 },
            &seed("r"),
        );
        assert!(
            f.to_f32_vec()
                .iter()
                .all(|x| x.fract() == 0.0 && (0.0..10.0).contains(x))
        );
        // Full i64 range does not overflow.
        let w = make_fixture(
            DType::I64,
            &[10],
            &Init::Randint {
                low: i64::MIN,
                high: i64::MAX,
            },
            &seed("w"),
        );
        assert_eq!(w.numel(), 10);
        // Empty range: all `low`.
        let e = Init::Randint { low: 5, high: 5 };
        assert_eq!(
            make_fixture(DType::I8, &[3], &e, &seed("e")).bytes(),
            [5, 5, 5]
        );
    }

    #[test]
    fn permutation_deals_distinct_columns_first() {
        // 1-D, n == numel: one permutation of 0..n.
        let p = make_fixture(DType::I32, &[50], &Init::Permutation { n: 50 }, &seed("p"));
        let mut v: Vec<i64> = p.to_f64_vec().iter().map(|&x| x as i64).collect();
        assert_ne!(v, (0..50).collect::<Vec<_>>(), "not shuffled");
        v.sort_unstable();
        assert_eq!(v, (0..50).collect::<Vec<_>>());

        // A block table [rows=4, cols=6] over n = 4 * 3 blocks: the first
        // 3 columns of all rows are 12 distinct values, every value < n.
        let bt = make_fixture(
            DType::I32,
            &[4, 6],
            &Init::Permutation { n: 12 },
            &seed("bt"),
        );
        let v: Vec<i64> = bt.to_f64_vec().iter().map(|&x| x as i64).collect();
        assert!(v.iter().all(|&x| (0..12).contains(&x)));
        let mut lead: Vec<i64> = (0..4)
            .flat_map(|r| (0..3).map(move |c| (r, c)))
            .map(|(r, c)| v[r * 6 + c])
            .collect();
        lead.sort_unstable();
        assert_eq!(lead, (0..12).collect::<Vec<_>>());
        // Columns 3..6 are a second shuffle: again 12 distinct values.
        let mut rest: Vec<i64> = (0..4)
            .flat_map(|r| (3..6).map(move |c| (r, c)))
            .map(|(r, c)| v[r * 6 + c])
            .collect();
        rest.sort_unstable();
        assert_eq!(rest, (0..12).collect::<Vec<_>>());

        // Deterministic, and the seed matters.
        let again = make_fixture(
            DType::I32,
            &[4, 6],
            &Init::Permutation { n: 12 },
            &seed("bt"),
        );
        assert_eq!(bt.bytes(), again.bytes());
        let other = make_fixture(
            DType::I32,
            &[4, 6],
            &Init::Permutation { n: 12 },
            &seed("bt2"),
        );
        assert_ne!(bt.bytes(), other.bytes());

        // n larger than the tensor: distinct values drawn from 0..n.
        let wide = make_fixture(
            DType::I64,
            &[2, 3],
            &Init::Permutation { n: 1000 },
            &seed("w"),
        );
        let w: std::collections::HashSet<i64> =
            wide.to_f64_vec().iter().map(|&x| x as i64).collect();
        assert_eq!(w.len(), 6);
        assert!(w.iter().all(|&x| (0..1000).contains(&x)));
        // n == 0: zeros.
        let z = make_fixture(DType::I8, &[3], &Init::Permutation { n: 0 }, &seed("z"));
        assert_eq!(z.bytes(), [0, 0, 0]);
    }

    #[test]
    fn const_arange_zeros() {
        let a = make_fixture(
            DType::I16,
            &[2, 3],
            &Init::Arange {
                start: -1.0,
                step: 0.5,
            },
            &seed("a"),
        );
        assert_eq!(a.to_f64_vec(), [-1.0, -0.0, 0.0, 0.0, 1.0, 2.0]); // -0.5 and 0.5 tie to even 0
        let c = make_fixture(DType::BF16, &[4], &Init::Const { value: 0.1 }, &seed("c"));
        assert_eq!(c.to_f32_vec(), [half::bf16::from_f64(0.1).to_f32(); 4]);
        let z = make_fixture(DType::F16, &[4], &Init::Zeros, &seed("z"));
        assert_eq!(z, Tensor::zeros(DType::F16, &[4]));
    }

    #[test]
    fn list_fills_in_order_exactly() {
        let init = Init::List {
            values: vec![
                ListItem::Int(i64::MAX),
                ListItem::Int(-3),
                ListItem::Float(2.5),
            ],
        };
        let t = make_fixture(DType::I64, &[3], &init, &seed("l"));
        let got: Vec<i64> = t
            .bytes()
            .chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [i64::MAX, -3, 2], "2.5 rounds half-even to 2");
        let f = make_fixture(DType::F32, &[2, 2], &init, &seed("l"));
        assert_eq!(f.to_f32_vec(), [i64::MAX as f32, -3.0, 2.5, 0.0]);
    }

    #[test]
    fn same_seed_same_bytes_other_names_differ() {
        let init = Init::Normal {
            mean: 0.0,
            std: 1.0,
        };
        let a = make_fixture(DType::F16, &[64, 3], &init, &seed("q"));
        let b = make_fixture(DType::F16, &[64, 3], &init, &seed("q"));
        assert_eq!(a.bytes(), b.bytes());
        assert_ne!(
            a.bytes(),
            make_fixture(DType::F16, &[64, 3], &init, &seed("k")).bytes()
        );
        let other_case = FixtureSeed {
            case: "c2",
            ..seed("q")
        };
        assert_ne!(
            a.bytes(),
            make_fixture(DType::F16, &[64, 3], &init, &other_case).bytes()
        );
        let other_seed = FixtureSeed {
            seed: 8,
            ..seed("q")
        };
        assert_ne!(
            a.bytes(),
            make_fixture(DType::F16, &[64, 3], &init, &other_seed).bytes()
        );
        // Field boundaries are length-prefixed: ("ab","c") != ("a","bc").
        let x = FixtureSeed {
            scene: "ab",
            case: "c",
            tensor: "t",
            seed: 0,
        };
        let y = FixtureSeed {
            scene: "a",
            case: "bc",
            tensor: "t",
            seed: 0,
        };
        assert_ne!(x.key(), y.key());
    }
}
