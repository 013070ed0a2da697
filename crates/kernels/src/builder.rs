//! The builder: plans units for many callables, runs them on one bounded
//! pool, and assembles callables from the shared artifacts.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crate::compile;
use crate::error::{BuildError, BuildSetupError, CompileError, UnitFailure};
use crate::key::{self, UnitKey};
use crate::link;
use crate::plan::{self, Job, PlanEntry};
use crate::report::{BuildOutput, Observer, UnitOutcome, UnitReport};
use crate::toolchain::Toolchain;
use crate::unit::{CallableSpec, ChipCallable, CoreType, IncoreImage, IncoreUnit, OrchUnit};

#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Upper bound on compiler/linker processes alive at once, across all
    /// callables of a `build_all`.
    pub workers: NonZeroUsize,
    /// Parent for the builder's scratch directory (default: system temp).
    pub work_dir: Option<PathBuf>,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            workers: std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
            work_dir: None,
        }
    }
}

type Artifact = Arc<Vec<u8>>;
type UnitResult = Result<Artifact, Arc<CompileError>>;

pub struct Builder {
    root: PathBuf,
    toolchain: Toolchain,
    workers: NonZeroUsize,
    scratch: tempfile::TempDir,
    link_script: PathBuf,
    /// Compiled on first use, by whichever worker needs it first.
    builtins: [OnceLock<Result<PathBuf, Arc<CompileError>>>; 2],
    memo: Mutex<HashMap<UnitKey, Artifact>>,
    /// Keeps file names unique if the same key is built twice concurrently.
    sequence: AtomicU64,
    observer: Option<Observer>,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("root", &self.root)
            .field("platform", &self.toolchain.platform)
            .field("workers", &self.workers)
            .field("scratch", &self.scratch.path())
            .field("observer", &self.observer.is_some())
            .finish_non_exhaustive()
    }
}

impl Builder {
    pub fn new(
        root: impl Into<PathBuf>,
        toolchain: Toolchain,
        options: BuildOptions,
    ) -> Result<Builder, BuildSetupError> {
        let root = root.into();
        if !root.is_dir() {
            return Err(BuildSetupError::Root { path: root });
        }
        toolchain.check()?;

        let parent = match options.work_dir {
            Some(dir) => dir,
            None => std::env::temp_dir(),
        };
        let setup_err = |source| BuildSetupError::WorkDir {
            path: parent.clone(),
            source,
        };
        std::fs::create_dir_all(&parent).map_err(setup_err)?;
        let scratch = tempfile::Builder::new()
            .prefix("scene-kernels-")
            .tempdir_in(&parent)
            .map_err(setup_err)?;
        // Tools run in the root, so scratch paths handed to them must not be
        // relative to wherever this process happens to be.
        let scratch_path = std::path::absolute(scratch.path()).map_err(setup_err)?;
        let link_script = scratch_path.join("kernel.ld");
        std::fs::write(&link_script, &toolchain.link_script).map_err(setup_err)?;

        Ok(Builder {
            root,
            toolchain,
            workers: options.workers,
            scratch,
            link_script,
            builtins: [OnceLock::new(), OnceLock::new()],
            memo: Mutex::new(HashMap::new()),
            sequence: AtomicU64::new(0),
            observer: None,
        })
    }

    /// Adds a progress callback, invoked once per unit as it finishes.
    pub fn with_observer(mut self, observer: Observer) -> Self {
        self.observer = Some(observer);
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn toolchain(&self) -> &Toolchain {
        &self.toolchain
    }

    /// Builds one callable.
    pub fn build(&self, spec: &CallableSpec) -> Result<Arc<ChipCallable>, BuildError> {
        let mut out = self.build_all(std::slice::from_ref(spec));
        out.callables.pop().unwrap_or_else(|| {
            Err(BuildError {
                label: spec.label.clone(),
                failures: Vec::new(),
            })
        })
    }

    /// Builds every callable, compiling each distinct unit once.
    ///
    /// A failing unit fails only the callables that use it; everything else
    /// is still built.
    pub fn build_all(&self, specs: &[CallableSpec]) -> BuildOutput {
        let plan = plan::plan(specs);
        let mut results: Vec<Option<UnitResult>> = vec![None; plan.entries.len()];
        let mut reports: Vec<Option<UnitReport>> = vec![None; plan.entries.len()];
        let mut queue: Vec<(usize, UnitKey)> = Vec::new();

        for (idx, entry) in plan.entries.iter().enumerate() {
            let key = match &entry.job {
                Job::Incore(unit) => key::incore_key(&self.toolchain, &self.root, unit),
                Job::Orch(unit) => key::orch_key(&self.toolchain, &self.root, unit),
            };
            let key = match key {
                Ok(key) => key,
                Err(err) => {
                    self.finish(
                        entry,
                        &mut reports[idx],
                        UnitOutcome::Failed,
                        Duration::ZERO,
                    );
                    results[idx] = Some(Err(Arc::new(err)));
                    continue;
                }
            };
            let memoized = self.memo_lock().get(&key).cloned();
            match memoized {
                Some(artifact) => {
                    self.finish(
                        entry,
                        &mut reports[idx],
                        UnitOutcome::Reused,
                        Duration::ZERO,
                    );
                    results[idx] = Some(Ok(artifact));
                }
                None => queue.push((idx, key)),
            }
        }

        self.run_queue(&plan.entries, &queue, &mut results, &mut reports);

        let callables = specs
            .iter()
            .zip(plan.specs)
            .map(|(spec, spec_plan)| match spec_plan {
                Err(failures) => Err(BuildError {
                    label: spec.label.clone(),
                    failures,
                }),
                Ok(spec_plan) => assemble(spec, &spec_plan, &results),
            })
            .collect();
        BuildOutput {
            callables,
            units: reports.into_iter().flatten().collect(),
        }
    }

    /// Runs the queued units on `workers` threads. Each thread runs one
    /// unit at a time, and a unit runs its tools one after another, so at
    /// most `workers` tool processes are ever alive.
    fn run_queue(
        &self,
        entries: &[PlanEntry],
        queue: &[(usize, UnitKey)],
        results: &mut [Option<UnitResult>],
        reports: &mut [Option<UnitReport>],
    ) {
        let threads = self.workers.get().min(queue.len());
        let next = AtomicUsize::new(0);
        let (tx, rx) = mpsc::channel::<(usize, UnitKey, UnitResult, Duration)>();
        std::thread::scope(|scope| {
            for _ in 0..threads {
                let tx = tx.clone();
                let next = &next;
                scope.spawn(move || {
                    while let Some(&(idx, key)) = queue.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let started = Instant::now();
                        let result = self
                            .run_unit(&entries[idx], key)
                            .map(Arc::new)
                            .map_err(Arc::new);
                        if tx.send((idx, key, result, started.elapsed())).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            // Reporting happens here so the observer sees one call at a time.
            for (idx, key, result, duration) in rx {
                let outcome = match &result {
                    Ok(artifact) => {
                        self.memo_lock().insert(key, Arc::clone(artifact));
                        UnitOutcome::Compiled
                    }
                    Err(_) => UnitOutcome::Failed,
                };
                self.finish(&entries[idx], &mut reports[idx], outcome, duration);
                results[idx] = Some(result);
            }
        });
    }

    fn finish(
        &self,
        entry: &PlanEntry,
        slot: &mut Option<UnitReport>,
        outcome: UnitOutcome,
        duration: Duration,
    ) {
        let report = UnitReport {
            unit: entry.display.clone(),
            kind: entry.kind,
            outcome,
            duration,
        };
        if let Some(observer) = &self.observer {
            observer(&report);
        }
        *slot = Some(report);
    }

    fn memo_lock(&self) -> std::sync::MutexGuard<'_, HashMap<UnitKey, Artifact>> {
        // The memo only ever gains complete entries, so a panic elsewhere
        // cannot leave it inconsistent.
        self.memo.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn scratch_file(&self, key: UnitKey, ext: &str) -> PathBuf {
        let seq = self.sequence.fetch_add(1, Ordering::Relaxed);
        self.link_script
            .with_file_name(format!("{}-{seq}.{ext}", &key.to_hex()[..16]))
    }

    fn run_unit(&self, entry: &PlanEntry, key: UnitKey) -> Result<Vec<u8>, CompileError> {
        match &entry.job {
            Job::Incore(unit) => self.build_incore(unit, &entry.display, key),
            Job::Orch(unit) => self.build_orch(unit, key),
        }
    }

    fn build_incore(
        &self,
        unit: &IncoreUnit,
        display: &str,
        key: UnitKey,
    ) -> Result<Vec<u8>, CompileError> {
        let builtins = self.builtins(unit.core)?;
        let object = self.scratch_file(key, "o");
        compile::compile_incore(&self.toolchain, &self.root, unit, &object)?;
        let linked = object.with_extension("elf");
        let cwd = self.link_script.parent().unwrap_or(&self.root);
        link::link_incore(
            &self.toolchain,
            &self.link_script,
            &[&object, &builtins],
            &linked,
            cwd,
        )?;
        link::read_image(&linked, display)
    }

    fn build_orch(&self, unit: &OrchUnit, key: UnitKey) -> Result<Vec<u8>, CompileError> {
        let out = self.scratch_file(key, "so");
        compile::compile_orchestration(&self.toolchain, &self.root, unit, &out)
    }

    fn builtins(&self, core: CoreType) -> Result<PathBuf, CompileError> {
        let slot = match core {
            CoreType::Aic => &self.builtins[0],
            CoreType::Aiv => &self.builtins[1],
        };
        let dir = self.link_script.parent().unwrap_or(&self.root);
        slot.get_or_init(|| compile::compile_builtins(&self.toolchain, core, dir).map_err(Arc::new))
            .clone()
            .map_err(CompileError::Shared)
    }
}

/// Puts one callable together from unit results, or lists why it cannot be.
fn assemble(
    spec: &CallableSpec,
    spec_plan: &plan::SpecPlan,
    results: &[Option<UnitResult>],
) -> Result<Arc<ChipCallable>, BuildError> {
    let result_of = |idx: usize| -> UnitResult {
        results
            .get(idx)
            .cloned()
            .flatten()
            .unwrap_or_else(|| Err(Arc::new(internal_missing())))
    };

    let mut failures = Vec::new();
    let orch = &spec.orchestration;
    let orch_so = match result_of(spec_plan.orch) {
        Ok(bytes) => Some(bytes),
        Err(error) => {
            failures.push(UnitFailure::Orchestration {
                name: orch.name.clone(),
                function: orch.function.clone(),
                source: orch.source.clone(),
                error,
            });
            None
        }
    };

    let mut order: Vec<usize> = (0..spec.incores.len()).collect();
    order.sort_by_key(|&i| spec.incores[i].func_id);
    let mut incores = Vec::with_capacity(order.len());
    for i in order {
        let unit = &spec.incores[i];
        let idx = spec_plan.incores.get(i).copied().unwrap_or(usize::MAX);
        match result_of(idx) {
            Ok(text) => incores.push(IncoreImage {
                name: unit.name.clone(),
                func_id: unit.func_id,
                core: unit.core,
                text: text.as_ref().clone(),
            }),
            Err(error) => failures.push(UnitFailure::Incore {
                name: unit.name.clone(),
                func_id: unit.func_id,
                core: unit.core,
                source: unit.source.clone(),
                error,
            }),
        }
    }

    match orch_so {
        Some(orch_so) if failures.is_empty() => Ok(Arc::new(ChipCallable {
            label: spec.label.clone(),
            orch_so: orch_so.as_ref().clone(),
            orch_symbol: orch.function.clone(),
            incores,
        })),
        _ => Err(BuildError {
            label: spec.label.clone(),
            failures,
        }),
    }
}

/// Every planned unit gets a result before assembly; this only guards
/// against a scheduler bug turning into a panic.
fn internal_missing() -> CompileError {
    CompileError::Read {
        path: PathBuf::from("<internal>"),
        source: std::io::Error::other("unit produced no result (scheduler bug)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_and_outputs_can_be_shared_across_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Builder>();
        shareable::<ChipCallable>();
        shareable::<BuildError>();
        shareable::<crate::report::BuildOutput>();
    }

    #[test]
    fn missing_root_is_a_setup_error() {
        let tc = Toolchain::builtin("a5sim").expect("toolchain");
        let err = Builder::new("/definitely/not/a/root", tc, BuildOptions::default())
            .expect_err("no root");
        assert!(err.to_string().contains("/definitely/not/a/root"), "{err}");
    }
}
