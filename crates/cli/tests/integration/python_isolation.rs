//! Python goldens cannot be fooled (issue 27): scenes with colliding module
//! names each import their own (causes 1), in either order, with fixtures
//! that do not depend on the order; the golden cache notices an edit
//! through every import form and every file the golden read (cause 3), and
//! refuses to cache what it cannot digest; a golden that forks cannot
//! desynchronise the worker (cause 11).
//!
//! Needs numpy: python3's, else the suite's managed environment
//! (`common::test_python`, which `TestEnv` passes as SCENE_PYTHON).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{TestEnv, assert_success, copy_scene, report_case as case, show};
use serde_json::Value;

/// The kernel's function, as a helper module defines it.
const RIGHT: &str = "(s + 1) * (s + 2) + s";
/// What a wrong helper computes instead.
const WRONG: &str = "s * 0";

fn helper(expr: &str, offset: f32) -> String {
    format!("OFFSET = {offset:?}\n\n\ndef combine(a, b):\n    s = a + b\n    return {expr}\n")
}

/// A copy of `vector_example` as `name` whose golden is `golden` (written
/// as `golden.py`), with `files` beside it and one case per entry of
/// `cases`; `fixtures` makes `golden.py` its fixtures too.
fn py_scene(
    env: &TestEnv,
    name: &str,
    golden: &str,
    files: &[(&str, String)],
    cases: &[&str],
    fixtures: bool,
) -> PathBuf {
    let dir = copy_scene(env, "vector_example", name);
    std::fs::write(dir.join("golden.py"), golden).unwrap();
    for (file, text) in files {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let toml = std::fs::read_to_string(dir.join("scene.toml")).unwrap();
    let head = &toml[..toml.find("[[cases]]").unwrap()];
    let mut replacement = "golden = { python = \"golden.py\" }".to_string();
    if fixtures {
        replacement.push_str("\nfixtures = { python = \"golden.py\" }");
    }
    let mut text = head.replace("golden = \"vector_example\"", &replacement);
    assert_ne!(text, head);
    for (i, case) in cases.iter().enumerate() {
        text.push_str(&format!(
            "[[cases]]\nname = \"{case}\"\nparams = {{ N = {} }}\n\n",
            1000 + i
        ));
    }
    std::fs::write(dir.join("scene.toml"), text).unwrap();
    dir
}

fn run(env: &TestEnv, args: &[&str], extra_env: &[(&str, &str)]) -> (Output, Value) {
    let mut full = vec!["run"];
    full.extend(args);
    env.run_with_report_using(&full, |cmd| {
        cmd.envs(extra_env.iter().copied());
    })
}

fn status(report: &Value, name: &str) -> String {
    case(report, name)["status"]
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

/// Fixtures and golden both from the scene's own `helper` module.
const HELPER_GOLDEN: &str = r#"import numpy as np

import helper


def generate_inputs(params):
    n = params["N"]
    a = np.random.uniform(-1, 1, n).astype(np.float32) + np.float32(helper.OFFSET)
    return [("a", a), ("b", np.arange(n, dtype=np.float32) / n)]


def compute_golden(tensors, params):
    tensors["f"][:] = helper.combine(tensors["a"], tensors["b"])
"#;

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Cause 1: two scenes with a `helper.py` each, run in one `scene run` in
/// both orders (scenes run in name order): each golden and each fixture
/// comes from its own scene's module, the wrong one fails, and fixtures
/// are byte-equal to those of the scene run alone.
#[test]
fn python_modules_do_not_leak_between_scenes_in_either_order() {
    for (first, second, right_first) in
        [("a_right", "b_wrong", true), ("a_wrong", "b_right", false)]
    {
        let env = TestEnv::with_scenes(&[]);
        let (right, wrong) = if right_first {
            (first, second)
        } else {
            (second, first)
        };
        py_scene(
            &env,
            right,
            HELPER_GOLDEN,
            &[("helper.py", helper(RIGHT, 0.0))],
            &["c"],
            true,
        );
        py_scene(
            &env,
            wrong,
            HELPER_GOLDEN,
            &[("helper.py", helper(WRONG, 0.5))],
            &["c"],
            true,
        );
        // Alone, each scene's fixtures.
        let alone = env.dir.path().join("alone");
        for scene in [right, wrong] {
            let (out, _) = run(
                &env,
                &[
                    "--no-golden-cache",
                    "--dump",
                    alone.to_str().unwrap(),
                    scene,
                ],
                &[],
            );
            assert_eq!(
                out.status.success(),
                scene == right,
                "{scene} alone: {}",
                show(&out)
            );
        }
        // Together, in one run, first the one then the other.
        let both = env.dir.path().join("both");
        let (out, report) = run(
            &env,
            &["--dump", both.to_str().unwrap(), first, second],
            &[],
        );
        assert_eq!(out.status.code(), Some(1), "{}", show(&out));
        assert_eq!(
            status(&report, &format!("{right}::c")),
            "passed",
            "{report:#}"
        );
        assert_eq!(
            status(&report, &format!("{wrong}::c")),
            "failed",
            "{report:#}"
        );
        for scene in [right, wrong] {
            for tensor in ["a", "b"] {
                let rel = format!("{scene}/c/inputs/{tensor}.npy");
                assert_eq!(
                    read(&alone.join(&rel)),
                    read(&both.join(&rel)),
                    "{rel}: fixtures depend on the order scenes ran in"
                );
            }
        }
        // The golden cache holds each scene's own golden: a warm run
        // judges the same.
        let (out, report) = run(&env, &[first, second], &[]);
        assert_eq!(out.status.code(), Some(1), "{}", show(&out));
        assert_eq!(report["totals"]["goldens_computed"], 0, "{report:#}");
        assert_eq!(status(&report, &format!("{right}::c")), "passed");
        assert_eq!(status(&report, &format!("{wrong}::c")), "failed");
    }
}

const PLAIN_IMPORT: &str = "import helper\n\n\ndef compute_golden(t, p):\n    t[\"f\"][:] = helper.combine(t[\"a\"], t[\"b\"])\n";
const FROM_IMPORT: &str = "from helper import combine\n\n\ndef compute_golden(t, p):\n    t[\"f\"][:] = combine(t[\"a\"], t[\"b\"])\n";
const IMPORTLIB: &str = "import importlib\n\n\ndef compute_golden(t, p):\n    h = importlib.import_module(\"helper\")\n    t[\"f\"][:] = h.combine(t[\"a\"], t[\"b\"])\n";
const DUNDER_IMPORT: &str = "def compute_golden(t, p):\n    h = __import__(\"helper\")\n    t[\"f\"][:] = h.combine(t[\"a\"], t[\"b\"])\n";
/// The repo's `common_pa` pattern: a shared package under the scenes root
/// whose module imports its sibling relatively.
const PACKAGE: &str = "from shared_pk.impl import compute_golden  # noqa: F401\n";
const PACKAGE_IMPL: &str = "from . import helper\n\n\ndef compute_golden(t, p):\n    t[\"f\"][:] = helper.combine(t[\"a\"], t[\"b\"])\n";
/// A data file the golden reads.
const DATA: &str = "import os\n\n\ndef compute_golden(t, p):\n    with open(os.path.join(os.path.dirname(__file__), \"expr.txt\")) as f:\n        expr = f.read().strip()\n    s = t[\"a\"] + t[\"b\"]\n    t[\"f\"][:] = eval(expr)\n";

/// Cause 3: an edit through every import form (and of a data file the
/// golden reads) recomputes that scene's golden, which then fails against
/// the kernel; nothing else is recomputed.
#[test]
fn golden_cache_key_misses_no_import_form() {
    let env = TestEnv::with_scenes(&[]);
    let root = env.scenes_dir.clone().unwrap();
    std::fs::create_dir_all(root.join("shared_pk")).unwrap();
    std::fs::write(root.join("shared_pk/__init__.py"), "").unwrap();
    std::fs::write(root.join("shared_pk/impl.py"), PACKAGE_IMPL).unwrap();
    std::fs::write(root.join("shared_pk/helper.py"), helper(RIGHT, 0.0)).unwrap();
    let with_helper = |golden: &'static str| (golden, vec![("helper.py", helper(RIGHT, 0.0))]);
    /// A scene: its name, its golden and the files beside it.
    type Spec = (&'static str, (&'static str, Vec<(&'static str, String)>));
    let scenes: Vec<Spec> = vec![
        ("p_plain", with_helper(PLAIN_IMPORT)),
        ("p_from", with_helper(FROM_IMPORT)),
        ("p_importlib", with_helper(IMPORTLIB)),
        ("p_dunder", with_helper(DUNDER_IMPORT)),
        ("p_package", (PACKAGE, vec![])),
        ("p_data", (DATA, vec![("expr.txt", RIGHT.to_string())])),
    ];
    for (name, (golden, files)) in &scenes {
        py_scene(&env, name, golden, files, &["c"], false);
    }
    let names: Vec<&str> = scenes.iter().map(|(n, _)| *n).collect();
    let (out, cold) = run(&env, &names, &[]);
    assert_success(&out);
    assert_eq!(cold["totals"]["goldens_computed"], names.len(), "{cold:#}");
    let (out, warm) = run(&env, &names, &[]);
    assert_success(&out);
    assert_eq!(warm["totals"]["goldens_computed"], 0, "{warm:#}");

    let edits: Vec<(&str, PathBuf, String)> = vec![
        (
            "p_plain",
            root.join("p_plain/helper.py"),
            helper(WRONG, 0.0),
        ),
        ("p_from", root.join("p_from/helper.py"), helper(WRONG, 0.0)),
        (
            "p_importlib",
            root.join("p_importlib/helper.py"),
            helper(WRONG, 0.0),
        ),
        (
            "p_dunder",
            root.join("p_dunder/helper.py"),
            helper(WRONG, 0.0),
        ),
        (
            "p_package",
            root.join("shared_pk/helper.py"),
            helper(WRONG, 0.0),
        ),
        ("p_data", root.join("p_data/expr.txt"), WRONG.to_string()),
    ];
    for (scene, path, text) in edits {
        let before = read(&path);
        std::fs::write(&path, &text).unwrap();
        let (out, r) = run(&env, &["--explain"], &[]);
        let c = format!("{scene}::c");
        assert_eq!(
            recomputed(&r),
            std::slice::from_ref(&c),
            "edit of {}: {r:#}",
            path.display()
        );
        assert_eq!(
            status(&r, &c),
            "failed",
            "{c}: a stale golden was served after {} changed: {}",
            path.display(),
            show(&out)
        );
        let miss = case(&r, &c)["golden_miss"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(miss.starts_with("golden code changed"), "{c}: {miss}");
        // Restored: served again (from the first entry, whose recorded
        // files match once more) or recomputed, and right either way.
        std::fs::write(&path, before).unwrap();
        let (out, r) = run(&env, &[], &[]);
        assert_success(&out);
        assert!(recomputed(&r).iter().all(|n| *n == c), "{r:#}");
    }
}

/// Cause 3: a module the harness cannot digest (here, one imported from a
/// zip) makes its golden uncacheable, and the report says why.
#[test]
fn golden_importing_from_a_zip_is_not_cached() {
    let env = TestEnv::with_scenes(&[]);
    let golden = "import os\nimport sys\n\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), \"lib.zip\"))\nimport zipped_helper  # noqa: E402\n\n\ndef compute_golden(t, p):\n    t[\"f\"][:] = zipped_helper.combine(t[\"a\"], t[\"b\"])\n";
    let dir = py_scene(&env, "zipped", golden, &[], &["c"], false);
    let zip = dir.join("lib.zip");
    let made = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w') as z:\n    z.writestr('zipped_helper.py', sys.argv[2])\n",
            zip.to_str().unwrap(),
            &helper(RIGHT, 0.0),
        ])
        .output()
        .unwrap();
    assert_success(&made);
    for _ in 0..2 {
        let (out, r) = run(&env, &["--explain", "zipped"], &[]);
        assert_success(&out);
        assert_eq!(r["totals"]["goldens_computed"], 1, "{r:#}");
        let miss = case(&r, "zipped::c")["golden_miss"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(
            miss.contains("not cached") && miss.contains("zipped_helper"),
            "{miss}"
        );
    }
}

/// Cause 11: a golden that forks, whose child comes back from
/// `compute_golden` with a wrong value, desynchronised the worker; now the
/// child leaves silently and every case gets its parent's answer. A
/// subprocess reading its stdin no longer reads the worker's requests.
#[test]
fn forking_golden_does_not_desynchronise_the_worker_protocol() {
    let env = TestEnv::with_scenes(&[]);
    let golden = "import os\n\n\ndef compute_golden(t, p):\n    s = t[\"a\"] + t[\"b\"]\n    pid = os.fork()\n    if pid == 0:\n        t[\"f\"][:] = s * 0\n        return\n    os.waitpid(pid, 0)\n    t[\"f\"][:] = (s + 1) * (s + 2) + s\n";
    py_scene(&env, "forks", golden, &[], &["c1", "c2", "c3"], false);
    py_scene(
        &env,
        "plain",
        PLAIN_IMPORT,
        &[("helper.py", helper(RIGHT, 0.0))],
        &["c1", "c2"],
        false,
    );
    // A subprocess that reads its stdin must not read the requests.
    let reads_stdin = "import subprocess\n\n\ndef compute_golden(t, p):\n    subprocess.run([\"cat\"], stdout=subprocess.DEVNULL, check=True)\n    s = t[\"a\"] + t[\"b\"]\n    t[\"f\"][:] = (s + 1) * (s + 2) + s\n";
    py_scene(&env, "reads_stdin", reads_stdin, &[], &["c1", "c2"], false);
    let (out, r) = run(
        &env,
        &["--no-golden-cache", "forks", "plain", "reads_stdin"],
        &[("SCENE_GOLDEN_TIMEOUT", "20")],
    );
    assert_success(&out);
    for c in [
        "forks::c1",
        "forks::c2",
        "forks::c3",
        "plain::c1",
        "plain::c2",
    ] {
        assert_eq!(status(&r, c), "passed", "{c}: {}", show(&out));
    }
}

/// Cause 3, fixtures: `generate_inputs` reading a module the scan of
/// imports cannot see; an edit of it is new fixtures (a new golden, cached
/// again), not a false "non-deterministic" warning.
#[test]
fn fixture_edit_through_importlib_is_new_fixtures_not_nondeterminism() {
    let env = TestEnv::with_scenes(&[]);
    let golden = HELPER_GOLDEN.replace(
        "import helper\n",
        "import importlib\n\nhelper = importlib.import_module(\"helper\")\n",
    );
    let dir = py_scene(
        &env,
        "fx",
        &golden,
        &[("helper.py", helper(RIGHT, 0.0))],
        &["c"],
        true,
    );
    let (out, _) = run(&env, &["fx"], &[]);
    assert_success(&out);
    std::fs::write(dir.join("helper.py"), helper(RIGHT, 0.25)).unwrap();
    let (out, r) = run(&env, &["fx"], &[]);
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("different bytes"), "{stderr}");
    assert_eq!(recomputed(&r), ["fx::c"]);
    let (out, r) = run(&env, &["fx"], &[]);
    assert_success(&out);
    assert_eq!(r["totals"]["goldens_computed"], 0, "{r:#}");
}
