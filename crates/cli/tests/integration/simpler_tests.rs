//! The original project's test files run unchanged (issue 40): `scene
//! run <dir of test_*.py>` imports them with our own `simpler_setup`,
//! makes each collected `SceneTestCase` class a scene and each `CASES`
//! entry a case, and runs them with everything a scene gets (kernel and
//! golden caches, two passes, reports). CI has no checkout of the
//! original: the test files under `tests/simpler-compat/checkout/tests/`
//! are in its format (numpy tensors instead of torch ones, which the
//! harness takes alike), with kernels and orchestrations on its API.

use std::path::{Path, PathBuf};

use crate::common;

use common::{TestEnv, show, workspace_root};

/// A scratch copy of the stand-in checkout (so a test may edit it).
fn checkout_copy(env: &TestEnv) -> PathBuf {
    let dst = env.dir.path().join("simpler");
    common::copy_dir(
        &workspace_root().join("tests/simpler-compat/checkout"),
        &dst,
    );
    dst
}

fn tests_dir(checkout: &Path) -> PathBuf {
    checkout.join("tests/st/a2a3")
}

fn run_tests(
    env: &TestEnv,
    checkout: &Path,
    extra: &[&str],
) -> (std::process::Output, serde_json::Value) {
    let tests = tests_dir(checkout);
    let mut args = vec![
        "run",
        "--simpler-root",
        checkout.to_str().unwrap(),
        tests.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    env.run_with_report(&args)
}

/// `scene run` on one test file of a checkout (`file` relative to it).
fn run_file(
    env: &TestEnv,
    checkout: &Path,
    file: &str,
) -> (std::process::Output, serde_json::Value) {
    let file = checkout.join(file);
    env.run_with_report(&[
        "run",
        "--simpler-root",
        checkout.to_str().unwrap(),
        file.to_str().unwrap(),
    ])
}

/// Every file under a checkout's path as a tree of (path, size), to show
/// that a run wrote nothing into it.
fn tree(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            out.push((path.clone(), 0));
            out.extend(tree(&path));
        } else {
            out.push((path, entry.metadata().unwrap().len()));
        }
    }
    out.sort();
    out
}

fn case<'a>(report: &'a serde_json::Value, scene: &str, name: &str) -> &'a serde_json::Value {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["scene"] == scene && c["case"] == name)
        .unwrap_or_else(|| panic!("no {scene}::{name} in {report:#}"))
}

/// The files run where they stand: one scene per class, one case per
/// `CASES` entry on the platform (manual ones with `--include-manual`),
/// named as the original names them; the class's `compare_outputs`
/// override judges its cases; classes that do not fit are noted with
/// their reason; nothing is written into the checkout; a second run
/// compiles nothing and computes no golden.
#[test]
fn test_files_run_unchanged_and_a_second_run_reuses_everything() {
    let env = TestEnv::new();
    let checkout = checkout_copy(&env);
    let before = tree(&checkout);
    let (out, r) = run_tests(&env, &checkout, &[]);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 8, "{}", show(&out));
    for (scene, name) in [
        ("TestVectorScale", "default"),
        ("TestNamedEntry", "named"),
        ("TestAccumulate", "three_rounds"),
        ("TestAccumulate", "one_round"),
        ("TestDeviceShape", "a2a3"),
        ("TestL3Pair", "pair"),
        ("TestL3One", "one"),
        ("TestL3Program", "program"),
    ] {
        assert_eq!(case(&r, scene, name)["status"], "passed", "{r:#}");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "test_not_here.py::TestLevelThree: level 3: case two_chips: test_run uses \
             st_worker.alloc_shared_tensor"
        ) && stderr
            .contains("test_env_manager.py: it imports env_manager from simpler, the original's")
            && stderr.contains(
                "test_not_here.py::TestWhiteBox: white-box: it overrides _run_and_validate_l2"
            )
            && stderr.contains(
                "test_named_entry.py::TestNamedEntry::test_prepared_twice: white-box: a test method"
            ),
        "{}",
        show(&out)
    );
    assert_eq!(tree(&checkout), before, "the run wrote into the checkout");
    let accumulate = case(&r, "TestAccumulate", "three_rounds");
    assert_eq!(
        accumulate["outputs"][0]["comparison"], "TestAccumulate.compare_outputs",
        "{accumulate:#}"
    );

    let (out, r) = run_tests(&env, &checkout, &[]);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["units_compiled"], 0, "{}", show(&out));
    assert_eq!(r["totals"]["goldens_computed"], 0, "{}", show(&out));

    let (out, r) = run_tests(&env, &checkout, &["--include-manual", "TestVectorScale"]);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 2, "{}", show(&out));
    assert_eq!(case(&r, "TestVectorScale", "wide")["status"], "passed");
}

/// A run whose test files are unchanged imports none of them: their
/// descriptions, fixtures and goldens all come from the cache (the
/// original's a2a3 set spent ~15 s describing and ~3 s making fixtures in
/// Python on every warm run). The file here notes every import of it in a
/// log; an edit of the file (or of anything it was made of) imports it
/// again.
#[test]
fn a_run_of_unchanged_files_imports_none_of_them() {
    let env = TestEnv::new();
    let checkout = checkout_copy(&env);
    let file = "tests/st/a2a3/tensormap_and_ringbuffer/vector_scale/test_vector_scale.py";
    let log = env.dir.path().join("imports.log");
    edit(
        &checkout,
        file,
        "import ctypes\n",
        "import ctypes\nimport os\nopen(os.environ['IMPORT_LOG'], 'a').write('imported\\n')\n",
    );
    let dir = checkout.join("tests/st/a2a3/tensormap_and_ringbuffer/vector_scale");
    let run = || {
        let args = [
            "run",
            "--simpler-root",
            checkout.to_str().unwrap(),
            dir.to_str().unwrap(),
        ];
        let (out, r) = env.run_with_report_using(&args, |c| {
            c.env("IMPORT_LOG", &log);
        });
        assert!(out.status.success(), "{}", show(&out));
        assert_eq!(r["totals"]["passed"], 1, "{}", show(&out));
        let imports = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count();
        (r, imports)
    };
    let (_, first) = run();
    assert!(first >= 1, "the first run never imported {file}");
    let (r, second) = run();
    assert_eq!(second, first, "an unchanged file was imported again");
    assert_eq!(r["totals"]["goldens_computed"], 0, "{r:#}");
    edit(&checkout, file, "    RTOL = 1e-6", "    RTOL = 2e-6");
    let (r, third) = run();
    assert!(third > second, "an edited file was not imported again");
    // The golden's code is the whole file: computed again.
    assert_eq!(r["totals"]["goldens_computed"], 1, "{r:#}");
    let (_, fourth) = run();
    assert_eq!(fourth, third, "the edited file was imported again");
}

/// `scene list` names the cases as the original does and marks the ones
/// only a card runs.
#[test]
fn scene_list_names_classes_and_cases() {
    let env = TestEnv::new();
    let checkout = checkout_copy(&env);
    let tests = tests_dir(&checkout);
    let out = env
        .scene(&[
            "list",
            "--simpler-root",
            checkout.to_str().unwrap(),
            tests.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "TestAccumulate::three_rounds",
            "TestAccumulate::one_round",
            "TestDeviceShape::a2a3",
            "TestL3Pair::pair",
            "TestL3One::one",
            "TestL3Program::program",
            "TestNamedEntry::named",
            "TestVectorScale::default",
            "TestVectorScale::card_only  [hardware only: a2a3]",
        ],
        "{}",
        show(&out)
    );
}

/// `path` of the checkout with `from` replaced by `to` (once).
fn edit(checkout: &Path, path: &str, from: &str, to: &str) {
    let path = checkout.join(path);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{} has no `{from}`", path.display());
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

/// The verdict rests on what runs: a changed kernel, orchestration or
/// golden (`compute_golden` of the test file) each fails its case, and
/// only its case; so do the cases of a kernel only the class's
/// `compare_outputs` catches.
#[test]
fn a_changed_kernel_orchestration_or_golden_fails_its_case() {
    let mutations: [(&str, &str, &str, &str); 5] = [
        (
            "kernel",
            "vector_scale/kernels/aiv/kernel_add.cpp",
            "a[i] + b[i]",
            "a[i] - b[i]",
        ),
        (
            "orchestration",
            "vector_scale/kernels/orchestration/vector_scale_orch.cpp",
            "scale.add_input(sum.get_ref(0));",
            "scale.add_input(a);",
        ),
        (
            "golden",
            "vector_scale/test_vector_scale.py",
            "np.float32(args.scale.value)",
            "np.float32(args.scale.value * 1.001)",
        ),
        (
            "compare_outputs",
            "accumulate/kernels/aiv/kernel_accumulate.cpp",
            "count[0] = static_cast<int32_t>(n);",
            "count[0] = static_cast<int32_t>(n + 1);",
        ),
        (
            // Called by the name the class's CALLABLE gives it.
            "config_name",
            "named_entry/kernels/orchestration/scale_graph_orch.cpp",
            ".expected_arg_count = 4,",
            ".expected_arg_count = 5,",
        ),
    ];
    for (what, file, from, to) in mutations {
        let env = TestEnv::new();
        let checkout = checkout_copy(&env);
        edit(
            &checkout,
            &format!("tests/st/a2a3/tensormap_and_ringbuffer/{file}"),
            from,
            to,
        );
        let (out, r) = run_tests(&env, &checkout, &[]);
        assert!(!out.status.success(), "{what}: {}", show(&out));
        // The accumulate kernel serves both of its class's cases; the add
        // kernel TestVectorScale, TestNamedEntry and the three level-3
        // classes, which run vector_scale's orchestration too.
        let failed = match what {
            "kernel" => 5,
            "orchestration" => 4,
            "compare_outputs" => 2,
            _ => 1,
        };
        assert_eq!(r["totals"]["failed"], failed, "{what}: {}", show(&out));
        assert_eq!(r["totals"]["passed"], 8 - failed, "{what}: {}", show(&out));
        if what == "config_name" {
            assert!(
                show(&out).contains("scale_graph_config expects 5 arguments"),
                "{}",
                show(&out)
            );
        }
        if what == "compare_outputs" {
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout.contains("TestAccumulate.compare_outputs: count is 129, expected 128"),
                "{}",
                show(&out)
            );
        }
    }
}

/// A level-3 class's Python orchestration is recorded at describe time
/// and run as steps: a group chip task is one chip step on two cards
/// (worker r's arguments on rank r), the sub task after it a host step
/// calling the class's sub callable on the tensors in its arguments'
/// order and its scalars. A wrong sub callable, another scalar, a golden
/// that disagrees and a sub task writing a tensor it only reads each fail
/// the case; a chip task on part
/// of the group is listed as not run, with its reason.
#[test]
fn level_three_classes_run_their_orchestration_as_steps() {
    const FILE: &str = "tests/st/a2a3/tensormap_and_ringbuffer/l3_pair/test_l3_pair.py";
    let run = |checkout: &Path, env: &TestEnv| run_file(env, checkout, FILE);
    let env = TestEnv::new();
    let checkout = checkout_copy(&env);
    let (out, r) = run(&checkout, &env);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 2, "{}", show(&out));
    let pair = case(&r, "TestL3Pair", "pair");
    assert_eq!(pair["devices"], serde_json::json!([0, 1]), "{pair:#}");
    assert_eq!(pair["ranks"].as_array().map(Vec::len), Some(2), "{pair:#}");
    let steps = pair["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 2, "{pair:#}");
    assert!(
        steps[0]["kind"].as_str().unwrap().starts_with("chip step"),
        "{pair:#}"
    );
    assert_eq!(steps[1]["kind"], "host step `total` (Python)", "{pair:#}");
    assert_eq!(steps[1]["after"], serde_json::json!([0]), "{pair:#}");
    let outputs: Vec<&str> = pair["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(outputs, ["f0", "f1", "g"], "{pair:#}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "test_l3_pair.py::TestL3Half: level 3: task 0 of the orchestration runs on workers [1]"
        ),
        "{}",
        show(&out)
    );

    for (what, from, to, says) in [
        (
            "sub callable",
            "g[:] = (f0 + f1) * args.scalar(0)",
            "g[:] = (f0 - f1) * args.scalar(0)",
            "`g`",
        ),
        (
            "sub scalar",
            "sub.add_scalar(2)",
            "sub.add_scalar(3)",
            "`g`",
        ),
        (
            "golden",
            "args.f1[:] = (args.a1 + args.b1) * s",
            "args.f1[:] = (args.a1 + args.b1) * s * 1.001",
            "`f1`",
        ),
        (
            "read-only write",
            "g[:] = (f0 + f1) * args.scalar(0)",
            "g[:] = (f0 + f1) * args.scalar(0)\n    f0[:] = 0",
            "changed `f0`, which the step only reads",
        ),
    ] {
        let env = TestEnv::new();
        let checkout = checkout_copy(&env);
        edit(&checkout, FILE, from, to);
        let (out, r) = run(&checkout, &env);
        assert!(!out.status.success(), "{what}: {}", show(&out));
        assert_eq!(case(&r, "TestL3Pair", "pair")["status"], "failed", "{what}");
        assert_eq!(case(&r, "TestL3One", "one")["status"], "passed", "{what}");
        assert!(show(&out).contains(says), "{what}: {}", show(&out));
    }
}

/// A level-3 class's own `test_run(self, st_worker)` (a program on the
/// original's Worker: create_buffer, fill, run one orchestration, assert)
/// is recorded while the file is described and replayed after the device
/// ran its tasks: its own assert is the verdict, so a wrong expectation
/// fails the case, and a test_run that fills its buffers differently the
/// second time cannot be judged. A test_run asking for other pytest
/// fixtures and a class's white-box methods are listed.
#[test]
fn level_three_test_run_programs_are_recorded_and_replayed() {
    const FILE: &str = "tests/st/a2a3/tensormap_and_ringbuffer/l3_program/test_l3_program.py";
    let run = |checkout: &Path, env: &TestEnv| run_file(env, checkout, FILE);
    let env = TestEnv::new();
    let checkout = checkout_copy(&env);
    let (out, r) = run(&checkout, &env);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 1, "{}", show(&out));
    let program = case(&r, "TestL3Program", "program");
    assert_eq!(
        program["outputs"][0]["comparison"], "TestL3Program.test_run",
        "{program:#}"
    );
    assert_eq!(program["outputs"][0]["name"], "buffer2", "{program:#}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "test_l3_program.py::TestL3ProgramWithFixtures: level 3: its own test_run takes more \
             than st_worker"
        ) && stderr.contains("test_l3_program.py::TestL3Program::test_buffer_backing: white-box"),
        "{}",
        show(&out)
    );
    // Warm: nothing compiled, no golden (it has none), judged again.
    let (out, r) = run(&checkout, &env);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["units_compiled"], 0, "{}", show(&out));
    assert_eq!(r["totals"]["goldens_computed"], 0, "{}", show(&out));

    for (what, from, to, says) in [
        (
            "expectation",
            "(a + b) * np.float32(SCALE), rtol",
            "(a + b) * np.float32(SCALE) + 1, rtol",
            "TestL3Program.test_run: f is not (a + b) * scale",
        ),
        (
            "unseeded fill",
            "a[:] = np.random.rand(N)",
            "a[:] = np.random.default_rng().random(N)",
            "its test_run must be deterministic",
        ),
    ] {
        let env = TestEnv::new();
        let checkout = checkout_copy(&env);
        edit(&checkout, FILE, from, to);
        let (out, r) = run(&checkout, &env);
        assert!(!out.status.success(), "{what}: {}", show(&out));
        assert_eq!(
            case(&r, "TestL3Program", "program")["status"],
            "failed",
            "{what}"
        );
        assert!(show(&out).contains(says), "{what}: {}", show(&out));
    }
}

/// Two passes on test files: `scene precompile` stores every case, and
/// `run --from` with no compiler at all runs them, computing nothing.
#[test]
fn test_files_run_in_two_passes_without_a_compiler() {
    let env = TestEnv::new();
    let checkout = checkout_copy(&env);
    let tests = tests_dir(&checkout);
    let bundle = env.dir.path().join("bundle");
    let root = checkout.to_str().unwrap();
    let out = env
        .scene(&[
            "precompile",
            "--simpler-root",
            root,
            "--out",
            bundle.to_str().unwrap(),
            tests.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    let (out, r) = env.run_with_report_using(
        &[
            "run",
            "--from",
            bundle.to_str().unwrap(),
            "--simpler-root",
            root,
            tests.to_str().unwrap(),
        ],
        |cmd| {
            cmd.env("SCENE_CACHE_DIR", env.dir.path().join("pass2-cache"))
                .env("SCENE_CC", "false")
                .env("SCENE_LD", "false")
                .env("SCENE_HOSTED_CXX", "false");
        },
    );
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 8, "{}", show(&out));
    assert_eq!(r["totals"]["units_compiled"], 0, "{}", show(&out));
    assert_eq!(r["totals"]["goldens_computed"], 0, "{}", show(&out));
}

/// A test file that does not import fails as its own load entry, naming
/// the file and the Python error; the other files still run.
#[test]
fn a_test_file_that_does_not_import_fails_alone() {
    let env = TestEnv::new();
    let checkout = checkout_copy(&env);
    let broken = checkout.join("tests/st/a2a3/tensormap_and_ringbuffer/broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join("test_broken.py"),
        "from simpler_setup import SceneTestCase\nimport no_such_module_here\n",
    )
    .unwrap();
    let (out, r) = run_tests(&env, &checkout, &[]);
    assert!(!out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 8, "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("test_broken.py: does not import: ModuleNotFoundError")
            && stderr.contains("no_such_module_here"),
        "{}",
        show(&out)
    );
    let load = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["scene"] == "test_broken")
        .unwrap_or_else(|| panic!("no load entry: {r:#}"));
    assert_eq!(load["status"], "failed", "{load:#}");
}

/// A case runs on the platforms its `platforms` lists, on the device
/// shape the original's simulator of that platform has (24 clusters on
/// a2a3, 36 on a5: `TestDeviceShape` reads it through the orchestration
/// API); the run's own `SCENE_RUNTIME_OPTIONS` still win.
#[test]
fn cases_run_on_their_platforms_with_the_originals_device_shape() {
    let env = TestEnv::new();
    let checkout = checkout_copy(&env);
    let (out, r) = run_tests(&env, &checkout, &["--platform", "a5sim"]);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["passed"], 2, "{}", show(&out));
    assert_eq!(
        case(&r, "TestAccumulate", "three_rounds")["status"],
        "passed"
    );
    assert_eq!(case(&r, "TestDeviceShape", "a5")["status"], "passed");

    let tests = tests_dir(&checkout);
    let (out, r) = env.run_with_report_using(
        &[
            "run",
            "--simpler-root",
            checkout.to_str().unwrap(),
            tests.to_str().unwrap(),
            "TestDeviceShape",
        ],
        |cmd| {
            cmd.env("SCENE_RUNTIME_OPTIONS", "aic=2;aiv=4");
        },
    );
    assert!(!out.status.success(), "{}", show(&out));
    assert_eq!(r["totals"]["failed"], 1, "{}", show(&out));
}
