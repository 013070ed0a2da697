//! `scene run --trace DIR` and `--dep-graph DIR` (issue 19), through the
//! real `scene` binary: the trace is read back as trace-event JSON and
//! checked against the runtime's own record and the report; the DOT graph
//! is parsed and checked against the runtime's record and against an
//! independent computation from the recorded accesses.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;

use common::{TestEnv, assert_success, read_report, report_case as case};
use serde_json::Value;

struct Traced {
    report: Value,
    trace_dir: PathBuf,
    dep_dir: PathBuf,
}

/// Runs `filter` with `--trace` and `--dep-graph` (plus `extra`); every
/// case must pass.
fn run_traced(env: &TestEnv, filter: &str, extra: &[&str]) -> Traced {
    let trace_dir = env.dir.path().join("trace");
    let dep_dir = env.dir.path().join("deps");
    let mut args = vec![
        "run",
        filter,
        "--trace",
        trace_dir.to_str().unwrap(),
        "--dep-graph",
        dep_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (out, report) = env.run_with_report_using(&args, |cmd| {
        cmd.env_remove("SCENE_RUNTIME_OPTIONS");
    });
    assert_success(&out);
    Traced {
        report,
        trace_dir,
        dep_dir,
    }
}

/// A complete event on a lane.
#[derive(Debug, Clone)]
struct Span {
    pid: u64,
    tid: u64,
    name: String,
    ts: f64,
    end: f64,
    args: Value,
}

fn spans(trace: &Value) -> Vec<Span> {
    trace["traceEvents"]
        .as_array()
        .expect("traceEvents is an array")
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap();
            Span {
                pid: e["pid"].as_u64().unwrap(),
                tid: e["tid"].as_u64().unwrap(),
                name: e["name"].as_str().unwrap().to_owned(),
                ts,
                end: ts + e["dur"].as_f64().unwrap(),
                args: e["args"].clone(),
            }
        })
        .collect()
}

/// `(pid, tid) -> name` of the `thread_name` metadata events, and
/// `pid -> name` of the `process_name` ones.
fn lane_names(trace: &Value) -> (BTreeMap<(u64, u64), String>, BTreeMap<u64, String>) {
    let mut threads = BTreeMap::new();
    let mut processes = BTreeMap::new();
    for e in trace["traceEvents"].as_array().unwrap() {
        if e["ph"] != "M" {
            continue;
        }
        let pid = e["pid"].as_u64().unwrap();
        let name = e["args"]["name"].as_str().map(str::to_owned);
        match (e["name"].as_str(), name) {
            (Some("thread_name"), Some(n)) => {
                threads.insert((pid, e["tid"].as_u64().unwrap()), n);
            }
            (Some("process_name"), Some(n)) => {
                processes.insert(pid, n);
            }
            _ => {}
        }
    }
    (threads, processes)
}

fn is_core_lane(name: &str) -> bool {
    name.starts_with("aic ") || name.starts_with("aiv ")
}

/// Checks one card process of a trace: every task of the runtime's
/// record has each of its blocks exactly once on a core lane, and no two
/// blocks overlap on a lane. Returns the core-lane spans.
fn check_card(trace: &Value, pid: u64) -> Vec<Span> {
    let (threads, _) = lane_names(trace);
    let all = spans(trace);
    let run = all
        .iter()
        .find(|s| s.pid == pid && s.name == "run")
        .unwrap_or_else(|| panic!("card process {pid} has a `run` span"));
    let tasks = run.args["tasks"].as_u64().unwrap() as usize;
    assert!(tasks > 0, "the runtime recorded tasks: {:?}", run.args);
    let blocks: Vec<Span> = all
        .iter()
        .filter(|s| {
            s.pid == pid
                && threads
                    .get(&(s.pid, s.tid))
                    .is_some_and(|n| is_core_lane(n))
        })
        .cloned()
        .collect();
    let mut seen: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for b in &blocks {
        let task = b.args["task"].as_u64().unwrap();
        let block = b.args["block"].as_u64().unwrap();
        let num = b.args["block_num"].as_u64().unwrap();
        assert!(block < num, "{b:?}");
        assert!(
            seen.entry(task).or_default().insert(block),
            "task {task} block {block} appears twice on the core lanes"
        );
        assert!(b.name.contains("(func_id "), "block name {:?}", b.name);
        assert!(b.args["args"].is_array(), "args summary: {:?}", b.args);
    }
    assert_eq!(
        seen.len(),
        tasks,
        "every task the runtime recorded appears on a core lane"
    );
    for (task, got) in &seen {
        let num = blocks
            .iter()
            .find(|b| b.args["task"].as_u64() == Some(*task))
            .map(|b| b.args["block_num"].as_u64().unwrap())
            .unwrap();
        assert_eq!(got.len() as u64, num, "task {task}: every block once");
    }
    // No two blocks overlap on one lane (1 ns of float slack).
    let mut by_lane: BTreeMap<u64, Vec<&Span>> = BTreeMap::new();
    for b in &blocks {
        by_lane.entry(b.tid).or_default().push(b);
    }
    for (tid, mut lane) in by_lane {
        lane.sort_by(|a, b| a.ts.total_cmp(&b.ts));
        for w in lane.windows(2) {
            assert!(
                w[1].ts + 0.001 >= w[0].end,
                "lane {tid} of card process {pid}: {:?} overlaps {:?}",
                w[0],
                w[1]
            );
        }
    }
    blocks
}

/// The device lane's extent matches the report's `device_s` plus
/// `runtime_open_s` (within 1 ms), and every card event lies inside it.
fn check_device_lane(trace: &Value, c: &Value) {
    let (threads, _) = lane_names(trace);
    let all = spans(trace);
    let device: Vec<&Span> = all
        .iter()
        .filter(|s| threads.get(&(s.pid, s.tid)).map(String::as_str) == Some("device"))
        .collect();
    assert!(!device.is_empty(), "the trace has a device lane");
    let begin = device.iter().map(|s| s.ts).fold(f64::INFINITY, f64::min);
    let end = device.iter().map(|s| s.end).fold(0.0, f64::max);
    let device_s =
        c["phases"]["device_s"].as_f64().unwrap() + c["phases"]["runtime_open_s"].as_f64().unwrap();
    assert!(
        ((end - begin) - device_s * 1e6).abs() <= 1000.0,
        "device lane {} us vs device_s {device_s} s",
        end - begin
    );
    for s in all.iter().filter(|s| s.pid >= 10) {
        assert!(
            s.ts + 0.001 >= begin && s.end <= end + 0.001,
            "card event {s:?} lies inside the device phase [{begin}, {end}]"
        );
    }
}

#[test]
fn decode_layer_trace_has_every_block_once_and_the_device_phase() {
    let env = TestEnv::new();
    let t = run_traced(&env, "decode_layer::step16", &[]);
    let c = case(&t.report, "decode_layer::step16");
    let path = t.trace_dir.join("decode_layer/step16.trace.json");
    assert_eq!(c["trace"].as_str(), Some(path.to_str().unwrap()), "{c}");
    let trace = read_report(&path);
    assert_eq!(trace["displayTimeUnit"], "ms");
    let (threads, processes) = lane_names(&trace);
    assert_eq!(processes.get(&10).map(String::as_str), Some("card 0"));
    assert!(
        threads.values().any(|n| n == "orchestration"),
        "{threads:?}"
    );
    for phase in [
        "compile",
        "fixtures",
        "golden",
        "lock wait",
        "device",
        "compare",
    ] {
        assert!(
            spans(&trace)
                .iter()
                .any(|s| s.pid == 1 && s.tid == 1 && s.name == phase),
            "host phase `{phase}` is on the harness lane"
        );
    }
    let blocks = check_card(&trace, 10);
    assert!(
        blocks
            .iter()
            .any(|b| threads[&(10, b.tid)].starts_with("aic"))
    );
    assert!(
        blocks
            .iter()
            .any(|b| threads[&(10, b.tid)].starts_with("aiv"))
    );
    // The orchestration lane has its submits.
    let submits = spans(&trace)
        .iter()
        .filter(|s| s.pid == 10 && s.name.starts_with("submit task "))
        .count();
    let run = spans(&trace).into_iter().find(|s| s.name == "run").unwrap();
    assert_eq!(submits as u64, run.args["tasks"].as_u64().unwrap());
    check_device_lane(&trace, c);
}

#[test]
fn independent_tasks_overlap_on_different_cores() {
    let env = TestEnv::new();
    // Traced on the last of three rounds: the trace is that round's.
    let t = run_traced(&env, "overlap_pair::pair", &["--rounds", "3"]);
    let c = case(&t.report, "overlap_pair::pair");
    let trace = read_report(&t.trace_dir.join("overlap_pair/pair.trace.json"));
    let blocks = check_card(&trace, 10);
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    let (a, b) = (&blocks[0], &blocks[1]);
    assert_ne!(a.args["task"], b.args["task"]);
    assert_ne!(a.tid, b.tid, "the two tasks ran on different core lanes");
    assert!(
        a.ts < b.end && b.ts < a.end,
        "the two independent tasks overlap in time: {a:?} {b:?}"
    );
    check_device_lane(&trace, c);
}

#[test]
fn level3_trace_has_one_process_per_card() {
    let env = TestEnv::new();
    let t = run_traced(&env, "allreduce_ring::p2", &[]);
    let c = case(&t.report, "allreduce_ring::p2");
    let trace = read_report(&t.trace_dir.join("allreduce_ring/p2.trace.json"));
    let (_, processes) = lane_names(&trace);
    let cards: Vec<&String> = processes
        .iter()
        .filter(|(pid, _)| **pid >= 10)
        .map(|(_, n)| n)
        .collect();
    assert_eq!(cards.len(), 2, "{processes:?}");
    for (rank, name) in cards.iter().enumerate() {
        assert!(name.ends_with(&format!("(rank {rank})")), "{name}");
        check_card(&trace, 10 + rank as u64);
    }
    check_device_lane(&trace, c);
    // One cluster per rank in the graph.
    let dot = std::fs::read_to_string(t.dep_dir.join("allreduce_ring/p2.dot")).unwrap();
    assert!(dot.contains("subgraph cluster_rank0") && dot.contains("subgraph cluster_rank1"));
}

// ---- dependency graphs -------------------------------------------------

/// `(from, to, kind, tensor, start, end)`.
type Edge = (String, String, String, String, u64, u64);

/// The edges of a DOT file as written by `--dep-graph`, with their style.
fn dot_edges(dot: &str) -> Vec<(Edge, String)> {
    let mut out = Vec::new();
    for line in dot.lines() {
        let Some((ends, attrs)) = line.trim().split_once(" [") else {
            continue;
        };
        let Some((from, to)) = ends.split_once(" -> ") else {
            continue;
        };
        let label = attrs
            .split_once("label=\"")
            .and_then(|(_, r)| r.split_once('"'))
            .map(|(l, _)| l)
            .unwrap_or_else(|| panic!("edge without a label: {line}"));
        let style = attrs
            .split_once("style=")
            .and_then(|(_, r)| r.split([',', ']']).next())
            .unwrap_or_else(|| panic!("edge without a style: {line}"));
        let (kind, rest) = label.split_once(' ').unwrap();
        let (tensor, range) = rest.rsplit_once(" [").unwrap();
        let (start, end) = range.trim_end_matches(')').split_once(", ").unwrap();
        out.push((
            (
                from.to_owned(),
                to.to_owned(),
                kind.to_owned(),
                tensor.to_owned(),
                start.parse().unwrap(),
                end.parse().unwrap(),
            ),
            style.to_owned(),
        ));
    }
    out
}

/// The edges of `deps.json` (the runtime's record), with `pending`.
fn record_edges(deps: &Value) -> Vec<(Edge, bool)> {
    let mut out = Vec::new();
    for t in deps["ranks"][0]["tasks"].as_array().unwrap() {
        let to = format!("t{}", t["id"]);
        for d in t["deps"].as_array().unwrap() {
            out.push((
                (
                    format!("t{}", d["task"]),
                    to.clone(),
                    d["kind"].as_str().unwrap().to_owned(),
                    d["tensor"].as_str().unwrap().to_owned(),
                    d["start"].as_u64().unwrap(),
                    d["end"].as_u64().unwrap(),
                ),
                d["pending"].as_bool().unwrap(),
            ));
        }
    }
    out
}

/// Independently of the runtime's dependency lists: every pair of an
/// earlier and a later task's recorded accesses on the same tensor whose
/// byte ranges overlap, with a write on either side.
fn computed_edges(deps: &Value) -> BTreeSet<Edge> {
    let tasks = deps["ranks"][0]["tasks"].as_array().unwrap();
    let mut out = BTreeSet::new();
    for (j, later) in tasks.iter().enumerate() {
        for earlier in &tasks[..j] {
            for a in later["accesses"].as_array().unwrap() {
                for b in earlier["accesses"].as_array().unwrap() {
                    let (aw, bw) = (a["write"] == true, b["write"] == true);
                    let (a0, a1) = (a["start"].as_u64().unwrap(), a["end"].as_u64().unwrap());
                    let (b0, b1) = (b["start"].as_u64().unwrap(), b["end"].as_u64().unwrap());
                    if a["tensor"] != b["tensor"] || a0 >= b1 || b0 >= a1 || !(aw || bw) {
                        continue;
                    }
                    let kind = match (aw, bw) {
                        (true, true) => "WAW",
                        (true, false) => "WAR",
                        _ => "RAW",
                    };
                    out.insert((
                        format!("t{}", earlier["id"]),
                        format!("t{}", later["id"]),
                        kind.to_owned(),
                        a["tensor"].as_str().unwrap().to_owned(),
                        a0.max(b0),
                        a1.min(b1),
                    ));
                }
            }
        }
    }
    out
}

fn dot_available() -> bool {
    std::process::Command::new("dot")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn decode_layer_dep_graph_has_exactly_the_dependencies_the_sim_used() {
    let env = TestEnv::new();
    let t = run_traced(&env, "decode_layer::step16", &[]);
    let c = case(&t.report, "decode_layer::step16");
    let dot_path = t.dep_dir.join("decode_layer/step16.dot");
    assert_eq!(
        c["dep_graph"].as_str(),
        Some(dot_path.to_str().unwrap()),
        "{c}"
    );
    let dot = std::fs::read_to_string(&dot_path).unwrap();
    let deps = read_report(&t.dep_dir.join("decode_layer/step16.deps.json"));
    let from_dot = dot_edges(&dot);
    let recorded = record_edges(&deps);
    assert!(
        recorded.len() > 10,
        "decode_layer has a real graph: {recorded:?}"
    );
    // The DOT shows the runtime's record, edge for edge, pending solid.
    let dot_set: BTreeSet<(Edge, bool)> = from_dot
        .iter()
        .map(|(e, style)| (e.clone(), style == "solid"))
        .collect();
    let rec_set: BTreeSet<(Edge, bool)> = recorded.iter().cloned().collect();
    assert_eq!(dot_set.len(), from_dot.len(), "no edge drawn twice");
    assert_eq!(dot_set, rec_set, "DOT edges = the runtime's record");
    // The record is the complete graph of the recorded accesses.
    let logical: BTreeSet<Edge> = rec_set.iter().map(|(e, _)| e.clone()).collect();
    assert_eq!(
        logical,
        computed_edges(&deps),
        "record = independent computation"
    );
    // Tensors are named from scene.toml (run arguments) or as the
    // orchestration's allocations.
    assert!(logical.iter().any(|e| e.3 == "k_cache"), "{logical:?}");
    assert!(
        logical.iter().any(|e| e.3.starts_with("intermediate ")),
        "{logical:?}"
    );
    // `pending` agrees with the timeline: a pending edge's later task
    // started after the earlier one's last block ended; a satisfied one's
    // earlier task had ended before the later one was submitted.
    let trace = read_report(&t.trace_dir.join("decode_layer/step16.trace.json"));
    let origin = trace["otherData"]["origin_ns"].as_u64().unwrap() as f64;
    let mut first_begin: BTreeMap<u64, f64> = BTreeMap::new();
    let mut last_end: BTreeMap<u64, f64> = BTreeMap::new();
    for b in check_card(&trace, 10) {
        let task = b.args["task"].as_u64().unwrap();
        let fb = first_begin.entry(task).or_insert(f64::INFINITY);
        *fb = fb.min(b.ts);
        let le = last_end.entry(task).or_insert(0.0);
        *le = le.max(b.end);
    }
    let submit_us: BTreeMap<u64, f64> = deps["ranks"][0]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let ns = t["submit_ns"].as_u64().unwrap() as f64;
            (t["id"].as_u64().unwrap(), (ns - origin) / 1000.0)
        })
        .collect();
    let id = |n: &str| n.trim_start_matches('t').parse::<u64>().unwrap();
    let mut pending = 0;
    for (e, was_pending) in &rec_set {
        let (from, to) = (id(&e.0), id(&e.1));
        if *was_pending {
            pending += 1;
            assert!(
                first_begin[&to] + 0.001 >= last_end[&from],
                "pending edge {e:?}: task {to} started before task {from} ended"
            );
        } else {
            assert!(
                last_end[&from] <= submit_us[&to] + 0.001,
                "satisfied edge {e:?}: task {from} had not ended when task {to} was submitted"
            );
        }
    }
    // How many were waited on depends on timing (not asserted: a loaded
    // machine may finish every producer before its consumer's submit).
    println!(
        "decode_layer::step16: {} edges, {pending} pending at submit",
        rec_set.len()
    );
    let svg = dot_path.with_extension("svg");
    if dot_available() {
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg"), "{}", svg.display());
    } else {
        println!("Graphviz `dot` is not installed: the SVG part of this test is skipped");
    }
}

#[test]
fn war_hazard_graph_shows_its_one_war_edge() {
    let env = TestEnv::new();
    let t = run_traced(&env, "war_hazard::small", &[]);
    let dot = std::fs::read_to_string(t.dep_dir.join("war_hazard/small.dot")).unwrap();
    let edges = dot_edges(&dot);
    let only: Vec<&Edge> = edges.iter().map(|(e, _)| e).collect();
    assert_eq!(
        only,
        vec![&(
            "t0".to_owned(),
            "t1".to_owned(),
            "WAR".to_owned(),
            "x".to_owned(),
            0,
            1024
        )],
        "{dot}"
    );
    let deps = read_report(&t.dep_dir.join("war_hazard/small.deps.json"));
    let computed = computed_edges(&deps);
    let got: HashSet<&Edge> = computed.iter().collect();
    assert_eq!(got, only.into_iter().collect::<HashSet<_>>());
}
