//! `manual_dep` (issue 30 item 3) through the real binary: the column-block
//! scene's false write-after-write edges disappear with it and the result
//! is unchanged; two tasks whose manual accesses really overlap, with
//! nothing ordering them, fail the run as a data race under `--race-check`
//! instead of computing whatever the timing gives. The check is a
//! diagnostic, off by default (issue 39): the original project's kernels
//! write parts of a manual tensor they compute themselves, which it cannot
//! see, and it refused valid programs.

use crate::common;

use common::{TestEnv, report_case, show};
use serde_json::Value;

/// Edges of one case's dependency graph (`--dep-graph`).
fn edges(dir: &std::path::Path, case: &str) -> Vec<Value> {
    let path = dir
        .join("manual_dep_columns")
        .join(format!("{case}.deps.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let deps: Value = serde_json::from_str(&text).unwrap();
    deps["ranks"][0]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["deps"].as_array().unwrap().clone())
        .collect()
}

#[test]
fn manual_dep_drops_the_false_edges_and_keeps_the_result() {
    let env = TestEnv::new();
    let graphs = env.dir.path().join("graphs");
    for platform in ["a2a3sim", "a5sim"] {
        let (out, r) = env.run_with_report(&[
            "run",
            "manual_dep_columns",
            "--platform",
            platform,
            "--dep-graph",
            graphs.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{platform}: {}", show(&out));
        assert_eq!(r["totals"]["passed"], 2, "{platform}");
        // Four column blocks: tracked, each block's span overlaps every
        // earlier one (3 + 2 + 1 write-after-write edges); manual, none.
        let tracked = edges(&graphs, "tracked");
        assert_eq!(tracked.len(), 6, "{platform}: {tracked:?}");
        assert!(
            tracked
                .iter()
                .all(|e| e["kind"] == "WAW" && e["manual"] == false)
        );
        assert_eq!(edges(&graphs, "manual"), Vec::<Value>::new(), "{platform}");
    }
}

#[test]
fn two_unordered_manual_writers_of_one_block_are_a_data_race_under_race_check() {
    let env = TestEnv::with_scenes(&[]);
    let dir = common::copy_scene(&env, "manual_dep_columns", "manual_dep_columns");
    let orch = dir.join("orchestration.c");
    let text = std::fs::read_to_string(&orch).unwrap();
    let from = "SceneTaskArgV2 out = scene_task_view(c, at, shape);";
    assert_eq!(text.matches(from).count(), 1);
    // Every task writes block 0 of c.
    let to = "uint64_t first[2] = {0, 0};\n        SceneTaskArgV2 out = scene_task_view(c, first, shape);";
    std::fs::write(&orch, text.replacen(from, to, 1)).unwrap();
    // Without the diagnostic the run is not refused: the overlapping
    // writes just compute a wrong result (the comparison catches it).
    let (out, r) = env.run_with_report(&["run", "manual_dep_columns"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let msg = report_case(&r, "manual_dep_columns::manual")["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        msg.contains("tensor `c` mismatch") && !msg.contains("data race"),
        "{msg}"
    );
    // With it, by the flag or the runtime option, the race is named.
    let (out, r) = env.run_with_report(&["run", "manual_dep_columns", "--race-check"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let (_, by_option) = env.run_with_report_using(&["run", "manual_dep_columns"], |cmd| {
        cmd.env("SCENE_RUNTIME_OPTIONS", "race_check=1");
    });
    assert_eq!(
        report_case(&by_option, "manual_dep_columns::manual")["message"],
        report_case(&r, "manual_dep_columns::manual")["message"]
    );
    let manual = report_case(&r, "manual_dep_columns::manual");
    let msg = manual["message"].as_str().unwrap_or_default();
    assert_eq!(manual["status"], "failed", "{manual}");
    assert!(
        msg.contains("data race: task 1 (func_id 0, argument 1) writes")
            && msg.contains("that task 0 (func_id 0, argument 1) writes")
            && msg.contains("manual_dep"),
        "{msg}"
    );
    // Tracked, the same writes are ordered: no race, just a wrong result.
    let tracked = report_case(&r, "manual_dep_columns::tracked");
    let msg = tracked["message"].as_str().unwrap_or_default();
    assert_eq!(tracked["status"], "failed", "{tracked}");
    assert!(
        msg.contains("tensor `c` mismatch") && !msg.contains("data race"),
        "{msg}"
    );
}

/// The same overlapping manual writes, but every task also writes one
/// element of `a` through a tracked argument: the tracked edges order the
/// tasks (a chain), so there is no race, only the wrong result of every
/// task writing block 0. Each task has finished before the next is
/// submitted (the orchestration reads what it wrote): the ordering must
/// come from the graph, not from which tasks are still running.
#[test]
fn manual_writers_ordered_by_tracked_edges_are_not_a_race() {
    let env = TestEnv::with_scenes(&[]);
    let dir = common::copy_scene(&env, "manual_dep_columns", "manual_dep_columns");
    let orch = dir.join("orchestration.c");
    let text = std::fs::read_to_string(&orch).unwrap();
    let from = "SceneTaskArgV2 out = scene_task_view(c, at, shape);";
    let to = "uint64_t first[2] = {0, 0}, one[2] = {1, 1};\n        SceneTaskArgV2 out = scene_task_view(c, first, shape);";
    assert_eq!(text.matches(from).count(), 1);
    let text = text.replacen(from, to, 1);
    let from = "SceneTaskArgV2 t[2] = {scene_task_view(a, at, shape), out};\n        int32_t rc = scene_orch_submit_v2(ctx, 0, 1, t, 2);";
    // After each submit the orchestration reads a[0, 0], which waits for
    // that task: every earlier task has finished when the next is
    // submitted, so no unfinished-task edge orders them.
    let to = "SceneTaskArgV2 t[3] = {scene_task_view(a, at, shape), out,\n                               scene_task_dir(scene_task_view(a, first, one), SCENE_DIR_INOUT)};\n        int32_t rc = scene_orch_submit_v2(ctx, 0, 1, t, 3);\n        float seen;\n        if (!rc) rc = scene_orch_read(ctx, args[0].value, 0, &seen, sizeof seen);";
    assert_eq!(text.matches(from).count(), 1);
    std::fs::write(&orch, text.replacen(from, to, 1)).unwrap();
    for _ in 0..3 {
        let (out, r) = env.run_with_report(&["run", "manual_dep_columns", "--race-check"]);
        assert_eq!(out.status.code(), Some(1), "{}", show(&out));
        for case in ["manual_dep_columns::manual", "manual_dep_columns::tracked"] {
            let c = report_case(&r, case);
            let msg = c["message"].as_str().unwrap_or_default();
            assert!(
                msg.contains("tensor `c` mismatch") && !msg.contains("data race"),
                "{case}: {msg}"
            );
        }
    }
}
