//! The run record behind `scene_rt_trace_enable` / `scene_rt_trace_take`
//! (optional ABI): what one run did, for swimlane traces and dependency
//! graphs.
//!
//! Off by default, and then free: the scheduler holds an
//! `Option<Box<TraceRun>>` that is `None`, every hook is one branch on it
//! (or on `RunCtx::trace`, a copy of the flags), and no clock is read.
//!
//! On, a run records:
//! - `SCENE_RT_TRACE_TIMELINE`: every block of every task on the core lane
//!   that ran it (`aic`/`aiv` thread index; a mixed task's block is one
//!   call per slot, each with its `slot` and `func_id`), with `CLOCK_MONOTONIC`
//!   nanoseconds, and the orchestration's own operations (submit, read,
//!   write, fill and the wait each caused, alloc, free, scopes);
//! - `SCENE_RT_TRACE_DEPS`: every task's accesses (buffer, byte range,
//!   read or write) and the complete list of earlier accesses each
//!   conflicts with (a write on either side: RAW, WAR, WAW), each marked
//!   `pending` when that earlier task had not finished at submit (the
//!   edges the scheduler actually waited on; `enqueue` only links
//!   unfinished tasks, so which edges those are depends on timing).
//!
//! Orchestration ABI v6 adds, whatever the flags: a dependency-only task
//! is recorded with `"dummy":true` (func_id `(uint32_t)SCENE_NO_KERNEL`,
//! core `"none"`, no blocks), a task whose predicate was false with
//! `"skipped":true` and the `predicate_value` read (no blocks either;
//! the run's `"skipped"` counts them), and `submit_task`'s explicit
//! dependencies as `"explicit_deps"` (`task`, `pending` at submit).
//!
//! Buffers are named by what the run knows: `arg` N (the run argument at
//! position N) or `alloc` N (the N-th `alloc` of the orchestration in
//! this run, from 0); ranges are byte offsets into that buffer. A freed
//! allocation's accesses leave the conflict list: a later buffer at the
//! same address is another tensor.
//!
//! The record is JSON text built here by hand (the runtime has no serde);
//! `crates/harness/src/trace.rs` reads it.
//!
//! `unsafe` (allowed per item): `clock_gettime`.

use std::fmt::Write as _;

use scene_abi::*;

use crate::memory::DEVICE_BASE;

/// `CLOCK_MONOTONIC` in nanoseconds: the clock the harness (another
/// process) places these timestamps with.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC exists on
    // every supported system, so the call cannot fail.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A buffer of the run: a run argument or an orchestration allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BufRef {
    alloc: bool,
    index: u32,
}

impl BufRef {
    fn json(self, out: &mut String) {
        let _ = write!(
            out,
            "\"buffer\":\"{}\",\"index\":{}",
            if self.alloc { "alloc" } else { "arg" },
            self.index
        );
    }
}

/// One access of a task, in arena offsets (and resolved to a buffer).
#[derive(Debug, Clone, Copy)]
struct Acc {
    task: usize,
    start: u64,
    end: u64,
    write: bool,
    /// Through a `manual_dep` argument: not tracked, so never a later
    /// access's dependency.
    manual: bool,
    buf: Option<(BufRef, u64)>,
}

/// A byte range of the arena a task touches: `(start, end, writes)`.
type Span = (u64, u64, bool);

#[derive(Debug)]
enum ArgRec {
    Tensor {
        dir: u32,
        /// `manual_dep` (`SCENE_DIR_MANUAL_DEP`).
        manual: bool,
        dtype: u32,
        shape: Vec<u64>,
    },
    Scalar(u64),
}

#[derive(Debug)]
struct Dep {
    task: usize,
    kind: &'static str,
    start: u64,
    end: u64,
    buf: Option<(BufRef, u64)>,
    pending: bool,
    /// Of a `manual_dep` access: the edge from a producer of its bytes.
    manual: bool,
}

/// A kernel of a mixed task: `(slot, func_id)`.
pub type Kernel = (u32, u32);

#[derive(Debug)]
struct TaskRec {
    /// The (first) kernel's func_id and core type; `None`: a
    /// dependency-only task (v6), recorded as `"dummy":true`.
    kernel: Option<(u32, u32)>,
    /// A mixed task's kernels, slot order (empty for a plain task).
    kernels: Vec<Kernel>,
    block_num: u32,
    submit_ns: u64,
    args: Vec<ArgRec>,
    accesses: Vec<Acc>,
    deps: Vec<Dep>,
    /// v6 `submit_task`'s explicit dependencies: the task, and whether it
    /// had not finished at submit.
    explicit: Vec<(usize, bool)>,
    /// Its predicate was false when it became ready (the value read): it
    /// ran nothing.
    skipped: Option<i64>,
}

#[derive(Debug)]
struct BlockRec {
    task: usize,
    block: u32,
    core: u32,
    lane: u32,
    /// Of a mixed task: the kernel this call ran.
    kernel: Option<Kernel>,
    begin: u64,
    end: u64,
}

#[derive(Debug)]
struct OpRec {
    op: &'static str,
    begin: u64,
    end: u64,
    wait: u64,
    task: Option<usize>,
    bytes: Option<u64>,
    at: Option<(BufRef, u64)>,
}

/// A live (or freed) allocation of the run: arena offset, size, id.
#[derive(Debug)]
struct AllocRec {
    start: u64,
    size: u64,
    live: bool,
}

/// What one traced run recorded (see the module docs).
#[derive(Debug)]
pub struct TraceRun {
    flags: u32,
    device: i32,
    cores: [u32; 2],
    run_begin: u64,
    orch: (u64, u64),
    /// Run arguments' arena ranges by position (scalars: empty).
    args: Vec<(u64, u64)>,
    allocs: Vec<AllocRec>,
    tasks: Vec<TaskRec>,
    blocks: Vec<BlockRec>,
    ops: Vec<OpRec>,
    /// Every access of every earlier task still naming a live buffer
    /// (`DEPS` only).
    all: Vec<Acc>,
}

impl TraceRun {
    /// A record for a run with `args` (`(device address, size)` by
    /// position, scalars `(0, 0)`).
    pub fn new(flags: u32, device: i32, cores: [u32; 2], args: &[(u64, u64)]) -> TraceRun {
        TraceRun {
            flags,
            device,
            cores,
            run_begin: now_ns(),
            orch: (0, 0),
            args: args
                .iter()
                .map(|&(a, s)| {
                    if s == 0 {
                        (0, 0)
                    } else {
                        (a.wrapping_sub(DEVICE_BASE), s)
                    }
                })
                .collect(),
            allocs: Vec::new(),
            tasks: Vec::new(),
            blocks: Vec::new(),
            ops: Vec::new(),
            all: Vec::new(),
        }
    }

    pub fn timeline(&self) -> bool {
        self.flags & SCENE_RT_TRACE_TIMELINE != 0
    }

    fn deps(&self) -> bool {
        self.flags & SCENE_RT_TRACE_DEPS != 0
    }

    /// The buffer an arena offset lies in, and the offset into it.
    fn resolve(&self, off: u64) -> Option<(BufRef, u64)> {
        for (i, &(start, size)) in self.args.iter().enumerate() {
            if size > 0 && off >= start && off < start + size {
                let b = BufRef {
                    alloc: false,
                    index: i as u32,
                };
                return Some((b, off - start));
            }
        }
        // Newest first: a freed allocation's range may be reused.
        for (i, a) in self.allocs.iter().enumerate().rev() {
            if a.live && off >= a.start && off < a.start + a.size.max(1) {
                let b = BufRef {
                    alloc: true,
                    index: i as u32,
                };
                return Some((b, off - a.start));
            }
        }
        None
    }

    pub fn orch_begin(&mut self) {
        self.orch.0 = now_ns();
    }

    pub fn orch_end(&mut self) {
        self.orch.1 = now_ns();
    }

    /// A task entered the graph as `tid`; `kernel` is its (first)
    /// kernel's func_id and core type (`None`: dependency-only);
    /// `pending` are the unfinished tasks the scheduler made it wait for,
    /// `explicit` the tasks `submit_task` named; `begin` is when its
    /// submit call started; `kernels` are a mixed task's (empty for a
    /// plain one). `manual` says which arguments were `manual_dep`, and
    /// `manual_accesses` are theirs: as in the scheduler, they depend only
    /// on tracked writes of their bytes and are never a later access's
    /// dependency.
    pub fn submit(
        &mut self,
        tid: usize,
        (kernel, block_num, kernels): (Option<(u32, u32)>, u32, &[Kernel]),
        (args, manual): (&[SceneTaskArgV2], &[bool]),
        (accesses, manual_accesses): (&[Span], &[Span]),
        (pending, explicit): (&[usize], &[usize]),
        begin: u64,
    ) {
        let now = if self.timeline() { now_ns() } else { 0 };
        let args = args
            .iter()
            .zip(manual.iter().chain(std::iter::repeat(&false)))
            .map(|(a, &manual)| match a.direction {
                SCENE_DIR_SCALAR => ArgRec::Scalar(a.value),
                dir => ArgRec::Tensor {
                    dir,
                    manual,
                    dtype: a.desc.dtype,
                    shape: a.desc.shape[..(a.desc.rank as usize).min(SCENE_MAX_RANK)].to_vec(),
                },
            })
            .collect();
        let mut accs = Vec::new();
        let mut deps = Vec::new();
        if self.deps() {
            let tagged = accesses
                .iter()
                .map(|&a| (a, false))
                .chain(manual_accesses.iter().map(|&a| (a, true)));
            for ((start, end, write), manual) in tagged {
                let mine = Acc {
                    task: tid,
                    start,
                    end,
                    write,
                    manual,
                    buf: self.resolve(start),
                };
                for p in &self.all {
                    let conflict = if manual { p.write } else { write || p.write };
                    if !p.manual && p.start < end && start < p.end && conflict {
                        let kind = match (write, p.write) {
                            (true, true) => "WAW",
                            (true, false) => "WAR",
                            _ => "RAW",
                        };
                        let (s, e) = (start.max(p.start), end.min(p.end));
                        let dup = deps.iter().any(|d: &Dep| {
                            d.task == p.task && d.kind == kind && d.start == s && d.end == e
                        });
                        if !dup {
                            deps.push(Dep {
                                task: p.task,
                                kind,
                                start: s,
                                end: e,
                                buf: self.resolve(s),
                                pending: pending.contains(&p.task),
                                manual,
                            });
                        }
                    }
                }
                accs.push(mine);
            }
            self.all.extend(accs.iter().copied());
        }
        self.tasks.push(TaskRec {
            kernel,
            kernels: kernels.to_vec(),
            block_num,
            submit_ns: now,
            args,
            accesses: accs,
            deps,
            explicit: explicit
                .iter()
                .map(|&d| (d, pending.contains(&d)))
                .collect(),
            skipped: None,
        });
        if self.timeline() {
            self.ops.push(OpRec {
                op: "submit",
                begin,
                end: now,
                wait: 0,
                task: Some(tid),
                bytes: None,
                at: None,
            });
        }
    }

    /// Task `task`'s predicate read `value` and was false: it completed
    /// without running.
    pub fn skipped(&mut self, task: usize, value: i64) {
        if let Some(t) = self.tasks.get_mut(task) {
            t.skipped = Some(value);
        }
    }

    /// One block of `task` ran on lane `lane` of core type `core`;
    /// `kernel` says which, when the task is mixed.
    pub fn block(
        &mut self,
        task: usize,
        block: u32,
        (core, lane): (u32, u32),
        kernel: Option<Kernel>,
        begin: u64,
        end: u64,
    ) {
        self.blocks.push(BlockRec {
            task,
            block,
            core,
            lane,
            kernel,
            begin,
            end,
        });
    }

    /// A read, write or fill of `bytes` at arena offset `off`: waited
    /// from `begin` to `waited`, done at `end`.
    pub fn data_op(&mut self, op: &'static str, off: u64, bytes: u64, times: (u64, u64, u64)) {
        if !self.timeline() {
            return;
        }
        let at = self.resolve(off);
        self.ops.push(OpRec {
            op,
            begin: times.0,
            end: times.2,
            wait: times.1.saturating_sub(times.0),
            task: None,
            bytes: Some(bytes),
            at,
        });
    }

    /// The orchestration allocated `size` bytes at device address `addr`.
    pub fn alloc(&mut self, addr: u64, size: u64, begin: u64) {
        self.allocs.push(AllocRec {
            start: addr.wrapping_sub(DEVICE_BASE),
            size,
            live: true,
        });
        if self.timeline() {
            let at = self.resolve(addr.wrapping_sub(DEVICE_BASE));
            self.ops.push(OpRec {
                op: "alloc",
                begin,
                end: now_ns(),
                wait: 0,
                task: None,
                bytes: Some(size),
                at,
            });
        }
    }

    /// The orchestration freed (or its scope released) the allocation at
    /// `addr`: its accesses leave the conflict list.
    pub fn free(&mut self, addr: u64) {
        let off = addr.wrapping_sub(DEVICE_BASE);
        let at = self.resolve(off);
        if let Some(a) = self
            .allocs
            .iter_mut()
            .rev()
            .find(|a| a.live && a.start == off)
        {
            a.live = false;
            let (s, e) = (a.start, a.start + a.size);
            self.all.retain(|x| !(x.start >= s && x.end <= e));
        }
        if self.timeline() {
            let now = now_ns();
            self.ops.push(OpRec {
                op: "free",
                begin: now,
                end: now,
                wait: 0,
                task: None,
                bytes: None,
                at,
            });
        }
    }

    /// `begin_scope` / `end_scope` (an instant on the orchestration lane).
    pub fn scope(&mut self, op: &'static str) {
        if self.timeline() {
            let now = now_ns();
            self.ops.push(OpRec {
                op,
                begin: now,
                end: now,
                wait: 0,
                task: None,
                bytes: None,
                at: None,
            });
        }
    }

    /// The record as JSON text; `end` closes the run.
    pub fn finish(self, end: u64) -> String {
        let mut o = String::with_capacity(256 + self.tasks.len() * 256 + self.blocks.len() * 96);
        let _ = write!(
            o,
            "{{\"version\":1,\"flags\":{},\"device\":{},\"cores\":{{\"aic\":{},\"aiv\":{}}},\"run\":{{\"begin_ns\":{},\"end_ns\":{}}},\"orchestration\":{{\"begin_ns\":{},\"end_ns\":{}}},\"skipped\":{},\"tasks\":[",
            self.flags,
            self.device,
            self.cores[0],
            self.cores[1],
            self.run_begin,
            end,
            self.orch.0,
            self.orch.1,
            self.tasks.iter().filter(|t| t.skipped.is_some()).count()
        );
        for (i, t) in self.tasks.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            // A dependency-only task keeps the fields every reader
            // expects: func_id (uint32_t)SCENE_NO_KERNEL, core "none".
            let (func_id, core) = match t.kernel {
                Some((f, c)) => (f, super::core_name(c)),
                None => (SCENE_NO_KERNEL as u32, "none"),
            };
            let _ = write!(
                o,
                "{{\"id\":{i},\"func_id\":{func_id},\"core\":\"{core}\",\"block_num\":{},\"submit_ns\":{},",
                t.block_num, t.submit_ns
            );
            if t.kernel.is_none() {
                o.push_str("\"dummy\":true,");
            }
            if let Some(value) = t.skipped {
                let _ = write!(o, "\"skipped\":true,\"predicate_value\":{value},");
            }
            if !t.explicit.is_empty() {
                o.push_str("\"explicit_deps\":[");
                for (k, &(task, pending)) in t.explicit.iter().enumerate() {
                    if k > 0 {
                        o.push(',');
                    }
                    let _ = write!(o, "{{\"task\":{task},\"pending\":{pending}}}");
                }
                o.push_str("],");
            }
            if !t.kernels.is_empty() {
                o.push_str("\"kernels\":");
                kernels_json(&mut o, &t.kernels);
                o.push(',');
            }
            o.push_str("\"args\":[");
            for (k, a) in t.args.iter().enumerate() {
                if k > 0 {
                    o.push(',');
                }
                match a {
                    ArgRec::Scalar(v) => {
                        let _ = write!(o, "{{\"dir\":\"scalar\",\"value\":{v}}}");
                    }
                    ArgRec::Tensor {
                        dir,
                        manual,
                        dtype,
                        shape,
                    } => {
                        let _ = write!(
                            o,
                            "{{\"dir\":\"{}\",\"manual\":{manual},\"dtype\":{dtype},\"shape\":{shape:?}}}",
                            dir_name(*dir)
                        );
                    }
                }
            }
            o.push(']');
            if self.deps() {
                o.push_str(",\"accesses\":[");
                for (k, a) in t.accesses.iter().enumerate() {
                    if k > 0 {
                        o.push(',');
                    }
                    o.push('{');
                    range_json(&mut o, a.buf, a.start, a.end);
                    let _ = write!(o, ",\"write\":{},\"manual\":{}}}", a.write, a.manual);
                }
                o.push_str("],\"deps\":[");
                for (k, d) in t.deps.iter().enumerate() {
                    if k > 0 {
                        o.push(',');
                    }
                    let _ = write!(o, "{{\"task\":{},\"kind\":\"{}\",", d.task, d.kind);
                    range_json(&mut o, d.buf, d.start, d.end);
                    let _ = write!(o, ",\"pending\":{},\"manual\":{}}}", d.pending, d.manual);
                }
                o.push(']');
            }
            o.push('}');
        }
        o.push_str("],\"blocks\":[");
        for (i, b) in self.blocks.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            let _ = write!(
                o,
                "{{\"task\":{},\"block\":{},\"core\":\"{}\",\"lane\":{},\"begin_ns\":{},\"end_ns\":{}",
                b.task,
                b.block,
                super::core_name(b.core),
                b.lane,
                b.begin,
                b.end
            );
            if let Some((slot, func_id)) = b.kernel {
                let _ = write!(
                    o,
                    ",\"slot\":\"{}\",\"func_id\":{func_id}",
                    super::cluster::slot_name(slot)
                );
            }
            o.push('}');
        }
        o.push_str("],\"ops\":[");
        for (i, op) in self.ops.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            let _ = write!(
                o,
                "{{\"op\":\"{}\",\"begin_ns\":{},\"end_ns\":{},\"wait_ns\":{}",
                op.op, op.begin, op.end, op.wait
            );
            if let Some(t) = op.task {
                let _ = write!(o, ",\"task\":{t}");
            }
            if let Some(b) = op.bytes {
                let _ = write!(o, ",\"bytes\":{b}");
            }
            if let Some((buf, off)) = op.at {
                o.push(',');
                buf.json(&mut o);
                let _ = write!(o, ",\"offset\":{off}");
            }
            o.push('}');
        }
        o.push_str("]}");
        o
    }
}

/// `"buffer":..,"index":..,"start":..,"end":..` of an arena range, in
/// offsets of its buffer (`"buffer":"unknown"` and arena offsets if it
/// lies in none, which a checked access cannot).
fn range_json(o: &mut String, buf: Option<(BufRef, u64)>, start: u64, end: u64) {
    match buf {
        Some((b, rel)) => {
            b.json(o);
            let _ = write!(o, ",\"start\":{rel},\"end\":{}", rel + (end - start));
        }
        None => {
            let _ = write!(
                o,
                "\"buffer\":\"unknown\",\"index\":0,\"start\":{start},\"end\":{end}"
            );
        }
    }
}

/// `[{"slot":"aic","func_id":0},...]`.
pub fn kernels_json(o: &mut String, kernels: &[Kernel]) {
    o.push('[');
    for (k, &(slot, func_id)) in kernels.iter().enumerate() {
        if k > 0 {
            o.push(',');
        }
        let _ = write!(
            o,
            "{{\"slot\":\"{}\",\"func_id\":{func_id}}}",
            super::cluster::slot_name(slot)
        );
    }
    o.push(']');
}

fn dir_name(dir: u32) -> &'static str {
    match dir {
        SCENE_DIR_IN => "in",
        SCENE_DIR_OUT => "out",
        SCENE_DIR_INOUT => "inout",
        _ => "scalar",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_are_complete_and_marked_pending() {
        let base = DEVICE_BASE;
        let mut t = TraceRun::new(
            SCENE_RT_TRACE_DEPS | SCENE_RT_TRACE_TIMELINE,
            0,
            [1, 1],
            &[(base, 64), (base + 4096, 64)],
        );
        // task 0 reads x, task 1 writes x (WAR on x), task 2 reads x (RAW on 1).
        t.submit(
            0,
            (Some((1, 1)), 1, &[]),
            (&[], &[]),
            (&[(0, 64, false)], &[]),
            (&[], &[]),
            0,
        );
        t.submit(
            1,
            (Some((2, 1)), 1, &[]),
            (&[], &[]),
            (&[(0, 32, true)], &[]),
            (&[0], &[]),
            0,
        );
        t.submit(
            2,
            (Some((1, 1)), 1, &[]),
            (&[], &[]),
            (&[(16, 64, false), (4096, 4160, true)], &[]),
            (&[], &[]),
            0,
        );
        assert_eq!(t.tasks[1].deps.len(), 1);
        assert_eq!(t.tasks[1].deps[0].kind, "WAR");
        assert!(t.tasks[1].deps[0].pending);
        let d2: Vec<_> = t.tasks[2]
            .deps
            .iter()
            .map(|d| (d.task, d.kind, d.start, d.end, d.pending))
            .collect();
        assert_eq!(d2, vec![(1, "RAW", 16, 32, false)]);
        let json = t.finish(now_ns());
        assert!(json.contains("\"kind\":\"WAR\",\"buffer\":\"arg\",\"index\":0,\"start\":0,\"end\":32,\"pending\":true,\"manual\":false"), "{json}");
    }

    /// A manual access waits only for tracked writes of its bytes and is
    /// never a later access's dependency.
    #[test]
    fn manual_accesses_depend_on_tracked_producers_only() {
        let base = DEVICE_BASE;
        let mut t = TraceRun::new(SCENE_RT_TRACE_DEPS, 0, [1, 1], &[(base, 64)]);
        // task 0 writes x (tracked); task 1 reads x (tracked); task 2 writes
        // x through manual_dep: on 0 only (its producer; no WAR on 1); task 3 writes
        // x tracked: WAW on 0, WAR on 1, nothing on 2.
        t.submit(
            0,
            (Some((1, 1)), 1, &[]),
            (&[], &[]),
            (&[(0, 64, true)], &[]),
            (&[], &[]),
            0,
        );
        t.submit(
            1,
            (Some((1, 1)), 1, &[]),
            (&[], &[]),
            (&[(0, 64, false)], &[]),
            (&[], &[]),
            0,
        );
        t.submit(
            2,
            (Some((1, 1)), 1, &[]),
            (&[], &[]),
            (&[], &[(0, 32, true)]),
            (&[], &[]),
            0,
        );
        t.submit(
            3,
            (Some((1, 1)), 1, &[]),
            (&[], &[]),
            (&[(0, 64, true)], &[]),
            (&[], &[]),
            0,
        );
        let deps = |k: usize| -> Vec<_> {
            t.tasks[k]
                .deps
                .iter()
                .map(|d| (d.task, d.kind, d.manual))
                .collect()
        };
        assert_eq!(deps(2), vec![(0, "WAW", true)]);
        assert_eq!(deps(3), vec![(0, "WAW", false), (1, "WAR", false)]);
        assert!(t.tasks[2].accesses[0].manual);
    }
}
