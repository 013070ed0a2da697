//! A level-3 case's `[[steps]]` ([`crate::scene::steps`]), run in the order
//! written: the harness is the host level of simpler's L3 orchestration.
//!
//! The host holds every tensor's current value (the case's inputs at the
//! start). A chip step is one device stage of the rank group (acquire the
//! case's cards, upload, run the step's orchestration function on every
//! rank, download, release): every tensor is uploaded, the ones the step
//! neither reads nor writes as zeros, and only the ones it writes come
//! back; an `out` / `inout` tensor it changed without declaring it fails
//! the step. A host step runs with no card held: a C function in a child
//! process ([`crate::host_step`]), a Python one in the scene's Python
//! worker; it sees only its declared tensors, and only its writes come
//! back. The outputs after the last step are what the comparison judges.
//!
//! Cards are held for each chip step only, never across a host step, so a
//! host function (however slow) costs no card time; the price is one
//! acquisition and one upload / download of the tensors per chip step.
//! The report's `steps` records each step's time, the card time it held
//! and the earlier steps its tensors make it depend on.

use scene_device::CardLease;
use scene_golden::Tensor;
use scene_kernels::ChipCallable;

use crate::device::{DeviceOutcome, DeviceStage, DeviceWork};
use crate::host_step::HostTensor;
use crate::prepare::CpuStages;
use crate::report::CaseReport;
use crate::scene::steps::{Step, StepKind};

/// What runs a case's steps: the device stage for chip steps, the CPU
/// stages' Python runner and the run's host builds for host steps.
#[derive(Debug)]
pub struct StepRunner<'a> {
    pub device: &'a DeviceStage,
    pub cpu: &'a CpuStages,
}

impl StepRunner<'_> {
    /// Runs every step of `work`'s scene on its inputs; the outcome holds
    /// one run's outputs (the values after the last step) or why a step
    /// failed (the message names the scene, the step and its function).
    pub fn run(
        &self,
        work: DeviceWork<'_>,
        report: &mut CaseReport,
        held: Option<&CardLease>,
    ) -> DeviceOutcome {
        let scene = &work.sel.scene;
        let mut outcome = DeviceOutcome::default();
        let what =
            |i: usize, step: &Step| format!("scene `{}`, steps[{i}], {}", scene.name, step.kind);
        // Every C host function is built (or installed from a bundle
        // slot) before the first card is taken: in the CPU stages, so this
        // finds each one ready.
        let exes = match self.cpu.host_executables(work.sel) {
            Ok(exes) => exes,
            Err(e) => {
                outcome.notes.push(e.to_string());
                return outcome;
            }
        };
        let mut state: Vec<(String, Tensor)> = work.inputs.to_vec();
        for (i, step) in scene.steps.iter().enumerate() {
            let started = std::time::Instant::now();
            let held_before = report.phases.lock_held_s;
            let done = match &step.kind {
                StepKind::Chip { function } => {
                    match self.chip(work, function, step, &state, report, held) {
                        ChipOutcome::Done(values) => Ok(values),
                        ChipOutcome::Cancelled => {
                            outcome.cancelled = true;
                            return outcome;
                        }
                        ChipOutcome::Failed(notes, trace) => {
                            report.steps.push(step_time(
                                scene,
                                i,
                                started,
                                report.phases.lock_held_s - held_before,
                            ));
                            outcome.trace = trace;
                            let mut notes = notes.into_iter();
                            let first = notes.next().unwrap_or_default();
                            outcome.notes.push(format!("{}: {first}", what(i, step)));
                            outcome.notes.extend(notes);
                            return outcome;
                        }
                        ChipOutcome::Undeclared(message) => Err(message),
                    }
                }
                StepKind::HostC { .. } => {
                    let tensors: Vec<HostTensor<'_>> = step_tensors(step, &state)
                        .map(|(t, (name, tensor))| HostTensor {
                            name,
                            tensor,
                            writes: step.writes.contains(&t),
                        })
                        .collect();
                    let exe = exes
                        .get(&i)
                        .map_or(std::path::Path::new(""), |p| p.as_path());
                    let ranks = work.sel.case().group.map_or(1, |g| g.ranks);
                    let config = self.cpu.config();
                    crate::host_step::run(exe, ranks, &tensors, &config.cancel, config.case_timeout)
                        .map(|values| written(step, values))
                        .map_err(|e| e.to_string())
                }
                StepKind::HostPython { function } => self
                    .python(work, function, step, &state)
                    .map_err(|e| e.to_string()),
            };
            report.steps.push(step_time(
                scene,
                i,
                started,
                report.phases.lock_held_s - held_before,
            ));
            match done {
                Ok(values) => {
                    for (t, v) in values {
                        state[t].1 = v;
                    }
                }
                Err(_) if self.cpu.config().cancel.is_cancelled() => {
                    outcome.cancelled = true;
                    return outcome;
                }
                Err(e) => {
                    outcome.notes.push(format!("{}: {e}", what(i, step)));
                    return outcome;
                }
            }
        }
        let outputs = state
            .into_iter()
            .zip(&scene.tensors)
            .filter(|(_, spec)| spec.direction.is_output())
            .map(|((_, t), _)| t)
            .collect();
        outcome.outputs = Some(vec![outputs]);
        outcome
    }

    /// One chip step: the rank group runs `function` on the current
    /// values (zeros for the tensors the step does not touch).
    fn chip(
        &self,
        work: DeviceWork<'_>,
        function: &str,
        step: &Step,
        state: &[(String, Tensor)],
        report: &mut CaseReport,
        held: Option<&CardLease>,
    ) -> ChipOutcome {
        let scene = &work.sel.scene;
        let callable = ChipCallable {
            orch_symbol: scene.orchestration.symbol_of(function).to_owned(),
            ..work.callable.clone()
        };
        if !step.bind.is_empty() {
            return self.chip_bound(work, &callable, step, state, report, held);
        }
        let inputs: Vec<(String, Tensor)> = state
            .iter()
            .enumerate()
            .map(|(t, (name, v))| {
                let v = if step.touches(t) {
                    v.clone()
                } else {
                    Tensor::zeros(v.dtype(), v.shape())
                };
                (name.clone(), v)
            })
            .collect();
        let w = DeviceWork {
            callable: &callable,
            inputs: &inputs,
            upload_outputs: true,
            ..work
        };
        let last = match self.run_device(w, report, held) {
            Ok(last) => last,
            Err(outcome) => return outcome,
        };
        let outputs: Vec<usize> = (0..scene.tensors.len())
            .filter(|&t| scene.tensors[t].direction.is_output())
            .collect();
        let mut values = Vec::new();
        for (t, v) in outputs.into_iter().zip(last) {
            if step.writes.contains(&t) {
                values.push((t, v));
            } else if v.bytes() != inputs[t].1.bytes() {
                return ChipOutcome::Undeclared(format!(
                    "the rank group wrote `{}`, which the step does not declare in `writes`",
                    scene.tensors[t].name
                ));
            }
        }
        ChipOutcome::Done(values)
    }

    /// The device stage's run of `w`: the outputs of its last run, or the
    /// step's outcome when none ran to the end.
    fn run_device(
        &self,
        w: DeviceWork<'_>,
        report: &mut CaseReport,
        held: Option<&CardLease>,
    ) -> Result<Vec<Tensor>, ChipOutcome> {
        let mut o = self.device.run(w, report, held);
        if o.cancelled {
            return Err(ChipOutcome::Cancelled);
        }
        match o.outputs.take().and_then(|runs| runs.into_iter().last()) {
            Some(last) => Ok(last),
            None => Err(ChipOutcome::Failed(o.notes, o.trace)),
        }
    }

    /// A chip task of a test file's level-3 class: rank r's orchestration
    /// gets the tensors `step.bind[r]`, whole. The device stage sees a
    /// scene of one tensor per argument (per rank when the group has
    /// several: rank r's slice is the tensor rank r binds), so its
    /// per-rank upload and download serve it unchanged; what comes back
    /// is split again into the tensors the ranks bound.
    fn chip_bound(
        &self,
        work: DeviceWork<'_>,
        callable: &ChipCallable,
        step: &Step,
        state: &[(String, Tensor)],
        report: &mut CaseReport,
        held: Option<&CardLease>,
    ) -> ChipOutcome {
        let scene = &work.sel.scene;
        let ranks = step.bind.len();
        let args = step.bind[0].len();
        let stacked = |shape: &[usize]| {
            let mut s = shape.to_vec();
            if ranks > 1 {
                s.insert(0, ranks);
            }
            s
        };
        let mut view: crate::scene::Scene = (**scene).clone();
        view.steps.clear();
        view.tensors = (0..args)
            .map(|i| {
                let names: Vec<&str> = step
                    .bind
                    .iter()
                    .map(|b| scene.tensors[b[i]].name.as_str())
                    .collect();
                crate::scene::TensorSpec {
                    name: names.join("|"),
                    direction: scene
                        .orchestration
                        .signature
                        .get(i)
                        .copied()
                        .unwrap_or(crate::scene::ArgDirection::In),
                    per_rank: ranks > 1,
                    ..scene.tensors[step.bind[0][i]].clone()
                }
            })
            .collect();
        let case = work.sel.case();
        view.cases[work.sel.case].tensors = (0..args)
            .map(|i| {
                let mut t = case.tensors[step.bind[0][i]].clone();
                t.shape = stacked(&t.shape);
                t
            })
            .collect();
        // Argument i: every rank's tensor in rank order, each its current
        // value, or zeros when the step does not touch it. (The ranks'
        // tensors at one position are alike in dtype and shape: the load
        // checks it.)
        let mut inputs = Vec::with_capacity(args);
        for (i, spec) in view.tensors.iter().enumerate() {
            let first = &state[step.bind[0][i]].1;
            let mut bytes = Vec::with_capacity(first.bytes().len() * ranks);
            for b in &step.bind {
                let v = state[b[i]].1.bytes();
                if step.touches(b[i]) {
                    bytes.extend_from_slice(v);
                } else {
                    bytes.resize(bytes.len() + v.len(), 0);
                }
            }
            match Tensor::from_bytes(first.dtype(), &stacked(first.shape()), bytes) {
                Ok(t) => inputs.push((spec.name.clone(), t)),
                Err(e) => {
                    return ChipOutcome::Failed(vec![format!("tensor `{}`: {e}", spec.name)], None);
                }
            }
        }
        let outputs: Vec<usize> = (0..args)
            .filter(|&i| view.tensors[i].direction.is_output())
            .collect();
        let sel = crate::select::SelectedCase {
            scene: std::sync::Arc::new(view),
            case: work.sel.case,
        };
        let w = DeviceWork {
            sel: &sel,
            callable,
            inputs: &inputs,
            upload_outputs: true,
            ..work
        };
        let last = match self.run_device(w, report, held) {
            Ok(last) => last,
            Err(outcome) => return outcome,
        };
        let mut values = Vec::new();
        for (i, joined) in outputs.into_iter().zip(last) {
            // Rank r's slice of what came back, beside what it was given.
            let each = joined.bytes().len() / ranks;
            let given = inputs[i].1.bytes().chunks(each.max(1));
            let got = joined.bytes().chunks(each.max(1));
            for (r, (bytes, before)) in got.zip(given).enumerate() {
                let t = step.bind[r][i];
                let like = &state[t].1;
                if step.writes.contains(&t) {
                    match Tensor::from_bytes(like.dtype(), like.shape(), bytes.to_vec()) {
                        Ok(v) => values.push((t, v)),
                        Err(e) => {
                            return ChipOutcome::Failed(
                                vec![format!("downloaded `{}`: {e}", scene.tensors[t].name)],
                                None,
                            );
                        }
                    }
                } else if bytes != before {
                    return ChipOutcome::Undeclared(format!(
                        "rank {r} wrote `{}`, which its task does not tag as an output",
                        scene.tensors[t].name
                    ));
                }
            }
        }
        ChipOutcome::Done(values)
    }

    /// One Python host step, in the scene's Python worker: the new values
    /// of the tensors it writes, with their indices.
    fn python(
        &self,
        work: DeviceWork<'_>,
        function: &str,
        step: &Step,
        state: &[(String, Tensor)],
    ) -> Result<Vec<(usize, Tensor)>, crate::golden::python::PyError> {
        let scene = &work.sel.scene;
        let Some(file) = scene
            .python
            .golden
            .as_ref()
            .or(scene.python.fixtures.as_ref())
        else {
            return Err(crate::golden::python::PyError::Failed(
                "the scene names no Python file".into(),
            ));
        };
        // A test file's sub task passes its tensors in its arguments' order.
        let order: Vec<usize> = match step.bind.first() {
            Some(args) => args.clone(),
            None => step_tensors(step, state).map(|(t, _)| t).collect(),
        };
        let tensors: Vec<(&str, &Tensor, bool)> = order
            .iter()
            .map(|&t| (state[t].0.as_str(), &state[t].1, step.writes.contains(&t)))
            .collect();
        let values = self.cpu.python().host_step(
            scene,
            work.sel.case(),
            file,
            function,
            &tensors,
            &step.scalars,
        )?;
        // `host_step` gives the written ones back in the order passed.
        let writes = order.into_iter().filter(|t| step.writes.contains(t));
        Ok(writes.zip(values).collect())
    }
}

/// The report's record of step `i`, started at `started`.
fn step_time(
    scene: &crate::scene::Scene,
    i: usize,
    started: std::time::Instant,
    lock_held_s: f64,
) -> crate::report::StepTime {
    crate::report::StepTime {
        step: i,
        kind: scene.steps[i].kind.to_string(),
        after: crate::scene::steps::dependencies(&scene.steps, i),
        seconds: started.elapsed().as_secs_f64(),
        lock_held_s,
    }
}

enum ChipOutcome {
    Done(Vec<(usize, Tensor)>),
    Cancelled,
    Failed(Vec<String>, Option<crate::observe::trace::DeviceTrace>),
    Undeclared(String),
}

/// The tensors `step` touches, in signature order, with their indices.
fn step_tensors<'s>(
    step: &'s Step,
    state: &'s [(String, Tensor)],
) -> impl Iterator<Item = (usize, (&'s str, &'s Tensor))> + 's {
    state
        .iter()
        .enumerate()
        .filter(|(t, _)| step.touches(*t))
        .map(|(t, (name, v))| (t, (name.as_str(), v)))
}

/// The new values of the tensors `step` writes (given in signature order)
/// with their indices.
fn written(step: &Step, values: Vec<Tensor>) -> Vec<(usize, Tensor)> {
    let mut writes = step.writes.clone();
    writes.sort_unstable();
    writes.into_iter().zip(values).collect()
}
