//! Property tests: `assert_close` against a plain element loop in f64.

use half::{bf16, f16};
use proptest::prelude::*;
use scene_golden::closeness::{CHUNK_ELEMS, MAX_LISTED};
use scene_golden::{DType, Mismatch, Tensor, Tolerance, assert_close};

/// Straightforward reference: indices of mismatching elements.
fn reference(a: &[f64], e: &[f64], tol: &Tolerance) -> Vec<usize> {
    let mut bad = Vec::new();
    for i in 0..a.len() {
        let (x, y) = (a[i], e[i]);
        let ok = if x.is_nan() || y.is_nan() {
            tol.equal_nan && x.is_nan() && y.is_nan()
        } else if x.is_infinite() || y.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= tol.atol + tol.rtol * y.abs()
        };
        if !ok {
            bad.push(i);
        }
    }
    bad
}

/// Checks the verdict and the report against the reference.
fn check(actual: &Tensor, expected: &Tensor, tol: Tolerance) -> Result<(), TestCaseError> {
    let (a, e) = (actual.to_f64_vec(), expected.to_f64_vec());
    let bad = reference(&a, &e, &tol);
    match assert_close("t", actual, expected, tol) {
        Ok(()) => prop_assert!(bad.is_empty(), "passed but reference found {:?}", bad),
        Err(Mismatch::Values(r)) => {
            prop_assert!(!bad.is_empty(), "failed but reference found none: {}", r);
            prop_assert_eq!(r.mismatched, bad.len());
            prop_assert_eq!(r.total, a.len());
            let firsts: Vec<usize> = r
                .first
                .iter()
                .map(|(idx, _, _)| flat(idx, actual.shape()))
                .collect();
            prop_assert_eq!(&firsts[..], &bad[..bad.len().min(MAX_LISTED)]);
            for (idx, x, y) in &r.first {
                let i = flat(idx, actual.shape());
                prop_assert!(same(*x, a[i]) && same(*y, e[i]));
            }
            let diffs: Vec<(usize, f64)> = bad
                .iter()
                .map(|&i| (i, (a[i] - e[i]).abs()))
                .filter(|(_, d)| !d.is_nan())
                .collect();
            match (
                &r.max_abs,
                diffs
                    .iter()
                    .map(|p| p.1)
                    .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.max(d)))),
            ) {
                (None, None) => {}
                (Some(w), Some(max)) => {
                    prop_assert_eq!(w.diff, max);
                    prop_assert_eq!(w.diff, (a[w.flat] - e[w.flat]).abs());
                    prop_assert_eq!(flat(&w.index, actual.shape()), w.flat);
                }
                (w, m) => prop_assert!(false, "max_abs {:?} vs reference {:?}", w, m),
            }
        }
        Err(other) => prop_assert!(false, "unexpected {}", other),
    }
    Ok(())
}

fn same(x: f64, y: f64) -> bool {
    x == y || (x.is_nan() && y.is_nan())
}

fn flat(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &d)| acc * d + i)
}

fn special_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(f32::NAN),
        Just(f32::INFINITY),
        Just(f32::NEG_INFINITY),
        Just(0.0f32),
        Just(-0.0f32),
        Just(f32::from_bits(1)),            // smallest denormal
        Just(-f32::from_bits(0x007f_ffff)), // largest denormal
        Just(f32::MIN_POSITIVE),
        Just(f32::MAX),
    ]
}

fn value_f32() -> impl Strategy<Value = f32> {
    prop_oneof![4 => -10.0f32..10.0, 1 => special_f32(), 1 => any::<f32>()]
}

/// Actual value derived from an expected one: equal, nudged, or arbitrary.
fn nudge(e: f32) -> impl Strategy<Value = f32> {
    prop_oneof![
        3 => Just(e),
        3 => (-30i32..30).prop_map(move |k| e + k as f32 * 1e-6 * (1.0 + e.abs())),
        1 => (-3i32..3).prop_map(move |k| f32::from_bits(e.to_bits().wrapping_add(k as u32))),
        1 => value_f32(),
    ]
}

fn tolerance() -> impl Strategy<Value = Tolerance> {
    (
        prop_oneof![Just(0.0), Just(1.3e-6), Just(1e-5), Just(1e-3)],
        prop_oneof![
            Just(0.0),
            Just(1e-5),
            Just(1e-3),
            Just(f64::from(f32::from_bits(1)))
        ],
        any::<bool>(),
    )
        .prop_map(|(rtol, atol, equal_nan)| Tolerance {
            rtol,
            atol,
            equal_nan,
        })
}

fn f32_pairs(max: usize) -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    prop::collection::vec(value_f32().prop_flat_map(|e| (nudge(e), Just(e))), 0..max)
        .prop_map(|v| v.into_iter().unzip())
}

proptest! {
    #[test]
    fn f32_matches_reference((a, e) in f32_pairs(300), tol in tolerance()) {
        let n = a.len();
        let t = |v: &[f32]| Tensor::from_f32(DType::F32, &[n], v).unwrap();
        check(&t(&a), &t(&e), tol)?;
    }

    /// One special pair among otherwise equal data, so the verdict hinges on it.
    #[test]
    fn f32_one_special_pair(
        base in prop::collection::vec(-10.0f32..10.0, 1..100),
        pos in any::<prop::sample::Index>(),
        x in prop_oneof![special_f32(), -10.0f32..10.0],
        y in prop_oneof![special_f32(), -10.0f32..10.0],
        tol in tolerance(),
    ) {
        let n = base.len();
        let (mut a, mut e) = (base.clone(), base);
        let i = pos.index(n);
        a[i] = x;
        e[i] = y;
        let t = |v: &[f32]| Tensor::from_f32(DType::F32, &[n], v).unwrap();
        check(&t(&a), &t(&e), tol)?;
        check(&t(&e), &t(&a), tol)?;
    }

    /// Actual values a few ulps either side of the tolerance bound, where the
    /// conservative f32 prefilter hands over to the exact rule.
    #[test]
    fn f32_near_the_bound(
        es in prop::collection::vec(prop_oneof![-1e6f32..1e6, -1.0f32..1.0, Just(0.0f32)], 1..64),
        ulps in prop::collection::vec(-40i32..40, 64),
        signs in prop::collection::vec(any::<bool>(), 64),
        rtol in prop_oneof![Just(0.0), Just(1.3e-6), Just(1e-5), Just(1e-3), Just(0.5)],
        atol in prop_oneof![Just(1e-5), Just(1e-3), Just(1e-8), Just(1.0)],
    ) {
        let tol = Tolerance::new(rtol, atol);
        let n = es.len();
        let a: Vec<f32> = es.iter().enumerate().map(|(i, &e)| {
            let bound = atol + rtol * f64::from(e).abs();
            let edge = if signs[i] { f64::from(e) + bound } else { f64::from(e) - bound };
            let edge = edge as f32;
            f32::from_bits((edge.to_bits() as i64 + i64::from(ulps[i])).clamp(0, i64::from(u32::MAX)) as u32)
        }).collect();
        let t = |v: &[f32]| Tensor::from_f32(DType::F32, &[n], v).unwrap();
        check(&t(&a), &t(&es), tol)?;
    }

    #[test]
    fn f32_2d_indices((a, e) in f32_pairs(40).prop_filter("even", |(a, _)| a.len() % 4 == 0), tol in tolerance()) {
        let shape = [a.len() / 4, 2, 2];
        let t = |v: &[f32]| Tensor::from_f32(DType::F32, &shape, v).unwrap();
        check(&t(&a), &t(&e), tol)?;
    }

    #[test]
    fn f16_and_bf16_bits_match_reference(
        pairs in prop::collection::vec((any::<u16>(), prop_oneof![Just(0i16), Just(1), Just(-1), Just(7)], any::<bool>()), 0..300),
        tol in tolerance(),
    ) {
        let e: Vec<u16> = pairs.iter().map(|p| p.0).collect();
        // Actual is the same bits, a neighbor, or (flag) a sign flip.
        let a: Vec<u16> = pairs.iter().map(|&(b, k, flip)| b.wrapping_add(k as u16) ^ if flip && k == 7 { 0x8000 } else { 0 }).collect();
        let bytes = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        for dt in [DType::F16, DType::BF16] {
            let n = e.len();
            let ta = Tensor::from_bytes(dt, &[n], bytes(&a)).unwrap();
            let te = Tensor::from_bytes(dt, &[n], bytes(&e)).unwrap();
            // to_f64_vec must agree with the half crate's decoding.
            let dec = |x: u16| if dt == DType::F16 { f16::from_bits(x).to_f64() } else { bf16::from_bits(x).to_f64() };
            prop_assert!(ta.to_f64_vec().iter().zip(&a).all(|(v, &x)| same(*v, dec(x))));
            check(&ta, &te, tol)?;
            check(&ta, &te, Tolerance::default_for(dt))?;
        }
    }

    #[test]
    fn i32_matches_reference(
        pairs in prop::collection::vec((any::<i32>(), prop_oneof![3 => Just(0i64), 1 => -2i64..3, 1 => any::<i32>().prop_map(i64::from)]), 0..200),
        atol in prop_oneof![Just(0.0), Just(1.0), Just(2.5)],
        rtol in prop_oneof![Just(0.0), Just(1e-9)],
    ) {
        let e: Vec<i64> = pairs.iter().map(|p| i64::from(p.0)).collect();
        let a: Vec<i64> = pairs.iter().map(|p| i64::from(p.0) + p.1).collect();
        let n = e.len();
        let ta = Tensor::from_i64(DType::I32, &[n], &a).unwrap();
        let te = Tensor::from_i64(DType::I32, &[n], &e).unwrap();
        check(&ta, &te, Tolerance::new(rtol, atol))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Sparse mismatches in a tensor spanning several parallel chunks.
    #[test]
    fn sparse_mismatches_across_chunks(
        hits in prop::collection::vec((0usize..3 * CHUNK_ELEMS + 1234, prop_oneof![special_f32(), Just(5.0f32)]), 0..12),
        equal_nan in any::<bool>(),
    ) {
        let n = 3 * CHUNK_ELEMS + 1234;
        let e: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.01).collect();
        let mut a = e.clone();
        for &(i, v) in &hits {
            a[i] = v;
        }
        let t = |v: &[f32]| Tensor::from_f32(DType::F32, &[n], v).unwrap();
        check(&t(&a), &t(&e), Tolerance::default_for(DType::F32).with_equal_nan(equal_nan))?;
    }
}
