//! The CPU stages of a case: fixtures, scalar arguments and the golden.
//!
//! [`CpuStages`] owns what these need (the builder, the golden registry,
//! the golden thread pool) and nothing that touches a card, so `scene run`
//! and `scene precompile` share it: pass 1 of a two-pass run is exactly
//! the CPU half of a one-pass run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use scene_golden::{DType, Tensor};
use scene_kernels::{Builder, ChipCallable};

use crate::compare::Comparison;
use crate::compile::{CompiledScenes, compile_builder, compile_scenes};
use crate::config::RunConfig;
use crate::golden::python::PyError;
pub use crate::golden::stage::build_fixtures;
use crate::golden::stage::{CodeIdentityError, Fixtures, GoldenOutcome, GoldenStage};
use crate::golden::{GoldenCtx, GoldenOutputs, GoldenRegistry};
use crate::report::{CaseFailure, CaseReport};
use crate::scene::expr::Num;
use crate::scene::{Case, ScalarSpec, Scene};
use crate::select::{SelectedCase, distinct_scenes};

/// Why the CPU stages could not be set up at all.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("toolchain: {0}")]
    Toolchain(#[from] scene_kernels::BuildSetupError),
    #[error("golden thread pool: {0}")]
    GoldenPool(#[from] rayon::ThreadPoolBuildError),
    #[error("card pool: {0}")]
    CardPool(#[from] scene_device::DeviceError),
    /// The runtime library the run would load is not there (checked
    /// before any case; it is loaded only by a device worker holding a
    /// card).
    #[error("{0}")]
    Runtime(#[from] crate::device::RuntimeLibError),
}

/// Why a case has no golden.
#[derive(Debug, thiserror::Error)]
pub enum CaseGoldenError {
    /// Python's `compute_golden` failed (or its worker).
    #[error("{0}")]
    Python(#[from] PyError),
    #[error("{0}")]
    CodeIdentity(#[from] CodeIdentityError),
    #[error(
        "{}: golden `{golden}` is not registered (registered: {registered})",
        manifest.display()
    )]
    NotRegistered {
        manifest: PathBuf,
        golden: String,
        registered: String,
    },
    #[error("{0}")]
    Scalars(#[from] ScalarError),
    /// The registered Rust golden returned an error.
    #[error("golden `{golden}`: {source}")]
    Failed {
        golden: String,
        #[source]
        source: crate::golden::GoldenError,
    },
    #[error("golden `{golden}` returned no value for output tensor `{tensor}`")]
    MissingOutput { golden: String, tensor: String },
}

/// Why a case's scalar arguments cannot be passed as declared.
#[derive(Debug, thiserror::Error)]
pub enum ScalarError {
    #[error("case `{case}` resolves {resolved} scalars, the scene declares {declared}")]
    Count {
        case: String,
        resolved: usize,
        declared: usize,
    },
    #[error("scalar `{name}`: {value} is not an integer ({dtype})")]
    NotInteger {
        name: String,
        value: f64,
        dtype: DType,
    },
    #[error("scalar `{name}`: dtype {dtype} is not supported for scalars")]
    UnsupportedDType { name: String, dtype: DType },
    #[error("scalar `{name}`: {value} is out of range for {dtype}")]
    OutOfRange {
        name: String,
        value: i64,
        dtype: DType,
    },
    #[error("scalar `{name}`: an integer scalar ({dtype}) needs an integer value")]
    NeedsInteger { name: String, dtype: DType },
}

/// A case between its CPU stages and its device stage: everything the card
/// needs, and what the comparison will judge against.
#[derive(Debug)]
pub struct Prepared {
    pub sel: SelectedCase,
    pub callable: Arc<ChipCallable>,
    /// Every tensor argument, in signature order.
    pub inputs: Vec<(String, Tensor)>,
    /// Raw bits of the scalar arguments, in signature order.
    pub scalars: Vec<u64>,
    pub golden: GoldenOutputs,
    /// Phases so far (compile, fixtures, golden).
    pub report: CaseReport,
    pub started: Instant,
}

/// A case's CPU stages done, its compiled callable not attached yet
/// ([`CpuStages::prepare_cpu`], then [`CpuStages::attach`]).
#[derive(Debug)]
pub struct CpuPrepared {
    sel: SelectedCase,
    inputs: Vec<(String, Tensor)>,
    scalars: Vec<u64>,
    golden: GoldenOutputs,
    report: CaseReport,
    started: Instant,
}

/// `report` failed with `failure`, its wall time counted from `started`.
fn failed(mut report: CaseReport, failure: CaseFailure, started: Instant) -> Box<CaseReport> {
    report.fail_with(failure);
    report.wall_s = started.elapsed().as_secs_f64();
    Box::new(report)
}

/// The compiled callable of scene `name`, or why the case fails at compile.
fn callable_of(compiled: &CompiledScenes, name: &str) -> Result<Arc<ChipCallable>, CaseFailure> {
    match compiled.callables.get(name) {
        Some(Ok(c)) => Ok(Arc::clone(c)),
        Some(Err(e)) => Err(CaseFailure::Compile(e.to_string())),
        None => Err(CaseFailure::Compile(
            "scene was not part of the compile plan".into(),
        )),
    }
}

/// Compile, fixtures and goldens: the stages that never need a card.
pub struct CpuStages {
    config: RunConfig,
    builder: Builder,
    registry: GoldenRegistry,
    golden_pool: rayon::ThreadPool,
    /// Python worker and golden cache.
    goldens: GoldenStage,
    /// What decides a case's device memory besides its scene.
    memory: crate::device_memory::MemorySettings,
    /// Level-3 `[[steps]]`: the run's C host functions, each built once
    /// (or installed from a bundle slot).
    hosts: crate::host_step::HostBuilds,
}

impl std::fmt::Debug for CpuStages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuStages")
            .field("platform", &self.config.platform.name())
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl CpuStages {
    pub fn new(config: RunConfig, registry: GoldenRegistry) -> Result<Self, SetupError> {
        let builder = compile_builder(&config)?;
        let golden_pool = scene_golden::reference::try_golden_pool(config.golden_threads)?;
        let goldens = GoldenStage::new(&config, builder.cache());
        Ok(Self {
            hosts: Default::default(),
            memory: crate::device_memory::MemorySettings::of(&config),
            config,
            builder,
            registry,
            golden_pool,
            goldens,
        })
    }

    /// The run's C host functions (level-3 `[[steps]]`).
    pub fn hosts(&self) -> &crate::host_step::HostBuilds {
        &self.hosts
    }

    /// The executable of every C host step of `sel`'s scene, by step
    /// index, built on first use; the error names the scene, the step and
    /// the function.
    pub fn host_executables(
        &self,
        sel: &SelectedCase,
    ) -> Result<
        std::collections::BTreeMap<usize, std::path::PathBuf>,
        crate::host_step::StepBuildError,
    > {
        let scene = &sel.scene;
        let mut out = std::collections::BTreeMap::new();
        for (i, step) in scene.steps.iter().enumerate() {
            if let crate::scene::steps::StepKind::HostC { source, function } = &step.kind {
                let exe = self
                    .hosts
                    .executable(&self.builder, &self.config, scene, source, function)
                    .map_err(|error| crate::host_step::StepBuildError {
                        scene: scene.name.clone(),
                        step: i,
                        kind: step.kind.to_string(),
                        error,
                    })?;
                out.insert(i, exe);
            }
        }
        Ok(out)
    }

    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    pub fn builder(&self) -> &Builder {
        &self.builder
    }

    /// Replaces the builder (e.g. one with a progress observer).
    pub fn with_builder(mut self, builder: Builder) -> Self {
        if let Some(cache) = builder.cache() {
            self.goldens.use_kernel_cache(cache);
        }
        self.builder = builder;
        self
    }

    /// The managed Python environments the run used so far (`--explain`).
    pub fn python_environments(&self) -> Vec<crate::golden::python::provision::ManagedEnv> {
        self.goldens.python().environments()
    }

    /// The run's Python workers (Python comparisons run in them).
    pub fn python(&self) -> &crate::golden::python::PythonRunner {
        self.goldens.python()
    }

    pub fn golden_pool(&self) -> &rayon::ThreadPool {
        &self.golden_pool
    }

    /// When every case of `cases` has Python goldens or fixtures, so none
    /// can proceed without Python: starts the run's Python worker (which
    /// each of them would start first) and returns its message when no
    /// usable interpreter is there (none on `PATH`, no numpy). With other
    /// cases selected too, those run and the Python ones fail with that
    /// message; the errors of one case's Python code stay that case's.
    pub fn check_python(&self, cases: &[SelectedCase]) -> Result<(), PyError> {
        if cases.is_empty() || !cases.iter().all(|c| c.scene.python.any()) {
            return Ok(());
        }
        // Each scene's interpreter (its requirement set may differ): the
        // run cannot proceed only when none of them is usable.
        let mut first_message = None;
        for scene in distinct_scenes(cases) {
            match self.goldens.python().versions(&scene) {
                Err(e @ PyError::Unavailable(_)) => {
                    first_message.get_or_insert(e);
                }
                _ => return Ok(()),
            }
        }
        first_message.map_or(Ok(()), Err)
    }

    /// Compiles the callables of every scene used by `cases` as one plan.
    /// Their C host steps' programs are built in the same plan and handed
    /// to [`CpuStages::hosts`].
    pub fn compile(&self, cases: &[SelectedCase]) -> CompiledScenes {
        let compiled = compile_scenes(&self.builder, &self.config, &distinct_scenes(cases));
        self.hosts.add_built(&compiled.hosts);
        compiled
    }

    /// The case's CPU stages with its compiled callable attached:
    /// [`CpuStages::prepare_cpu`] knowing the compile's outcome, then
    /// [`CpuStages::attach`].
    pub fn prepare(
        &self,
        sel: &SelectedCase,
        compiled: &CompiledScenes,
    ) -> Result<Prepared, Box<CaseReport>> {
        let cpu = self.prepare_cpu(sel, Some(compiled))?;
        self.attach(cpu, compiled)
    }

    /// Everything of a case that needs neither a card nor its compiled
    /// callable: its checks, fixtures and golden. With `compiled` known
    /// (the compile is over) a scene that failed to build fails the case
    /// first, without fixtures or golden; without it (the compile still
    /// running, `Session::run`), they are made meanwhile and a compile
    /// failure is reported by [`CpuStages::attach`].
    pub fn prepare_cpu(
        &self,
        sel: &SelectedCase,
        compiled: Option<&CompiledScenes>,
    ) -> Result<CpuPrepared, Box<CaseReport>> {
        let started = Instant::now();
        let scene = &sel.scene;
        let case = sel.case();
        let mut report = CaseReport::new(&scene.name, &case.name);
        let fail = |report, failure| failed(report, failure, started);
        // A custom comparison that is not registered (or gets the wrong
        // arguments) fails the case before anything is built or run.
        if let Err(e) = self.check_comparisons(sel) {
            return Err(fail(report, CaseFailure::Compare(e.to_string())));
        }
        if let Some(compiled) = compiled {
            report.phases.compile_s = compiled.compile_s.get(&scene.name).copied().unwrap_or(0.0);
            if let Err(failure) = callable_of(compiled, &scene.name) {
                return Err(fail(report, failure));
            }
            // Level 3's C host functions, built with the callables (in the
            // same plan, through the kernel cache), before any card: one
            // that does not build fails the case at compile.
            if let Err(e) = self.host_executables(sel) {
                return Err(fail(report, CaseFailure::Compile(e.to_string())));
            }
        }

        // Before allocating: a case too large for this machine fails alone,
        // with a message, instead of aborting the process.
        if let Some(bound) = self.config.max_case_bytes {
            let runs = self.config.warmup.saturating_add(self.config.rounds.max(1));
            let bytes = case_bytes_for_runs(scene, case, runs);
            if bytes.is_none_or(|b| b > bound) {
                return Err(fail(report, CaseFailure::TooLarge { bytes, bound }));
            }
        }
        // Then, still before anything is built (issue 30): a case whose
        // tensors cannot fit the device memory it would get fails now,
        // naming the setting, not with the runtime's OOM after its
        // fixtures and golden. (The host bound goes first: a case this
        // machine cannot hold is that, whatever the device.)
        if let Err(e) = self.check_device_memory(sel) {
            return Err(fail(report, CaseFailure::DeviceMemory(e)));
        }
        let t = Instant::now();
        let Fixtures {
            inputs,
            deterministic,
        } = match self.goldens.fixtures(scene, case) {
            Ok(f) => f,
            Err(e) => return Err(fail(report, CaseFailure::Fixtures(e.to_string()))),
        };
        let scalars = match scalar_bits(scene, case) {
            Ok(s) => s,
            Err(e) => return Err(fail(report, CaseFailure::Fixtures(e.to_string()))),
        };
        report.phases.fixtures_s = t.elapsed().as_secs_f64();

        let t = Instant::now();
        let golden = match self.golden(scene, case, &inputs, deterministic) {
            Ok((g, outcome)) => {
                report.golden_cached = outcome.cached;
                report.golden_computed = !outcome.cached && !scene.case_skips_every_output(case);
                report.golden_miss = outcome.recomputed_because;
                g
            }
            Err(e) => {
                report.golden_computed = true;
                return Err(fail(report, CaseFailure::Golden(e.to_string())));
            }
        };
        report.phases.golden_s = t.elapsed().as_secs_f64();
        Ok(CpuPrepared {
            sel: sel.clone(),
            inputs,
            scalars,
            golden,
            report,
            started,
        })
    }

    /// `cpu` with its scene's compiled callable: the case fails at compile
    /// if its callable (or a level-3 C host function) did not build.
    pub fn attach(
        &self,
        cpu: CpuPrepared,
        compiled: &CompiledScenes,
    ) -> Result<Prepared, Box<CaseReport>> {
        let CpuPrepared {
            sel,
            inputs,
            scalars,
            golden,
            mut report,
            started,
        } = cpu;
        let name = &sel.scene.name;
        report.phases.compile_s = compiled.compile_s.get(name).copied().unwrap_or(0.0);
        let fail = |report, failure| failed(report, failure, started);
        let callable = match callable_of(compiled, name) {
            Ok(c) => c,
            Err(failure) => return Err(fail(report, failure)),
        };
        // Built (or found failed) once per run and remembered
        // (`HostBuilds`): asked again here, it is a lookup.
        if let Err(e) = self.host_executables(&sel) {
            return Err(fail(report, CaseFailure::Compile(e.to_string())));
        }
        Ok(Prepared {
            sel,
            callable,
            inputs,
            scalars,
            golden,
            report,
            started,
        })
    }

    /// Every custom comparison of the case is registered and gets the
    /// arguments it takes; the error names the file, field and case.
    pub fn check_comparisons(&self, sel: &SelectedCase) -> Result<(), CustomComparisonError> {
        check_custom_comparisons(&self.registry, &sel.scene, sel.case())
    }

    /// The case's argument tensors fit the device memory it would run
    /// with (`device_memory`, issue 30); for bundle slots, whose CPU
    /// stages ran in pass 1.
    pub fn check_device_memory(
        &self,
        sel: &SelectedCase,
    ) -> Result<(), crate::device_memory::DeviceMemoryError> {
        crate::device_memory::check(&self.memory, &sel.scene, sel.case())
    }

    /// The registry of goldens and comparisons.
    pub fn registry(&self) -> &GoldenRegistry {
        &self.registry
    }

    /// The case's golden (from the golden cache, or computed: the
    /// registered Rust function or the scene's Python `compute_golden`),
    /// checked to cover every output tensor.
    fn golden(
        &self,
        scene: &Scene,
        case: &Case,
        inputs: &[(String, Tensor)],
        deterministic: bool,
    ) -> Result<(GoldenOutputs, GoldenOutcome), CaseGoldenError> {
        // Nothing to compare: the golden is not called (and need not be
        // registered); outputs are still checked for NaN / inf.
        if scene.case_skips_every_output(case) {
            let outcome = GoldenOutcome {
                cached: false,
                recomputed_because: None,
            };
            return Ok((GoldenOutputs::new(), outcome));
        }
        let compute = || match &scene.python.golden {
            Some(file) => Ok(self
                .goldens
                .python()
                .compute_golden(scene, case, file, inputs)?),
            None => compute_golden(
                &self.registry,
                &self.golden_pool,
                self.config.golden_threads,
                scene,
                case,
                inputs,
            ),
        };
        let (golden, outcome) =
            self.goldens
                .golden(&self.registry, scene, case, inputs, deterministic, compute)?;
        match missing_golden_output(scene, case, &golden) {
            Some(name) => Err(missing_golden(scene, name)),
            None => Ok((golden, outcome)),
        }
    }
}

/// The first output tensor of `scene` that `case` compares and `golden`
/// has no value for (outputs skipped with `skip_golden` need none).
pub fn missing_golden_output<'s>(
    scene: &'s Scene,
    case: &Case,
    golden: &GoldenOutputs,
) -> Option<&'s str> {
    scene
        .tensors
        .iter()
        .enumerate()
        .filter(|(i, t)| {
            t.direction.is_output()
                && !matches!(scene.comparison_for(case, *i), Some(Comparison::Skipped))
        })
        .find(|(_, t)| golden.get(&t.name).is_none())
        .map(|(_, t)| t.name.as_str())
}

/// What a case whose golden lacks output `name` fails with.
pub fn missing_golden(scene: &Scene, name: &str) -> CaseGoldenError {
    CaseGoldenError::MissingOutput {
        golden: scene.golden.clone(),
        tensor: name.to_owned(),
    }
}

/// [`missing_golden`]'s message (the compare stage's problem line).
pub fn missing_golden_message(scene: &Scene, name: &str) -> String {
    missing_golden(scene, name).to_string()
}

/// The golden of one case: the registered function `scene.golden` on
/// `inputs`, run on `pool`.
pub fn compute_golden(
    registry: &GoldenRegistry,
    pool: &rayon::ThreadPool,
    threads: usize,
    scene: &Scene,
    case: &Case,
    inputs: &[(String, Tensor)],
) -> Result<GoldenOutputs, CaseGoldenError> {
    let Some(golden_fn) = registry.get(&scene.golden) else {
        return Err(CaseGoldenError::NotRegistered {
            manifest: scene.manifest.clone(),
            golden: scene.golden.clone(),
            registered: registry.names().collect::<Vec<_>>().join(", "),
        });
    };
    let scalars = scalar_values(scene, case)?;
    let int_scalars = int_scalar_values(scene, case)?;
    let int_params = case.int_params();
    let ctx = GoldenCtx::new(&scene.name, &case.name, &int_params, inputs, threads)
        .with_values(&case.values)
        .with_scalars(&scalars)
        .with_int_scalars(&int_scalars);
    pool.install(|| golden_fn(&ctx))
        .map_err(|source| CaseGoldenError::Failed {
            golden: scene.golden.clone(),
            source,
        })
}

/// A custom comparison of a case that cannot run; it names the file, the
/// field and the case.
#[derive(Debug, thiserror::Error)]
#[error(
    "{}: `tensors[{index}].compare{}`: case `{case}`: tensor `{tensor}`: {problem}",
    manifest.display(),
    problem.field()
)]
pub struct CustomComparisonError {
    pub manifest: PathBuf,
    /// The tensor's index in `scene.toml`'s `[[tensors]]`.
    pub index: usize,
    pub case: String,
    pub tensor: String,
    pub problem: Box<CustomComparisonProblem>,
}

/// What is wrong with a custom comparison.
#[derive(Debug, thiserror::Error)]
pub enum CustomComparisonProblem {
    #[error("comparison `{name}` is not registered (registered: {registered})")]
    NotRegistered { name: String, registered: String },
    #[error("comparison `{name}` takes no argument `{arg}` (it takes: {takes})")]
    UnknownArgument {
        name: String,
        arg: String,
        takes: String,
    },
    #[error("comparison `{name}` needs argument `{arg}` (it takes: {takes})")]
    MissingArgument {
        name: String,
        arg: String,
        takes: String,
    },
}

impl CustomComparisonProblem {
    /// The field under `compare` the problem is in: `.custom`, `.<arg>`,
    /// or `compare` itself.
    fn field(&self) -> String {
        match self {
            Self::NotRegistered { .. } => ".custom".to_owned(),
            Self::UnknownArgument { arg, .. } => format!(".{arg}"),
            Self::MissingArgument { .. } => String::new(),
        }
    }
}

/// Checks, before any device work, that every custom comparison of the
/// case is registered and gets exactly the arguments it takes.
pub fn check_custom_comparisons(
    registry: &GoldenRegistry,
    scene: &Scene,
    case: &Case,
) -> Result<(), CustomComparisonError> {
    for (j, (t, ct)) in scene.tensors.iter().zip(&case.tensors).enumerate() {
        let Some(Comparison::Custom { name, args }) = &ct.comparison else {
            continue;
        };
        let at = |problem| CustomComparisonError {
            manifest: scene.manifest.clone(),
            index: j,
            case: case.name.clone(),
            tensor: t.name.clone(),
            problem: Box::new(problem),
        };
        let Some(custom) = registry.comparison(name) else {
            return Err(at(CustomComparisonProblem::NotRegistered {
                name: name.clone(),
                registered: registry.comparison_names().collect::<Vec<_>>().join(", "),
            }));
        };
        if let Some(extra) = args.keys().find(|k| !custom.args.contains(&k.as_str())) {
            return Err(at(CustomComparisonProblem::UnknownArgument {
                name: name.clone(),
                arg: extra.clone(),
                takes: custom.args.join(", "),
            }));
        }
        if let Some(missing) = custom.args.iter().find(|a| !args.contains_key(**a)) {
            return Err(at(CustomComparisonProblem::MissingArgument {
                name: name.clone(),
                arg: (*missing).to_owned(),
                takes: custom.args.join(", "),
            }));
        }
    }
    Ok(())
}

/// Bytes of the case's tensors (each tensor once, inputs and outputs);
/// `None` when the sum does not fit a `u64`.
pub fn case_bytes(_scene: &Scene, case: &Case) -> Option<u64> {
    case.tensors.iter().try_fold(0u64, |total, t| {
        let elements = t
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(u64::try_from(d).ok()?))?;
        let bytes = elements.checked_mul(u64::try_from(t.dtype.size_of()).ok()?)?;
        total.checked_add(bytes)
    })
}

/// [`case_bytes`] with the outputs held once per run: a session of
/// `--warmup` + `--rounds` runs gives each run its own output room and
/// reads every run's outputs back.
pub fn case_bytes_for_runs(scene: &Scene, case: &Case, runs: u32) -> Option<u64> {
    let all = case_bytes(scene, case)?;
    let outputs = scene
        .tensors
        .iter()
        .zip(&case.tensors)
        .filter(|(spec, _)| spec.direction.is_output())
        .try_fold(0u64, |total, (_, t)| {
            let elements = t
                .shape
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(u64::try_from(d).ok()?))?;
            total.checked_add(elements.checked_mul(u64::try_from(t.dtype.size_of()).ok()?)?)
        })?;
    outputs
        .checked_mul(u64::from(runs.max(1) - 1))
        .and_then(|more| all.checked_add(more))
}

/// The case's scalar values, paired with their specs.
fn case_scalars<'s>(
    scene: &'s Scene,
    case: &'s Case,
) -> Result<impl Iterator<Item = (&'s ScalarSpec, Num)>, ScalarError> {
    if case.scalars.len() != scene.scalars.len() {
        return Err(ScalarError::Count {
            case: case.name.clone(),
            resolved: case.scalars.len(),
            declared: scene.scalars.len(),
        });
    }
    Ok(scene.scalars.iter().zip(case.scalars.iter().copied()))
}

/// The case's scalar arguments as numbers, by name, in signature order.
pub fn scalar_values(scene: &Scene, case: &Case) -> Result<Vec<(String, f64)>, ScalarError> {
    Ok(case_scalars(scene, case)?
        .map(|(s, v)| (s.name.clone(), v.as_f64()))
        .collect())
}

/// The case's integer scalar arguments, exactly, by name in signature order.
pub fn int_scalar_values(scene: &Scene, case: &Case) -> Result<Vec<(String, i64)>, ScalarError> {
    case_scalars(scene, case)?
        .filter(|(s, _)| crate::scene::int_range(s.dtype).is_some())
        .map(|(s, v)| match v {
            Num::Int(i) => Ok((s.name.clone(), i)),
            Num::Float(f) => Err(ScalarError::NotInteger {
                name: s.name.clone(),
                value: f,
                dtype: s.dtype,
            }),
        })
        .collect()
}

/// Raw bits of the case's scalar arguments, as the orchestration receives them.
///
/// Integers never pass through `f64`: an `i64` above 2^53 reaches the
/// device exactly as written (validation at load checked the range).
pub fn scalar_bits(scene: &Scene, case: &Case) -> Result<Vec<u64>, ScalarError> {
    case_scalars(scene, case)?
        .map(|(s, value)| {
            Ok(match (s.dtype, value) {
                (DType::F32, Num::Int(i)) => u64::from((i as f32).to_bits()),
                (DType::F32, Num::Float(f)) => u64::from((f as f32).to_bits()),
                (DType::F64, Num::Int(i)) => (i as f64).to_bits(),
                (DType::F64, Num::Float(f)) => f.to_bits(),
                (DType::F16 | DType::BF16 | DType::Bool, _) => {
                    return Err(ScalarError::UnsupportedDType {
                        name: s.name.clone(),
                        dtype: s.dtype,
                    });
                }
                (dtype, Num::Int(i)) => match crate::scene::int_range(dtype) {
                    Some((lo, hi)) if (lo..=hi).contains(&i) => i as u64,
                    _ => {
                        return Err(ScalarError::OutOfRange {
                            name: s.name.clone(),
                            value: i,
                            dtype,
                        });
                    }
                },
                (dtype, _) => {
                    return Err(ScalarError::NeedsInteger {
                        name: s.name.clone(),
                        dtype,
                    });
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::NumSpec;
    use crate::scene::expr::Value;

    /// An `i64` above 2^53 reaches the device bit for bit.
    #[test]
    fn integer_scalars_are_exact() {
        let big = (1i64 << 53) + 1;
        let case = Case {
            name: "c".into(),
            params: [("N".to_string(), Value::Int(big + 2))]
                .into_iter()
                .collect(),
            values: [("N".to_string(), Value::Int(big + 2))]
                .into_iter()
                .collect(),
            init: Default::default(),
            platforms: None,
            manual: Default::default(),
            seed: 0,
            tensors: vec![],
            scalars: vec![
                Num::Int(big),
                Num::Int(big + 2),
                Num::Int(-1),
                Num::Float(0.5),
            ],
            group: None,
            device_memory: None,
        };
        let scalar = |name: &str, dtype, value| ScalarSpec {
            name: name.into(),
            dtype,
            value,
        };
        let scalars = vec![
            scalar("a", scene_golden::DType::I64, NumSpec::Int(big)),
            scalar("b", scene_golden::DType::I64, NumSpec::Int(0)),
            scalar("c", scene_golden::DType::I32, NumSpec::Int(-1)),
            scalar("d", scene_golden::DType::F32, NumSpec::Float(0.5)),
        ];
        let scene = Scene {
            name: "s".into(),
            dir: "/s".into(),
            manifest: "/s/scene.toml".into(),
            level: 2,
            platforms: vec![],
            golden: "g".into(),
            python: Default::default(),
            tolerance: Default::default(),
            devices: 1,
            device_memory: None,
            group: None,
            orchestration: crate::scene::Orchestration {
                source: "o.c".into(),
                function: "o".into(),
                api: Default::default(),
                signature: vec![],
                include_dirs: vec![],
                defines: vec![],
            },
            incores: vec![],
            args: Default::default(),
            runtime: Default::default(),
            tensors: vec![],
            scalars,
            derived: vec![],
            cases: vec![],
            steps: vec![],
            origin: None,
        };
        let ints = int_scalar_values(&scene, &case).unwrap();
        let names: Vec<&str> = ints.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(ints[0].1, big);
        assert_eq!(ints[1].1, big + 2);
        let int_params = case.int_params();
        let ctx = GoldenCtx::new("s", "c", &int_params, &[], 1).with_int_scalars(&ints);
        assert_eq!(ctx.scalar_i64("a").unwrap(), big);
        assert!(ctx.scalar_i64("zz").is_err());
        let bits = scalar_bits(&scene, &case).unwrap();
        assert_eq!(bits[0], big as u64);
        assert_eq!(bits[1], (big + 2) as u64);
        assert_eq!(bits[2], u64::MAX, "i32 -1 is sign-extended as before");
        assert_eq!(bits[3], u64::from(0.5f32.to_bits()));
    }
}
