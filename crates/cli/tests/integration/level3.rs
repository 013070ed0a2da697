//! Level-3 scenes through the real `scene` binary: the collective ports
//! pass, one rank per card, with per-rank device times and the group's
//! card-seconds in the report; each port fails when its kernel is mutated
//! (copies in a temp scenes dir, the package's scenes are never touched);
//! a rank that never signals fails its case with the wait message within
//! the (shortened) comm timeout, and the case after it, on the same cards
//! and in the same process, passes; several processes with 2- and 4-rank
//! cases on `--device 0-7` never hold a card twice and never deadlock.

use crate::common;

use serde_json::Value;

use common::{TestEnv, assert_no_card_held_twice, copy_dir, package_scenes_dir};

/// Every level-3 scene of the package.
const PORTS: [&str; 13] = [
    "allreduce_onephase",
    "allreduce_bidirectional_ring",
    "allreduce_twophase",
    "allreduce_ring",
    "allgather",
    "broadcast",
    "reduce_scatter",
    "all_to_all",
    "ffn_tp_parallel",
    "rank_local_linear",
    "allreduce_atomic",
    "allgather_window",
    "l3_host_dependency",
];

/// A private scenes dir with `scenes`, the collectives' shared
/// orchestration and `vector_example`'s kernels (not its scene).
pub(crate) fn env_with(scenes: &[&str]) -> TestEnv {
    let env = TestEnv::with_scenes(&[]);
    let dir = env.scenes_dir.clone().unwrap();
    for s in scenes.iter().copied().chain(["common_comm"]) {
        copy_dir(&package_scenes_dir().join(s), &dir.join(s));
    }
    copy_dir(
        &package_scenes_dir().join("vector_example/kernels"),
        &dir.join("vector_example/kernels"),
    );
    env
}

/// Replaces `from` (which must occur exactly once) by `to` in `file`.
pub(crate) fn mutate(env: &TestEnv, file: &str, from: &str, to: &str) {
    let path = env.scenes_dir.as_ref().unwrap().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text.matches(from).count(),
        1,
        "{file}: the mutation site `{from}` must occur exactly once"
    );
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

/// Runs `scene run <args> --report-json` in `env`; returns success, the
/// output text and the report.
pub(crate) fn run(
    env: &TestEnv,
    args: &[&str],
    extra_env: &[(&str, &str)],
) -> (bool, String, Value) {
    let mut full = vec!["run", "--platform", "a2a3sim", "--device", "0-7"];
    full.extend(args);
    let (out, report) = env.run_with_report_using(&full, |cmd| {
        cmd.envs(extra_env.iter().copied());
    });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text, report)
}

fn cases(report: &Value) -> &Vec<Value> {
    report["cases"].as_array().unwrap()
}

#[test]
fn every_port_passes_one_rank_per_card_with_per_rank_times() {
    let env = env_with(&PORTS);
    let (ok, text, report) = run(&env, &[], &[]);
    assert!(ok, "{text}");
    let cases = cases(&report);
    // allreduce: 4 algorithms x 2, 4, 8 ranks; 4 others x 2, 4; ffn x 2, 4;
    // rank_local_linear x 2, 4; allreduce_atomic x 2, 4, 8;
    // allgather_window x 2, 4; l3_host_dependency x 2, 4.
    assert_eq!(cases.len(), 12 + 8 + 2 + 2 + 3 + 2 + 2, "{text}");
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let ranks: usize = name
            .rsplit("::")
            .next()
            .and_then(|case| {
                case.trim_start_matches(|ch: char| ch.is_alphabetic())
                    .parse()
                    .ok()
            })
            .unwrap();
        let mut devices: Vec<u64> = c["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(devices.len(), ranks, "{c}");
        devices.sort_unstable();
        devices.dedup();
        assert_eq!(devices.len(), ranks, "a card twice in one group: {c}");
        let per_rank = c["ranks"].as_array().unwrap();
        assert_eq!(per_rank.len(), ranks, "{c}");
        for (r, entry) in per_rank.iter().enumerate() {
            assert_eq!(entry["rank"].as_u64(), Some(r as u64), "{c}");
            assert!(entry["device_s"].as_f64().unwrap() >= 0.0, "{c}");
        }
        let held = c["phases"]["lock_held_s"].as_f64().unwrap();
        let card_s = c["card_seconds"].as_f64().unwrap();
        assert!((card_s - held * ranks as f64).abs() < 1e-9, "{c}");
    }
}

/// `filter` fails on a comparison of `y` (not a crash, not a load error).
pub(crate) fn assert_fails_on_y(env: &TestEnv, filter: &str, what: &str) {
    let (ok, text, _) = run(env, &[filter], &[]);
    assert!(!ok, "{what}: the mutated scene passed\n{text}");
    assert!(
        text.contains(&format!("FAIL {filter}")) && text.contains("tensor `y` mismatch"),
        "{what}: expected `{filter}` to fail on tensor `y`\n{text}"
    );
}

#[test]
fn allreduce_onephase_fails_reading_the_wrong_peer() {
    let env = env_with(&["allreduce_onephase"]);
    mutate(
        &env,
        "allreduce_onephase/kernel.c",
        "scene_comm_peer_ptr(c, peer, 0)",
        "scene_comm_peer_ptr(c, (peer + 1) % c->nranks, 0)",
    );
    assert_fails_on_y(&env, "allreduce_onephase::p4", "wrong peer");
}

#[test]
fn allreduce_twophase_fails_gathering_from_the_wrong_owner() {
    let env = env_with(&["allreduce_twophase"]);
    mutate(
        &env,
        "allreduce_twophase/kernel.c",
        "scene_comm_peer_ptr(c, r, r * chunk * sizeof(float))",
        "scene_comm_peer_ptr(c, (r + 1) % p, r * chunk * sizeof(float))",
    );
    assert_fails_on_y(&env, "allreduce_twophase::p4", "wrong chunk owner");
}

#[test]
fn allreduce_ring_fails_with_the_send_index_one_off() {
    let env = env_with(&["allreduce_ring"]);
    mutate(
        &env,
        "allreduce_ring/kernel.c",
        "uint32_t left_send = (left + p - step) % p;",
        "uint32_t left_send = (left + p - step + 1) % p;",
    );
    assert_fails_on_y(&env, "allreduce_ring::p8", "send index");
}

#[test]
fn allreduce_bidirectional_ring_fails_pushing_ring_1_the_wrong_way() {
    let env = env_with(&["allreduce_bidirectional_ring"]);
    mutate(
        &env,
        "allreduce_bidirectional_ring/kernel.c",
        "float *dst1 = (float *)scene_comm_peer_ptr(c, left, (stride + idx1 * sub) * sizeof(float));\n        for (uint64_t i = 0; i < sub; ++i) dst1[i] += ring1[idx1 * sub + i];",
        "float *dst1 = (float *)scene_comm_peer_ptr(c, right, (stride + idx1 * sub) * sizeof(float));\n        for (uint64_t i = 0; i < sub; ++i) dst1[i] += ring1[idx1 * sub + i];",
    );
    assert_fails_on_y(&env, "allreduce_bidirectional_ring::p4", "ring 1 direction");
}

#[test]
fn allgather_fails_reading_the_wrong_peer() {
    let env = env_with(&["allgather"]);
    mutate(
        &env,
        "allgather/kernel.c",
        "scene_comm_peer_ptr(c, r, 0)",
        "scene_comm_peer_ptr(c, (r + 1) % c->nranks, 0)",
    );
    assert_fails_on_y(&env, "allgather::p4", "wrong peer");
}

/// The window as a tensor (`[comm] window_tensor`): `allgather_window`
/// passes on both platforms, and in each rank's dependency graph the task
/// that reads the whole window tensor depends on the one that wrote the
/// rank's slot through a view: a RAW edge on `scratch` over exactly that
/// slot's bytes.
#[test]
fn allgather_window_orders_its_tasks_through_the_window_tensor() {
    let env = env_with(&["allgather_window"]);
    for platform in ["a2a3sim", "a5sim"] {
        let graphs = env.dir.path().join(format!("graphs-{platform}"));
        let (out, report) = env.run_with_report_using(
            &[
                "run",
                "allgather_window",
                "--platform",
                platform,
                "--device",
                "0-7",
                "--dep-graph",
                graphs.to_str().unwrap(),
            ],
            |_| {},
        );
        assert!(out.status.success(), "{platform}: {}", common::show(&out));
        assert_eq!(report["totals"]["passed"], 2, "{platform}");
        let text = std::fs::read_to_string(graphs.join("allgather_window/p4.deps.json")).unwrap();
        let deps: Value = serde_json::from_str(&text).unwrap();
        let ranks = deps["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), 4, "{platform}");
        let slot = 64 * 4;
        for (r, rank) in ranks.iter().enumerate() {
            let tasks = rank["tasks"].as_array().unwrap();
            assert_eq!(tasks.len(), 2, "{platform} rank {r}: stage, gather");
            let edges: Vec<(u64, &str, &str, u64, u64)> = tasks[1]["deps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    (
                        d["task"].as_u64().unwrap(),
                        d["kind"].as_str().unwrap(),
                        d["tensor"].as_str().unwrap(),
                        d["start"].as_u64().unwrap(),
                        d["end"].as_u64().unwrap(),
                    )
                })
                .collect();
            let (start, end) = (r as u64 * slot, (r as u64 + 1) * slot);
            assert_eq!(
                edges,
                vec![(0, "RAW", "scratch", start, end)],
                "{platform} rank {r}"
            );
        }
        let dot = std::fs::read_to_string(graphs.join("allgather_window/p2.dot")).unwrap();
        assert!(
            dot.contains("r1t0 -> r1t1 [label=\"RAW scratch [256, 512)\""),
            "{platform}: {dot}"
        );
    }
}

/// Staging into the wrong slot of the window tensor (the view one slot
/// off) fails on `y`; so does the same scene with the runtime's own
/// windows (`window = ...` instead of `window_tensor`): then the tensor
/// the tasks write is not what peers read.
#[test]
fn allgather_window_fails_staging_into_the_wrong_slot_or_another_window() {
    let env = env_with(&["allgather_window"]);
    mutate(
        &env,
        "allgather_window/orchestration.c",
        "uint64_t off[1] = {(uint64_t)rank * c};",
        "uint64_t off[1] = {(uint64_t)((rank + 1) % nranks) * c};",
    );
    assert_fails_on_y(&env, "allgather_window::p4", "view one slot off");
    let env = env_with(&["allgather_window"]);
    mutate(
        &env,
        "allgather_window/scene.toml",
        "window_tensor = \"scratch\"",
        "window = \"nranks * C * 4\"",
    );
    assert_fails_on_y(&env, "allgather_window::p2", "heap windows");
}

/// A window tensor is an output like any other: its slices after the run
/// are compared with the golden's (`allgather_window`'s golden says what
/// each window holds), so a kernel that scribbles on a part of its window
/// nobody reads fails on `scratch` while `y` still passes; with
/// `skip_golden = true` on the tensor the same scene passes, `scratch`
/// judged `skipped`.
#[test]
fn a_window_tensor_is_compared_like_any_output_unless_skipped() {
    let env = env_with(&["allgather_window"]);
    mutate(
        &env,
        "allgather_window/kernels/gather.c",
        "for (uint64_t i = 0; i < n; ++i) out[p * n + i] = remote[i];\n    }",
        "for (uint64_t i = 0; i < n; ++i) out[p * n + i] = remote[i];\n    }\n    \
         ((float *)scene_comm_local_ptr(c, ((c->rank + 1) % c->nranks) * n * 4))[0] = 42.0f;",
    );
    let (ok, text, report) = run(&env, &["allgather_window::p2"], &[]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("tensor `scratch` mismatch") && !text.contains("tensor `y` mismatch"),
        "{text}"
    );
    let outputs = |report: &Value| -> Vec<(String, String)> {
        cases(report)[0]["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["name"].as_str().unwrap().to_owned(),
                    o["verdict"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let pair = |n: &str, v: &str| (n.to_owned(), v.to_owned());
    assert_eq!(
        outputs(&report),
        vec![pair("scratch", "fail"), pair("y", "pass")]
    );
    mutate(
        &env,
        "allgather_window/scene.toml",
        "name = \"scratch\"\ndtype = \"f32\"",
        "name = \"scratch\"\nskip_golden = true\ndtype = \"f32\"",
    );
    let (ok, text, report) = run(&env, &["allgather_window::p2"], &[]);
    assert!(ok, "{text}");
    assert_eq!(
        outputs(&report),
        vec![pair("scratch", "skipped"), pair("y", "pass")]
    );
}

#[test]
fn broadcast_fails_reading_rank_0_instead_of_the_root() {
    let env = env_with(&["broadcast"]);
    mutate(
        &env,
        "broadcast/kernel.c",
        "scene_comm_peer_ptr(c, (uint32_t)root, 0)",
        "scene_comm_peer_ptr(c, 0, 0)",
    );
    assert_fails_on_y(&env, "broadcast::p4", "root");
}

#[test]
fn reduce_scatter_fails_reducing_the_wrong_chunk() {
    let env = env_with(&["reduce_scatter"]);
    mutate(
        &env,
        "reduce_scatter/kernel.c",
        "scene_comm_peer_ptr(c, peer, c->rank * n * sizeof(float))",
        "scene_comm_peer_ptr(c, peer, peer * n * sizeof(float))",
    );
    assert_fails_on_y(&env, "reduce_scatter::p4", "wrong chunk");
}

#[test]
fn all_to_all_fails_pushing_into_the_wrong_slot() {
    let env = env_with(&["all_to_all"]);
    mutate(
        &env,
        "all_to_all/kernel.c",
        "scene_comm_peer_ptr(c, dest, c->rank * n * sizeof(float))",
        "scene_comm_peer_ptr(c, dest, dest * n * sizeof(float))",
    );
    assert_fails_on_y(&env, "all_to_all::p4", "wrong slot");
}

#[test]
fn ffn_tp_parallel_fails_reading_the_wrong_mailbox_slot() {
    let env = env_with(&["ffn_tp_parallel"]);
    mutate(
        &env,
        "ffn_tp_parallel/kernels/allreduce_sum.c",
        "scene_comm_local_ptr(c, peer * slot_bytes)",
        "scene_comm_local_ptr(c, c->rank * slot_bytes)",
    );
    assert_fails_on_y(&env, "ffn_tp_parallel::tp4", "wrong mailbox slot");
}

/// A group whose ranks do not communicate runs with `window = "0"` on both
/// sims (`rank_local_linear`, which shares `ffn_tp_parallel`'s kernel);
/// its operands swapped, it fails on `y`; and a group that does
/// communicate, given no window, fails on `y` too (its peer pointers are
/// NULL), never passes silently.
#[test]
fn a_group_that_does_not_communicate_needs_no_window() {
    let env = env_with(&["rank_local_linear", "ffn_tp_parallel"]);
    for platform in ["a2a3sim", "a5sim"] {
        let (out, report) = env.run_with_report_using(
            &[
                "run",
                "rank_local_linear",
                "--platform",
                platform,
                "--device",
                "0-7",
            ],
            |_| {},
        );
        assert!(out.status.success(), "{platform}: {}", common::show(&out));
        assert_eq!(report["totals"]["passed"], 2, "{platform}");
    }
    mutate(
        &env,
        "ffn_tp_parallel/scene.toml",
        "window = \"nranks * M * N * 4\"",
        "window = \"0\"",
    );
    assert_fails_on_y(
        &env,
        "ffn_tp_parallel::tp2",
        "a communicating group without a window",
    );
    mutate(
        &env,
        "rank_local_linear/orchestration.c",
        "SCENE_IN(args[0]), SCENE_IN(args[1])",
        "SCENE_IN(args[1]), SCENE_IN(args[0])",
    );
    assert_fails_on_y(&env, "rank_local_linear::dp2", "operands swapped");
}

/// Window atomics (`allreduce_atomic`): the sum lands where it is added,
/// and what the fetch-adds counted is read back after the barrier.
#[test]
fn allreduce_atomic_fails_adding_into_the_wrong_word() {
    let env = env_with(&["allreduce_atomic"]);
    mutate(
        &env,
        "allreduce_atomic/kernel.c",
        "scene_comm_atomic_add_f32(c, peer, i * sizeof(float), in[i])",
        "scene_comm_atomic_add_f32(c, peer, (i + 1) % n * sizeof(float), in[i])",
    );
    assert_fails_on_y(&env, "allreduce_atomic::p4", "wrong word");
}

#[test]
fn allreduce_atomic_fails_when_a_counter_is_not_what_the_ranks_added() {
    let env = env_with(&["allreduce_atomic"]);
    mutate(
        &env,
        "allreduce_atomic/kernel.c",
        "scene_comm_fetch_add_i64(c, 0, count64, (int64_t)1 << 40, &before64)",
        "scene_comm_fetch_add_i64(c, 0, count64, (int64_t)1 << 39, &before64)",
    );
    assert_fails_on_y(&env, "allreduce_atomic::p2", "counter");
}

/// `hang_a::p2`: rank 1 waits for rank 0's signal 3, which rank 0 never
/// sends; `hang_b::{p2,p2b,p2c}`: the unmodified allreduce on 2 ranks,
/// prepared after it. On a pool of 2 cards every case holds both; the
/// waiting line is first come, first served, so at least one `hang_b`
/// case takes the cards after `hang_a` released them.
fn env_with_a_silent_rank() -> TestEnv {
    let env = TestEnv::with_scenes(&[]);
    let dir = env.scenes_dir.clone().unwrap();
    copy_dir(
        &package_scenes_dir().join("common_comm"),
        &dir.join("common_comm"),
    );
    for (name, silent) in [("hang_a", true), ("hang_b", false)] {
        copy_dir(
            &package_scenes_dir().join("allreduce_onephase"),
            &dir.join(name),
        );
        let toml = dir.join(name).join("scene.toml");
        let text = std::fs::read_to_string(&toml).unwrap().replace(
            "name = \"allreduce_onephase\"",
            &format!("name = \"{name}\""),
        );
        let cut = text.find("[[cases]]\nname = \"p4\"").unwrap();
        let mut text = text[..cut].to_owned();
        if !silent {
            for extra in ["p2b", "p2c"] {
                text.push_str(&format!(
                    "[[cases]]\nname = \"{extra}\"\nparams = {{ nranks = 2, N = 256 }}\n\n"
                ));
            }
        }
        std::fs::write(&toml, text).unwrap();
        if silent {
            mutate(
                &env,
                &format!("{name}/kernel.c"),
                "if (scene_comm_barrier(c, 0) != 0) return;",
                "if (c->rank == 1 && scene_comm_wait_from(c, 0, 3, 1) != 0) return;",
            );
        }
    }
    env
}

fn check_silent_rank_then_pass(report: &Value, text: &str) {
    let cases = cases(report);
    let get = |n: &str| {
        cases
            .iter()
            .find(|c| c["name"] == n)
            .unwrap_or_else(|| panic!("no {n}\n{text}"))
    };
    let failed = get("hang_a::p2");
    assert_eq!(failed["status"], "failed", "{text}");
    let msg = failed["message"].as_str().unwrap();
    assert!(
        msg.contains("rank 1 waited for rank 0 signal 3 for 1 s"),
        "{msg}"
    );
    // Every other case passes, and one of them took the two cards the
    // failed case released, after it released them.
    let released = failed["lock"]["released_at"].as_f64().unwrap();
    let others: Vec<&Value> = cases.iter().filter(|c| c["name"] != "hang_a::p2").collect();
    assert_eq!(others.len(), 3, "{text}");
    for c in &others {
        assert_eq!(c["status"], "passed", "{text}");
    }
    assert!(
        others.iter().any(|c| c["devices"] == failed["devices"]
            && c["lock"]["acquired_at"].as_f64().unwrap() >= released),
        "no case ran on the cards after the failed one\n{text}"
    );
    assert_no_card_held_twice(std::slice::from_ref(report));
}

#[test]
fn a_rank_that_never_signals_fails_within_its_timeout_and_the_next_case_passes() {
    let env = env_with_a_silent_rank();
    for mode in [&[][..], &["--in-process"][..]] {
        let mut args = vec!["run", "hang_", "--platform", "a2a3sim", "--device", "0-1"];
        args.extend(mode);
        let (out, report) = env.run_with_report_using(&args, |cmd| {
            cmd.env("SCENE_COMM_TIMEOUT", "1");
        });
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(1), "{mode:?}: {text}");
        check_silent_rank_then_pass(&report, &text);
        // Not retired: a comm failure is the case's, not the card's.
        assert!(!text.contains("retired"), "{mode:?}: {text}");
    }
}

/// 2-rank and 4-rank cases from three processes at once on `--device 0-7`,
/// 20 rounds: no card is held by two groups at once, and every process
/// finishes.
#[test]
fn rank_groups_across_processes_never_share_a_card_or_deadlock() {
    let env = env_with(&["allreduce_onephase", "allgather"]);
    // The p8 case would take the whole pool; 2 and 4 ranks interleave.
    let toml = env
        .scenes_dir
        .as_ref()
        .unwrap()
        .join("allreduce_onephase/scene.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let cut = text.find("[[cases]]\nname = \"p8\"").unwrap();
    std::fs::write(&toml, &text[..cut]).unwrap();
    for round in 0..20 {
        let reports = common::run_concurrently(
            &env,
            3,
            &["run", "--platform", "a2a3sim", "--device", "0-7"],
            &format!("r{round}"),
        );
        for r in &reports {
            assert_eq!(cases(r).len(), 4, "{r}");
        }
        assert_no_card_held_twice(&reports);
    }
}
