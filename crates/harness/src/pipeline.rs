//! The stage pipeline: compile -> fixtures -> golden -> device -> compare.
//!
//! The order is the point. Everything that needs no card (compiling,
//! fixtures, goldens) is finished before a card is requested; the card lock
//! covers upload, run and download only; the comparison runs after the card
//! is released. The runtime library is loaded only once the card is held
//! ([`scene_device::Runtime::load`] takes the lease to prove it).

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use scene_device::{
    AcquireOptions, CallableImage, CardLease, CardPool, DeviceList, DeviceSession, Direction,
    IncoreImageRef, RunArg, Runtime, RuntimeError, WaitStatus,
};
use scene_golden::{FixtureSeed, Tensor, assert_close, make_fixture};
use scene_kernels::{
    BuildOptions, Builder, CacheConfig, CallableSpec, ChipCallable, IncoreUnit, OrchUnit, Toolchain,
};

use crate::bundle::SlotData;
use crate::golden::{GoldenCtx, GoldenOutputs, GoldenRegistry};
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
    /// Thread cap for goldens and comparisons (`--golden-threads`,
    /// `SCENE_GOLDEN_THREADS`; default: available parallelism, at most 8).
    pub golden_threads: usize,
    /// Header directory of the runtime ABI (scene_kernel.h, scene_orch.h).
    pub abi_include_dir: PathBuf,
    /// Deadline of one device run; a run past it is stopped and its card
    /// retired (a hung kernel cannot be trusted to stop).
    pub case_timeout: Option<Duration>,
    /// Extra `key=value;...` options for the runtime's `open`
    /// (`SCENE_RUNTIME_OPTIONS`), e.g. `aiv=4` or test-only fault knobs.
    pub runtime_options: String,
    /// `--dump DIR`: write every case's tensors under `DIR/<scene>/<case>/`.
    pub dump_dir: Option<PathBuf>,
    /// Where a failing case is dumped when `dump_dir` is unset
    /// (`SCENE_FAILURE_DUMP_DIR`, default `<root>/target/scene-dumps`).
    pub failure_dump_root: PathBuf,
    /// Narrate card acquisition and release on stderr.
    pub verbose: bool,
    /// Persistent kernel cache (`--cache-dir` / `SCENE_CACHE_DIR`, default
    /// `<root>/target/scene-cache`); `None` compiles without one.
    pub cache_dir: Option<PathBuf>,
    /// `--hold-card`: the one-pass shape (card(s) taken before compiling,
    /// held until the run ends), kept to measure what two passes save.
    pub hold_card: bool,
}

/// Default `--case-timeout`: generous for the simulator, finite so a hung
/// kernel never holds a card forever.
pub const DEFAULT_CASE_TIMEOUT: Duration = Duration::from_secs(300);

impl RunConfig {
    /// Defaults for `root`, honouring the environment (`SCENE_DEVICES`,
    /// `TASK_DEVICE`, `SCENE_LOCK_DIR`, `SCENE_RUNTIME_LIB`, `SCENE_PLATFORM`).
    pub fn from_env(root: &Path) -> Result<Self, PipelineError> {
        let platform = std::env::var("SCENE_PLATFORM").unwrap_or_else(|_| "a2a3sim".to_string());
        let devices = DeviceList::resolve(
            None,
            std::env::var("SCENE_DEVICES").ok().as_deref(),
            std::env::var("TASK_DEVICE").ok().as_deref(),
        )
        .map_err(|e| PipelineError::Config(e.to_string()))?;
        Ok(Self {
            root: root.to_path_buf(),
            platform,
            compile_workers: std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
            devices,
            lock_dir: scene_device::resolve_lock_dir(
                std::env::var_os("SCENE_LOCK_DIR").as_deref().map(Path::new),
                std::env::var("USER").ok().as_deref(),
            ),
            runtime_lib: std::env::var_os("SCENE_RUNTIME_LIB").map(PathBuf::from),
            lock_timeout: None,
            golden_threads: match std::env::var("SCENE_GOLDEN_THREADS") {
                Ok(v) => v
                    .trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        PipelineError::Config(format!(
                            "SCENE_GOLDEN_THREADS=`{v}` is not a positive number"
                        ))
                    })?,
                Err(_) => scene_golden::reference::default_thread_cap(),
            },
            abi_include_dir: scene_device::include_dir(),
            case_timeout: Some(DEFAULT_CASE_TIMEOUT),
            runtime_options: std::env::var("SCENE_RUNTIME_OPTIONS").unwrap_or_default(),
            dump_dir: None,
            failure_dump_root: std::env::var_os("SCENE_FAILURE_DUMP_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target").join("scene-dumps")),
            verbose: false,
            cache_dir: Some(crate::cache_cmd::cache_dir(root)),
            hold_card: false,
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

/// The scenes of `cases`, each once, in selection order.
pub fn distinct_scenes(cases: &[SelectedCase]) -> Vec<Arc<Scene>> {
    let mut scenes: Vec<Arc<Scene>> = Vec::new();
    for c in cases {
        if !scenes.iter().any(|s| s.name == c.scene.name) {
            scenes.push(Arc::clone(&c.scene));
        }
    }
    scenes
}

/// The compile spec of a scene's callable, paths relative to `root`.
pub fn callable_spec(scene: &Scene, root: &Path, abi_include_dir: &Path) -> CallableSpec {
    let rel = |p: &Path| scene.relative_to(root, p);
    let abi_inc = abi_include_dir
        .strip_prefix(root)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| abi_include_dir.to_path_buf());
    // Only the declared dirs and the ABI headers: no implicit per-scene dir,
    // so a kernel shared by several scenes is one unit with one cache key.
    let includes = |dirs: &[PathBuf]| {
        let mut v: Vec<PathBuf> = dirs.iter().map(|d| rel(d)).collect();
        v.push(abi_inc.clone());
        v
    };
    let o = &scene.orchestration;
    CallableSpec {
        label: scene.name.clone(),
        orchestration: OrchUnit {
            name: "orchestration".to_string(),
            source: rel(&o.source),
            function: o.function.clone(),
            include_dirs: includes(&o.include_dirs),
            defines: o.defines.clone(),
        },
        incores: scene
            .incores
            .iter()
            .map(|k| IncoreUnit {
                name: k.name.clone(),
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

/// The builder a run compiles with (toolchain, worker budget, cache).
/// `scene compile` uses it directly: same units, same keys as `scene run`,
/// but no card pool and no runtime.
pub fn compile_builder(config: &RunConfig) -> Result<Builder, PipelineError> {
    let toolchain = Toolchain::for_platform(&config.platform)
        .map_err(|e| PipelineError::Toolchain(e.to_string()))?;
    Builder::new(
        config.root.clone(),
        toolchain,
        BuildOptions {
            workers: config.compile_workers,
            work_dir: None,
            cache: config.cache_dir.clone().map(CacheConfig::new),
        },
    )
    .map_err(|e| PipelineError::Toolchain(e.to_string()))
}

/// A configured harness: one compile plan, one card pool, one golden registry.
pub struct Session {
    pub config: RunConfig,
    registry: GoldenRegistry,
    builder: Builder,
    pool: CardPool,
    golden_pool: rayon::ThreadPool,
    runtime_path: Mutex<Option<Result<PathBuf, String>>>,
    /// `run --from DIR`: precompiled cases, used instead of compiling.
    bundle: Option<crate::bundle::Bundle>,
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
        let builder = compile_builder(&config)?;
        let pool = CardPool::new(config.devices.clone(), config.lock_dir.clone())
            .map_err(|e| PipelineError::Config(e.to_string()))?;
        let golden_pool = scene_golden::reference::try_golden_pool(config.golden_threads)
            .map_err(|e| PipelineError::Config(format!("golden thread pool: {e}")))?;
        Ok(Self {
            config,
            registry,
            builder,
            pool,
            golden_pool,
            runtime_path: Mutex::new(None),
            bundle: None,
        })
    }

    pub fn builder(&self) -> &Builder {
        &self.builder
    }

    /// Runs cases from `bundle` where its slots are valid (see
    /// [`crate::bundle`]); other cases are compiled as usual.
    pub fn with_bundle(mut self, bundle: crate::bundle::Bundle) -> Self {
        self.bundle = Some(bundle);
        self
    }

    /// Compiles the callables of every scene used by `cases` as one plan.
    pub fn compile(&self, cases: &[SelectedCase]) -> CompiledScenes {
        let scenes = distinct_scenes(cases);
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

    /// Compiles then runs `cases`, calling `on_case` (on this thread) as each
    /// finishes. Returns the reports in selection order.
    ///
    /// CPU work and device work overlap: one thread prepares fixtures and
    /// goldens case after case, while one device worker per healthy card
    /// takes prepared cases, holds a card only for upload/run/download, and
    /// compares after releasing it. Cards therefore never wait on the CPU
    /// when prepared work exists.
    pub fn run(&self, cases: &[SelectedCase], on_case: &mut dyn FnMut(&CaseReport)) -> RunReport {
        if self.config.hold_card {
            return self.run_holding_card(cases, on_case);
        }
        let start = Instant::now();
        let mut reports: Vec<Option<CaseReport>> = vec![None; cases.len()];
        let pool_size = self.config.devices.len();
        let runnable = fail_oversized(
            cases,
            pool_size,
            &format!(
                "the pool has {pool_size} (--device {})",
                self.config.devices
            ),
            &mut reports,
            on_case,
        );
        let (mut slots, to_compile) = self.slots_from_bundle(cases, &runnable);
        let compiled = self.compile(&to_compile);

        let workers = self.pool.healthy().len().clamp(1, runnable.len().max(1));
        let (work_tx, work_rx) = mpsc::sync_channel::<Prepared>(workers);
        let work_rx = Mutex::new(work_rx);
        let (done_tx, done_rx) = mpsc::channel::<(usize, CaseReport)>();
        std::thread::scope(|s| {
            let prep_done = done_tx.clone();
            let compiled = &compiled;
            let runnable = &runnable;
            s.spawn(move || {
                for &i in runnable {
                    let prepared = match slots.remove(&i) {
                        Some(slot) => Ok(self.prepare_from_slot(&cases[i], slot)),
                        None => self.prepare(&cases[i], compiled),
                    };
                    match prepared {
                        Ok(p) => {
                            if work_tx.send(Prepared { index: i, ..p }).is_err() {
                                break;
                            }
                        }
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
                        let Ok(p) = next else { break };
                        let i = p.index;
                        if done.send((i, self.finish(p))).is_err() {
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
        let reports = reports.into_iter().flatten().collect();
        RunReport::new(
            &self.config.platform,
            reports,
            start.elapsed().as_secs_f64(),
        )
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
        let healthy = self.pool.healthy().len().max(1);
        let need = cases
            .iter()
            .map(|c| c.scene.devices)
            .max()
            .unwrap_or(1)
            .clamp(1, healthy);
        let acquired = self.pool.acquire(
            need,
            "scene run --hold-card",
            AcquireOptions {
                timeout: self.config.lock_timeout,
                on_wait: None,
            },
        );
        let mut lease = match acquired {
            Ok(l) => Some(l),
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
                        r
                    })
                    .collect();
                return RunReport::new(
                    &self.config.platform,
                    reports,
                    start.elapsed().as_secs_f64(),
                );
            }
        };
        let wait_s = start.elapsed().as_secs_f64();
        let cards: Vec<u32> = lease
            .as_ref()
            .map(|l| l.cards().to_vec())
            .unwrap_or_default();
        let mut mark = Instant::now();
        let mut mark_unix = lease
            .as_ref()
            .map(|l| unix_seconds(l.acquired_at()))
            .unwrap_or_default();
        let mut reports: Vec<Option<CaseReport>> = vec![None; cases.len()];
        let runnable = fail_oversized(
            cases,
            cards.len(),
            &format!("--hold-card holds {cards:?}"),
            &mut reports,
            on_case,
        );
        let (mut slots, to_compile) = self.slots_from_bundle(cases, &runnable);
        let compiled = self.compile(&to_compile);
        for (n, &i) in runnable.iter().enumerate() {
            let prepared = match slots.remove(&i) {
                Some(slot) => Ok(self.prepare_from_slot(&cases[i], slot)),
                None => self.prepare(&cases[i], &compiled),
            };
            let mut r = match prepared {
                Ok(p) => self.finish_on(p, lease.as_ref()),
                Err(r) => *r,
            };
            if n + 1 == runnable.len()
                && let Some(l) = lease.take()
            {
                l.release();
            }
            let now = Instant::now();
            let now_unix = unix_seconds(std::time::SystemTime::now());
            r.phases.lock_held_s = now.duration_since(mark).as_secs_f64();
            if n == 0 {
                r.phases.lock_wait_s += wait_s;
            }
            r.devices = cards.clone();
            r.lock = Some(LockInterval {
                acquired_at: mark_unix,
                released_at: now_unix,
            });
            (mark, mark_unix) = (now, now_unix);
            on_case(&r);
            reports[i] = Some(r);
        }
        if let Some(l) = lease.take() {
            l.release();
        }
        let reports = reports.into_iter().flatten().collect();
        RunReport::new(
            &self.config.platform,
            reports,
            start.elapsed().as_secs_f64(),
        )
    }

    /// Splits `runnable` into cases a bundle slot serves and cases to
    /// compile. A slot that cannot be used is reported with the reason and
    /// its case alone is rebuilt; the others still run from the bundle.
    fn slots_from_bundle(
        &self,
        cases: &[SelectedCase],
        runnable: &[usize],
    ) -> (HashMap<usize, SlotData>, Vec<SelectedCase>) {
        let mut slots = HashMap::new();
        let mut to_compile = Vec::new();
        for &i in runnable {
            let sel = &cases[i];
            match &self.bundle {
                Some(b) => match b.load_case(sel, &self.config.platform) {
                    Ok(slot) => {
                        slots.insert(i, slot);
                    }
                    Err(problem) => {
                        eprintln!(
                            "warning: {}: bundle slot {problem}; rebuilding this case",
                            sel.id()
                        );
                        to_compile.push(sel.clone());
                    }
                },
                None => to_compile.push(sel.clone()),
            }
        }
        (slots, to_compile)
    }

    /// A case served by a bundle slot: no compile, fixtures or golden, so
    /// those phases stay at zero.
    fn prepare_from_slot(&self, sel: &SelectedCase, slot: SlotData) -> Prepared {
        Prepared {
            index: 0,
            sel: sel.clone(),
            callable: slot.callable,
            inputs: slot.inputs,
            scalars: slot.scalars,
            golden: slot.golden,
            report: CaseReport::new(&sel.scene.name, &sel.case().name),
            started: Instant::now(),
        }
    }

    /// Runs one case whose scene is in `compiled`, stage after stage.
    pub fn run_case(&self, sel: &SelectedCase, compiled: &CompiledScenes) -> CaseReport {
        match self.prepare(sel, compiled) {
            Ok(p) => self.finish(p),
            Err(r) => *r,
        }
    }

    /// The CPU stages before the device: look up the callable, build
    /// fixtures, compute the golden. `Err` is a finished (failed) report.
    fn prepare(
        &self,
        sel: &SelectedCase,
        compiled: &CompiledScenes,
    ) -> Result<Prepared, Box<CaseReport>> {
        let started = Instant::now();
        let scene = &sel.scene;
        let case = sel.case();
        let mut report = CaseReport::new(&scene.name, &case.name);
        report.phases.compile_s = compiled.compile_s.get(&scene.name).copied().unwrap_or(0.0);
        let fail = |mut report: CaseReport, stage, msg: String| {
            report.fail(stage, msg);
            report.wall_s = started.elapsed().as_secs_f64();
            Box::new(report)
        };
        let callable = match compiled.callables.get(&scene.name) {
            Some(Ok(c)) => Arc::clone(c),
            Some(Err(e)) => return Err(fail(report, FailureStage::Compile, e.clone())),
            None => {
                return Err(fail(
                    report,
                    FailureStage::Compile,
                    "scene was not part of the compile plan".into(),
                ));
            }
        };

        let t = Instant::now();
        let inputs = match build_fixtures(scene, case) {
            Ok(i) => i,
            Err(e) => return Err(fail(report, FailureStage::Fixtures, e)),
        };
        let scalars = match scalar_bits(scene, case) {
            Ok(s) => s,
            Err(e) => return Err(fail(report, FailureStage::Fixtures, e)),
        };
        report.phases.fixtures_s = t.elapsed().as_secs_f64();

        let t = Instant::now();
        let golden = match compute_golden(
            &self.registry,
            &self.golden_pool,
            self.config.golden_threads,
            scene,
            case,
            &inputs,
        ) {
            Ok(g) => g,
            Err(msg) => return Err(fail(report, FailureStage::Golden, msg)),
        };
        report.phases.golden_s = t.elapsed().as_secs_f64();
        Ok(Prepared {
            index: 0,
            sel: sel.clone(),
            callable,
            inputs,
            scalars,
            golden,
            report,
            started,
        })
    }

    /// The device stage (with one retry on another card after a fault that
    /// retires a card), then the comparison after the card is released.
    fn finish(&self, p: Prepared) -> CaseReport {
        self.finish_on(p, None)
    }

    /// [`Self::finish`] on the card(s) of `held_lease` when the run holds
    /// them (`--hold-card`), else on card(s) acquired for this case.
    fn finish_on(&self, p: Prepared, held_lease: Option<&CardLease>) -> CaseReport {
        let Prepared {
            sel,
            callable,
            inputs,
            scalars,
            golden,
            mut report,
            started,
            ..
        } = p;
        let scene = &sel.scene;
        let mut notes = Vec::new();
        let mut outputs = None;
        for attempt in 1..=2 {
            match self.device_stage(&sel, &callable, &inputs, &scalars, &mut report, held_lease) {
                Ok(o) => {
                    outputs = Some(o);
                    break;
                }
                Err(f) => {
                    // A held card cannot be swapped for another mid-run.
                    let retry = f.retryable
                        && attempt == 1
                        && held_lease.is_none()
                        && !self.pool.healthy().is_empty();
                    notes.push(f.message);
                    if !retry {
                        break;
                    }
                    notes.push(format!(
                        "retrying on a healthy card (retired: {:?})",
                        self.pool.retired()
                    ));
                }
            }
        }
        let Some(outputs) = outputs else {
            report.fail(FailureStage::Device, notes.join("\n"));
            report.wall_s = started.elapsed().as_secs_f64();
            return report;
        };

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
            if let Err(m) = self
                .golden_pool
                .install(|| assert_close(&spec.name, actual, expected, scene.tolerance_for(spec)))
            {
                problems.push(m.to_string());
            }
        }
        report.phases.compare_s = t.elapsed().as_secs_f64();
        crate::dump::after_compare(
            &self.config,
            scene,
            sel.case(),
            &inputs,
            &outputs,
            &golden,
            &mut problems,
        );
        if !problems.is_empty() {
            problems.extend(notes);
            report.fail(FailureStage::Compare, problems.join("\n"));
        } else if !notes.is_empty() {
            report.message = Some(notes.join("\n"));
        }
        report.wall_s = started.elapsed().as_secs_f64();
        report
    }

    fn runtime_path(&self) -> Result<PathBuf, String> {
        let mut slot = self.runtime_path.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert_with(|| match &self.config.runtime_lib {
            Some(p) => Ok(p.clone()),
            None => scene_device::default_runtime_path().map_err(|e| e.to_string()),
        })
        .clone()
    }

    /// Options string for the runtime's `open`.
    fn device_options(&self) -> String {
        let mut o = format!("platform={}", self.config.platform);
        if let Some(t) = self.config.case_timeout {
            o.push_str(&format!(";timeout_ms={}", t.as_millis().max(1)));
        }
        if !self.config.runtime_options.is_empty() {
            o.push(';');
            o.push_str(&self.config.runtime_options);
        }
        o
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
        held_lease: Option<&CardLease>,
    ) -> Result<Vec<Tensor>, DeviceFailure> {
        let scene = &sel.scene;
        let runtime_path = self.runtime_path().map_err(DeviceFailure::plain)?;
        let id = sel.id();
        let wait_start = Instant::now();
        // A wait under a second is ordinary turn-taking between processes;
        // say so only with -v. Longer waits are announced, then repeated
        // every 10 s, so a long queue is visible without flooding the terminal.
        let mut next_note = if self.config.verbose {
            Duration::ZERO
        } else {
            Duration::from_secs(1)
        };
        let mut on_wait = |w: &WaitStatus| {
            if w.waited >= next_note {
                eprintln!("{id}: {w} (waited {:.1} s)", w.waited.as_secs_f64());
                next_note = w.waited + Duration::from_secs(10);
            }
        };
        // Under `--hold-card` the run already holds the card(s), and flock
        // would not let this process take them a second time.
        let acquired = match held_lease {
            Some(_) => None,
            None => Some(
                self.pool
                    .acquire(
                        scene.devices,
                        &id,
                        AcquireOptions {
                            timeout: self.config.lock_timeout,
                            on_wait: Some(&mut on_wait),
                        },
                    )
                    .map_err(|e| {
                        DeviceFailure::plain(format!("acquiring {} card(s): {e}", scene.devices))
                    })?,
            ),
        };
        let Some(lease) = held_lease.or(acquired.as_ref()) else {
            return Err(DeviceFailure::plain("no card lease"));
        };
        report.phases.lock_wait_s += wait_start.elapsed().as_secs_f64();
        let held = Instant::now();
        let acquired_at = unix_seconds(lease.acquired_at());
        report.devices = lease.cards().to_vec();
        if self.config.verbose {
            eprintln!(
                "{id}: acquired card(s) {:?} after {:.3} s",
                lease.cards(),
                report.phases.lock_wait_s
            );
        }

        let mut device_time = Duration::ZERO;
        let result = (|| {
            let runtime = Runtime::load(lease, &runtime_path)
                .map_err(|e| SessionError::from(e.to_string()))?;
            let card = lease.cards()[0];
            // Device time is the whole device session: opening the card is
            // device work too (a real runtime initialises the card there).
            let device_start = Instant::now();
            let device = runtime
                .open(card, &self.device_options())
                .map_err(|e| SessionError::from(format!("opening card {card}: {e}")));
            let device = match device {
                Ok(d) => d,
                Err(e) => {
                    device_time = device_start.elapsed();
                    return Err(e);
                }
            };
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
            let outcome = run_on_device(&device, &image, scene, inputs, scalars);
            drop(device);
            device_time = device_start.elapsed();
            outcome
        })();
        // A held lease is released, and its hold accounted, by the run.
        if let Some(lease) = acquired {
            let released_at = unix_seconds(lease.release());
            report.phases.lock_held_s += held.elapsed().as_secs_f64();
            if self.config.verbose {
                eprintln!("{id}: released card(s) {:?}", report.devices);
            }
            report.lock = Some(LockInterval {
                acquired_at,
                released_at,
            });
        }
        report.phases.device_s += device_time.as_secs_f64();
        result.map_err(|e| {
            if e.fatal {
                for &c in &report.devices {
                    self.pool.retire(c);
                }
            }
            DeviceFailure {
                message: if e.fatal {
                    format!(
                        "{}; card(s) {:?} retired for the rest of this run",
                        e.message, report.devices
                    )
                } else {
                    e.message
                },
                retryable: e.retryable,
            }
        })
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
        if sel.scene.devices > capacity {
            let mut r = CaseReport::new(&sel.scene.name, &sel.case().name);
            r.fail(
                FailureStage::Device,
                format!("needs {} cards but {why}", sel.scene.devices),
            );
            on_case(&r);
            reports[i] = Some(r);
        } else {
            runnable.push(i);
        }
    }
    runnable
}

/// A case between its CPU stages and its device stage.
struct Prepared {
    index: usize,
    sel: SelectedCase,
    callable: Arc<ChipCallable>,
    inputs: Vec<(String, Tensor)>,
    scalars: Vec<u64>,
    golden: GoldenOutputs,
    report: CaseReport,
    started: Instant,
}

/// Why the device stage failed.
struct DeviceFailure {
    message: String,
    /// The card failed, not the case: worth running again on another card.
    retryable: bool,
}

impl DeviceFailure {
    fn plain(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: false,
        }
    }
}

/// An error of the device session.
struct SessionError {
    message: String,
    /// The card is unusable for the rest of the process.
    fatal: bool,
    /// The card, not the case, is to blame (a device fault, not a timeout:
    /// a kernel that hung once would hang on the next card too).
    retryable: bool,
}

impl From<String> for SessionError {
    fn from(message: String) -> Self {
        Self {
            message,
            fatal: false,
            retryable: false,
        }
    }
}

fn session_error(what: String, e: RuntimeError) -> SessionError {
    let timed_out = e.status() == Some(scene_device::abi::SCENE_RT_E_TIMEOUT);
    SessionError {
        message: if timed_out {
            format!("{what}: case timeout: the device run did not finish in time ({e})")
        } else {
            format!("{what}: {e}")
        },
        // A timed-out device keeps running the hung kernel: unusable too.
        fatal: e.is_device_fatal() || timed_out,
        retryable: e.is_device_fatal(),
    }
}

/// Upload, register, run, download, free: everything that happens on the card.
fn run_on_device(
    device: &DeviceSession<'_>,
    image: &CallableImage<'_>,
    scene: &Scene,
    inputs: &[(String, Tensor)],
    scalars: &[u64],
) -> Result<Vec<Tensor>, SessionError> {
    let handle = device
        .register(image)
        .map_err(|e| session_error("registering the callable".into(), e))?;
    let mut args = Vec::with_capacity(inputs.len() + scalars.len());
    let mut addrs = Vec::with_capacity(inputs.len());
    for ((name, tensor), spec) in inputs.iter().zip(&scene.tensors) {
        let size = tensor.bytes().len() as u64;
        let addr = device
            .malloc(size)
            .map_err(|e| session_error(format!("allocating tensor `{name}` ({size} bytes)"), e))?
            .addr;
        addrs.push(addr);
        if spec.direction != ArgDirection::Out {
            device
                .copy_to(addr, tensor.bytes())
                .map_err(|e| session_error(format!("uploading tensor `{name}`"), e))?;
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
    device
        .run(handle, &args)
        .map_err(|e| session_error("run".into(), e))?;
    let mut outputs = Vec::new();
    for (((name, tensor), spec), &addr) in inputs.iter().zip(&scene.tensors).zip(&addrs) {
        if spec.direction.is_output() {
            let mut out = Tensor::zeros(tensor.dtype(), tensor.shape());
            device
                .copy_from(addr, out.bytes_mut())
                .map_err(|e| session_error(format!("downloading tensor `{name}`"), e))?;
            outputs.push(out);
        }
    }
    for addr in addrs {
        device
            .free(addr)
            .map_err(|e| session_error("freeing device memory".into(), e))?;
    }
    let _ = device.unregister(handle);
    Ok(outputs)
}

/// The golden of one case: the registered function `scene.golden` on
/// `inputs`, run on `pool`. CPU only, so `scene precompile` uses it too.
pub fn compute_golden(
    registry: &GoldenRegistry,
    pool: &rayon::ThreadPool,
    threads: usize,
    scene: &Scene,
    case: &Case,
    inputs: &[(String, Tensor)],
) -> Result<GoldenOutputs, String> {
    let Some(golden_fn) = registry.get(&scene.golden) else {
        return Err(format!(
            "{}: golden `{}` is not registered (registered: {})",
            scene.manifest.display(),
            scene.golden,
            registry.names().collect::<Vec<_>>().join(", ")
        ));
    };
    let scalars = scalar_values(scene, case)?;
    let ctx = GoldenCtx::new(&scene.name, &case.name, &case.params, inputs, threads)
        .with_scalars(&scalars);
    pool.install(|| golden_fn(&ctx))
        .map_err(|e| format!("golden `{}`: {e}", scene.golden))
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

/// The case's scalar arguments as numbers, by name, in signature order.
pub fn scalar_values(scene: &Scene, case: &Case) -> Result<Vec<(String, f64)>, String> {
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
            Ok((s.name.clone(), v))
        })
        .collect()
}

/// Raw bits of the case's scalar arguments, as the orchestration receives them.
pub fn scalar_bits(scene: &Scene, case: &Case) -> Result<Vec<u64>, String> {
    use scene_golden::DType;
    scene
        .scalars
        .iter()
        .zip(scalar_values(scene, case)?)
        .map(|(s, (_, v))| {
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
