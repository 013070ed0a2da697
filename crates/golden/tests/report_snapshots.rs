//! Snapshots of the human mismatch report.

use std::path::PathBuf;

use scene_golden::{DType, Mismatch, Tensor, Tolerance, assert_close};

/// `insta::assert_snapshot!` against `tests/snapshots/` of the checkout the
/// test runs in. insta resolves snapshot files from the compile-time
/// manifest dir; a nextest archive run with `--workspace-remap` sets the
/// run-time one to the checkout it runs in.
macro_rules! assert_snapshot {
    ($value:expr) => {{
        let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(manifest.join("tests/snapshots"));
        settings.bind(|| insta::assert_snapshot!($value));
    }};
}

fn report(name: &str, a: &Tensor, e: &Tensor, tol: Tolerance) -> String {
    match assert_close(name, a, e, tol) {
        Err(m @ Mismatch::Values(_)) => m.to_string(),
        other => panic!("expected a values mismatch, got {other:?}"),
    }
}

#[test]
fn f32_report() {
    let e: Vec<f32> = (0..16384).map(|i| (i % 7) as f32 * 0.25 + 1.0).collect();
    let mut a = e.clone();
    a[17] = 3.5; // expected 1.75
    a[9000] = e[9000] + 1e-3; // 2.25 + 1e-3: small abs and rel, still beyond 1e-5
    a[16383] = f32::NAN;
    let t = |v: &[f32]| Tensor::from_f32(DType::F32, &[16384], v).unwrap();
    let r = report("f", &t(&a), &t(&e), Tolerance::new(1e-5, 1e-5));
    assert_snapshot!(r);
}

#[test]
fn bf16_report_multi_dim() {
    let shape = [2, 3, 4];
    let e: Vec<f32> = (0..24).map(|i| i as f32 - 4.0).collect();
    let mut a = e.clone();
    for i in [1, 5, 6, 13, 20, 21, 23] {
        a[i] += 0.5 * (i as f32 + 1.0);
    }
    a[4] = 0.125; // expected 0: infinite relative difference
    let t = |v: &[f32]| Tensor::from_f32(DType::BF16, &shape, v).unwrap();
    let r = report(
        "attn.out",
        &t(&a),
        &t(&e),
        Tolerance::default_for(DType::BF16),
    );
    assert_snapshot!(r);
}

#[test]
fn i32_report() {
    let e: Vec<i64> = (0..10).map(|i| i * 1000).collect();
    let mut a = e.clone();
    a[3] = -7;
    a[8] = i64::from(i32::MAX);
    let t = |v: &[i64]| Tensor::from_i64(DType::I32, &[2, 5], v).unwrap();
    let r = report(
        "topk_idx",
        &t(&a),
        &t(&e),
        Tolerance::default_for(DType::I32),
    );
    assert_snapshot!(r);
}
