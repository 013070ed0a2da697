//! The stage pipeline: compile -> fixtures -> golden -> device -> compare.
//!
//! The order is the point. Everything that needs no card (compiling,
//! fixtures, goldens) is finished before a card is requested; the card lock
//! covers upload, run and download only; the comparison runs after the card
//! is released. The runtime library is loaded only once the card is held
//! ([`scene_device::Runtime::load`] takes the lease to prove it).

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scene_device::{
    AcquireOptions, CallableImage, CardPool, DeviceList, Direction, IncoreImageRef, RunArg,
    Runtime, WaitStatus,
};
use scene_golden::{FixtureSeed, Tensor, assert_close, make_fixture};
use scene_kernels::{
    BuildOptions, Builder, CallableSpec, ChipCallable, IncoreUnit, OrchUnit, Toolchain,
};

use crate::golden::{GoldenCtx, GoldenRegistry};
use crate::report::{CaseReport, CaseStatus, FailureStage, LockInterval, RunReport, unix_seconds};
use crate::scene::{ArgDirection, Case, ParamValue, Scene};
use crate::shape::eval_shape;

/// Everything a run is configured with; built by the CLI or the test target.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Workspace root: compilers run here, with paths relative to it.
    pub root: PathBuf,
    pub platform: String,
    pub compile_workers: NonZeroUsize,
    pub devices: DeviceList,
    pub lock_dir: PathBuf,
    /// Runtime library; `None` = `SCENE_RUNTIME_LIB` or the built sim runtime.
    pub runtime_lib: Option<PathBuf>,
    pub lock_timeout: Option<Duration>,
    /// Thread cap for goldens.
    pub golden_threads: usize,
    /// Header directory of the runtime ABI (scene_kernel.h, scene_orch.h).
    pub abi_include_dir: PathBuf,
}

impl RunConfig {
    /// Defaults for `root`, honouring the environment (`SCENE_DEVICES`,
    /// `TASK_DEVICE`, `SCENE_LOCK_DIR`, `SCENE_RUNTIME_LIB`, `SCENE_PLATFORM`).
    pub fn from_env(root: &Path) -> Result<Self, PipelineError> {
        let platform = std::env::var("SCENE_PLATFORM").unwrap_or_else(|_| "a2a3sim".to_string());
        let devices =
            DeviceList::from_env(None).map_err(|e| PipelineError::Config(e.to_string()))?;
        Ok(Self {
            root: root.to_path_buf(),
            platform,
            compile_workers: std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
            devices,
            lock_dir: scene_device::default_lock_dir(),
            runtime_lib: std::env::var_os("SCENE_RUNTIME_LIB").map(PathBuf::from),
            lock_timeout: None,
            golden_threads: std::thread::available_parallelism()
                .map(|n| n.get().min(8))
                .unwrap_or(1),
            abi_include_dir: scene_device::include_dir(),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("configuration: {0}")]
    Config(String),
    #[error("toolchain: {0}")]
    Toolchain(String),
}

/// One selected `scene::case`.
#[derive(Clone, Debug)]
pub struct SelectedCase {
    pub scene: Arc<Scene>,
    pub case: usize,
}

impl SelectedCase {
    pub fn case(&self) -> &Case {
        &self.scene.cases[self.case]
    }
    pub fn id(&self) -> String {
        format!("{}::{}", self.scene.name, self.case().name)
    }
}

/// Cases of `scenes` enabled on `platform` whose `scene::case` contains
/// `filter`; `manual` cases only when asked or named exactly.
pub fn select_cases(
    scenes: &[Arc<Scene>],
    filter: Option<&str>,
    platform: &str,
    include_manual: bool,
) -> Vec<SelectedCase> {
    let mut out = Vec::new();
    for scene in scenes {
        for (i, case) in scene.cases.iter().enumerate() {
            let sel = SelectedCase {
                scene: Arc::clone(scene),
                case: i,
            };
            let id = sel.id();
            if let Some(f) = filter
                && !id.contains(f)
            {
                continue;
            }
            if !scene.case_enabled_on(case, platform) {
                continue;
            }
            if case.manual && !include_manual && filter != Some(id.as_str()) {
                continue;
            }
            out.push(sel);
        }
    }
    out
}

/// The compile spec of a scene's callable, paths relative to `root`.
pub fn callable_spec(scene: &Scene, root: &Path, abi_include_dir: &Path) -> CallableSpec {
    let rel = |p: &Path| scene.relative_to(root, p);
    let abi_inc = abi_include_dir
        .strip_prefix(root)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| abi_include_dir.to_path_buf());
    let scene_dir = rel(Path::new(""));
    let includes = |dirs: &[PathBuf]| {
        let mut v: Vec<PathBuf> = dirs.iter().map(|d| rel(d)).collect();
        v.push(scene_dir.clone());
        v.push(abi_inc.clone());
        v
    };
    let o = &scene.orchestration;
    CallableSpec {
        label: scene.name.clone(),
        orchestration: OrchUnit {
            name: format!("{}/orchestration", scene.name),
            source: rel(&o.source),
            function: o.function.clone(),
            include_dirs: includes(&o.include_dirs),
            defines: o.defines.clone(),
        },
        incores: scene
            .incores
            .iter()
            .map(|k| IncoreUnit {
                name: format!("{}/{}", scene.name, k.name),
                func_id: k.func_id,
                core: k.core,
                source: rel(&k.source),
                include_dirs: includes(&k.include_dirs),
                defines: k.defines.clone(),
            })
            .collect(),
    }
}

/// Outcome of the compile stage for the scenes of a run.
#[derive(Debug, Default)]
pub struct CompiledScenes {
    pub callables: BTreeMap<String, Result<Arc<ChipCallable>, String>>,
    /// Seconds of compiler work attributed to each scene.
    pub compile_s: BTreeMap<String, f64>,
}

/// A configured harness: one compile plan, one card pool, one golden registry.
pub struct Session {
    pub config: RunConfig,
    registry: GoldenRegistry,
    builder: Builder,
    pool: CardPool,
    runtime_path: Mutex<Option<Result<PathBuf, String>>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Session {
    pub fn new(config: RunConfig, registry: GoldenRegistry) -> Result<Self, PipelineError> {
        let toolchain = Toolchain::for_platform(&config.platform)
            .map_err(|e| PipelineError::Toolchain(e.to_string()))?;
        let builder = Builder::new(
            config.root.clone(),
            toolchain,
            BuildOptions {
                workers: config.compile_workers,
                work_dir: None,
            },
        )
        .map_err(|e| PipelineError::Toolchain(e.to_string()))?;
        let pool = CardPool::new(config.devices.clone(), config.lock_dir.clone())
            .map_err(|e| PipelineError::Config(e.to_string()))?;
        Ok(Self {
            config,
            registry,
            builder,
            pool,
            runtime_path: Mutex::new(None),
        })
    }

    pub fn builder(&self) -> &Builder {
        &self.builder
    }

    /// Compiles the callables of every scene used by `cases` as one plan.
    pub fn compile(&self, cases: &[SelectedCase]) -> CompiledScenes {
        let mut scenes: Vec<&Arc<Scene>> = Vec::new();
        for c in cases {
            if !scenes.iter().any(|s| s.name == c.scene.name) {
                scenes.push(&c.scene);
            }
        }
        let specs: Vec<CallableSpec> = scenes
            .iter()
            .map(|s| callable_spec(s, &self.config.root, &self.config.abi_include_dir))
            .collect();
        let out = self.builder.build_all(&specs);
        let mut compiled = CompiledScenes::default();
        for (scene, result) in scenes.iter().zip(out.callables) {
            compiled
                .callables
                .insert(scene.name.clone(), result.map_err(|e| e.to_string()));
        }
        for unit in &out.units {
            if let Some((scene, _)) = unit.unit.split_once('/') {
                *compiled.compile_s.entry(scene.to_string()).or_default() +=
                    unit.duration.as_secs_f64();
            }
        }
        compiled
    }

    /// Compiles then runs `cases` one after another, calling `on_case` as
    /// each finishes.
    pub fn run(&self, cases: &[SelectedCase], on_case: &mut dyn FnMut(&CaseReport)) -> RunReport {
        let start = Instant::now();
        let compiled = self.compile(cases);
        let mut reports = Vec::with_capacity(cases.len());
        for sel in cases {
            let report = self.run_case(sel, &compiled);
            on_case(&report);
            reports.push(report);
        }
        RunReport::new(
            &self.config.platform,
            reports,
            start.elapsed().as_secs_f64(),
        )
    }

    /// Runs one case whose scene is in `compiled`.
    pub fn run_case(&self, sel: &SelectedCase, compiled: &CompiledScenes) -> CaseReport {
        let start = Instant::now();
        let scene = &sel.scene;
        let case = sel.case();
        let mut report = CaseReport::new(&scene.name, &case.name);
        report.phases.compile_s = compiled.compile_s.get(&scene.name).copied().unwrap_or(0.0);
        let callable = match compiled.callables.get(&scene.name) {
            Some(Ok(c)) => Arc::clone(c),
            Some(Err(e)) => {
                report.fail(FailureStage::Compile, e.clone());
                report.wall_s = start.elapsed().as_secs_f64();
                return report;
            }
            None => {
                report.fail(
                    FailureStage::Compile,
                    "scene was not part of the compile plan",
                );
                report.wall_s = start.elapsed().as_secs_f64();
                return report;
            }
        };
        self.run_stages(sel, &callable, &mut report);
        report.wall_s = start.elapsed().as_secs_f64();
        report
    }

    fn run_stages(&self, sel: &SelectedCase, callable: &ChipCallable, report: &mut CaseReport) {
        let scene = &sel.scene;
        let case = sel.case();

        // Fixtures.
        let t = Instant::now();
        let inputs = match build_fixtures(scene, case) {
            Ok(i) => i,
            Err(e) => return report.fail(FailureStage::Fixtures, e),
        };
        let scalars = match scalar_bits(scene, case) {
            Ok(s) => s,
            Err(e) => return report.fail(FailureStage::Fixtures, e),
        };
        report.phases.fixtures_s = t.elapsed().as_secs_f64();

        // Golden.
        let t = Instant::now();
        let Some(golden_fn) = self.registry.get(&scene.golden) else {
            return report.fail(
                FailureStage::Golden,
                format!(
                    "{}: golden `{}` is not registered (registered: {})",
                    scene.manifest.display(),
                    scene.golden,
                    self.registry.names().collect::<Vec<_>>().join(", ")
                ),
            );
        };
        let ctx = GoldenCtx::new(
            &scene.name,
            &case.name,
            &case.params,
            &inputs,
            self.config.golden_threads,
        );
        let golden =
            match scene_golden::reference::with_thread_cap(self.config.golden_threads, || {
                golden_fn(&ctx)
            }) {
                Ok(g) => g,
                Err(e) => {
                    return report.fail(
                        FailureStage::Golden,
                        format!("golden `{}`: {e}", scene.golden),
                    );
                }
            };
        report.phases.golden_s = t.elapsed().as_secs_f64();

        // Device: the only phase under the card lock.
        let outputs = match self.device_stage(sel, callable, &inputs, &scalars, report) {
            Ok(o) => o,
            Err(e) => return report.fail(FailureStage::Device, e),
        };

        // Compare, after the card is released.
        let t = Instant::now();
        let mut problems = Vec::new();
        for (spec, actual) in scene
            .tensors
            .iter()
            .filter(|t| t.direction.is_output())
            .zip(&outputs)
        {
            let Some(expected) = golden.get(&spec.name) else {
                problems.push(format!(
                    "golden `{}` returned no value for output tensor `{}`",
                    scene.golden, spec.name
                ));
                continue;
            };
            if let Err(m) = assert_close(&spec.name, actual, expected, scene.tolerance_for(spec)) {
                problems.push(m.to_string());
            }
        }
        report.phases.compare_s = t.elapsed().as_secs_f64();
        if !problems.is_empty() {
            report.fail(FailureStage::Compare, problems.join("\n"));
        }
    }

    fn runtime_path(&self) -> Result<PathBuf, String> {
        let mut slot = self.runtime_path.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert_with(|| match &self.config.runtime_lib {
            Some(p) => Ok(p.clone()),
            None => scene_device::default_runtime_path().map_err(|e| e.to_string()),
        })
        .clone()
    }

    /// Acquire, load, upload, run, download, release. Returns the outputs in
    /// declaration order.
    fn device_stage(
        &self,
        sel: &SelectedCase,
        callable: &ChipCallable,
        inputs: &[(String, Tensor)],
        scalars: &[u64],
        report: &mut CaseReport,
    ) -> Result<Vec<Tensor>, String> {
        let scene = &sel.scene;
        let runtime_path = self.runtime_path()?;
        let id = sel.id();
        let wait_start = Instant::now();
        let mut announced = false;
        let mut on_wait = |w: &WaitStatus| {
            if !announced {
                eprintln!("{id}: {w}");
                announced = true;
            }
        };
        let lease = self
            .pool
            .acquire(
                scene.devices,
                &id,
                AcquireOptions {
                    timeout: self.config.lock_timeout,
                    on_wait: Some(&mut on_wait),
                },
            )
            .map_err(|e| format!("acquiring {} card(s): {e}", scene.devices))?;
        report.phases.lock_wait_s = wait_start.elapsed().as_secs_f64();
        let held = Instant::now();
        let acquired_at = unix_seconds(lease.acquired_at());
        report.devices = lease.cards().to_vec();

        let result = (|| {
            let runtime = Runtime::load(&lease, &runtime_path).map_err(|e| e.to_string())?;
            let card = lease.cards()[0];
            let device = runtime
                .open(card, &format!("platform={}", self.config.platform))
                .map_err(|e| format!("opening card {card}: {e}"))?;
            let image = CallableImage {
                orch_so: &callable.orch_so,
                orch_symbol: &callable.orch_symbol,
                incores: callable
                    .incores
                    .iter()
                    .map(|k| IncoreImageRef {
                        func_id: k.func_id,
                        core_type: k.core.as_abi(),
                        image: &k.text,
                    })
                    .collect(),
            };
            let device_start = Instant::now();
            let handle = device.register(&image).map_err(|e| e.to_string())?;
            let mut args = Vec::with_capacity(inputs.len() + scalars.len());
            let mut addrs = Vec::with_capacity(inputs.len());
            for ((name, tensor), spec) in inputs.iter().zip(&scene.tensors) {
                let size = tensor.bytes().len() as u64;
                let addr = device
                    .malloc(size)
                    .map_err(|e| format!("allocating tensor `{name}` ({size} bytes): {e}"))?
                    .addr;
                addrs.push(addr);
                if spec.direction != ArgDirection::Out {
                    device
                        .copy_to(addr, tensor.bytes())
                        .map_err(|e| format!("uploading tensor `{name}`: {e}"))?;
                }
                let direction = match spec.direction {
                    ArgDirection::In => Direction::In,
                    ArgDirection::Out => Direction::Out,
                    _ => Direction::InOut,
                };
                args.push(RunArg::Tensor {
                    direction,
                    addr,
                    size,
                });
            }
            args.extend(scalars.iter().map(|&s| RunArg::Scalar(s)));
            device.run(handle, &args).map_err(|e| format!("run: {e}"))?;
            let mut outputs = Vec::new();
            for (((name, tensor), spec), &addr) in inputs.iter().zip(&scene.tensors).zip(&addrs) {
                if spec.direction.is_output() {
                    let mut out = Tensor::zeros(tensor.dtype(), tensor.shape());
                    device
                        .copy_from(addr, out.bytes_mut())
                        .map_err(|e| format!("downloading tensor `{name}`: {e}"))?;
                    outputs.push(out);
                }
            }
            for addr in addrs {
                device.free(addr).map_err(|e| e.to_string())?;
            }
            let _ = device.unregister(handle);
            Ok::<_, String>((outputs, device_start.elapsed()))
        })();
        let released_at = unix_seconds(lease.release());
        report.phases.lock_held_s = held.elapsed().as_secs_f64();
        report.lock = Some(LockInterval {
            acquired_at,
            released_at,
        });
        let (outputs, device_time) = result?;
        report.phases.device_s = device_time.as_secs_f64();
        Ok(outputs)
    }
}

/// The case's input fixtures, one per tensor in signature order.
pub fn build_fixtures(scene: &Scene, case: &Case) -> Result<Vec<(String, Tensor)>, String> {
    scene
        .tensors
        .iter()
        .map(|t| {
            let shape = eval_shape(&t.shape, &case.params)
                .map_err(|e| format!("tensor `{}`: {e}", t.name))?;
            let seed = FixtureSeed {
                scene: &scene.name,
                case: &case.name,
                tensor: &t.name,
                seed: t.seed ^ case.seed.rotate_left(32),
            };
            Ok((
                t.name.clone(),
                make_fixture(t.dtype, &shape, &t.init, &seed),
            ))
        })
        .collect()
}

/// Raw bits of the case's scalar arguments.
pub fn scalar_bits(scene: &Scene, case: &Case) -> Result<Vec<u64>, String> {
    use scene_golden::DType;
    scene
        .scalars
        .iter()
        .map(|s| {
            let v = match &s.value {
                ParamValue::Int(i) => *i as f64,
                ParamValue::Float(f) => *f,
                ParamValue::Param(p) => *case
                    .params
                    .get(p)
                    .ok_or_else(|| format!("scalar `{}`: param `{p}` not bound", s.name))?
                    as f64,
            };
            Ok(match s.dtype {
                DType::F32 => u64::from((v as f32).to_bits()),
                DType::F64 => v.to_bits(),
                DType::F16 | DType::BF16 | DType::Bool => {
                    return Err(format!(
                        "scalar `{}`: dtype {} is not supported for scalars",
                        s.name, s.dtype
                    ));
                }
                _ => (v as i64) as u64,
            })
        })
        .collect()
}

/// `passed` if every report passed.
pub fn status_word(status: CaseStatus) -> &'static str {
    match status {
        CaseStatus::Passed => "PASS",
        CaseStatus::Failed => "FAIL",
        CaseStatus::Skipped => "SKIP",
    }
}
