//! `--trace DIR`: one swimlane trace per case, in the Chrome / Perfetto
//! trace-event JSON format (`DIR/<scene>/<case>.trace.json`; open it in
//! <https://ui.perfetto.dev> or `chrome://tracing`).
//!
//! Processes and lanes (`pid` / `tid`, named by `M` metadata events):
//! - `host` (pid 1): lane `harness phases` (compile, fixtures, golden,
//!   lock wait, device, compare) and lane `device`, whose one span is the
//!   device phase exactly as the report times it (`phases.device_s`: the
//!   supervisor's go to the worker's exit);
//! - one process per card (pid 10 + rank): lane `orchestration` (the
//!   runtime's `run`, the orchestration function, and within it every
//!   submit, read, write, fill with the wait it caused, alloc, free and
//!   scope), and one lane per emulated core thread (`aic 0`, `aiv 1`, ...)
//!   with every block of every task.
//!
//! The device side is the runtime's record of the run
//! (`scene_rt_trace_enable` / `scene_rt_trace_take`), made in the worker
//! process; both sides stamp `CLOCK_MONOTONIC`, so the runtime's blocks
//! land inside the host's device span. With `--rounds`, the last measured
//! round is the traced one. Host phases that the report only keeps as
//! durations are laid out from the case's preparation start (fixtures,
//! golden; compile, a share of the run's one compile plan, just before it)
//! and around the device span (lock wait just before it); device and
//! compare are placed where they ran.

use crate::observe::args_dump::dtype_name;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;

pub use super::args_dump::SlotKernel;
use serde_json::{Value, json};

use crate::config::RunConfig;
use crate::report::CaseReport;

/// Why a case's trace or dependency graph was not written.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("the runtime's trace record of rank {rank} is malformed: {source}")]
    MalformedRecord {
        rank: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot create `{}`: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Serialize(#[source] serde_json::Error),
}

/// The `SCENE_RT_TRACE_*` flags a run asks of the runtime.
pub fn runtime_flags(config: &RunConfig) -> u32 {
    use scene_device::abi::{SCENE_RT_TRACE_DEPS, SCENE_RT_TRACE_TIMELINE};
    let mut flags = 0;
    if config.trace_dir.is_some() {
        flags |= SCENE_RT_TRACE_TIMELINE;
    }
    if config.dep_graph_dir.is_some() {
        flags |= SCENE_RT_TRACE_DEPS;
    }
    flags
}

/// The device phase of a traced case and the runtime's records.
#[derive(Debug, Clone)]
pub struct DeviceTrace {
    /// Start of the device phase, `CLOCK_MONOTONIC` ns.
    pub began_ns: u64,
    /// Its length: the report's `device_s` plus `runtime_open_s` (the
    /// worker's part of the case, from the request to the reply).
    pub device: Duration,
    /// The held cards, rank r on `cards[r]`.
    pub cards: Vec<u32>,
    /// The runtime's record of the traced run, JSON text, one per rank.
    pub records: Vec<String>,
}

// ---- the runtime's record (crates/sim-runtime/src/device/trace.rs) ----

#[derive(Debug, Clone, Deserialize)]
pub struct Record {
    pub device: i32,
    pub cores: Cores,
    pub run: Interval,
    pub orchestration: Interval,
    pub tasks: Vec<TaskRec>,
    #[serde(default)]
    pub blocks: Vec<BlockRec>,
    #[serde(default)]
    pub ops: Vec<OpRec>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Cores {
    pub aic: u32,
    pub aiv: u32,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Interval {
    pub begin_ns: u64,
    pub end_ns: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TaskRec {
    pub id: usize,
    pub func_id: u32,
    pub core: String,
    /// A mixed task's kernels, slot order (empty for a plain task).
    #[serde(default)]
    pub kernels: Vec<SlotKernel>,
    pub block_num: u32,
    pub submit_ns: u64,
    /// A dependency-only task (orchestration ABI v6, the original's
    /// `rt_submit_dummy_task`): no kernel, func_id `SCENE_NO_KERNEL`.
    #[serde(default)]
    pub dummy: bool,
    /// Its predicate was false: never dispatched.
    #[serde(default)]
    pub skipped: bool,
    /// The predicate's value as read when the task was ready (with
    /// `skipped`).
    #[serde(default)]
    pub predicate_value: Option<i64>,
    pub args: Vec<ArgRec>,
    #[serde(default)]
    pub accesses: Vec<AccessRec>,
    #[serde(default)]
    pub deps: Vec<DepRec>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ArgRec {
    pub dir: String,
    /// A `manual_dep` tensor argument.
    #[serde(default)]
    pub manual: bool,
    #[serde(default)]
    pub dtype: u32,
    #[serde(default)]
    pub shape: Vec<u64>,
    #[serde(default)]
    pub value: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct AccessRec {
    pub buffer: String,
    pub index: u32,
    pub start: u64,
    pub end: u64,
    pub write: bool,
    /// Through a `manual_dep` argument (not dependency-tracked).
    #[serde(default)]
    pub manual: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DepRec {
    pub task: usize,
    pub kind: String,
    pub buffer: String,
    pub index: u32,
    pub start: u64,
    pub end: u64,
    pub pending: bool,
    /// The edge of a `manual_dep` access from a producer of its bytes.
    #[serde(default)]
    pub manual: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BlockRec {
    pub task: usize,
    pub block: u32,
    pub core: String,
    pub lane: u32,
    /// Of a mixed task: the slot and func_id this call ran.
    #[serde(default)]
    pub slot: Option<String>,
    #[serde(default)]
    pub func_id: Option<u32>,
    pub begin_ns: u64,
    pub end_ns: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct OpRec {
    pub op: String,
    pub begin_ns: u64,
    pub end_ns: u64,
    #[serde(default)]
    pub wait_ns: u64,
    pub task: Option<usize>,
    pub bytes: Option<u64>,
    pub buffer: Option<String>,
    pub index: Option<u32>,
    pub offset: Option<u64>,
}

/// What the trace and the dependency graph of one case are made from.
#[derive(Debug)]
pub struct CaseTrace<'a> {
    pub scene: &'a str,
    pub case: &'a str,
    /// Kernel name by func_id.
    pub kernels: BTreeMap<u32, String>,
    /// Run-argument names by position (`None`: a scalar).
    pub arg_names: Vec<Option<String>>,
    pub report: &'a CaseReport,
    /// When the case's preparation began (fixtures, golden).
    pub started: Instant,
    /// When the comparison began, if it ran.
    pub compare_at: Option<Instant>,
    pub device: Option<&'a DeviceTrace>,
}

impl CaseTrace<'_> {
    /// `arg` N as its scene name, `alloc` N as `intermediate N`.
    pub fn tensor_name(&self, buffer: &str, index: u32) -> String {
        match buffer {
            "arg" => self
                .arg_names
                .get(index as usize)
                .cloned()
                .flatten()
                .unwrap_or_else(|| format!("run argument {index}")),
            "alloc" => format!("intermediate {index}"),
            other => format!("{other} {index}"),
        }
    }

    pub fn kernel(&self, func_id: u32) -> String {
        self.kernels
            .get(&func_id)
            .cloned()
            .unwrap_or_else(|| format!("func_id {func_id}"))
    }

    /// What a task runs: `MATMUL (func_id 0)`, or for a mixed task every
    /// kernel with its slot, `MATMUL+ADD (func_ids 0+1, aic+aiv0)`.
    pub fn task_kernels(&self, task: &TaskRec) -> String {
        if task.dummy {
            return "dependency-only (no kernel)".to_owned();
        }
        if task.skipped {
            let what = if task.kernels.is_empty() {
                format!("{} (func_id {})", self.kernel(task.func_id), task.func_id)
            } else {
                let ids: Vec<String> = task
                    .kernels
                    .iter()
                    .map(|k| self.kernel(k.func_id))
                    .collect();
                ids.join("+")
            };
            return match task.predicate_value {
                Some(v) => format!("{what}, skipped: predicate {v}"),
                None => format!("{what}, skipped"),
            };
        }
        if task.kernels.is_empty() {
            return format!("{} (func_id {})", self.kernel(task.func_id), task.func_id);
        }
        let join = |f: &dyn Fn(&SlotKernel) -> String| -> String {
            task.kernels.iter().map(f).collect::<Vec<_>>().join("+")
        };
        format!(
            "{} (func_ids {}, {})",
            join(&|k| self.kernel(k.func_id)),
            join(&|k| k.func_id.to_string()),
            join(&|k| k.slot.clone())
        )
    }

    /// The runtime records, parsed (rank order); a malformed one is an
    /// error naming its rank.
    pub fn records(&self) -> Result<Vec<Record>, TraceError> {
        let Some(d) = self.device else {
            return Ok(Vec::new());
        };
        d.records
            .iter()
            .enumerate()
            .map(|(rank, text)| {
                serde_json::from_str(text)
                    .map_err(|source| TraceError::MalformedRecord { rank, source })
            })
            .collect()
    }

    pub fn level3(&self) -> bool {
        self.device.is_some_and(|d| d.records.len() > 1)
    }
}

/// `DIR/<scene>/<case>.<ext>`, its directory created.
pub fn case_path(dir: &Path, scene: &str, case: &str, ext: &str) -> Result<PathBuf, TraceError> {
    let sub = dir.join(scene);
    std::fs::create_dir_all(&sub).map_err(|source| TraceError::CreateDir {
        path: sub.clone(),
        source,
    })?;
    Ok(sub.join(format!("{case}.{ext}")))
}

/// `CLOCK_MONOTONIC` ns of an `Instant` of this process.
fn mono_of(t: Instant) -> u64 {
    let now = scene_device::monotonic_ns();
    now.saturating_sub(t.elapsed().as_nanos() as u64)
}

fn secs_ns(s: f64) -> u64 {
    (s.max(0.0) * 1e9) as u64
}

/// One trace event before serialisation (timestamps in ns).
struct Ev {
    pid: u32,
    tid: u32,
    name: String,
    cat: &'static str,
    begin: u64,
    end: u64,
    /// An instant (`ph: "i"`) rather than a span.
    instant: bool,
    args: Value,
}

const HOST: u32 = 1;
const PHASES: u32 = 1;
const DEVICE: u32 = 2;
const ORCH: u32 = 1;

fn card_pid(rank: usize) -> u32 {
    10 + rank as u32
}

fn lane_tid(core: &str, lane: u32) -> u32 {
    (if core == "aic" { 100 } else { 200 }) + lane
}

/// The trace-event JSON of one case.
pub fn trace_json(t: &CaseTrace<'_>) -> Result<Value, TraceError> {
    let records = t.records()?;
    let mut evs = Vec::new();
    let mut meta = Vec::new();
    let p = &t.report.phases;
    let span = |tid, name: &str, begin: u64, len: u64, args: Value| Ev {
        pid: HOST,
        tid,
        name: name.to_owned(),
        cat: "host",
        begin,
        end: begin + len,
        instant: false,
        args,
    };
    // Host phases (see the module docs for how each is placed).
    let prep = mono_of(t.started);
    let compile = secs_ns(p.compile_s);
    evs.push(span(
        PHASES,
        "compile",
        prep.saturating_sub(compile),
        compile,
        json!({"compile_s": p.compile_s, "note": "the scene's share of the run's compile plan, placed before the case's preparation"}),
    ));
    let fixtures = secs_ns(p.fixtures_s);
    evs.push(span(
        PHASES,
        "fixtures",
        prep,
        fixtures,
        json!({"fixtures_s": p.fixtures_s}),
    ));
    evs.push(span(
        PHASES,
        "golden",
        prep + fixtures,
        secs_ns(p.golden_s),
        json!({"golden_s": p.golden_s, "cached": t.report.golden_cached}),
    ));
    if let Some(d) = t.device {
        let wait = secs_ns(p.lock_wait_s);
        evs.push(span(
            PHASES,
            "lock wait",
            d.began_ns.saturating_sub(wait),
            wait,
            json!({"lock_wait_s": p.lock_wait_s}),
        ));
        let len = d.device.as_nanos() as u64;
        let args = json!({"device_s": p.device_s, "session_s": p.session_s, "runtime_open_s": p.runtime_open_s, "lock_held_s": p.lock_held_s, "cards": d.cards});
        evs.push(span(PHASES, "device", d.began_ns, len, args.clone()));
        evs.push(span(DEVICE, "device", d.began_ns, len, args));
    }
    if let Some(c) = t.compare_at {
        evs.push(span(
            PHASES,
            "compare",
            mono_of(c),
            secs_ns(p.compare_s),
            json!({"compare_s": p.compare_s}),
        ));
    }
    meta.push(
        json!({"name": "process_name", "ph": "M", "pid": HOST, "tid": 0,
        "args": {"name": format!("host: {}::{}", t.scene, t.case)}}),
    );
    meta.push(json!({"name": "process_sort_index", "ph": "M", "pid": HOST, "tid": 0, "args": {"sort_index": 0}}));
    for (tid, name) in [(PHASES, "harness phases"), (DEVICE, "device")] {
        meta.push(json!({"name": "thread_name", "ph": "M", "pid": HOST, "tid": tid, "args": {"name": name}}));
        meta.push(json!({"name": "thread_sort_index", "ph": "M", "pid": HOST, "tid": tid, "args": {"sort_index": tid}}));
    }

    let level3 = t.level3();
    for (rank, r) in records.iter().enumerate() {
        card_events(t, rank, r, level3, &mut evs, &mut meta);
    }

    let origin = evs.iter().map(|e| e.begin).min().unwrap_or(0);
    let us = |ns: u64| (ns.saturating_sub(origin)) as f64 / 1000.0;
    let mut events = meta;
    for e in evs {
        let mut v = json!({"name": e.name, "cat": e.cat, "pid": e.pid, "tid": e.tid, "ts": us(e.begin), "args": e.args});
        if e.instant {
            v["ph"] = json!("i");
            v["s"] = json!("t");
        } else {
            v["ph"] = json!("X");
            v["dur"] = json!(e.end.saturating_sub(e.begin) as f64 / 1000.0);
        }
        events.push(v);
    }
    Ok(json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "scene": t.scene, "case": t.case, "clock": "CLOCK_MONOTONIC",
            "origin_ns": origin,
        }
    }))
}

/// The events of one card: its lanes, the run, the orchestration's
/// operations and every block.
fn card_events(
    t: &CaseTrace<'_>,
    rank: usize,
    r: &Record,
    level3: bool,
    evs: &mut Vec<Ev>,
    meta: &mut Vec<Value>,
) {
    let pid = card_pid(rank);
    let card = t
        .device
        .and_then(|d| d.cards.get(rank))
        .map_or_else(|| r.device.to_string(), u32::to_string);
    let pname = if level3 {
        format!("card {card} (rank {rank})")
    } else {
        format!("card {card}")
    };
    meta.push(
        json!({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": pname}}),
    );
    meta.push(json!({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}}));
    let mut lanes = vec![(ORCH, "orchestration".to_owned())];
    for i in 0..r.cores.aic {
        lanes.push((lane_tid("aic", i), format!("aic {i}")));
    }
    for i in 0..r.cores.aiv {
        lanes.push((lane_tid("aiv", i), format!("aiv {i}")));
    }
    for (tid, name) in lanes {
        meta.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}));
        meta.push(json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}}));
    }
    let ev = |tid, name: String, cat, begin: u64, end: u64, args: Value| Ev {
        pid,
        tid,
        name,
        cat,
        begin,
        end: end.max(begin),
        instant: false,
        args,
    };
    evs.push(ev(
        ORCH,
        "run".into(),
        "run",
        r.run.begin_ns,
        r.run.end_ns,
        json!({"tasks": r.tasks.len(), "blocks": r.blocks.len(), "rank": rank, "card": card}),
    ));
    if r.orchestration.begin_ns > 0 {
        evs.push(ev(
            ORCH,
            "orchestration".into(),
            "orchestration",
            r.orchestration.begin_ns,
            r.orchestration.end_ns,
            json!({}),
        ));
    }
    for op in &r.ops {
        let tensor = op
            .buffer
            .as_deref()
            .zip(op.index)
            .map(|(b, i)| t.tensor_name(b, i));
        let (name, args) = match op.op.as_str() {
            "submit" => {
                let task = op.task.and_then(|i| r.tasks.get(i));
                let name = match task {
                    Some(k) if k.dummy || k.skipped => {
                        format!("submit task {} ({})", k.id, t.task_kernels(k))
                    }
                    Some(k) => format!("submit task {} ({})", k.id, t.kernel(k.func_id)),
                    None => "submit".to_owned(),
                };
                (name, json!({"task": op.task}))
            }
            other => {
                let name = match &tensor {
                    Some(x) => format!("{other} {x}"),
                    None => other.to_owned(),
                };
                (
                    name,
                    json!({"bytes": op.bytes, "tensor": tensor, "offset": op.offset,
                        "wait_us": op.wait_ns as f64 / 1000.0}),
                )
            }
        };
        let mut e = ev(ORCH, name, "orchestration", op.begin_ns, op.end_ns, args);
        e.instant = op.begin_ns == op.end_ns;
        evs.push(e);
        if op.wait_ns > 0 {
            evs.push(ev(
                ORCH,
                format!("wait ({})", op.op),
                "wait",
                op.begin_ns,
                op.begin_ns + op.wait_ns,
                json!({"wait_us": op.wait_ns as f64 / 1000.0}),
            ));
        }
    }
    for b in &r.blocks {
        let Some(task) = r.tasks.get(b.task) else {
            continue;
        };
        let summary: Vec<String> = task.args.iter().map(arg_summary).collect();
        // A mixed task's call names the kernel it ran and its slot.
        let func_id = b.func_id.unwrap_or(task.func_id);
        let mut args = json!({
            "task": task.id, "func_id": func_id, "kernel": t.kernel(func_id),
            "block": b.block, "block_num": task.block_num,
            "block_of": format!("{} of {}", b.block, task.block_num),
            "args": summary,
        });
        if level3 {
            args["rank"] = json!(rank);
        }
        let mut name = format!("{} (func_id {func_id})", t.kernel(func_id));
        if let Some(slot) = &b.slot {
            args["slot"] = json!(slot);
            args["mixed_task"] = json!(t.task_kernels(task));
            name = format!("{name} [{slot}]");
        }
        evs.push(ev(
            lane_tid(&b.core, b.lane),
            name,
            "block",
            b.begin_ns,
            b.end_ns,
            args,
        ));
    }
}

/// `in f32[128, 64]`, `scalar 3`.
fn arg_summary(a: &ArgRec) -> String {
    if a.dir == "scalar" {
        return format!("scalar {}", a.value);
    }
    let shape: Vec<String> = a.shape.iter().map(u64::to_string).collect();
    format!("{} {}[{}]", a.dir, dtype_name(a.dtype), shape.join(", "))
}

/// Writes the case's trace to `DIR/<scene>/<case>.trace.json`.
pub fn write(dir: &Path, t: &CaseTrace<'_>) -> Result<PathBuf, TraceError> {
    let v = trace_json(t)?;
    let path = case_path(dir, t.scene, t.case, "trace.json")?;
    let text = serde_json::to_vec(&v).map_err(TraceError::Serialize)?;
    write_file(&path, &text)?;
    Ok(path)
}

/// Writes one output file of `--trace` / `--dep-graph`.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), TraceError> {
    scene_util::write_atomically(path, bytes).map_err(|source| TraceError::Write {
        path: path.to_path_buf(),
        source,
    })
}
