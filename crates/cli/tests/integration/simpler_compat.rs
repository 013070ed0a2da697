//! The original project's kernels as its own sim build compiles them
//! (issue 39): `--simpler-root` / `SCENE_SIMPLER_ROOT` names a checkout,
//! and `chip_tensor` kernels get its include dirs for the scene's runtime
//! and the platform's arch, its defines and its language standard; every
//! block reads its block index, block count and vector lane from the
//! context tail (`args[48]`, `args[49]`). CI has no checkout of the
//! original: `tests/simpler-compat/checkout` stands in, with headers of
//! our own where its kernels look for them.

use crate::common;

use common::{TestEnv, show, workspace_root};

fn compat() -> std::path::PathBuf {
    workspace_root().join("tests/simpler-compat")
}

fn run(
    env: &TestEnv,
    extra: &[&str],
    vars: &[(&str, &str)],
) -> (std::process::Output, serde_json::Value) {
    let scenes = compat().join("scenes");
    let mut args = vec!["run", "--scenes-dir", scenes.to_str().unwrap()];
    args.extend_from_slice(extra);
    env.run_with_report_using(&args, |cmd| {
        for (k, v) in vars {
            cmd.env(k, v);
        }
    })
}

/// Both runtimes' headers, both arches', the vector and cube defines, the
/// original's language standard (each kernel `#error`s without them), and
/// the tail of plain and mixed tasks of 1 to 16 blocks, compared exactly.
/// The flag and the variable name the same checkout.
#[test]
fn the_originals_kernels_get_its_toolchain_and_their_context_tail() {
    let env = TestEnv::new();
    let checkout = compat().join("checkout");
    let checkout = checkout.to_str().unwrap();
    let (out, r) = run(&env, &["--simpler-root", checkout], &[]);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 2, "{}", show(&out));
    let (out, r) = run(
        &env,
        &["--platform", "a5sim"],
        &[("SCENE_SIMPLER_ROOT", checkout)],
    );
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 1, "{}", show(&out));
}

/// Without a checkout named the same kernels do not build (their headers
/// are nowhere), each failure naming the kernel and the header.
#[test]
fn without_a_checkout_the_originals_kernels_fail_naming_the_header() {
    let env = TestEnv::new();
    let (out, r) = run(&env, &["tail_tmr"], &[]);
    assert!(!out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["failed"], 1, "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("kernel `TAIL_AIV`") && stdout.contains("arch_tag.h"),
        "{}",
        show(&out)
    );
}

/// A directory that is not a checkout is a usage error (exit 2) naming
/// it and what it lacks, before any work.
#[test]
fn a_directory_that_is_not_a_checkout_is_a_usage_error() {
    let env = TestEnv::new();
    let not = env.dir.path().join("not-simpler");
    std::fs::create_dir_all(&not).unwrap();
    let out = env
        .scene(&["run", "--simpler-root", not.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--simpler-root / SCENE_SIMPLER_ROOT")
            && stderr.contains("not-simpler")
            && stderr.contains("src/common/task_interface/tensor.h"),
        "{}",
        show(&out)
    );
}
