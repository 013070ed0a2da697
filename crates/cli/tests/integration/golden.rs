//! Goldens end to end with the real `scene` binary: `.npy` dumps that numpy
//! reads, fixtures identical across processes, and the gemm / softmax /
//! rmsnorm scenes passing on both sim platforms while a mutated kernel in
//! each fails with the mismatch report (and a dump of the failing case).

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{TestEnv, copy_scene};
use scene_golden::{DType, npy};

const PLATFORMS: [&str; 2] = ["a2a3sim", "a5sim"];
const GEMM_CASES: [&str; 4] = ["ragged", "skinny", "square64", "tall"];

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn of(out: Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn text(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr)
    }
}

/// Runs `scene` in `env` with failure dumps going to `<env>/failure-dumps`.
fn scene(env: &TestEnv, args: &[&str]) -> Run {
    Run::of(
        env.scene(args)
            .env("SCENE_FAILURE_DUMP_DIR", failure_root(env))
            .output()
            .expect("spawning scene"),
    )
}

fn failure_root(env: &TestEnv) -> PathBuf {
    env.dir.path().join("failure-dumps")
}

fn read_json(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `<dir>/*.npy` by file name, as bytes.
fn npy_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "npy"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

/// Recomputes C = A @ B from the dumped inputs with numpy (float64) and
/// checks the dumped golden against it, and the dumped output against the
/// golden, within the scene tolerance recorded in meta.json.
const NUMPY_GEMM_CHECK: &str = r#"
import json, pathlib, sys
import numpy as np

root = pathlib.Path(sys.argv[1]) / "gemm"
cases = sorted(p for p in root.iterdir() if p.is_dir())
names = [c.name for c in cases]
assert names == sys.argv[2].split(","), names

def load(path, meta):
    a = np.load(path)
    assert list(a.shape) == meta["shape"], (path, a.shape, meta["shape"])
    if meta["dtype"] == "bf16":
        assert a.dtype == np.dtype("<u2"), (path, a.dtype)
        a = (a.astype(np.uint32) << 16).view(np.float32)
    elif meta["dtype"] == "f16":
        assert a.dtype == np.dtype("<f2"), (path, a.dtype)
    return a

for case in cases:
    meta = json.loads((case / "meta.json").read_text())
    assert meta["verdict"] == "passed", meta
    t = {x["name"]: x for x in meta["tensors"]}
    m, k, n = (meta["params"][p] for p in ("M", "K", "N"))
    for dt in ("bf16", "f16"):
        a = load(case / "inputs" / f"a_{dt}.npy", t[f"a_{dt}"])
        b = load(case / "inputs" / f"b_{dt}.npy", t[f"b_{dt}"])
        assert a.shape == (m, k) and b.shape == (k, n), (a.shape, b.shape)
        golden = np.load(case / "golden" / f"c_{dt}.npy")
        out = np.load(case / "outputs" / f"c_{dt}.npy")
        assert golden.dtype == np.float32 and out.dtype == np.float32
        tol = t[f"c_{dt}"]["tolerance"]
        want = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(golden, want, rtol=tol["rtol"], atol=tol["atol"],
                                   err_msg=f"{case.name}: golden c_{dt} vs numpy")
        np.testing.assert_allclose(out, golden, rtol=tol["rtol"], atol=tol["atol"],
                                   err_msg=f"{case.name}: output c_{dt} vs golden")
        assert np.abs(want).max() > 0.5, "trivial product"
print(f"numpy checked {len(cases)} cases")
"#;

/// python3 when it has numpy, else the suite's managed environment.
fn numpy_python() -> std::path::PathBuf {
    common::test_python().unwrap_or_else(|| "python3".into())
}

#[test]
fn gemm_dump_is_numpy_readable_and_golden_matches_numpy_product() {
    let env = TestEnv::new();
    let dump = env.dir.path().join("dump");
    let run = scene(&env, &["run", "gemm", "--dump", dump.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{}", run.text());
    assert!(
        !run.stdout.contains("dump"),
        "passing cases say nothing about dumps:\n{}",
        run.text()
    );

    // Layout and our own reader first (no python needed).
    for case in GEMM_CASES {
        let dir = dump.join("gemm").join(case);
        let inputs = npy_files(&dir.join("inputs"));
        let names: Vec<&str> = inputs.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["a_bf16.npy", "a_f16.npy", "b_bf16.npy", "b_f16.npy"],
            "{case}"
        );
        let outputs = npy_files(&dir.join("outputs"));
        assert_eq!(outputs.len(), 2, "{case}: {:?}", outputs.keys());
        assert_eq!(npy_files(&dir.join("golden")).len(), 2, "{case}");
        let a = npy::read_npy_as(&dir.join("inputs/a_bf16.npy"), DType::BF16).unwrap();
        assert_eq!(a.dtype(), DType::BF16);
        let a16 = npy::read_npy(&dir.join("inputs/a_f16.npy")).unwrap();
        assert_eq!(a16.dtype(), DType::F16);
        let meta = read_json(&dir.join("meta.json"));
        assert_eq!(meta["scene"], "gemm");
        assert_eq!(meta["case"], case);
        assert_eq!(meta["platform"], "a2a3sim");
        assert_eq!(meta["verdict"], "passed");
        let c = meta["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "c_f16")
            .unwrap();
        assert_eq!(c["tolerance"]["rtol"], 1e-4, "{c}");
        assert_eq!(c["tolerance"]["atol"], 1e-4, "{c}");
    }
    assert!(
        !failure_root(&env).exists(),
        "a passing run must not write failure dumps"
    );

    let out = Command::new(numpy_python())
        .args(["-c", NUMPY_GEMM_CHECK])
        .arg(&dump)
        .arg(GEMM_CASES.join(","))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "numpy check failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("numpy checked 4 cases"),
        "{stdout}\n{stderr}"
    );
}

#[test]
fn fixtures_are_byte_identical_across_processes() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "gemm", "gemm");
    copy_scene(&env, "rmsnorm", "rmsnorm");
    let mut dumps = Vec::new();
    for i in 0..2 {
        let dir = env.dir.path().join(format!("dump{i}"));
        let run = scene(&env, &["run", "--dump", dir.to_str().unwrap()]);
        assert_eq!(run.code, Some(0), "{}", run.text());
        dumps.push(dir);
    }
    let mut compared = 0;
    for (scene_name, cases, per_case) in [
        ("gemm", &GEMM_CASES[..], 4),
        ("rmsnorm", &["many_rows", "odd", "one_row", "small"][..], 2),
    ] {
        for case in cases {
            let inputs = |d: &Path| npy_files(&d.join(scene_name).join(case).join("inputs"));
            let first = inputs(&dumps[0]);
            let second = inputs(&dumps[1]);
            assert_eq!(
                first.len(),
                per_case,
                "{scene_name}::{case}: {:?}",
                first.keys()
            );
            for (name, bytes) in &first {
                assert!(
                    second.get(name) == Some(bytes),
                    "{scene_name}::{case}: inputs/{name} differs between two processes"
                );
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 4 * 4 + 4 * 2);
    // Different tensors of a case do not share a fixture.
    let g = npy_files(&dumps[0].join("gemm/square64/inputs"));
    assert_ne!(g["a_bf16.npy"], g["b_bf16.npy"]);
}

#[test]
fn gemm_softmax_rmsnorm_pass_on_both_platforms() {
    let env = TestEnv::with_scenes(&[]);
    for s in ["gemm", "softmax", "rmsnorm"] {
        copy_scene(&env, s, s);
    }
    for platform in PLATFORMS {
        let run = scene(&env, &["run", "--platform", platform]);
        assert_eq!(run.code, Some(0), "{platform}: {}", run.text());
        assert_eq!(
            run.stdout.lines().last(),
            Some("15 passed, 0 failed"),
            "{platform}: {}",
            run.text()
        );
        for id in [
            "gemm::ragged",
            "softmax::huge",
            "rmsnorm::one_row",
            "rmsnorm::f16_small",
            "rmsnorm::f32_odd",
        ] {
            assert!(
                run.stdout.contains(&format!("PASS {id}")),
                "{platform}: {}",
                run.text()
            );
        }
    }
    assert!(!failure_root(&env).exists(), "no failure, no failure dump");
}

/// Copies `scene_name`, replaces `from` by `to` in `kernel`, and checks that
/// every case fails on both platforms with the mismatch report naming
/// `tensor`, and that the failing case's dump is where the message says.
fn mutated_kernel_fails(scene_name: &str, kernel: &str, from: &str, to: &str, tensor: &str) {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, scene_name, scene_name);
    let src_path = dir.join("kernels").join(kernel);
    let src = std::fs::read_to_string(&src_path).unwrap();
    assert_eq!(
        src.matches(from).count(),
        1,
        "`{from}` not once in {kernel}"
    );
    std::fs::write(&src_path, src.replace(from, to)).unwrap();
    let scene_toml = std::fs::read_to_string(dir.join("scene.toml")).unwrap();
    let cases = scene_toml.matches("[[cases]]").count();

    for platform in PLATFORMS {
        let run = scene(&env, &["run", "--platform", platform]);
        let ctx = format!("{scene_name} on {platform}: {}", run.text());
        assert_eq!(run.code, Some(1), "{ctx}");
        assert_eq!(
            common::summary_line(&run.stdout),
            Some(format!("0 passed, {cases} failed").as_str()),
            "{ctx}"
        );
        // Every case's block names the tensor and how far off it is.
        let report = format!("tensor `{tensor}` mismatch: ");
        let blocks: Vec<&str> = run.stdout.split("FAIL ").skip(1).collect();
        assert_eq!(blocks.len(), cases, "{ctx}");
        for block in blocks {
            for needle in [
                report.as_str(),
                "%) differ beyond tolerance",
                "greatest absolute difference: ",
                "greatest relative difference: ",
                "first mismatches:",
            ] {
                assert!(
                    block.contains(needle),
                    "`{needle}` missing in:\n{block}\n{ctx}"
                );
            }
        }

        // Each failing case names its dump; the dump holds the evidence.
        let dumped: Vec<PathBuf> = run
            .stdout
            .lines()
            .filter_map(|l| l.trim().strip_prefix("dump written to "))
            .map(PathBuf::from)
            .collect();
        assert_eq!(dumped.len(), cases, "{ctx}");
        for path in &dumped {
            assert!(path.starts_with(failure_root(&env)), "{}", path.display());
            let meta = read_json(&path.join("meta.json"));
            assert_eq!(meta["verdict"], "failed", "{}", path.display());
            assert_eq!(meta["platform"], platform);
            assert!(
                meta["message"].as_str().unwrap().contains(&report),
                "{meta}"
            );
            let out = path.join("outputs").join(format!("{tensor}.npy"));
            let golden = path.join("golden").join(format!("{tensor}.npy"));
            let (out, golden) = (
                std::fs::read(&out).unwrap(),
                std::fs::read(&golden).unwrap(),
            );
            assert_eq!(out.len(), golden.len());
            assert_ne!(
                out,
                golden,
                "{}: the dumped output is the wrong one",
                path.display()
            );
        }
    }
}

#[test]
fn mutated_gemm_kernel_fails_with_mismatch_report() {
    mutated_kernel_fails(
        "gemm",
        "gemm.c",
        "acc[i][j] += av * bs[kk][j]",
        "acc[i][j] -= av * bs[kk][j]",
        "c_bf16",
    );
}

#[test]
fn mutated_softmax_kernel_fails_with_mismatch_report() {
    mutated_kernel_fails(
        "softmax",
        "softmax.c",
        "sum += scene_expf",
        "sum -= scene_expf",
        "y",
    );
}

#[test]
fn mutated_rmsnorm_kernel_fails_with_mismatch_report() {
    mutated_kernel_fails(
        "rmsnorm",
        "rmsnorm.c",
        "ss / (float)d + eps",
        "ss * (float)d + eps",
        "y",
    );
}

/// rmsnorm's cases differ by their `dtype` param (bf16, f16, f32 from one
/// definition): each case's tensors are in its dtype, and a case run by
/// another dtype's kernel fails while the others pass.
#[test]
fn rmsnorm_dtype_cases_run_their_own_kernel() {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, "rmsnorm", "rmsnorm");
    let dump = env.dir.path().join("dump");
    let run = scene(&env, &["run", "rmsnorm", "--dump", dump.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{}", run.text());
    for (case, dtype) in [("small", "bf16"), ("f16_small", "f16"), ("f32_odd", "f32")] {
        let meta = read_json(&dump.join("rmsnorm").join(case).join("meta.json"));
        for t in meta["tensors"].as_array().unwrap() {
            assert_eq!(t["dtype"], dtype, "{case}: {t}");
        }
    }
    // The f16 case handed to the bf16 image: only it fails, on `y`.
    let orch = dir.join("orchestration.c");
    let src = std::fs::read_to_string(&orch).unwrap();
    let from = "case SCENE_DTYPE_F16: func = 1; break;";
    assert_eq!(src.matches(from).count(), 1);
    std::fs::write(
        &orch,
        src.replace(from, "case SCENE_DTYPE_F16: func = 0; break;"),
    )
    .unwrap();
    let run = scene(&env, &["run", "rmsnorm"]);
    assert_eq!(run.code, Some(1), "{}", run.text());
    assert!(
        run.stdout.contains("FAIL rmsnorm::f16_small")
            && run.stdout.contains("tensor `y` mismatch"),
        "{}",
        run.text()
    );
    assert_eq!(
        common::summary_line(&run.stdout),
        Some("5 passed, 1 failed"),
        "{}",
        run.text()
    );
}
