//! The comparison rules, the built-ins and the compare stage together.

use scene_golden::{Tensor, Tolerance};

use super::*;
use crate::golden::GoldenRegistry;
use crate::judge::Judged;
use crate::prepare::check_custom_comparisons;
use scene_golden::DType;

fn f32t(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_f32(DType::F32, shape, v).unwrap()
}

fn run(
    comparison: &Comparison,
    actual: &Tensor,
    expected: Option<&Tensor>,
    allow_nonfinite: bool,
) -> OutputReport {
    Judged {
        scene: "s",
        case: "c",
        tensor: "y",
        comparison,
        tolerance: Tolerance::new(1e-3, 1e-3),
        allow_nonfinite,
        actual,
        expected,
    }
    .judge(&GoldenRegistry::new())
}

fn custom(name: &str, args: &[(&str, f64)]) -> Comparison {
    Comparison::Custom {
        name: name.into(),
        args: args.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

const SCENE: &str = r#"
name = "demo"
platforms = ["a2a3sim"]
golden = "demo"

[orchestration]
source = "k.c"
function = "o"
signature = ["in", "out", "out", "out"]

[[incores]]
func_id = 0
name = "k"
core = "aiv"
source = "k.c"

[[tensors]]
name = "x"
dtype = "f32"
shape = ["R", 4]

[[tensors]]
name = "y"
dtype = "f32"
shape = ["R", 4]
compare = { custom = "first_rows", rows = "valid" }

[[tensors]]
name = "n"
dtype = "i32"
shape = ["R"]

[[tensors]]
name = "w"
dtype = "f32"
shape = ["R"]
allow_nonfinite = true

[[cases]]
name = "a"
params = { R = 8, valid = 3 }
skip_golden = ["w"]

[[cases]]
name = "b"
params = { R = 4, valid = 4 }
skip_golden = true
"#;

fn load(text: &str) -> Result<crate::scene::Scene, crate::scene::SceneError> {
    let tmp = tempfile::Builder::new().prefix("cmp").tempdir().unwrap();
    let dir = tmp.path().join("demo");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("k.c"), "").unwrap();
    std::fs::write(dir.join("scene.toml"), text).unwrap();
    crate::scene::Scene::load(&dir)
}

/// Arguments resolve per case, skips per case and tensor, and integer
/// outputs keep allclose with tolerance 0 (exact) by default.
#[test]
fn comparisons_resolve_per_case() {
    let s = load(SCENE).unwrap();
    let (a, b) = (&s.cases[0], &s.cases[1]);
    assert_eq!(s.comparison_for(a, 0), None, "inputs are not compared");
    assert_eq!(
        s.comparison_for(a, 1),
        Some(&custom("first_rows", &[("rows", 3.0)]))
    );
    assert_eq!(s.comparison_for(a, 2), Some(&Comparison::AllClose));
    assert!(s.tolerance_for(a, 2).is_exact());
    assert_eq!(s.comparison_for(a, 3), Some(&Comparison::Skipped));
    assert!(!s.case_skips_every_output(a));
    for j in 1..4 {
        assert_eq!(s.comparison_for(b, j), Some(&Comparison::Skipped), "{j}");
    }
    assert!(s.case_skips_every_output(b));
    let registry = GoldenRegistry::new();
    assert!(check_custom_comparisons(&registry, &s, a).is_ok());
}

#[test]
fn unregistered_custom_comparisons_name_file_field_and_case() {
    let s = load(&SCENE.replace("\"first_rows\"", "\"first_row\"")).unwrap();
    let e = check_custom_comparisons(&GoldenRegistry::new(), &s, &s.cases[0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("scene.toml: `tensors[1].compare.custom`: case `a`: tensor `y`: comparison `first_row` is not registered (registered: cosine, first_rows"), "{e}");
    let s = load(&SCENE.replace("rows = \"valid\"", "rows = 1, extra = 2")).unwrap();
    let e = check_custom_comparisons(&GoldenRegistry::new(), &s, &s.cases[0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`tensors[1].compare.extra`: case `a`"), "{e}");
    assert!(
        e.contains("takes no argument `extra` (it takes: rows)"),
        "{e}"
    );
    let s = load(&SCENE.replace("rows = \"valid\"", "")).unwrap();
    let e = check_custom_comparisons(&GoldenRegistry::new(), &s, &s.cases[0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`tensors[1].compare`: case `a`"), "{e}");
    assert!(e.contains("needs argument `rows`"), "{e}");
}

#[test]
fn descriptions_name_the_rule_and_its_numbers() {
    let t = Tolerance::new(1e-3, 1e-5);
    assert_eq!(
        Comparison::AllClose.describe(&t),
        "allclose(rtol=0.001, atol=1e-05)"
    );
    assert_eq!(
        Comparison::AllClose.describe(&t.with_equal_nan(true)),
        "allclose(rtol=0.001, atol=1e-05, equal_nan)"
    );
    assert_eq!(Comparison::Exact.describe(&t), "exact");
    assert_eq!(
        custom("cosine", &[("min", 0.999)]).describe(&t),
        "cosine(min=0.999)"
    );
    assert_eq!(Comparison::Skipped.describe(&t), "skip_golden");
}

#[test]
fn cosine_passes_a_scaled_output_and_fails_a_flipped_one() {
    let e = f32t(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let scaled = f32t(&[4], &[1.1, 2.2, 3.3, 4.4]);
    let c = custom("cosine", &[("min", 0.999)]);
    let r = run(&c, &scaled, Some(&e), false);
    assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
    assert!(r.detail.unwrap().contains(">= min 0.999"));
    // allclose would have failed it.
    assert_eq!(
        run(&Comparison::AllClose, &scaled, Some(&e), false).verdict,
        Verdict::Fail
    );
    let flipped = f32t(&[4], &[-1.0, 2.0, -3.0, 4.0]);
    let r = run(&c, &flipped, Some(&e), false);
    assert_eq!(r.verdict, Verdict::Fail);
    let d = r.detail.unwrap();
    assert!(
        d.contains("tensor `y` failed comparison cosine(min=0.999): cosine similarity"),
        "{d}"
    );
    assert!(d.contains("< min 0.999"), "{d}");
}

#[test]
fn first_rows_ignores_the_rest_and_catches_a_bad_valid_row() {
    let e = f32t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let garbage = f32t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, f32::NAN, 1e30]);
    let c = custom("first_rows", &[("rows", 2.0)]);
    let r = run(&c, &garbage, Some(&e), false);
    assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
    assert!(r.detail.unwrap().contains("rows 2..3 ignored"));
    let bad = f32t(&[3, 2], &[1.0, 2.0, 3.5, 4.0, 5.0, 6.0]);
    let r = run(&c, &bad, Some(&e), false);
    assert_eq!(r.verdict, Verdict::Fail);
    let d = r.detail.unwrap();
    assert!(
        d.contains("in rows 0..2 of 3: tensor `y` mismatch: 1 / 4"),
        "{d}"
    );
    assert!(d.contains("[1, 0]"), "{d}");
    let r = run(&custom("first_rows", &[("rows", 4.0)]), &e, Some(&e), false);
    assert!(r.detail.unwrap().contains("rows = 4, but"));
    let r = run(&custom("first_rows", &[("rows", 1.5)]), &e, Some(&e), false);
    assert!(r.detail.unwrap().contains("not a non-negative integer"));
}

#[test]
fn abs_error_builtins() {
    let e = f32t(&[3], &[1.0, 2.0, 3.0]);
    let a = f32t(&[3], &[1.0, 2.5, 3.0]);
    let ok = run(&custom("max_abs", &[("max", 0.5)]), &a, Some(&e), false);
    assert_eq!(ok.verdict, Verdict::Pass, "{ok:?}");
    let bad = run(&custom("max_abs", &[("max", 0.25)]), &a, Some(&e), false);
    assert_eq!(bad.verdict, Verdict::Fail);
    assert!(
        bad.detail
            .unwrap()
            .contains("= 0.5 at index [1] > max 0.25")
    );
    let ok = run(&custom("mean_abs", &[("max", 0.2)]), &a, Some(&e), false);
    assert_eq!(ok.verdict, Verdict::Pass, "{ok:?}");
    let bad = run(&custom("mean_abs", &[("max", 0.1)]), &a, Some(&e), false);
    assert_eq!(bad.verdict, Verdict::Fail);
}

#[test]
fn issue27_first_rows_with_zero_rows_fails_instead_of_comparing_nothing() {
    let e = f32t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let garbage = f32t(&[3, 2], &[9.0; 6]);
    for actual in [&e, &garbage] {
        let r = run(
            &custom("first_rows", &[("rows", 0.0)]),
            actual,
            Some(&e),
            false,
        );
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        let d = r.detail.unwrap();
        assert!(d.contains("rows = 0 compares nothing"), "{d}");
    }
}

#[test]
fn issue27_cosine_min_of_minus_one_or_less_is_refused() {
    let e = f32t(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let flipped = f32t(&[4], &[-1.0, -2.0, -3.0, -4.0]);
    for min in [-1.0, -2.0] {
        let r = run(
            &custom("cosine", &[("min", min)]),
            &flipped,
            Some(&e),
            false,
        );
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert!(r.detail.unwrap().contains("accepts every output"));
    }
    // Just above -1 is still a real (if loose) bound.
    let r = run(&custom("cosine", &[("min", -0.5)]), &e, Some(&e), false);
    assert_eq!(r.verdict, Verdict::Pass, "{r:?}");
}

#[test]
fn issue27_nonfinite_or_negative_thresholds_are_refused() {
    let e = f32t(&[3], &[1.0, 2.0, 3.0]);
    let a = f32t(&[3], &[100.0, 2.0, 3.0]);
    for (name, arg) in [("cosine", "min"), ("max_abs", "max"), ("mean_abs", "max")] {
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let r = run(&custom(name, &[(arg, v)]), &a, Some(&e), false);
            assert_eq!(r.verdict, Verdict::Fail, "{name} {v}: {r:?}");
            assert!(r.detail.unwrap().contains("is not finite"), "{name} {v}");
        }
    }
    for name in ["max_abs", "mean_abs"] {
        let r = run(&custom(name, &[("max", -0.5)]), &e, Some(&e), false);
        assert_eq!(r.verdict, Verdict::Fail, "{r:?}");
        assert!(r.detail.unwrap().contains("is negative"), "{name}");
    }
}

#[test]
fn exact_and_allclose_name_the_comparison_in_the_failure() {
    let e = f32t(&[2], &[1.0, 2.0]);
    let a = f32t(&[2], &[1.0, f32::from_bits(2.0f32.to_bits() + 1)]);
    assert_eq!(
        run(&Comparison::AllClose, &a, Some(&e), false).verdict,
        Verdict::Pass
    );
    let r = run(&Comparison::Exact, &a, Some(&e), false);
    assert_eq!(r.verdict, Verdict::Fail);
    let d = r.detail.unwrap();
    assert!(d.starts_with("tensor `y` mismatch: 1 / 2"), "{d}");
    assert!(d.ends_with("comparison: exact"), "{d}");
}

#[test]
fn skipped_outputs_are_checked_for_nonfinite_values() {
    let fine = f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let r = run(&Comparison::Skipped, &fine, None, false);
    assert_eq!((r.verdict, r.detail), (Verdict::Skipped, None));
    let nan = f32t(&[2, 2], &[1.0, 2.0, f32::NAN, f32::INFINITY]);
    let r = run(&Comparison::Skipped, &nan, None, false);
    assert_eq!(r.verdict, Verdict::Fail);
    let d = r.detail.unwrap();
    assert!(
            d.contains("tensor `y`: not compared (skip_golden), but holds a non-finite value: nan at index [1, 0] (2 non-finite of 4 elements)"),
            "{d}"
        );
    assert!(d.contains("allow_nonfinite = true"), "{d}");
    let r = run(&Comparison::Skipped, &nan, None, true);
    assert_eq!(r.verdict, Verdict::Skipped);
    // A compared output without a golden fails, never passes silently.
    let r = run(&Comparison::AllClose, &fine, None, false);
    assert_eq!(r.verdict, Verdict::Fail);
}

#[test]
fn unregistered_custom_comparison_fails_naming_the_registered_ones() {
    let e = f32t(&[1], &[1.0]);
    let r = run(&custom("nope", &[]), &e, Some(&e), false);
    assert_eq!(r.verdict, Verdict::Fail);
    let d = r.detail.unwrap();
    assert!(d.contains("comparison `nope` is not registered"), "{d}");
    assert!(d.contains("cosine, first_rows, max_abs, mean_abs"), "{d}");
}

#[test]
fn a_registered_comparison_is_called_with_its_args() {
    fn at_least(ctx: &ComparisonCtx<'_>) -> Result<String, ComparisonFailure> {
        let min = ctx.arg("min")?;
        let all = ctx.actual.to_f32_vec().iter().all(|&v| f64::from(v) >= min);
        if all {
            Ok(format!("all >= {min}"))
        } else {
            Err(format!("some < {min}").into())
        }
    }
    let registry = GoldenRegistry::new().register_comparison("at_least", &["min"], at_least);
    assert!(registry.comparison_names().any(|n| n == "at_least"));
    let e = f32t(&[2], &[5.0, 6.0]);
    let c = custom("at_least", &[("min", 5.5)]);
    let judged = |actual: &Tensor| {
        Judged {
            scene: "s",
            case: "c",
            tensor: "y",
            comparison: &c,
            tolerance: Tolerance::EXACT,
            allow_nonfinite: false,
            actual,
            expected: Some(&e),
        }
        .judge(&registry)
    };
    assert_eq!(judged(&f32t(&[2], &[6.0, 7.0])).verdict, Verdict::Pass);
    let r = judged(&e);
    assert_eq!(r.verdict, Verdict::Fail);
    assert!(r.detail.unwrap().contains("some < 5.5"));
}
