//! Python goldens and the golden cache, end to end with the real `scene`
//! binary and real python3 processes: a Python-golden scene passes; an
//! exception, a wrong shape, a wrong dtype, a missing function and a hang
//! each fail their case alone; no python3 or no numpy fails the Python
//! scenes only; pass 2 of a two-pass run needs no Python; a warm run
//! computes no golden, and a changed golden file, input or param
//! recomputes exactly the cases it affects.
//!
//! Needs numpy: python3's, else a managed environment made once for the
//! suite (`common::test_python`, which `TestEnv` passes as SCENE_PYTHON).

use crate::common;

use std::path::PathBuf;
use std::process::Output;

use common::{TestEnv, assert_success, copy_scene, report_case as case, show};
use serde_json::Value;

/// The interpreter the tests' `scene` processes run Python goldens with.
fn python() -> PathBuf {
    common::test_python().unwrap_or_else(|| PathBuf::from("python3"))
}

const HELPER: &str = "def combine(a, b):\n    s = a + b\n    return (s + 1) * (s + 2) + s\n";

const GOLDEN: &str = r#"import time

import numpy as np

from helper import combine


def compute_golden(tensors, params):
    mode = params.get("MODE", "ok")
    a, b = tensors["a"], tensors["b"]
    if mode == "raise":
        raise ValueError("boom from the golden")
    if mode == "shape":
        tensors["f"] = np.zeros(3, dtype=np.float32)
        return
    if mode == "dtype":
        tensors["f"] = combine(a, b).astype(np.float64)
        return
    if mode == "hang":
        time.sleep(3600)
    tensors["f"][:] = combine(a, b)
"#;

/// A copy of `vector_example` as `pyvec` with a Python golden
/// (`golden.py` + a local `helper.py`) and cases `MODE` drives; a copy of
/// `vector_example` itself (Rust golden) beside it.
fn setup(modes: &[(&str, &str)]) -> (TestEnv, PathBuf) {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "vector_example", "vector_example");
    let dir = copy_scene(&env, "vector_example", "pyvec");
    std::fs::write(dir.join("golden.py"), GOLDEN).unwrap();
    std::fs::write(dir.join("helper.py"), HELPER).unwrap();
    let toml = std::fs::read_to_string(dir.join("scene.toml")).unwrap();
    let head = &toml[..toml.find("[[cases]]").unwrap()];
    let mut text = head.replace(
        "golden = \"vector_example\"",
        "golden = { python = \"golden.py\" }",
    );
    for (i, (name, mode)) in modes.iter().enumerate() {
        text.push_str(&format!(
            "[[cases]]\nname = \"{name}\"\nparams = {{ N = {}, MODE = \"{mode}\" }}\n\n",
            1000 + i
        ));
    }
    std::fs::write(dir.join("scene.toml"), text).unwrap();
    (env, dir)
}

fn run(env: &TestEnv, args: &[&str], extra_env: &[(&str, &str)]) -> (Output, Value) {
    let mut full = vec!["run"];
    full.extend(args);
    env.run_with_report_using(&full, |cmd| {
        cmd.envs(extra_env.iter().copied());
    })
}

fn passed(report: &Value, name: &str) -> bool {
    case(report, name)["status"] == "passed"
}

fn message(report: &Value, name: &str) -> String {
    case(report, name)["message"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn recomputed(report: &Value) -> Vec<String> {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["golden_cached"] == false)
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn python_golden_failures_fail_only_their_case() {
    let (env, _) = setup(&[
        ("ok1", "ok"),
        ("raise", "raise"),
        ("shape", "shape"),
        ("dtype", "dtype"),
        ("hang", "hang"),
        ("ok2", "ok"),
    ]);
    let (out, report) = run(&env, &[], &[("SCENE_GOLDEN_TIMEOUT", "2")]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    for ok in [
        "pyvec::ok1",
        "pyvec::ok2",
        "vector_example::small",
        "vector_example::odd",
    ] {
        assert!(passed(&report, ok), "{ok}: {}", show(&out));
    }
    let failures = [
        ("pyvec::raise", "ValueError: boom from the golden"),
        (
            "pyvec::shape",
            "golden output `f` has shape [3], expected [1002]",
        ),
        (
            "pyvec::dtype",
            "golden output `f` has dtype float64, expected f32",
        ),
        ("pyvec::hang", "no answer within 2 s"),
    ];
    for (name, needle) in failures {
        let c = case(&report, name);
        assert_eq!(c["status"], "failed", "{name}");
        assert_eq!(c["failure_stage"], "golden", "{name}");
        let m = message(&report, name);
        assert!(m.contains(needle), "{name}: {m}");
        assert!(
            m.contains(name),
            "{name}: the message names scene and case: {m}"
        );
    }
    // The exception comes with its traceback, down to the user's line.
    let m = message(&report, "pyvec::raise");
    assert!(m.contains("Traceback") && m.contains("golden.py"), "{m}");
    assert_eq!(report["totals"]["failed"], 4);
}

#[test]
fn missing_function_fails_that_scene_only() {
    let (env, dir) = setup(&[("ok1", "ok")]);
    std::fs::write(dir.join("golden.py"), "X = 1\n").unwrap();
    let (out, report) = run(&env, &[], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let m = message(&report, "pyvec::ok1");
    assert!(m.contains("defines no function `compute_golden`"), "{m}");
    assert!(passed(&report, "vector_example::small"));
}

#[test]
fn no_python_or_no_numpy_fails_python_scenes_with_one_line() {
    let (env, _) = setup(&[("ok1", "ok"), ("ok2", "ok")]);
    // No interpreter at all.
    let (out, report) = run(&env, &[], &[("SCENE_PYTHON", "/nonexistent/python3")]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    for name in ["pyvec::ok1", "pyvec::ok2"] {
        let m = message(&report, name);
        assert_eq!(m.lines().count(), 1, "{m}");
        assert!(
            m.contains("/nonexistent/python3") && m.contains("install"),
            "{m}"
        );
    }
    assert!(passed(&report, "vector_example::small"));
    // A python3 whose numpy cannot be imported (shadowed by a module that
    // raises ImportError, through a real wrapper script).
    let shadow = env.dir.path().join("shadow");
    std::fs::create_dir_all(&shadow).unwrap();
    std::fs::write(
        shadow.join("numpy.py"),
        "raise ImportError('no numpy here')\n",
    )
    .unwrap();
    let wrapper = env.dir.path().join("python-no-numpy");
    scene_util::write_executable(
        &wrapper,
        format!(
            "#!/bin/sh\nPYTHONPATH={} exec python3 \"$@\"\n",
            shadow.display()
        ),
    )
    .unwrap();
    let (out, report) = run(&env, &[], &[("SCENE_PYTHON", wrapper.to_str().unwrap())]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let m = message(&report, "pyvec::ok1");
    assert_eq!(m.lines().count(), 1, "{m}");
    assert!(
        m.contains("numpy cannot be imported") && m.contains("pip install numpy"),
        "{m}"
    );
    assert!(passed(&report, "vector_example::odd"));
}

#[test]
fn two_pass_run_needs_no_python() {
    let (env, _) = setup(&[("ok1", "ok"), ("ok2", "ok")]);
    let bundle = env.dir.path().join("bundle");
    let out = env
        .scene(&["precompile", "--out", bundle.to_str().unwrap(), "pyvec"])
        .output()
        .unwrap();
    assert_success(&out);
    let (out, report) = run(
        &env,
        &["--from", bundle.to_str().unwrap(), "pyvec"],
        &[
            ("SCENE_PYTHON", "/nonexistent/python3"),
            ("SCENE_CC", "false"),
            ("SCENE_LD", "false"),
        ],
    );
    assert_success(&out);
    assert!(passed(&report, "pyvec::ok1") && passed(&report, "pyvec::ok2"));
    assert_eq!(report["totals"]["goldens_computed"], 0);
}

#[test]
fn warm_run_computes_no_golden_and_changes_recompute_exactly_their_cases() {
    let (env, dir) = setup(&[("a", "ok"), ("b", "ok"), ("c", "ok")]);
    let all = |r: &Value| r["cases"].as_array().unwrap().len();
    // Cold: every golden computed.
    let (out, cold) = run(&env, &[], &[]);
    assert_success(&out);
    assert_eq!(cold["totals"]["goldens_computed"], all(&cold));
    // Warm: none, every case says so.
    let (out, warm) = run(&env, &["--explain"], &[]);
    assert_success(&out);
    assert_eq!(warm["totals"]["goldens_computed"], 0, "{warm:#}");
    assert!(recomputed(&warm).is_empty(), "{:?}", recomputed(&warm));
    assert!(String::from_utf8_lossy(&out.stdout).contains("goldens computed: 0"));

    // A local module the golden imports changed: the Python cases, not the
    // Rust ones.
    std::fs::write(dir.join("helper.py"), format!("{HELPER}# edited\n")).unwrap();
    let (out, r) = run(&env, &["--explain"], &[]);
    assert_success(&out);
    assert_eq!(recomputed(&r), ["pyvec::a", "pyvec::b", "pyvec::c"]);
    assert_eq!(case(&r, "pyvec::a")["golden_miss"], "golden code changed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("golden computed: golden code changed"),
        "{stdout}"
    );

    // One case's input changed (its seed, so its fixtures): that case only.
    let toml_path = dir.join("scene.toml");
    let toml = std::fs::read_to_string(&toml_path).unwrap();
    let seeded = toml.replace("name = \"b\"\nparams", "name = \"b\"\nseed = 7\nparams");
    assert_ne!(seeded, toml);
    std::fs::write(&toml_path, &seeded).unwrap();
    let (out, r) = run(&env, &[], &[]);
    assert_success(&out);
    assert_eq!(recomputed(&r), ["pyvec::b"], "{r:#}");
    assert_eq!(case(&r, "pyvec::b")["golden_miss"], "inputs changed");

    // One case's param changed (one the fixtures do not use): that case only.
    let extra = seeded.replace(
        "MODE = \"ok\" }\n\n[[cases]]\nname = \"b\"",
        "MODE = \"ok\", EXTRA = 1 }\n\n[[cases]]\nname = \"b\"",
    );
    assert_ne!(extra, seeded);
    std::fs::write(&toml_path, &extra).unwrap();
    let (out, r) = run(&env, &[], &[]);
    assert_success(&out);
    assert_eq!(recomputed(&r), ["pyvec::a"]);
    assert_eq!(case(&r, "pyvec::a")["golden_miss"], "params changed");

    // A Rust scene's input changed: that scene's cases only.
    let ve = env
        .scenes_dir
        .as_ref()
        .unwrap()
        .join("vector_example/scene.toml");
    let text = std::fs::read_to_string(&ve).unwrap();
    std::fs::write(&ve, text.replace("std = 1.0", "std = 2.0")).unwrap();
    let (out, r) = run(&env, &[], &[]);
    assert_success(&out);
    assert_eq!(
        recomputed(&r),
        ["vector_example::small", "vector_example::odd"]
    );

    // --no-golden-cache: everything computed, nothing read.
    let (out, r) = run(&env, &["--no-golden-cache"], &[]);
    assert_success(&out);
    assert_eq!(r["totals"]["goldens_computed"], all(&r));
    let (_, r) = run(&env, &[], &[("SCENE_NO_GOLDEN_CACHE", "1")]);
    assert_eq!(r["totals"]["goldens_computed"], all(&r));

    // Still warm; `scene cache clear` empties the golden cache too.
    let (_, r) = run(&env, &[], &[]);
    assert_eq!(r["totals"]["goldens_computed"], 0);
    let out = env.scene(&["cache", "clear"]).output().unwrap();
    assert_success(&out);
    assert!(!env.cache_dir.join("goldens").exists());
    let (_, r) = run(&env, &[], &[]);
    assert_eq!(r["totals"]["goldens_computed"], all(&r));
}

#[test]
fn a_damaged_golden_entry_is_recomputed() {
    let (env, _) = setup(&[("a", "ok")]);
    let (out, _) = run(&env, &["pyvec"], &[]);
    assert_success(&out);
    // Flip the last byte of every stored golden.
    let mut flipped = 0;
    let mut stack = vec![env.cache_dir.join("goldens/store")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|x| x == "artifact") {
                let mut bytes = std::fs::read(&p).unwrap();
                let last = bytes.len() - 1;
                bytes[last] ^= 0x40;
                std::fs::write(&p, bytes).unwrap();
                flipped += 1;
            }
        }
    }
    assert_eq!(flipped, 1);
    let (out, r) = run(&env, &["pyvec"], &[]);
    assert_success(&out);
    let miss = case(&r, "pyvec::a")["golden_miss"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        miss.starts_with("damaged entry") && miss.contains("blake3"),
        "{miss}"
    );
    let (_, r) = run(&env, &["pyvec"], &[]);
    assert_eq!(r["totals"]["goldens_computed"], 0);
}

const FIXTURES: &str = r#"import numpy as np

from helper import combine


def generate_inputs(params):
    n = params["N"]
    if params.get("MODE") == "unseeded":
        rng = np.random.default_rng()
        a = rng.uniform(-1, 1, n).astype(np.float32)
    else:
        a = np.random.uniform(-1, 1, n).astype(np.float32)
    return [("a", a), ("b", np.arange(n, dtype=np.float32) / n)]


def compute_golden(tensors, params):
    tensors["f"][:] = combine(tensors["a"], tensors["b"])
"#;

#[test]
fn python_fixtures_are_seeded_and_nondeterministic_ones_are_not_cached() {
    let (env, dir) = setup(&[("seeded", "ok"), ("unseeded", "unseeded")]);
    std::fs::write(dir.join("golden.py"), FIXTURES).unwrap();
    let toml_path = dir.join("scene.toml");
    let toml = std::fs::read_to_string(&toml_path).unwrap();
    std::fs::write(
        &toml_path,
        toml.replace(
            "golden = { python = \"golden.py\" }",
            "golden = { python = \"golden.py\" }\nfixtures = { python = \"golden.py\" }",
        ),
    )
    .unwrap();
    let dump = env.dir.path().join("dump");
    let (out, r) = run(&env, &["pyvec", "--dump", dump.to_str().unwrap()], &[]);
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("pyvec::unseeded: generate_inputs") && stderr.contains("not cached"),
        "{stderr}"
    );
    assert!(!stderr.contains("pyvec::seeded:"), "{stderr}");
    let a1 = std::fs::read(dump.join("pyvec/seeded/inputs/a.npy")).unwrap();
    // Warm: the seeded case's golden is read, the unseeded one's computed.
    let (out, r2) = run(&env, &["pyvec", "--dump", dump.to_str().unwrap()], &[]);
    assert_success(&out);
    assert_eq!(recomputed(&r2), ["pyvec::unseeded"]);
    assert_eq!(
        case(&r2, "pyvec::unseeded")["golden_miss"],
        "the fixtures are not deterministic"
    );
    // Same seed, same bytes, in another process.
    assert_eq!(
        std::fs::read(dump.join("pyvec/seeded/inputs/a.npy")).unwrap(),
        a1
    );
    let _ = r;
}

/// The numpy port of simpler's paged-attention golden agrees with the Rust
/// golden, within each scene's tolerance, on every sim case of both
/// paged-attention scenes, on the same (native) fixtures.
#[test]
fn numpy_paged_attention_golden_agrees_with_the_rust_golden() {
    use scene_harness::golden::python::provision::Provision;
    use scene_harness::golden::python::{PythonConfig, PythonRunner};
    use scene_harness::prepare::{build_fixtures, compute_golden};
    let scenes = common::package_scenes_dir();
    let file = scenes.join("common_pa/paged_attention_golden.py");
    let runner = PythonRunner::new(PythonConfig {
        python: python(),
        provision: Provision::Given,
        ..PythonConfig::default()
    });
    let registry = scenes::registry();
    let pool = scene_golden::reference::golden_pool(2);
    let mut checked = 0;
    for name in ["paged_attention", "paged_attention_unroll_4dims"] {
        let scene = scene_harness::Scene::load(&scenes.join(name)).unwrap();
        let out = scene.tensors.iter().position(|t| t.name == "out").unwrap();
        for case in scene.cases.iter().filter(|c| !c.manual.on("a2a3sim")) {
            let inputs = build_fixtures(&scene, case).unwrap();
            let rust = compute_golden(&registry, &pool, 2, &scene, case, &inputs).unwrap();
            let py = runner
                .compute_golden(&scene, case, &file, &inputs)
                .unwrap_or_else(|e| panic!("{name}::{}: {e}", case.name));
            let tol = case.tensors[out].tolerance;
            if let Err(m) = scene_golden::assert_close(
                "out",
                py.get("out").unwrap(),
                rust.get("out").unwrap(),
                tol,
            ) {
                panic!("{name}::{}: numpy vs Rust: {m}", case.name);
            }
            checked += 1;
        }
    }
    assert!(checked >= 5, "checked {checked} cases");
}

const TORCH_GOLDEN: &str = r#"SCENE_TENSORS = "torch"


def compute_golden(tensors, params):
    import torch

    assert isinstance(tensors["a"], torch.Tensor)
    s = tensors["a"] + tensors["b"]
    tensors["f"][:] = (s + 1) * (s + 2) + s
"#;

/// `SCENE_TENSORS = "torch"`: torch tensors in, torch tensors out. Without
/// torch the case fails saying what to install (checked), and the passing
/// run is skipped with a message.
#[test]
fn torch_goldens_run_where_torch_is_installed() {
    let (env, dir) = setup(&[("ok1", "ok")]);
    std::fs::write(dir.join("golden.py"), TORCH_GOLDEN).unwrap();
    let has_torch = std::process::Command::new(python())
        .args(["-c", "import torch"])
        .output()
        .is_ok_and(|o| o.status.success());
    let (out, report) = run(&env, &["pyvec"], &[]);
    if has_torch {
        assert_success(&out);
    } else {
        eprintln!("SKIP: torch is not installed; checking only the message without it");
        let m = message(&report, "pyvec::ok1");
        assert!(
            m.contains("torch is not installed") && m.contains("pip install torch"),
            "{m}"
        );
    }
}

/// `generate_inputs` for `pyvec`: ones, plus a number `x` that is NaN in
/// case mode `nan`; each call appends the worker's pid to `$PID_LOG`.
const NAN_FIXTURES: &str = r#"

import os


def generate_inputs(params):
    with open(os.environ["PID_LOG"], "a") as log:
        log.write("%d\n" % os.getpid())
    n = params["N"]
    out = {"a": np.ones(n, np.float32), "b": np.ones(n, np.float32)}
    if params["MODE"] == "nan":
        out["x"] = float("nan")
    return out
"#;

/// JSON has no NaN: Python's `json` writes `NaN` anyway, which serde_json
/// refuses, so a reply holding one (here a number `generate_inputs`
/// returned) was taken for a broken worker, which was killed. Now the
/// worker answers that request with an error instead: the case fails
/// saying why, and the same worker serves the next case.
#[test]
fn a_nan_in_a_python_reply_fails_its_case_and_keeps_the_worker() {
    let (env, dir) = setup(&[("ok1", "ok"), ("nan", "nan"), ("ok2", "ok")]);
    let golden = dir.join("golden.py");
    let text = std::fs::read_to_string(&golden).unwrap();
    std::fs::write(&golden, format!("{text}{NAN_FIXTURES}")).unwrap();
    let toml = dir.join("scene.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        text.replace(
            "golden = { python = \"golden.py\" }",
            "golden = { python = \"golden.py\" }\nfixtures = { python = \"golden.py\" }",
        ),
    )
    .unwrap();
    let log = env.dir.path().join("pids");
    let (out, report) = run(
        &env,
        &["pyvec", "--no-golden-cache"],
        &[("PID_LOG", log.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(passed(&report, "pyvec::ok1"), "{}", show(&out));
    assert!(passed(&report, "pyvec::ok2"), "{}", show(&out));
    let m = message(&report, "pyvec::nan");
    assert!(
        m.contains("the worker's reply cannot be sent as JSON") && !m.contains("died"),
        "{m}"
    );
    let pids = std::fs::read_to_string(&log).unwrap();
    let pids: Vec<&str> = pids.lines().collect();
    assert!(pids.len() >= 3, "{pids:?}");
    assert!(
        pids.iter().all(|p| *p == pids[0]),
        "the worker was replaced: {pids:?}\n{}",
        show(&out)
    );
}
