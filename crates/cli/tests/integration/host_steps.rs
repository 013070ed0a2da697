//! Level-3 `[[steps]]` through the real `scene` binary (issue 30 item 7),
//! on copies of `l3_host_dependency` (a chip step, a C host step, a chip
//! step): it passes on both simulators; a host step writing the wrong
//! offset fails on the tensor it writes; a host step that drops its
//! dependency on the chip output is stopped naming what it asked for, and
//! a chip step that drops its dependency on the host output fails on its
//! own output; a missing, failing or crashing host function fails its
//! case naming the scene, the step and the function, with no card held
//! for a host function that does not build; a slow host step holds no
//! card. `l3_host_dependency_py` does the same with the host function in
//! Python, in the scene's Python worker. The C host function is a unit of
//! the kernel cache: a warm run starts no compiler, an edit of `host.c`
//! rebuilds it, `scene compile` warms it.

use serde_json::Value;

use crate::level3::{assert_fails_on_y, env_with, mutate, run};

const SCENE: &str = "l3_host_dependency";

fn case<'r>(report: &'r Value, name: &str) -> &'r Value {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no case {name} in {report}"))
}

#[test]
fn chip_host_chip_passes_on_both_simulators() {
    let env = env_with(&[SCENE]);
    for platform in ["a2a3sim", "a5sim"] {
        let (out, report) = env.run_with_report_using(
            &["run", SCENE, "--platform", platform, "--device", "0-7"],
            |_| {},
        );
        assert!(
            out.status.success(),
            "{platform}: {}",
            crate::common::show(&out)
        );
        assert_eq!(report["totals"]["passed"], 2, "{platform}");
        let c = case(&report, "l3_host_dependency::p4");
        assert_eq!(c["devices"].as_array().unwrap().len(), 4, "{c}");
    }
}

#[test]
fn a_host_step_writing_the_wrong_offset_fails_on_what_it_writes() {
    let env = env_with(&[SCENE]);
    // Every rank's g from the next rank's f.
    mutate(
        &env,
        "l3_host_dependency/host.c",
        "gp[r * n + i] = fp[r * n + i] - mean;",
        "gp[r * n + i] = fp[((r + 1) % nr) * n + i] - mean;",
    );
    let (ok, text, _) = run(&env, &["l3_host_dependency::p2"], &[]);
    assert!(!ok, "the mutated host step passed\n{text}");
    assert!(text.contains("tensor `g` mismatch"), "{text}");
    // y = g * a on the chip after it: the host step's result is used.
    assert!(text.contains("tensor `y` mismatch"), "{text}");
    assert!(!text.contains("tensor `f` mismatch"), "{text}");
}

#[test]
fn a_dropped_dependency_is_caught_or_visibly_wrong() {
    // The host step no longer says it reads the chip step's f: it cannot
    // see f, and the failure names the scene, the step, the function and
    // the tensor it asked for.
    let env = env_with(&[SCENE]);
    mutate(
        &env,
        "l3_host_dependency/scene.toml",
        "reads = [\"f\"]",
        "reads = []",
    );
    let (ok, text, _) = run(&env, &["l3_host_dependency::p2"], &[]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("scene `l3_host_dependency`, steps[1], host step `center` (host.c): center returned -1; it asked for `f`, which the step does not declare in `reads` or `writes`"),
        "{text}"
    );
    // The last chip step no longer says it reads the host step's g: it
    // gets zeros for g, and y is wrong.
    let env = env_with(&[SCENE]);
    mutate(
        &env,
        "l3_host_dependency/scene.toml",
        "reads = [\"g\", \"a\"]",
        "reads = [\"a\"]",
    );
    assert_fails_on_y(&env, "l3_host_dependency::p2", "chip step without g");
}

#[test]
fn a_missing_failing_or_crashing_host_function_names_scene_step_and_function() {
    let env = env_with(&[SCENE]);
    mutate(
        &env,
        "l3_host_dependency/scene.toml",
        "function = \"center\"",
        "function = \"centre\"",
    );
    let (ok, text, report) = run(&env, &["l3_host_dependency::p2"], &[]);
    assert!(!ok, "{text}");
    assert!(
        text.contains(
            "scene `l3_host_dependency`, steps[1], host step `centre` (host.c): cannot build it:"
        ) && text.contains("centre"),
        "{text}"
    );
    // Built before the first chip step: no card was taken.
    let c = case(&report, "l3_host_dependency::p2");
    assert_eq!(c["phases"]["lock_held_s"].as_f64(), Some(0.0), "{c}");

    // A chip step naming a function the orchestration does not define.
    let env = env_with(&[SCENE]);
    mutate(
        &env,
        "l3_host_dependency/scene.toml",
        "chip = \"consume_g\"",
        "chip = \"consume_gg\"",
    );
    let (ok, text, _) = run(&env, &["l3_host_dependency::p2"], &[]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("scene `l3_host_dependency`, steps[2], chip step `consume_gg`:")
            && text.contains("undefined symbol: consume_gg"),
        "{text}"
    );

    let env = env_with(&[SCENE]);
    mutate(
        &env,
        "l3_host_dependency/host.c",
        "    return 0;\n}",
        "    return scene_host_fail(args, \"mean of %d ranks refused\", (int)nr);\n}",
    );
    let (ok, text, _) = run(&env, &["l3_host_dependency::p2"], &[]);
    assert!(!ok, "{text}");
    assert!(
        text.contains(
            "steps[1], host step `center` (host.c): center returned -1: mean of 2 ranks refused"
        ),
        "{text}"
    );

    // A host function that never returns is killed at the case timeout.
    let env = env_with(&[SCENE]);
    mutate(
        &env,
        "l3_host_dependency/host.c",
        "    if (!f || !g) return -1;",
        "    if (!f || !g) return -1;\n    for (volatile int spin = 1; spin;) {}",
    );
    let (ok, text, _) = run(
        &env,
        &["l3_host_dependency::p2", "--case-timeout", "1"],
        &[],
    );
    assert!(!ok, "{text}");
    assert!(
        text.contains("steps[1], host step `center` (host.c): it did not return within 1 s (the case timeout); it was killed"),
        "{text}"
    );

    let env = env_with(&[SCENE]);
    mutate(
        &env,
        "l3_host_dependency/host.c",
        "    if (!f || !g) return -1;",
        "    if (!f || !g) return -1;\n    *(volatile int *)0 = 1;",
    );
    let (ok, text, _) = run(&env, &["l3_host_dependency::p2"], &[]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("steps[1], host step `center` (host.c): it crashed (signal 11"),
        "{text}"
    );
}

/// A host step that only reads a tensor must not change it; a chip step
/// must not write a tensor it does not declare.
#[test]
fn undeclared_writes_fail_the_step() {
    let env = env_with(&[SCENE]);
    mutate(
        &env,
        "l3_host_dependency/host.c",
        "    return 0;\n}",
        "    ((float *)f->data)[0] += 1.0f;\n    return 0;\n}",
    );
    let (ok, text, _) = run(&env, &["l3_host_dependency::p2"], &[]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("host step `center` (host.c): it changed `f`, which the step only reads"),
        "{text}"
    );
    // produce_f now also writes g (the step does not touch g: zeros went
    // up, and something else came back).
    let env = env_with(&[SCENE]);
    mutate(
        &env,
        "l3_host_dependency/orchestration.c",
        "SceneTaskArg t4[3] = {SCENE_IN_BUF(m, bytes), SCENE_IN_BUF(s, bytes), SCENE_OUT(f)};\n    SUBMIT(FUNC_ADD, t4);",
        "SceneTaskArg t4[3] = {SCENE_IN_BUF(m, bytes), SCENE_IN_BUF(s, bytes), SCENE_OUT(f)};\n    SUBMIT(FUNC_ADD, t4);\n    SceneTaskArg t5[3] = {SCENE_IN_BUF(m, bytes), SCENE_IN_BUF(s, bytes), SCENE_OUT(args[3])};\n    SUBMIT(FUNC_ADD, t5);",
    );
    let (ok, text, _) = run(&env, &["l3_host_dependency::p2"], &[]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("steps[0], chip step `produce_f`: the rank group wrote `g`, which the step does not declare in `writes`"),
        "{text}"
    );
}

/// Cards are held for the chip steps only: a host step that takes half a
/// second (its own work, in the scene's code) adds nothing to the case's
/// card time.
#[test]
fn a_slow_host_step_holds_no_card() {
    let env = env_with(&[SCENE]);
    mutate(
        &env,
        "l3_host_dependency/host.c",
        "#include \"scene_host.h\"",
        "#include \"scene_host.h\"\n#include <time.h>",
    );
    mutate(
        &env,
        "l3_host_dependency/host.c",
        "    if (!f || !g) return -1;",
        "    if (!f || !g) return -1;\n    struct timespec half = {0, 500000000};\n    nanosleep(&half, NULL);",
    );
    let (ok, text, report) = run(&env, &["l3_host_dependency::p2"], &[]);
    assert!(ok, "{text}");
    let c = case(&report, "l3_host_dependency::p2");
    let held = c["phases"]["lock_held_s"].as_f64().unwrap();
    let wall = c["wall_s"].as_f64().unwrap();
    assert!(wall >= 0.5, "{c}");
    assert!(held < 0.45, "cards held across the host step: {c}");
    // Per step: the chip steps held the cards, the host step none, and
    // each step after the first depends on the one before it.
    let steps = c["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "{c}");
    assert_eq!(steps[1]["kind"], "host step `center` (host.c)", "{c}");
    assert!(steps[1]["seconds"].as_f64().unwrap() >= 0.5, "{c}");
    assert_eq!(steps[1]["lock_held_s"].as_f64(), Some(0.0), "{c}");
    for (i, after) in [(0, vec![]), (1, vec![0]), (2, vec![1])] {
        let got: Vec<u64> = steps[i]["after"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(got, after, "{c}");
    }
    for i in [0, 2] {
        assert!(steps[i]["lock_held_s"].as_f64().unwrap() > 0.0, "{c}");
    }
}

/// The same steps with the host function in Python (`host = { python =
/// "center" }`, run in the scene's Python worker): passes on both
/// simulators; a wrong host function fails on g; one that raises fails its
/// case with the traceback, naming the step; a misspelt one is a load
/// error.
#[test]
fn a_python_host_step_runs_in_the_scene_worker() {
    let scene = "l3_host_dependency_py";
    let env = env_with(&[SCENE, scene]);
    for platform in ["a2a3sim", "a5sim"] {
        let (out, report) = env.run_with_report_using(
            &[
                "run",
                "l3_host_dependency_py",
                "--platform",
                platform,
                "--device",
                "0-7",
            ],
            |_| {},
        );
        assert!(
            out.status.success(),
            "{platform}: {}",
            crate::common::show(&out)
        );
        assert_eq!(report["totals"]["passed"], 2, "{platform}");
    }
    mutate(
        &env,
        "l3_host_dependency_py/golden.py",
        "tensors[\"g\"][...] = f - f.mean(axis=0, dtype=np.float32)",
        "tensors[\"g\"][...] = f - f.mean(axis=1, keepdims=True, dtype=np.float32)",
    );
    let (ok, text, _) = run(&env, &["l3_host_dependency_py::p2"], &[]);
    assert!(!ok, "{text}");
    assert!(text.contains("tensor `g` mismatch"), "{text}");
    mutate(
        &env,
        "l3_host_dependency_py/golden.py",
        "    f = tensors[\"f\"]\n",
        "    f = tensors[\"f\"]\n    raise ValueError(\"no mean today\")\n",
    );
    let (ok, text, _) = run(&env, &["l3_host_dependency_py::p2"], &[]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("scene `l3_host_dependency_py`, steps[1], host step `center` (Python):")
            && text.contains("ValueError: no mean today")
            && text.contains("Traceback"),
        "{text}"
    );
    mutate(
        &env,
        "l3_host_dependency_py/scene.toml",
        "host = { python = \"center\" }",
        "host = { python = \"centre\" }",
    );
    let (ok, text, _) = run(&env, &["l3_host_dependency_py"], &[]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("`steps[1].host.python`:") && text.contains("defines no function `centre`"),
        "{text}"
    );
}

/// Two passes: `scene precompile` builds the C host function and the
/// bundle carries it (`hosts` of the slot), so `scene run --from` runs the
/// steps with the compiler and linker replaced by `false` and an empty
/// kernel cache.
#[test]
fn a_bundle_carries_the_host_function_to_a_machine_without_a_compiler() {
    let env = env_with(&[SCENE]);
    let bundle = env.dir.path().join("bundle");
    let out = env
        .scene(&["precompile", SCENE, "--out", bundle.to_str().unwrap()])
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("bundle.json")).unwrap()).unwrap();
    let slot = &manifest["slots"]["l3_host_dependency::p2"];
    assert_eq!(slot["hosts"]["1"], "host/step1", "{slot}");
    let (out, report) = env.run_with_report_using(
        &["run", "--from", bundle.to_str().unwrap(), "--device", "0-7"],
        |cmd| {
            cmd.env("SCENE_CACHE_DIR", env.dir.path().join("pass2-cache"))
                .env("SCENE_CC", "false")
                .env("SCENE_LD", "false");
        },
    );
    assert!(out.status.success(), "{}", crate::common::show(&out));
    assert_eq!(report["totals"]["passed"], 2, "{report}");
}

/// The C host function is a unit of the kernel cache: a second `scene
/// run` with a warm local cache starts no compiler at all; an edit of
/// `host.c` is a new key, so exactly the host program is compiled again,
/// by `scene compile` (which builds it with the callables, so the run
/// after it starts no compiler either). Each run counts it in its units.
/// A host function that does not build fails `scene compile` for its
/// scene, with the compiler's message.
#[test]
fn the_host_function_is_built_through_the_kernel_cache() {
    let env = env_with(&[SCENE]);
    let cc = crate::remote_cache::Wrapper::new(env.dir.path());
    let host_compiles = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.contains("host.c") || l.contains("scene_host_driver.c"))
            .count()
    };
    let run_counting = |what: &str| {
        cc.reset();
        let (out, report) = env.run_with_report_using(
            &["run", "--platform", "a2a3sim", "--device", "0-7", SCENE],
            |cmd| {
                cmd.env("SCENE_CC", &cc.path);
            },
        );
        assert!(
            out.status.success(),
            "{what}: {}",
            crate::common::show(&out)
        );
        assert_eq!(report["totals"]["failed"], 0, "{what}: {report}");
        (cc.lines(), report["totals"].clone())
    };
    let compile = || {
        cc.reset();
        env.scene(&["compile", "--platform", "a2a3sim", SCENE])
            .env("SCENE_CC", &cc.path)
            .output()
            .unwrap()
    };

    // Cold: orchestration, three incores, the host program (its object,
    // then the driver compiled and linked with it).
    let (lines, totals) = run_counting("a cold run");
    assert_eq!(host_compiles(&lines), 2, "{lines:?}");
    assert_eq!(totals["units_compiled"], 5, "{totals}");

    let (lines, totals) = run_counting("a second run");
    assert_eq!(lines, Vec::<String>::new(), "a warm run started a compiler");
    assert_eq!(totals["units_compiled"], 0, "{totals}");
    assert_eq!(totals["units_cached"], 5, "{totals}");

    let host = env.scenes_dir.as_ref().unwrap().join(SCENE).join("host.c");
    let mut text = std::fs::read_to_string(&host).unwrap();
    text.push_str("\n/* edited: a new key */\n");
    std::fs::write(&host, text).unwrap();
    let out = compile();
    crate::common::assert_success(&out);
    let lines = cc.lines();
    assert_eq!(host_compiles(&lines), 2, "{lines:?}");
    assert_eq!(lines.len(), 2, "only the host program: {lines:?}");

    let (lines, totals) = run_counting("a run after scene compile");
    assert_eq!(lines, Vec::<String>::new(), "scene compile did not warm it");
    assert_eq!(totals["units_cached"], 5, "{totals}");

    mutate(
        &env,
        "l3_host_dependency/scene.toml",
        "function = \"center\"",
        "function = \"centre\"",
    );
    let out = compile();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains(&format!("FAIL {SCENE}"))
            && text.contains("host program `host.c:centre`")
            && text.contains("failed to link")
            && text.matches("centre").count() >= 2,
        "{text}"
    );
}
