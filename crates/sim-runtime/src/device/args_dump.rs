//! Task argument recording (`scene_rt_args_record`, issue 19 "args dump").
//!
//! With a recording directory set on a device, every run records, per
//! task (task id = the 0-based submit index of the run), the task's
//! arguments: each tensor argument's view (its `SceneTensorDesc` as the
//! orchestration gave it) and the bytes of its bounding span just before
//! the task's first block runs, the bytes of every `out` / `inout`
//! argument's span right after its last block completed (before any
//! dependent task can run), scalars' bits, func_id, core type, block
//! count, and a mixed task's kernels (slot and func_id each). Raw
//! files, written by the core thread that runs the task:
//!
//! ```text
//! <dir>/task<N>.arg<i>.in.bin    span bytes before the first block (tensor args)
//! <dir>/task<N>.arg<i>.out.bin   span bytes after the last block (out / inout)
//! <dir>/task<N>.json             the task: written before its first
//!                                block with "complete":false, again
//!                                after its last with "complete":true
//! ```
//!
//! The harness turns them into `.npy` files (this crate has no `.npy`
//! writer and knows no scene). Arguments whose spans overlap within one
//! allocation share a `group` (with `group_offset`, bytes from the group's
//! first byte), so a replay lays them out aliased as they were.
//!
//! Off (no directory) costs one `Option` check per submit and per block.
//! On, the snapshots are taken under the scheduler's lock: no other block
//! of the task (nor a dependent task) runs while its bytes are copied.
//! Each run starts by removing the previous run's `task*` files, so with
//! several runs (`--rounds`) the last run's record remains.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use scene_abi::*;

use super::sched::Shared;
use super::submit::view_span;
use super::trace::{Kernel, kernels_json};
use super::{core_name, lock};
use crate::error::{RtError, RtResult};
use crate::memory::Place;

/// A run's recording: where its files go.
#[derive(Debug)]
pub struct Recorder {
    dir: PathBuf,
}

impl Recorder {
    /// The recorder of a run on a device recording into `dir` (`None`:
    /// not recording): the directory is created and the previous run's
    /// files removed.
    pub fn for_run(dir: Option<&Path>) -> RtResult<Option<Arc<Recorder>>> {
        let Some(dir) = dir else {
            return Ok(None);
        };
        let io = |what: &str, e: std::io::Error| {
            RtError::Invalid(format!("args dump: cannot {what} `{}`: {e}", dir.display()))
        };
        std::fs::create_dir_all(dir).map_err(|e| io("create", e))?;
        for entry in std::fs::read_dir(dir).map_err(|e| io("read", e))? {
            let entry = entry.map_err(|e| io("read", e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("task") && (name.ends_with(".json") || name.ends_with(".bin")) {
                std::fs::remove_file(entry.path()).map_err(|e| io("clean", e))?;
            }
        }
        Ok(Some(Arc::new(Recorder {
            dir: dir.to_path_buf(),
        })))
    }

    fn write(&self, name: &str, bytes: &[u8]) -> RtResult<()> {
        let path = self.dir.join(name);
        std::fs::write(&path, bytes).map_err(|e| {
            RtError::Invalid(format!("args dump: cannot write `{}`: {e}", path.display()))
        })
    }
}

/// One argument of a recorded task.
#[derive(Debug)]
struct ArgRecord {
    direction: u32,
    /// Scalar bits, or the buffer's device address.
    value: u64,
    /// The buffer's bytes (`SceneTaskArgV2::size`).
    size: u64,
    desc: SceneTensorDesc,
    /// Arena offset and bytes of the view's span.
    span_off: u64,
    span_bytes: u64,
    group: usize,
    group_offset: u64,
}

/// What a recorded task's arguments are, taken at submit.
#[derive(Debug)]
pub struct TaskRecord {
    func_id: u32,
    core: u32,
    /// A mixed task's kernels (empty for a plain task).
    kernels: Vec<Kernel>,
    block_num: u32,
    args: Vec<ArgRecord>,
}

fn is_tensor(direction: u32) -> bool {
    matches!(direction, SCENE_DIR_IN | SCENE_DIR_OUT | SCENE_DIR_INOUT)
}

/// Describes a task being submitted (its arguments were checked by
/// `kernel_args` already).
pub fn describe(
    shared: &Shared,
    (func_id, core, kernels): (u32, u32, &[Kernel]),
    block_num: u32,
    args: &[SceneTaskArgV2],
) -> RtResult<Box<TaskRecord>> {
    let mem = lock(&shared.mem);
    let mut recs = Vec::with_capacity(args.len());
    // Per tensor argument: (allocation, span start, span end).
    let mut spans: Vec<Option<(u64, u64, u64)>> = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        let (span_off, span_bytes) = if is_tensor(a.direction) {
            let (off, bytes) = view_span(&mem, a, &format!("task func_id {func_id} argument {i}"))?;
            let alloc = match mem.place(off) {
                Place::Data { block, .. } => block.data,
                _ => u64::MAX - i as u64,
            };
            spans.push(Some((alloc, off, off + bytes)));
            (off, bytes)
        } else {
            spans.push(None);
            (0, 0)
        };
        recs.push(ArgRecord {
            direction: a.direction,
            value: a.value,
            size: a.size,
            desc: a.desc,
            span_off,
            span_bytes,
            group: 0,
            group_offset: 0,
        });
    }
    drop(mem);
    let (member, groups) = group_spans(&spans);
    for (i, r) in recs.iter_mut().enumerate() {
        if member[i] != usize::MAX {
            r.group = member[i];
            r.group_offset = r.span_off - groups[member[i]].1;
        }
    }
    Ok(Box::new(TaskRecord {
        func_id,
        core,
        kernels: kernels.to_vec(),
        block_num,
        args: recs,
    }))
}

/// Groups of `(allocation, start, end)` spans (`None`: a scalar): spans
/// of one allocation that overlap share a group (merged until stable, so
/// a span bridging two groups joins them). Returns each span's group
/// (`usize::MAX` for scalars) and each group's `(allocation, start, end)`,
/// numbered by first member.
fn group_spans(spans: &[Option<(u64, u64, u64)>]) -> (Vec<usize>, Vec<(u64, u64, u64)>) {
    let mut groups: Vec<(u64, u64, u64)> = Vec::new();
    let mut member: Vec<usize> = vec![usize::MAX; spans.len()];
    for (i, s) in spans.iter().enumerate() {
        if let Some(s) = s {
            member[i] = groups.len();
            groups.push(*s);
        }
    }
    loop {
        let mut merged = false;
        'outer: for g in 0..groups.len() {
            for h in g + 1..groups.len() {
                let (ag, sg, eg) = groups[g];
                let (ah, sh, eh) = groups[h];
                if ag == ah && sg < eh && sh < eg {
                    groups[g] = (ag, sg.min(sh), eg.max(eh));
                    groups.remove(h);
                    for m in member.iter_mut() {
                        if *m == h {
                            *m = g;
                        } else if *m != usize::MAX && *m > h {
                            *m -= 1;
                        }
                    }
                    merged = true;
                    break 'outer;
                }
            }
        }
        if !merged {
            break;
        }
    }
    (member, groups)
}

/// Just before the first block of task `tid` runs (scheduler lock held):
/// every tensor argument's span.
pub fn before_first_block(
    shared: &Shared,
    recorder: &Recorder,
    tid: usize,
    rec: &TaskRecord,
) -> RtResult<()> {
    for (i, a) in rec.args.iter().enumerate() {
        if is_tensor(a.direction) {
            let bytes = span_bytes(shared, a);
            recorder.write(&format!("task{tid}.arg{i}.in.bin"), &bytes)?;
        }
    }
    // A task that never completes (its kernel crashed, the run timed
    // out) is still described, inputs and all.
    recorder.write(
        &format!("task{tid}.json"),
        task_json(tid, rec, false).as_bytes(),
    )
}

/// Right after the last block of task `tid` completed (scheduler lock
/// held, before dependents are released): the outputs' spans, then the
/// task's JSON.
pub fn after_last_block(
    shared: &Shared,
    recorder: &Recorder,
    tid: usize,
    rec: &TaskRecord,
) -> RtResult<()> {
    for (i, a) in rec.args.iter().enumerate() {
        if matches!(a.direction, SCENE_DIR_OUT | SCENE_DIR_INOUT) {
            let bytes = span_bytes(shared, a);
            recorder.write(&format!("task{tid}.arg{i}.out.bin"), &bytes)?;
        }
    }
    recorder.write(
        &format!("task{tid}.json"),
        task_json(tid, rec, true).as_bytes(),
    )
}

fn span_bytes(shared: &Shared, a: &ArgRecord) -> Vec<u8> {
    let mut bytes = vec![0u8; a.span_bytes as usize];
    if !bytes.is_empty() {
        shared.arena.read(a.span_off, &mut bytes);
    }
    bytes
}

fn direction_name(d: u32) -> &'static str {
    match d {
        SCENE_DIR_IN => "in",
        SCENE_DIR_OUT => "out",
        SCENE_DIR_INOUT => "inout",
        _ => "scalar",
    }
}

fn list(v: &[u64]) -> String {
    let items: Vec<String> = v.iter().map(u64::to_string).collect();
    format!("[{}]", items.join(","))
}

/// The task as JSON (numbers and fixed names only: written by hand).
fn task_json(tid: usize, rec: &TaskRecord, complete: bool) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "{{\"task\":{tid},\"complete\":{complete},\"func_id\":{},\"core\":\"{}\",\"block_num\":{},\"num_args\":{},",
        rec.func_id,
        core_name(rec.core),
        rec.block_num,
        rec.args.len()
    );
    if !rec.kernels.is_empty() {
        s.push_str("\"kernels\":");
        kernels_json(&mut s, &rec.kernels);
        s.push(',');
    }
    s.push_str("\"args\":[");
    for (i, a) in rec.args.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let dir = direction_name(a.direction);
        if !is_tensor(a.direction) {
            let _ = write!(
                s,
                "{{\"index\":{i},\"direction\":\"{dir}\",\"value\":{}}}",
                a.value
            );
            continue;
        }
        let rank = (a.desc.rank as usize).min(SCENE_MAX_RANK);
        let _ = write!(
            s,
            "{{\"index\":{i},\"direction\":\"{dir}\",\"dtype\":{},\"rank\":{},\"shape\":{},\"strides\":{},\"offset\":{},\"buffer_bytes\":{},\"span_bytes\":{},\"group\":{},\"group_offset\":{}}}",
            a.desc.dtype,
            a.desc.rank,
            list(&a.desc.shape[..rank]),
            list(&a.desc.strides[..rank]),
            a.desc.offset,
            a.size,
            a.span_bytes,
            a.group,
            a.group_offset
        );
    }
    s.push_str("]}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_spans_of_one_allocation_share_a_group() {
        let spans = [
            Some((100, 100, 164)), // a
            None,                  // a scalar
            Some((100, 164, 228)), // touches a, does not overlap: own group
            Some((200, 0, 64)),    // another allocation
            Some((100, 150, 170)), // bridges a and the third: all one group
        ];
        let (member, groups) = group_spans(&spans);
        assert_eq!(member, vec![0, usize::MAX, 0, 1, 0]);
        assert_eq!(groups, vec![(100, 100, 228), (200, 0, 64)]);
        let (member, groups) = group_spans(&[Some((1, 0, 8)), Some((1, 8, 16))]);
        assert_eq!(member, vec![0, 1], "adjacent views stay apart");
        assert_eq!(groups.len(), 2);
    }

    #[test]
    fn task_json_lists_views_and_scalars() {
        let rec = TaskRecord {
            func_id: 3,
            core: SCENE_CORE_AIV,
            kernels: Vec::new(),
            block_num: 4,
            args: vec![
                ArgRecord {
                    direction: SCENE_DIR_INOUT,
                    value: 0x1000,
                    size: 64,
                    desc: SceneTensorDesc::contiguous(SCENE_DTYPE_F32, &[2, 8]),
                    span_off: 0,
                    span_bytes: 64,
                    group: 0,
                    group_offset: 0,
                },
                ArgRecord {
                    direction: SCENE_DIR_SCALAR,
                    value: 7,
                    size: 0,
                    desc: SceneTensorDesc::default(),
                    span_off: 0,
                    span_bytes: 0,
                    group: 0,
                    group_offset: 0,
                },
            ],
        };
        let j = task_json(5, &rec, true);
        assert_eq!(
            j,
            "{\"task\":5,\"complete\":true,\"func_id\":3,\"core\":\"aiv\",\"block_num\":4,\"num_args\":2,\"args\":[\
             {\"index\":0,\"direction\":\"inout\",\"dtype\":0,\"rank\":2,\"shape\":[2,8],\"strides\":[8,1],\"offset\":0,\"buffer_bytes\":64,\"span_bytes\":64,\"group\":0,\"group_offset\":0},\
             {\"index\":1,\"direction\":\"scalar\",\"value\":7}]}\n"
        );
    }
}
