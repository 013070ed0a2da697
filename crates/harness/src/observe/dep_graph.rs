//! `--dep-graph DIR`: each case's task graph as Graphviz DOT
//! (`DIR/<scene>/<case>.dot`), SVG next to it when `dot` is on `PATH`, and
//! the runtime's record it was drawn from (`<case>.deps.json`).
//!
//! Nodes are tasks (`task N`, kernel name and func_id, core type,
//! block_num; a mixed task is one node naming each kernel with its slot,
//! `MATMUL+ADD (func_ids 0+1, aic+aiv0)`, and `mixed` as its core); edges go from an earlier task to a later one whose access
//! overlaps its own with a write on either side: RAW (the later reads
//! what the earlier wrote), WAR, WAW, labelled with the kind, the tensor
//! (its run-argument name from scene.toml, or `intermediate N` for the
//! orchestration's N-th allocation) and the overlapping byte range. The
//! graph is the complete logical one, from the runtime's own record
//! (`SCENE_RT_TRACE_DEPS`): a **solid** edge was still pending when the
//! later task was submitted (the scheduler made it wait), a **dashed**
//! one was already satisfied (the earlier task had finished). Level-3
//! cases get one cluster per rank (`rank R task N`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::observe::trace::{CaseTrace, TraceError, case_path, write_file};

/// DOT node id of `task` of `rank`.
fn node(level3: bool, rank: usize, task: usize) -> String {
    if level3 {
        format!("r{rank}t{task}")
    } else {
        format!("t{task}")
    }
}

fn quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The DOT text and the `deps.json` value of a case.
pub fn render(t: &CaseTrace<'_>) -> Result<(String, Value), TraceError> {
    let records = t.records()?;
    let level3 = t.level3();
    let mut dot = format!(
        "digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n  edge [fontname=\"monospace\", fontsize=10];\n",
        quote(&format!("{}::{}", t.scene, t.case))
    );
    let mut ranks = Vec::new();
    for (rank, r) in records.iter().enumerate() {
        let indent = if level3 {
            dot.push_str(&format!(
                "  subgraph cluster_rank{rank} {{\n    label=\"rank {rank}\";\n"
            ));
            "    "
        } else {
            "  "
        };
        let mut tasks = Vec::new();
        for task in &r.tasks {
            let kernel = t.kernel(task.func_id);
            let title = if level3 {
                format!("rank {rank} task {}", task.id)
            } else {
                format!("task {}", task.id)
            };
            let core = if task.kernels.is_empty() {
                task.core.as_str()
            } else {
                "mixed"
            };
            dot.push_str(&format!(
                "{indent}{} [label=\"{}\\n{}\\n{core}, block_num {}\"];\n",
                node(level3, rank, task.id),
                title,
                quote(&t.task_kernels(task)),
                task.block_num
            ));
            let accesses: Vec<Value> = task
                .accesses
                .iter()
                .map(|a| {
                    json!({"tensor": t.tensor_name(&a.buffer, a.index), "start": a.start,
                        "end": a.end, "write": a.write, "manual": a.manual})
                })
                .collect();
            let deps: Vec<Value> = task
                .deps
                .iter()
                .map(|d| {
                    json!({"task": d.task, "kind": d.kind, "tensor": t.tensor_name(&d.buffer, d.index),
                        "start": d.start, "end": d.end, "pending": d.pending, "manual": d.manual})
                })
                .collect();
            let kernel = if task.dummy {
                "dependency-only".to_owned()
            } else {
                kernel
            };
            let mut rec = json!({"id": task.id, "func_id": task.func_id, "kernel": kernel,
                "core": task.core, "block_num": task.block_num, "submit_ns": task.submit_ns,
                "accesses": accesses, "deps": deps});
            if task.dummy {
                rec["dummy"] = json!(true);
            }
            if task.skipped {
                rec["skipped"] = json!(true);
                rec["predicate_value"] = json!(task.predicate_value);
            }
            if !task.kernels.is_empty() {
                rec["kernels"] = task
                    .kernels
                    .iter()
                    .map(|k| json!({"slot": k.slot, "func_id": k.func_id, "kernel": t.kernel(k.func_id)}))
                    .collect();
            }
            tasks.push(rec);
        }
        for task in &r.tasks {
            for d in &task.deps {
                let color = match d.kind.as_str() {
                    "RAW" => "black",
                    "WAR" => "darkorange",
                    _ => "red",
                };
                // A manual_dep access's edge: from a producer of its bytes.
                let kind = if d.manual {
                    format!("{} (manual_dep)", d.kind)
                } else {
                    d.kind.clone()
                };
                dot.push_str(&format!(
                    "{indent}{} -> {} [label=\"{} {} [{}, {})\", style={}, color={color}];\n",
                    node(level3, rank, d.task),
                    node(level3, rank, task.id),
                    kind,
                    quote(&t.tensor_name(&d.buffer, d.index)),
                    d.start,
                    d.end,
                    if d.pending { "solid" } else { "dashed" }
                ));
            }
        }
        if level3 {
            dot.push_str("  }\n");
        }
        ranks.push(json!({"rank": rank, "tasks": tasks}));
    }
    dot.push_str("}\n");
    let deps = json!({"scene": t.scene, "case": t.case, "ranks": ranks});
    Ok((dot, deps))
}

/// Writes `<case>.dot`, `<case>.deps.json` and, with Graphviz on `PATH`,
/// `<case>.svg`. Returns the DOT path and notes (a failing `dot` is a
/// note, not a case failure).
pub fn write(dir: &Path, t: &CaseTrace<'_>) -> Result<(PathBuf, Vec<String>), TraceError> {
    let (dot, deps) = render(t)?;
    let dot_path = case_path(dir, t.scene, t.case, "dot")?;
    write_file(&dot_path, dot.as_bytes())?;
    let json_path = dot_path.with_extension("deps.json");
    let text = serde_json::to_vec_pretty(&deps).map_err(TraceError::Serialize)?;
    write_file(&json_path, &text)?;
    let mut notes = Vec::new();
    let svg = dot_path.with_extension("svg");
    match Command::new("dot")
        .arg("-Tsvg")
        .arg(&dot_path)
        .arg("-o")
        .arg(&svg)
        .output()
    {
        Ok(out) if out.status.success() => {}
        Ok(out) => notes.push(format!(
            "warning: `dot -Tsvg {}` failed ({}): {}",
            dot_path.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        // No Graphviz: the DOT file alone (documented).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => notes.push(format!("warning: cannot run `dot`: {e}")),
    }
    Ok((dot_path, notes))
}
