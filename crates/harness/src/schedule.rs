//! The order of stages across the cases of a run: the product.
//!
//! A [`Session`] is the CPU stages plus the device stage (plus, for
//! `run --from`, a bundle that stands in for the CPU stages). Everything
//! that needs no card (compiling, fixtures, goldens) is finished before a
//! card is requested; the card lock covers upload, run and download only;
//! the comparison and the dump run after the card is released. Within a
//! run, one thread prepares cases while one device worker per healthy card
//! runs prepared ones, so cards never wait on the CPU when prepared work
//! exists.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::Instant;

use scene_device::{AcquireOptions, CardLease};

use crate::bundle::{Bundle, SlotData};
use crate::compile::CompiledScenes;
use crate::config::RunConfig;
use crate::device::{DeviceStage, DeviceWork};
use crate::golden::GoldenRegistry;
use crate::judge::compare_outputs;
use crate::prepare::{CpuStages, Prepared, SetupError};
use crate::report::{CaseReport, FailureStage, LockInterval, RunReport, unix_seconds};
use crate::select::SelectedCase;

/// A configured harness: the CPU stages, the device stage and, optionally,
/// a bundle of precompiled cases.
#[derive(Debug)]
pub struct Session {
    cpu: CpuStages,
    device: DeviceStage,
    /// `run --from DIR`: precompiled cases, used instead of compiling.
    bundle: Option<Bundle>,
}

impl Session {
    pub fn new(config: RunConfig, registry: GoldenRegistry) -> Result<Self, SetupError> {
        // The CPU stages first: they open the kernel cache, which warns once
        // if its directory is unusable; the runtime then does not try it.
        let cpu = CpuStages::new(config, registry)?;
        let mut device = DeviceStage::new(cpu.config())?;
        if cpu.config().cache_dir.is_some() && cpu.builder().cache().is_none() {
            device = device.without_runtime_cache();
        }
        device.check_runtime().map_err(SetupError::Runtime)?;
        Ok(Self {
            cpu,
            device,
            bundle: None,
        })
    }

    pub fn config(&self) -> &RunConfig {
        self.cpu.config()
    }

    pub fn cpu(&self) -> &CpuStages {
        &self.cpu
    }

    /// Replaces the CPU stages (e.g. with a builder that reports progress).
    pub fn map_cpu(mut self, f: impl FnOnce(CpuStages) -> CpuStages) -> Self {
        self.cpu = f(self.cpu);
        self
    }

    /// Runs cases from `bundle` where its slots are valid (see
    /// [`crate::bundle`]); other cases are compiled as usual.
    pub fn with_bundle(mut self, bundle: Bundle) -> Self {
        self.bundle = Some(bundle);
        self
    }

    /// Compiles the callables of every scene used by `cases` as one plan.
    pub fn compile(&self, cases: &[SelectedCase]) -> CompiledScenes {
        self.cpu.compile(cases)
    }

    /// Runs one case whose scene is in `compiled`, stage after stage.
    pub fn run_case(&self, sel: &SelectedCase, compiled: &CompiledScenes) -> CaseReport {
        match self.cpu.prepare(sel, compiled) {
            Ok(p) => self.finish(p, None).unwrap_or_else(|| {
                let mut r = CaseReport::new(&sel.scene.name, &sel.case().name);
                r.fail(FailureStage::Device, "interrupted: the run was cancelled");
                r
            }),
            Err(r) => *r,
        }
    }

    /// Whether the run was cancelled ([`RunConfig::cancel`]).
    fn cancelled(&self) -> bool {
        self.config().cancel.is_cancelled()
    }

    /// Compiles then runs `cases`, calling `on_case` (on this thread) as each
    /// finishes. Returns the reports in selection order.
    ///
    /// Once [`RunConfig::cancel`] is cancelled, no further case is
    /// prepared or sent to a card, the running ones are stopped, and the
    /// report holds the cases that finished before (a case cut short is
    /// neither passed nor failed: it is left out).
    pub fn run(&self, cases: &[SelectedCase], on_case: &mut dyn FnMut(&CaseReport)) -> RunReport {
        if self.config().hold_card {
            return self.run_holding_card(cases, on_case);
        }
        let start = Instant::now();
        let mut reports: Vec<Option<CaseReport>> = vec![None; cases.len()];
        let pool_size = self.config().devices.len();
        let mut runnable = fail_oversized(
            cases,
            pool_size,
            &format!(
                "the pool has {pool_size} (--device {})",
                self.config().devices
            ),
            &mut reports,
            on_case,
        );
        let (slots, to_compile) =
            self.slots_from_bundle(cases, &mut runnable, &mut reports, on_case);
        // The compile runs beside the preparing thread: the first case's
        // fixtures and golden are made while kernels build (a cold
        // compile leaves cores idle: its probes and links are serial),
        // and the card gets it as soon as its callable is there.
        let compiled = OnceLock::new();
        let panicked = std::thread::scope(|s| {
            let compiling = s.spawn(|| {
                // Set whatever happens: the preparer waits for it. A
                // panicking compile leaves no callable (each case fails at
                // compile) and is resumed once the run is over.
                let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.compile(&to_compile)
                }));
                let (scenes, panic) = match built {
                    Ok(c) => (c, None),
                    Err(p) => (CompiledScenes::default(), Some(p)),
                };
                let _ = compiled.set(scenes);
                panic
            });
            self.pipelined(cases, &runnable, slots, &compiled, &mut reports, on_case);
            compiling.join().ok().flatten()
        });
        if let Some(p) = panicked {
            std::panic::resume_unwind(p);
        }
        let units = compiled.into_inner().map(|c| c.units).unwrap_or_default();
        self.run_report(reports, start).with_unit_counts(units)
    }

    /// One preparing thread feeding one device worker per healthy card.
    fn pipelined(
        &self,
        cases: &[SelectedCase],
        runnable: &[usize],
        mut slots: HashMap<usize, SlotData>,
        compiled: &OnceLock<CompiledScenes>,
        reports: &mut [Option<CaseReport>],
        on_case: &mut dyn FnMut(&CaseReport),
    ) {
        let workers = self
            .device
            .pool()
            .healthy()
            .len()
            .clamp(1, runnable.len().max(1));
        let (work_tx, work_rx) = mpsc::sync_channel::<(usize, Prepared)>(workers);
        let work_rx = Mutex::new(work_rx);
        let (done_tx, done_rx) = mpsc::channel::<(usize, CaseReport)>();
        std::thread::scope(|s| {
            let prep_done = done_tx.clone();
            s.spawn(move || {
                for &i in runnable {
                    if self.cancelled() {
                        break;
                    }
                    match self.prepare_overlapped(&cases[i], slots.remove(&i), compiled) {
                        Ok(p) => {
                            if work_tx.send((i, p)).is_err() {
                                break;
                            }
                        }
                        // A failure while cancelling is the cancellation's
                        // (a killed Python worker, an unbuilt callable).
                        Err(_) if self.cancelled() => break,
                        Err(r) => {
                            let _ = prep_done.send((i, *r));
                        }
                    }
                }
            });
            for _ in 0..workers {
                let done = done_tx.clone();
                let work_rx = &work_rx;
                s.spawn(move || {
                    loop {
                        let next = work_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        let Ok((i, p)) = next else { break };
                        // Cancelled: prepared cases are dropped unrun (the
                        // channel is drained so the preparer never blocks).
                        if self.cancelled() {
                            continue;
                        }
                        let Some(r) = self.finish(p, None) else {
                            continue;
                        };
                        if done.send((i, r)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(done_tx);
            for (i, r) in done_rx {
                on_case(&r);
                reports[i] = Some(r);
            }
        });
    }

    /// `--hold-card`: the one-pass shape of the old harness, kept for
    /// comparison with two passes. The card(s) are taken before compiling
    /// and held until the last case is done; cases run one after another.
    /// Each case's `lock_held_s` (and `lock`) is its share of the hold: from
    /// the previous case's end (or the acquisition) to its own end, so the
    /// run's `card_seconds_held` is the whole hold, not just device work.
    fn run_holding_card(
        &self,
        cases: &[SelectedCase],
        on_case: &mut dyn FnMut(&CaseReport),
    ) -> RunReport {
        let start = Instant::now();
        let pool = self.device.pool();
        let need = cases
            .iter()
            .map(SelectedCase::cards)
            .max()
            .unwrap_or(1)
            .clamp(1, pool.healthy().len().max(1));
        let acquired = pool.acquire(
            need,
            "scene run --hold-card",
            AcquireOptions {
                timeout: self.config().lock_timeout,
                on_wait: None,
            },
        );
        let lease = match acquired {
            Ok(l) => l,
            // Interrupted while waiting: nothing ran.
            Err(_) if self.cancelled() => return self.run_report(Vec::new(), start),
            Err(e) => {
                let reports = cases
                    .iter()
                    .map(|sel| {
                        let mut r = CaseReport::new(&sel.scene.name, &sel.case().name);
                        r.fail(
                            FailureStage::Device,
                            format!("acquiring {need} card(s) for --hold-card: {e}"),
                        );
                        on_case(&r);
                        Some(r)
                    })
                    .collect();
                return self.run_report(reports, start);
            }
        };
        let wait_s = start.elapsed().as_secs_f64();
        let cards = lease.cards().to_vec();
        let mut hold = HoldShares::new(unix_seconds(lease.acquired_at()));
        let mut reports: Vec<Option<CaseReport>> = vec![None; cases.len()];
        let mut runnable = fail_oversized(
            cases,
            cards.len(),
            &format!("--hold-card holds {cards:?}"),
            &mut reports,
            on_case,
        );
        let (mut slots, to_compile) =
            self.slots_from_bundle(cases, &mut runnable, &mut reports, on_case);
        let compiled = self.compile(&to_compile);
        let mut lease = Some(lease);
        for (n, &i) in runnable.iter().enumerate() {
            if self.cancelled() {
                break;
            }
            let r = match self.prepare_one(&cases[i], slots.remove(&i), &compiled) {
                Ok(p) => self.finish(p, lease.as_ref()),
                Err(_) if self.cancelled() => None,
                Err(r) => Some(*r),
            };
            let Some(mut r) = r else { break };
            // Released before the last share is charged, so the hold ends
            // where the last case does.
            if n + 1 == runnable.len()
                && let Some(l) = lease.take()
            {
                l.release();
            }
            hold.charge(&mut r, &cards);
            if n == 0 {
                r.phases.lock_wait_s += wait_s;
            }
            on_case(&r);
            reports[i] = Some(r);
        }
        if let Some(l) = lease.take() {
            l.release();
        }
        self.run_report(reports, start)
            .with_unit_counts(compiled.units)
    }

    fn run_report(&self, reports: Vec<Option<CaseReport>>, start: Instant) -> RunReport {
        let mut report = RunReport::new(
            self.config().platform.name(),
            reports.into_iter().flatten().collect(),
            start.elapsed().as_secs_f64(),
        );
        if let Some(cache) = self.cpu.builder().cache() {
            let stats = cache.run_stats();
            report.remote_hits = stats.remote_hits;
            report.remote_misses = stats.remote_misses;
        }
        report
    }

    /// Splits `runnable` into cases a bundle slot serves and cases to
    /// compile. A slot that cannot be used is reported with the reason and
    /// its case alone is rebuilt; the others still run from the bundle.
    /// A case pass 1 failed to store fails with pass 1's cause (its
    /// recorded stage and message), and is dropped from `runnable`.
    fn slots_from_bundle(
        &self,
        cases: &[SelectedCase],
        runnable: &mut Vec<usize>,
        reports: &mut [Option<CaseReport>],
        on_case: &mut dyn FnMut(&CaseReport),
    ) -> (HashMap<usize, SlotData>, Vec<SelectedCase>) {
        let mut slots = HashMap::new();
        let mut to_compile = Vec::new();
        let mut failed_in_pass1 = std::collections::HashSet::new();
        for &i in runnable.iter() {
            let sel = &cases[i];
            let Some(bundle) = &self.bundle else {
                to_compile.push(sel.clone());
                continue;
            };
            match bundle.load_case(sel, self.config().platform.name()) {
                Ok(slot) => {
                    slots.insert(i, slot);
                }
                Err(problem @ crate::bundle::SlotProblem::FailedInPass1 { stage, .. }) => {
                    let mut r = CaseReport::new(&sel.scene.name, &sel.case().name);
                    r.fail(stage, problem.to_string());
                    on_case(&r);
                    reports[i] = Some(r);
                    failed_in_pass1.insert(i);
                }
                Err(problem) => {
                    eprintln!(
                        "warning: {}: bundle slot {problem}; rebuilding this case",
                        sel.id()
                    );
                    to_compile.push(sel.clone());
                }
            }
        }
        if !failed_in_pass1.is_empty() {
            runnable.retain(|i| !failed_in_pass1.contains(i));
        }
        (slots, to_compile)
    }

    /// [`Session::prepare_one`] while the compile may still run: a
    /// bundle slot needs no compile, so it never waits for it; a case's CPU
    /// stages run at once and its callable is attached when the compile is
    /// over.
    fn prepare_overlapped(
        &self,
        sel: &SelectedCase,
        slot: Option<SlotData>,
        compiled: &OnceLock<CompiledScenes>,
    ) -> Result<Prepared, Box<CaseReport>> {
        match slot {
            Some(slot) => self.prepare_from_slot(sel, slot),
            None => {
                let cpu = self.cpu.prepare_cpu(sel, compiled.get())?;
                self.cpu.attach(cpu, compiled.wait())
            }
        }
    }

    /// The CPU stages of one case, or its bundle slot when it has one (then
    /// compile, fixtures and golden phases stay at zero).
    fn prepare_one(
        &self,
        sel: &SelectedCase,
        slot: Option<SlotData>,
        compiled: &CompiledScenes,
    ) -> Result<Prepared, Box<CaseReport>> {
        match slot {
            Some(slot) => self.prepare_from_slot(sel, slot),
            None => self.cpu.prepare(sel, compiled),
        }
    }

    /// A case prepared from its bundle slot: inputs, golden and callable
    /// from pass 1, after the checks pass 2 makes again.
    fn prepare_from_slot(
        &self,
        sel: &SelectedCase,
        slot: SlotData,
    ) -> Result<Prepared, Box<CaseReport>> {
        // The bundle holds inputs and goldens, not the verdict's
        // functions: a custom comparison must be registered here.
        if let Err(e) = self.cpu.check_comparisons(sel) {
            let mut r = CaseReport::new(&sel.scene.name, &sel.case().name);
            r.fail(FailureStage::Compare, e.to_string());
            return Err(Box::new(r));
        }
        // Pass 2 may run with other settings than pass 1 (its own
        // SCENE_RUNTIME_OPTIONS, platform file): its device memory
        // is checked again, still before a card is taken.
        if let Err(e) = self.cpu.check_device_memory(sel) {
            let mut r = CaseReport::new(&sel.scene.name, &sel.case().name);
            r.fail_with(crate::report::CaseFailure::DeviceMemory(e));
            return Err(Box::new(r));
        }
        // Pass 1's C host functions: pass 2 compiles none of them.
        for (step, bytes) in &slot.hosts {
            let Some(crate::scene::steps::StepKind::HostC { source, function }) =
                sel.scene.steps.get(*step).map(|s| &s.kind)
            else {
                continue;
            };
            if let Err(e) = self
                .cpu
                .hosts()
                .install(&sel.scene, source, function, bytes)
            {
                let mut r = CaseReport::new(&sel.scene.name, &sel.case().name);
                r.fail(
                    FailureStage::Compile,
                    format!("steps[{step}], host step `{function}`: {e}"),
                );
                return Err(Box::new(r));
            }
        }
        Ok(Prepared {
            sel: sel.clone(),
            callable: slot.callable,
            inputs: slot.inputs,
            scalars: slot.scalars,
            golden: slot.golden,
            report: CaseReport::new(&sel.scene.name, &sel.case().name),
            started: Instant::now(),
        })
    }

    /// The device stage, then (card released) the comparison, the verdict
    /// and the dump sink. `None`: the run was cancelled before the device
    /// stage finished (the case did not run to the end).
    fn finish(&self, p: Prepared, held: Option<&CardLease>) -> Option<CaseReport> {
        let Prepared {
            sel,
            callable,
            inputs,
            scalars,
            golden,
            mut report,
            started,
        } = p;
        let work = DeviceWork {
            sel: &sel,
            callable: &callable,
            inputs: &inputs,
            scalars: &scalars,
            upload_outputs: false,
        };
        let mut device = if sel.scene.steps.is_empty() {
            self.device.run(work, &mut report, held)
        } else {
            crate::steps::StepRunner {
                device: &self.device,
                cpu: &self.cpu,
            }
            .run(work, &mut report, held)
        };
        if device.cancelled {
            return None;
        }
        let Some(runs) = device.outputs.take() else {
            report.fail(FailureStage::Device, device.notes.join("\n"));
            report.wall_s = started.elapsed().as_secs_f64();
            self.write_trace(
                &sel,
                &callable,
                &inputs,
                &mut report,
                started,
                None,
                &device,
            );
            return Some(report);
        };

        // Every run's outputs are judged (`--warmup` runs, then `--rounds`),
        // in the order they ran, all of them: the first failing run is the
        // verdict and is named when there is more than one, and the
        // report's `rounds` lists every round that failed (a kernel that is
        // right once and then does nothing fails every later round).
        let t = Instant::now();
        let (warmup, rounds) = (self.config().warmup, self.config().rounds.max(1));
        let many = runs.len() > 1;
        let mut failure = None;
        let mut judged = None;
        let mut failed_rounds: Vec<String> = Vec::new();
        for (i, outputs) in runs.iter().enumerate() {
            let outcome = compare_outputs(
                self.cpu.golden_pool(),
                self.cpu.registry(),
                self.cpu.python(),
                &sel.scene,
                sel.case(),
                outputs,
                &golden,
            );
            let failed = !outcome.problems.is_empty();
            if failed {
                let in_warmup = i < warmup as usize;
                let number = if in_warmup {
                    i + 1
                } else {
                    i + 1 - warmup as usize
                };
                let label = match (many, in_warmup) {
                    (false, _) => String::new(),
                    (true, true) => format!("warmup round {number} of {warmup}"),
                    (true, false) => format!("round {number} of {rounds}"),
                };
                if let Some(r) = &mut report.rounds {
                    let number = u32::try_from(number).unwrap_or(u32::MAX);
                    if in_warmup {
                        r.failed_warmup.push(number);
                    } else {
                        r.failed.push(number);
                    }
                }
                if failure.is_none() {
                    let text = outcome.problems.join("\n");
                    failure = Some(if many {
                        format!("{label}: {text}")
                    } else {
                        text
                    });
                    judged = Some((outcome.outputs, i));
                } else {
                    failed_rounds.push(label);
                }
            } else if failure.is_none() {
                judged = Some((outcome.outputs, i));
            }
        }
        if let Some(f) = &mut failure
            && !failed_rounds.is_empty()
        {
            f.push_str(&format!("\nalso failed: {}", failed_rounds.join(", ")));
        }
        report.phases.compare_s = t.elapsed().as_secs_f64();
        let Some((judged_outputs, at)) = judged else {
            report.fail(FailureStage::Device, "the device returned no run's outputs");
            report.wall_s = started.elapsed().as_secs_f64();
            return Some(report);
        };
        report.outputs = judged_outputs;
        let outputs = &runs[at];
        let dumped = crate::observe::dump::sink(
            &self.config().dumps,
            self.config().platform.name(),
            (&sel.scene, sel.case()),
            &inputs,
            outputs,
            &golden,
            failure.as_deref(),
        );
        // The report's `dump` is absolute (a relative dump root is taken
        // against the working directory); the message says it as written.
        report.dump = dumped
            .dir
            .map(|d| std::path::absolute(&d).unwrap_or(d).display().to_string());
        let mut lines: Vec<String> = failure.iter().cloned().collect();
        lines.extend(dumped.note);
        lines.extend(std::mem::take(&mut device.notes));
        match failure {
            Some(_) => report.fail(FailureStage::Compare, lines.join("\n")),
            None if !lines.is_empty() => report.message = Some(lines.join("\n")),
            None => {}
        }
        report.wall_s = started.elapsed().as_secs_f64();
        self.write_trace(
            &sel,
            &callable,
            &inputs,
            &mut report,
            started,
            Some(t),
            &device,
        );
        Some(report)
    }

    /// `--trace` / `--dep-graph` (issue 19, `crate::observe::trace`): writes the
    /// case's trace and dependency graph and fills the report's paths.
    #[allow(clippy::too_many_arguments)]
    fn write_trace(
        &self,
        sel: &SelectedCase,
        callable: &scene_kernels::ChipCallable,
        inputs: &[(String, scene_golden::Tensor)],
        report: &mut CaseReport,
        started: Instant,
        compare_at: Option<Instant>,
        device: &crate::device::DeviceOutcome,
    ) {
        let config = self.config();
        if config.trace_dir.is_none() && config.dep_graph_dir.is_none() {
            return;
        }
        let mut arg_names: Vec<Option<String>> =
            inputs.iter().map(|(n, _)| Some(n.clone())).collect();
        arg_names.resize(arg_names.len() + sel.scene.scalars.len(), None);
        let snapshot = report.clone();
        let t = crate::observe::trace::CaseTrace {
            scene: &sel.scene.name,
            case: &sel.case().name,
            kernels: callable
                .incores
                .iter()
                .map(|k| (k.func_id, k.name.clone()))
                .collect(),
            arg_names,
            report: &snapshot,
            started,
            compare_at,
            device: device.trace.as_ref(),
        };
        let mut notes = Vec::new();
        if let Some(dir) = &config.trace_dir {
            match crate::observe::trace::write(dir, &t) {
                Ok(p) => report.trace = Some(p.display().to_string()),
                Err(e) => notes.push(format!("trace not written: {e}")),
            }
        }
        if let Some(dir) = &config.dep_graph_dir {
            match crate::observe::dep_graph::write(dir, &t) {
                Ok((p, more)) => {
                    report.dep_graph = Some(p.display().to_string());
                    notes.extend(more);
                }
                Err(e) => notes.push(format!("dependency graph not written: {e}")),
            }
        }
        if !notes.is_empty() {
            let mut lines: Vec<String> = report.message.take().into_iter().collect();
            lines.extend(notes);
            report.message = Some(lines.join("\n"));
        }
    }
}

/// `--hold-card` accounting: each case is charged the hold from the
/// previous case's end to its own.
struct HoldShares {
    mark: Instant,
    mark_unix: f64,
}

impl HoldShares {
    fn new(acquired_at: f64) -> Self {
        Self {
            mark: Instant::now(),
            mark_unix: acquired_at,
        }
    }

    fn charge(&mut self, r: &mut CaseReport, cards: &[u32]) {
        let now = Instant::now();
        let now_unix = unix_seconds(std::time::SystemTime::now());
        r.phases.lock_held_s = now.duration_since(self.mark).as_secs_f64();
        r.devices = cards.to_vec();
        r.lock = Some(LockInterval {
            acquired_at: self.mark_unix,
            released_at: now_unix,
        });
        (self.mark, self.mark_unix) = (now, now_unix);
    }
}

/// Fails, at selection, every case needing more than `capacity` cards
/// (waiting could never succeed), saying why (`the pool has ...`); returns
/// the indices of the others.
fn fail_oversized(
    cases: &[SelectedCase],
    capacity: usize,
    why: &str,
    reports: &mut [Option<CaseReport>],
    on_case: &mut dyn FnMut(&CaseReport),
) -> Vec<usize> {
    let mut runnable = Vec::with_capacity(cases.len());
    for (i, sel) in cases.iter().enumerate() {
        if sel.cards() > capacity {
            let mut r = CaseReport::new(&sel.scene.name, &sel.case().name);
            r.fail(
                FailureStage::Device,
                format!("needs {} cards but {why}", sel.cards()),
            );
            on_case(&r);
            reports[i] = Some(r);
        } else {
            runnable.push(i);
        }
    }
    runnable
}
