//! Mixed tasks (issue 30 item 2) through the real binary: one submission
//! runs a cube kernel and up to two vector kernels together on one
//! cluster over one argument list, as one node of the task graph; the
//! kernels of a block see their slot and may wait for each other; traces,
//! `--dep-graph`, `--dump-args` and `scene replay` say which kernel ran
//! where. Mutations (a vector lane that ignores its lane, a cube kernel
//! that never signals, kernels in the wrong slots) fail loudly.

use crate::common;

use std::path::Path;

use common::{TestEnv, assert_success, copy_scene, report_case, show};
use serde_json::Value;

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Runs `scene run <args>` (environment from `configure`), expects it to
/// fail, and returns the failure message of each of `cases`.
fn failures(
    env: &TestEnv,
    args: &[&str],
    configure: impl FnOnce(&mut std::process::Command),
    cases: &[&str],
) -> Vec<String> {
    let mut full = vec!["run"];
    full.extend_from_slice(args);
    let (out, r) = env.run_with_report_using(&full, configure);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    cases
        .iter()
        .map(|case| {
            let c = report_case(&r, case);
            assert_eq!(c["status"], "failed", "{c}");
            c["message"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

/// Passes `scene run <args> --platform P` on both platforms: `cases` pass.
fn passes_on_both_platforms(env: &TestEnv, args: &[&str], cases: u64) {
    for platform in ["a2a3sim", "a5sim"] {
        let mut full = vec!["run"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["--platform", platform]);
        let (out, r) = env.run_with_report(&full);
        assert_success(&out);
        assert_eq!(r["totals"]["passed"], cases, "{platform}: {}", show(&out));
    }
}

/// Replaces the one occurrence of `from` in `file` by `to`.
fn mutate(file: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    assert_eq!(text.matches(from).count(), 1, "{}: {from}", file.display());
    std::fs::write(file, text.replacen(from, to, 1)).unwrap();
}

/// The port of simpler's mixed_example passes on both platforms as five
/// tasks per iteration (not nine), three of them mixed, with no edge
/// between them; every block of a mixed task runs its kernels on one
/// cluster's lanes (aic c, aiv 2c and 2c + 1).
#[test]
fn mixed_example_is_five_tasks_per_iteration_on_one_cluster_each() {
    let env = TestEnv::new();
    let graphs = env.dir.path().join("graphs");
    let traces = env.dir.path().join("traces");
    for platform in ["a2a3sim", "a5sim"] {
        let (out, r) = env.run_with_report(&[
            "run",
            "mixed_example",
            "--include-manual",
            "--platform",
            platform,
            "--dep-graph",
            graphs.to_str().unwrap(),
            "--trace",
            traces.to_str().unwrap(),
        ]);
        assert_success(&out);
        assert_eq!(r["totals"]["passed"], 2, "{platform}: {}", show(&out));
        let deps = read_json(&graphs.join("mixed_example/case1.deps.json"));
        let tasks = deps["ranks"][0]["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), 4 * 5, "{platform}: 4 iterations of 5 tasks");
        let shapes: Vec<Vec<(String, u64)>> = tasks[..5]
            .iter()
            .map(|t| {
                t["kernels"]
                    .as_array()
                    .map(|ks| {
                        ks.iter()
                            .map(|k| {
                                (
                                    k["slot"].as_str().unwrap().to_owned(),
                                    k["func_id"].as_u64().unwrap(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect();
        let s = |v: &[(&str, u64)]| -> Vec<(String, u64)> {
            v.iter().map(|&(a, b)| (a.to_owned(), b)).collect()
        };
        assert_eq!(
            shapes,
            vec![
                s(&[("aic", 0), ("aiv0", 1), ("aiv1", 2)]),
                vec![],
                vec![],
                s(&[("aiv0", 3), ("aiv1", 4)]),
                s(&[("aic", 0), ("aiv0", 1)]),
            ],
            "{platform}"
        );
        assert!(
            tasks
                .iter()
                .all(|t| t["deps"].as_array().unwrap().is_empty()),
            "{platform}: the tasks write disjoint views, no edges"
        );
        let dot = std::fs::read_to_string(graphs.join("mixed_example/case1.dot")).unwrap();
        assert!(
            dot.contains("MATMUL+ADD+MUL (func_ids 0+1+2, aic+aiv0+aiv1)\\nmixed, block_num 1"),
            "{dot}"
        );
        // Trace: the three calls of task 0's block are on one cluster.
        let trace = read_json(&traces.join("mixed_example/case1.trace.json"));
        let mut lanes: Vec<(String, u64)> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "block" && e["args"]["task"] == 0)
            .map(|e| {
                (
                    e["args"]["slot"].as_str().unwrap().to_owned(),
                    e["tid"].as_u64().unwrap(),
                )
            })
            .collect();
        lanes.sort();
        assert_eq!(lanes.len(), 3, "{platform}: {lanes:?}");
        let cluster = lanes[0].1 - 100;
        assert_eq!(
            lanes,
            vec![
                ("aic".into(), 100 + cluster),
                ("aiv0".into(), 200 + 2 * cluster),
                ("aiv1".into(), 200 + 2 * cluster + 1)
            ],
            "{platform}"
        );
    }
}

/// In every block of `mixed_pipeline` the vector kernels wait for the cube
/// kernel's signal: it passes (both platforms, one and two vector lanes),
/// so the kernels of a block ran together. A vector kernel that ignores
/// its lane leaves half of each tile unwritten; a cube kernel that never
/// signals is reported as a deadlock naming the waiting kernel, not a
/// hang.
#[test]
fn cluster_flags_order_a_block_and_lanes_split_it() {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, "mixed_pipeline", "mixed_pipeline");
    passes_on_both_platforms(&env, &["mixed_pipeline"], 2);
    let relu = dir.join("kernels/bias_relu.c");
    mutate(
        &relu,
        "+ scene_sub_block_id(ka) * share",
        "+ 0 * scene_sub_block_id(ka) * share",
    );
    let (out, r) = env.run_with_report(&["run", "mixed_pipeline"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let two = report_case(&r, "mixed_pipeline::two_vector_lanes");
    let msg = two["message"].as_str().unwrap_or_default();
    assert!(msg.contains("tensor `y` mismatch"), "{two}");
    // One vector lane does every row: unaffected.
    assert_eq!(
        report_case(&r, "mixed_pipeline::one_vector_lane")["status"],
        "passed"
    );
    mutate(
        &relu,
        "+ 0 * scene_sub_block_id(ka) * share",
        "+ scene_sub_block_id(ka) * share",
    );
    mutate(
        &dir.join("kernels/matmul_tile.c"),
        "if (ka->slot_mask & (1u << slot)) scene_cluster_signal(ka, slot, 0);",
        "(void)slot;",
    );
    let cases = [
        "mixed_pipeline::two_vector_lanes",
        "mixed_pipeline::one_vector_lane",
    ];
    for msg in failures(&env, &["mixed_pipeline"], |_| {}, &cases) {
        assert!(
            msg.contains("cross-core flag deadlock: the aiv0 kernel (func_id 1) of block")
                || msg.contains("cross-core flag deadlock: the aiv1 kernel (func_id 1) of block"),
            "{msg}"
        );
        assert!(msg.contains("waits for its flag 0"), "{msg}");
    }
}

/// The port of simpler's spmd_multiblock_mix (mixed tasks of 2 to 48
/// blocks) passes on both platforms; a vector kernel that ignores its lane
/// leaves every aiv1 cache line unwritten.
#[test]
fn multiblock_mixed_tasks_give_each_lane_its_block_and_sub_block() {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, "spmd_multiblock_mix", "spmd_multiblock_mix");
    passes_on_both_platforms(&env, &["spmd_multiblock_mix"], 1);
    mutate(
        &dir.join("kernels/aiv_spmd_mix.c"),
        "(int64_t)scene_sub_block_id(ka);",
        "0;",
    );
    let msgs = failures(
        &env,
        &["spmd_multiblock_mix"],
        |_| {},
        &["spmd_multiblock_mix::Case1"],
    );
    assert!(msgs[0].contains("tensor `output` mismatch"), "{msgs:?}");
}

/// Kernels in the wrong slots, and a device without the cluster a task
/// needs, are refused at submit with what to change.
#[test]
fn a_mixed_task_needs_kernels_of_its_slots_and_a_cluster_that_has_them() {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, "mixed_example", "mixed_example");
    let case = ["mixed_example::case1"];
    let msg = &failures(
        &env,
        &["mixed_example"],
        |cmd| {
            cmd.env("SCENE_RUNTIME_OPTIONS", "aic=2;aiv=1");
        },
        &case,
    )[0];
    assert!(
        msg.contains("mixed task (aic+aiv0+aiv1) needs one cluster with 1 aic and 2 aiv core(s)")
            && msg.contains("aic=2, aiv=1"),
        "{msg}"
    );
    mutate(
        &dir.join("orchestration.c"),
        "scene_mixed(FUNC_MATMUL, FUNC_ADD, FUNC_MUL)",
        "scene_mixed(FUNC_ADD, FUNC_MATMUL, FUNC_MUL)",
    );
    let msg = &failures(&env, &["mixed_example"], |_| {}, &case)[0];
    assert!(
        msg.contains("mixed task: slot aic names func_id 1, an aiv kernel"),
        "{msg}"
    );
}

/// `--dump-args` records a mixed task once, with its kernels; `scene
/// replay` runs all of them again as one mixed task and matches bit for
/// bit, and after a change to one of its kernels names the output that
/// kernel writes.
#[test]
fn a_mixed_task_replays_with_all_its_kernels() {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, "mixed_example", "mixed_example");
    let root = env.dir.path().join("args");
    let dump = format!("--dump-args={}", root.display());
    let (out, _) = env.run_with_report(&["run", "mixed_example", dump.as_str()]);
    assert_success(&out);
    let case = root.join("mixed_example/case1");
    let task = read_json(&case.join("task0/task.json"));
    assert_eq!(
        task["kernels"],
        serde_json::json!([
            {"slot": "aic", "func_id": 0},
            {"slot": "aiv0", "func_id": 1},
            {"slot": "aiv1", "func_id": 2}
        ])
    );
    let replay = |task: &str| {
        env.scene(&["replay", case.to_str().unwrap(), task])
            .output()
            .unwrap()
    };
    let out = replay("0");
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("replay of mixed task 0 (kernels MATMUL (func_id 0) [aic] + ADD (func_id 1) [aiv0] + MUL (func_id 2) [aiv1]): outputs match bit for bit (3 output arguments"),
        "{text}"
    );
    // The mixed task's vector kernel changes: argument 8 (MUL's output)
    // of the replayed task no longer matches; 2 (MATMUL's) and 5 (ADD's) do.
    mutate(
        &dir.join("kernels/mul.c"),
        "out[i] = x[i] * y[i];",
        "out[i] = x[i] * y[i] + 1.0f;",
    );
    let out = replay("0");
    assert!(!out.status.success(), "{}", show(&out));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("argument 8"), "{text}");
    assert!(
        !text.contains("argument 2") && !text.contains("argument 5"),
        "{text}"
    );
}

/// One cluster shared by every mixed and plain task (`aic=1;aiv=2`: the
/// scheduler keeps the cluster for a waiting mixed block and must hand
/// the plain work back afterwards), and three clusters: the same results.
#[test]
fn mixed_and_plain_tasks_share_one_cluster_or_many() {
    let env = TestEnv::new();
    for options in ["aic=1;aiv=2", "aic=3;aiv=6", "aic=1;aiv=3"] {
        let (out, r) = env.run_with_report_using(
            &[
                "run",
                "mixed_example",
                "spmd_multiblock_mix",
                "mixed_pipeline",
                "--include-manual",
            ],
            |cmd| {
                cmd.env("SCENE_RUNTIME_OPTIONS", options);
            },
        );
        assert_success(&out);
        assert_eq!(r["totals"]["passed"], 5, "{options}: {}", show(&out));
    }
}

/// Hosted kernels of a mixed block share PTO-ISA's pipe state
/// (`pto_sim_get_pipe_shared_state`, found with dlsym): fresh per block
/// (every block reads its own block + 1, not a running sum), the same
/// bytes for the cube and both vector kernels of a block, per pipe key (a
/// producer that writes another key leaves the consumers' state 0).
#[test]
fn hosted_kernels_of_a_mixed_block_share_its_pipe_state() {
    let env = TestEnv::with_scenes(&[]);
    let dir = copy_scene(&env, "hosted_pipe_state", "hosted_pipe_state");
    passes_on_both_platforms(&env, &["hosted_pipe_state"], 1);
    mutate(
        &dir.join("kernels/producer.cpp"),
        "if (auto *state = pipe_state())",
        "if (auto *state = static_cast<std::atomic<std::int64_t> *>(\n        reinterpret_cast<void *(*)(std::uint64_t, std::size_t)>(\n            dlsym(RTLD_DEFAULT, \"pto_sim_get_pipe_shared_state\"))(43, 64)))",
    );
    let msgs = failures(
        &env,
        &["hosted_pipe_state"],
        |_| {},
        &["hosted_pipe_state::eight_blocks"],
    );
    assert!(msgs[0].contains("tensor `seen` mismatch"), "{msgs:?}");
}
