//! The kernel math library (`include/scene_math.h`) against host libm: a
//! host program (`tests/math/accuracy.c`) built with `cc -O2` sweeps every
//! function over millions of inputs, edge values included (denormals, +-0,
//! +-inf, NaN), and each maximum error must stay within the bound
//! documented in docs/scene-format.md ("Kernel math library"). And the
//! header compiled freestanding references no libm (or any other) symbol.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Documented bounds: (max ulp on normal results, max ulp on subnormal
/// results). Measured values are in docs/scene-format.md; the bounds leave
/// a little room over them.
const BOUNDS: &[(&str, f64, f64)] = &[
    ("expf", 1.5, 1.0),
    ("logf", 1.0, 0.5),
    ("sqrtf", 0.5, 0.5),
    ("rsqrtf", 2.0, 0.5),
    ("tanhf", 2.0, 0.5),
    ("sigmoidf", 3.0, 1.0),
    ("siluf", 3.0, 1.0),
    ("geluf", 1.0, 1.0),
    ("erff", 2.0, 1.0),
    ("powf", 1.0, 1.0),
    ("fabsf", 0.0, 0.0),
    ("fminf", 0.0, 0.0),
    ("fmaxf", 0.0, 0.0),
    ("floorf", 0.0, 0.0),
    ("ceilf", 0.0, 0.0),
];

fn program_source() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("tests/math/accuracy.c")
}

#[derive(Debug)]
struct Row {
    points: u64,
    max_ulp: f64,
    worst: String,
    max_ulp_sub: f64,
    specials: u64,
    detail: String,
}

fn run_accuracy(dir: &Path, extra_flags: &[&str], only: &[&str]) -> BTreeMap<String, Row> {
    let exe = dir.join(format!("accuracy{}", extra_flags.len()));
    let out = Command::new("cc")
        .args(["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"])
        .args(extra_flags)
        .arg("-I")
        .arg(include_dir())
        .arg(program_source())
        .arg("-o")
        .arg(&exe)
        .arg("-lm")
        .output()
        .expect("running cc");
    assert!(
        out.status.success(),
        "cc rejects the accuracy program:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).args(only).output().expect("running it");
    assert!(run.status.success(), "{run:?}");
    let text = String::from_utf8_lossy(&run.stdout);
    let mut rows = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.splitn(10, ' ').collect();
        assert_eq!(f.len(), 10, "unexpected line `{line}`");
        let num = |s: &str| s.parse::<f64>().unwrap_or(f64::NAN);
        rows.insert(
            f[0].to_owned(),
            Row {
                points: f[1].parse().unwrap_or(0),
                max_ulp: num(f[2]),
                worst: format!("x={} y={}", f[3], f[4]),
                max_ulp_sub: num(f[5]),
                specials: f[8].parse().unwrap_or(u64::MAX),
                detail: f[9].to_owned(),
            },
        );
    }
    eprintln!("{text}");
    rows
}

fn assert_within_bounds(rows: &BTreeMap<String, Row>, names: &[&str]) {
    let mut failures = Vec::new();
    for &(name, ulp, ulp_sub) in BOUNDS.iter().filter(|b| names.contains(&b.0)) {
        let Some(row) = rows.get(name) else {
            failures.push(format!("{name}: not measured"));
            continue;
        };
        if row.points < 1_000_000 {
            failures.push(format!("{name}: only {} points", row.points));
        }
        // A NaN (unparsable) measurement fails too.
        if row.max_ulp.is_nan() || row.max_ulp > ulp {
            failures.push(format!(
                "{name}: {} ulp > {ulp} (at {})",
                row.max_ulp, row.worst
            ));
        }
        if row.max_ulp_sub.is_nan() || row.max_ulp_sub > ulp_sub {
            failures.push(format!(
                "{name}: {} ulp on subnormal results > {ulp_sub}",
                row.max_ulp_sub
            ));
        }
        if row.specials != 0 {
            failures.push(format!(
                "{name}: {} special values wrong, first {}",
                row.specials, row.detail
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_function_is_within_its_documented_error_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = run_accuracy(dir.path(), &[], &[]);
    let names: Vec<&str> = BOUNDS.iter().map(|b| b.0).collect();
    assert_within_bounds(&rows, &names);
    assert_eq!(rows.len(), BOUNDS.len(), "a bound for every function");
}

/// Kernels build with -fno-math-errno, where scene_sqrtf is the compiler's
/// builtin rather than the inline instruction: the same results.
#[test]
fn sqrt_is_exact_with_the_kernel_flags_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let only = ["sqrtf", "rsqrtf"];
    let rows = run_accuracy(dir.path(), &["-fno-math-errno"], &only);
    assert_within_bounds(&rows, &only);
}

/// Every function, called from an exported wrapper so none is dropped.
const WRAPPERS: &str = r#"#include "scene_math.h"
#define W1(f) float w_##f(float x); float w_##f(float x) { return scene_##f(x); }
#define W2(f) float w_##f(float x, float y); float w_##f(float x, float y) { return scene_##f(x, y); }
#ifdef __cplusplus
extern "C" {
#endif
W1(expf) W1(logf) W1(sqrtf) W1(rsqrtf) W1(tanhf) W1(sigmoidf) W1(siluf) W1(geluf)
W1(erff) W1(fabsf) W1(floorf) W1(ceilf) W2(powf) W2(fminf) W2(fmaxf)
#ifdef __cplusplus
}
#endif
"#;

/// Undefined symbols of an object, as `nm -u` lists them.
fn undefined_symbols(dir: &Path, compiler: &str, flags: &[&str], file: &str) -> Vec<String> {
    let src = dir.join(file);
    std::fs::write(&src, WRAPPERS).expect("write");
    let obj = dir.join(format!("{file}.o"));
    let out = Command::new(compiler)
        .args(flags)
        .arg("-I")
        .arg(include_dir())
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {flags:?} rejects scene_math.h:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nm = Command::new("nm")
        .arg("-u")
        .arg(&obj)
        .output()
        .expect("running nm");
    assert!(nm.status.success(), "{nm:?}");
    String::from_utf8_lossy(&nm.stdout)
        .split_whitespace()
        .filter(|s| *s != "U")
        .map(str::to_owned)
        .collect()
}

#[test]
fn freestanding_header_references_no_libm_symbol() {
    let dir = tempfile::tempdir().expect("tempdir");
    let strict = [
        "-Wall",
        "-Wextra",
        "-Werror",
        "-ffreestanding",
        "-fno-builtin",
    ];
    let builds: [(&str, Vec<&str>, &str); 4] = [
        ("cc", [&["-O2", "-std=c11"], &strict[..]].concat(), "c_o2.c"),
        ("cc", [&["-O0", "-std=c11"], &strict[..]].concat(), "c_o0.c"),
        (
            "c++",
            [
                &[
                    "-x",
                    "c++",
                    "-std=c++17",
                    "-O2",
                    "-fno-exceptions",
                    "-fno-rtti",
                ],
                &strict[..],
            ]
            .concat(),
            "cxx_o2.cpp",
        ),
        (
            "cc",
            [&["-O2", "-std=c11", "-fno-math-errno"], &strict[..]].concat(),
            "c_kernel_flags.c",
        ),
    ];
    let mut builds = builds.to_vec();
    // clang too where it is installed (the a2a3sim-clang platform's compiler).
    let clang = Command::new("clang")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if clang {
        builds.push((
            "clang",
            [&["-O2", "-std=c11"], &strict[..]].concat(),
            "clang_o2.c",
        ));
        builds.push((
            "clang++",
            [&["-x", "c++", "-std=c++17", "-O2"], &strict[..]].concat(),
            "clangxx_o2.cpp",
        ));
    }
    for (compiler, flags, file) in builds {
        let undefined = undefined_symbols(dir.path(), compiler, &flags, file);
        assert!(
            undefined.is_empty(),
            "{compiler} {flags:?}: scene_math.h needs {undefined:?}"
        );
    }
}

/// The check above can fail: the same wrappers calling libm do reference it.
#[test]
fn the_nm_check_sees_a_libm_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("libm.c");
    std::fs::write(
        &src,
        "float expf(float);\nfloat w(float x);\nfloat w(float x) { return expf(x); }\n",
    )
    .expect("write");
    let obj = dir.path().join("libm.o");
    let ok = Command::new("cc")
        .args(["-O2", "-ffreestanding", "-fno-builtin", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .status()
        .expect("cc");
    assert!(ok.success());
    let nm = Command::new("nm").arg("-u").arg(&obj).output().expect("nm");
    assert!(String::from_utf8_lossy(&nm.stdout).contains("expf"));
}

/// The device headers of the checkout the test runs in: the manifest dir is
/// read at run time first (a nextest archive run with `--workspace-remap`
/// points it at the checkout it runs in; `scene_device::include_dir()` is
/// the build machine's).
fn include_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("include")
}
