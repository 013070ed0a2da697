//! The builder: plans units for many callables, runs them on one bounded
//! pool, and assembles callables from the shared artifacts.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use scene_util::Cancel;

use crate::budget::Budget;
use crate::cache::{Cache, CacheConfig, InputChange, Lookup, Manifest, MissReason, Tier};
use crate::compile;
use crate::deps::{self, Deps, NoDeps};
use crate::error::{BuildError, BuildSetupError, CompileError, UnitFailure};
use crate::key::{self, EntryKind, KeyContext, KeyInputs, UnitKey};
use crate::link;
use crate::plan::{self, Job, PlanEntry};
use crate::report::{BuildOutput, Observer, UnitKind, UnitOutcome, UnitReport};
use crate::toolchain::Toolchain;
use crate::unit::{
    CallableSpec, ChipCallable, CoreType, HostUnit, IncoreImage, IncoreUnit, Language, OrchUnit,
};

mod hosted;

use hosted::PreambleSlot;

#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Upper bound on compiler/linker processes alive at once, across all
    /// callables of a `build_all`.
    pub workers: NonZeroUsize,
    /// Parent for the builder's scratch directory (default: system temp).
    pub work_dir: Option<PathBuf>,
    /// The persistent cache shared with other processes (default: none,
    /// artifacts live only as long as the builder). If its directory cannot
    /// be created or locked, the builder warns once and builds without it.
    pub cache: Option<CacheConfig>,
    /// Cancels the build: no tool is started once it is cancelled, and
    /// running ones are terminated (they run in process groups registered
    /// with it); their units end [`UnitOutcome::Cancelled`]. Nothing
    /// partial is published (entries only ever appear by rename).
    pub cancel: Cancel,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            workers: std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
            work_dir: None,
            cache: None,
            cancel: Cancel::default(),
        }
    }
}

type Artifact = Arc<Vec<u8>>;

/// An artifact this process built or read, with the dependency list that
/// must still hold for it to be reused.
type Memo = (Artifact, Option<Arc<Deps>>);

/// What a compile produced: the bytes, and what it read (or why that is
/// not known).
type Compiled = (Vec<u8>, Result<Deps, NoDeps>);

type UnitResult = Result<Artifact, Arc<CompileError>>;

pub struct Builder {
    root: PathBuf,
    toolchain: Toolchain,
    workers: NonZeroUsize,
    /// Tool-process slots shared by every `build_all` running on this
    /// builder at once (e.g. concurrent test trials), so the bound is
    /// `workers` for the whole process, never `workers` per call.
    budget: Arc<Budget>,
    scratch: tempfile::TempDir,
    link_script: PathBuf,
    /// Compiled on first use, by whichever worker needs it first.
    builtins: [OnceLock<Result<PathBuf, Arc<CompileError>>>; 2],
    /// The toolchain of C++ shared objects (`unique::isolated`: with
    /// `-fno-gnu-unique` where the compiler takes it), made on first use.
    isolated: OnceLock<Toolchain>,
    /// The toolchains of hosted kernels by their units' own flags (the
    /// language standard `--simpler-root` gives is one): `isolated` plus
    /// the bf16 shim where the hosted compiler with those flags needs it
    /// (`crate::bf16`), asked only when such a kernel is built.
    hosted: Mutex<HashMap<Vec<String>, Arc<Toolchain>>>,
    /// The hosted compiler's probe (`compile::probe_hosted`),
    /// run before the first hosted unit compiles.
    hosted_probe: OnceLock<Result<(), Arc<CompileError>>>,
    /// Hosted kernels' precompiled preambles, by key: fetched or built
    /// once, shared by every unit that opens with the same directives.
    preambles: Mutex<HashMap<UnitKey, Arc<PreambleSlot>>>,
    memo: Mutex<HashMap<UnitKey, Memo>>,
    /// Keeps file names unique if the same key is built twice concurrently.
    sequence: AtomicU64,
    observer: Option<Observer>,
    /// Memoised file digests and tool identities for key computation.
    keys: KeyContext,
    cache: Option<Cache>,
    schema: u32,
    /// Something was published since the last prune check.
    published: AtomicBool,
    cancel: Cancel,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("root", &self.root)
            .field("platform", &self.toolchain.platform)
            .field("workers", &self.workers)
            .field("scratch", &self.scratch.path())
            .field("observer", &self.observer.is_some())
            .field("cache", &self.cache)
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

        let schema = options
            .cache
            .as_ref()
            .map_or(key::CACHE_SCHEMA, |c| c.schema);
        let cache = options.cache.and_then(|config| {
            let warn = config.warn.clone();
            Cache::open(config)
                .inspect_err(|e| warn(&format!("{e}; compiling without the kernel cache")))
                .ok()
        });
        let budget = Arc::new(Budget::new(options.workers.get()));
        // `cc --version` probes are tool processes too: same budget.
        let mut keys = KeyContext::new(cache.as_ref().map(|c| c.dir().join("tools")))
            .with_budget(Arc::clone(&budget))
            .with_cancel(options.cancel.clone());
        if let Some(cache) = &cache {
            keys = keys.with_digest_store(crate::digests::store_path(cache.dir()));
        }

        Ok(Builder {
            root,
            toolchain,
            workers: options.workers,
            budget,
            scratch,
            link_script,
            builtins: [OnceLock::new(), OnceLock::new()],
            isolated: OnceLock::new(),
            hosted: Mutex::new(HashMap::new()),
            hosted_probe: OnceLock::new(),
            preambles: Mutex::new(HashMap::new()),
            memo: Mutex::new(HashMap::new()),
            sequence: AtomicU64::new(0),
            observer: None,
            keys,
            cache,
            schema,
            published: AtomicBool::new(false),
            cancel: options.cancel,
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

    /// The persistent cache in use, if any.
    pub fn cache(&self) -> Option<&Cache> {
        self.cache.as_ref()
    }

    /// Forgets memoised file digests, so the next key computation reads
    /// every source and header again (benchmarks, long-lived tools). The
    /// cache's persistent digest store is bypassed from then on by this
    /// builder (neither read nor written).
    pub fn forget_file_digests(&self) {
        self.keys.forget_files();
    }

    /// Forgets the artifacts this builder already built or read, so the
    /// next build reads the persistent cache again, as a new process would
    /// (benchmarks of warm lookups).
    pub fn forget_artifacts(&self) {
        self.memo_lock().clear();
    }

    /// The toolchain hosted kernels and C++ orchestrations are keyed and
    /// built with: the configured one plus `-fno-gnu-unique` for each
    /// compiler that accepts it (`crate::unique`: their objects must stay
    /// their own in a device worker that loads many scenes). Image units
    /// and C orchestrations use the toolchain as configured, so their keys
    /// and commands do not depend on that probe.
    fn isolated(&self) -> &Toolchain {
        self.isolated.get_or_init(|| {
            let search = self.toolchain.search_path.as_deref();
            crate::unique::isolated(&self.toolchain, |cxx, flag| {
                self.keys.accepts_flag(cxx, search, flag)
            })
        })
    }

    /// The toolchain hosted kernel `unit` is keyed and built with: the
    /// [`Builder::isolated`] one, with a real `std::bfloat16_t` where the
    /// hosted compiler, given the unit's own flags, has only `__bf16`
    /// (`crate::bf16`). Decided once per distinct unit flags.
    fn hosted(&self, unit: &IncoreUnit) -> Arc<Toolchain> {
        let mut memo = self.hosted.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tc) = memo.get(&unit.flags) {
            return Arc::clone(tc);
        }
        let mut tc = self.isolated().clone();
        tc.hosted_bf16_shim = self.bf16_shim(&tc, &unit.flags);
        tc.hosted_pto_overlay = self.pto_overlay(&tc);
        let tc = Arc::new(tc);
        memo.insert(unit.flags.clone(), Arc::clone(&tc));
        tc
    }

    /// The bf16 shim's directory when `tc`'s hosted compiler with a
    /// unit's `flags` needs it and takes it (`crate::bf16`); `None` when
    /// it has the real type, lacks `__bf16` too, or the shim cannot be
    /// written.
    fn bf16_shim(&self, tc: &Toolchain, flags: &[String]) -> Option<PathBuf> {
        let search = tc.search_path.as_deref();
        // The hosted flags less `-shared`: the shim's probe links an
        // executable, so a conversion routine the runtime library lacks
        // fails it (a shared object would leave it undefined until
        // loaded). The native one compiles (`-c`; not `-fsyntax-only`,
        // which `zig c++` fails on any source).
        let base: Vec<&str> = tc
            .hosted_flags
            .iter()
            .map(String::as_str)
            .chain(flags.iter().map(String::as_str))
            .filter(|f| *f != "-shared")
            .collect();
        let out = crate::key::PROBE_OUT;
        let mut args = base.clone();
        args.extend(["-c", "-o", out]);
        let native = || {
            self.keys.accepts(
                &tc.hosted_cxx,
                search,
                &args,
                Some(crate::bf16::NATIVE_PROBE),
            )
        };
        let home = self.tools_dir();
        let mut dir = None;
        let shim = || {
            let Ok(made) = crate::bf16::materialise(&home) else {
                return false;
            };
            let flags = crate::bf16::shim_flags(&made);
            let flags: Vec<&str> = flags.iter().filter_map(|f| f.to_str()).collect();
            let mut with = base.clone();
            with.extend(flags.iter().copied());
            with.extend(["-o", out]);
            let taken = flags.len() == 3
                && self
                    .keys
                    .accepts(&tc.hosted_cxx, search, &with, Some(crate::bf16::SHIM_PROBE));
            dir = Some(made);
            taken
        };
        match crate::bf16::decide(native, shim) {
            crate::bf16::HostedBf16::Shim => dir,
            _ => None,
        }
    }

    /// The fast paths' overlay directory when `tc` wants them and its
    /// include roots qualify (`crate::pto_fast`); `None` otherwise, or
    /// when it cannot be written (PTO-ISA's own code is then used).
    fn pto_overlay(&self, tc: &Toolchain) -> Option<PathBuf> {
        if !tc.hosted_fast_paths {
            return None;
        }
        let digest = |f: &Path| self.keys.digest(f).ok();
        if !crate::pto_fast::applies(&tc.include_roots, digest) {
            return None;
        }
        crate::pto_fast::materialise(&self.tools_dir()).ok()
    }

    /// Where generated headers (the bf16 shim, the fast paths' overlay)
    /// live: the cache's `tools/`, else this builder's scratch directory.
    fn tools_dir(&self) -> PathBuf {
        match self.cache.as_ref().filter(|c| c.is_enabled()) {
            Some(cache) => cache.dir().join("tools"),
            None => self.scratch_dir().to_path_buf(),
        }
    }

    /// The toolchain an orchestration is keyed and built with.
    fn orch_toolchain(&self, unit: &OrchUnit) -> &Toolchain {
        match Language::of(&unit.source) {
            Language::Cxx => self.isolated(),
            Language::C => &self.toolchain,
        }
    }

    /// Every key input of a unit, as stored in its cache manifest.
    fn inputs(&self, job: &Job) -> Result<KeyInputs, CompileError> {
        match job {
            Job::Incore(unit) if unit.kind.is_hosted() => {
                self.keys
                    .incore_inputs(self.schema, &self.hosted(unit), &self.root, unit)
            }
            Job::Incore(unit) => {
                self.keys
                    .incore_inputs(self.schema, &self.toolchain, &self.root, unit)
            }
            Job::Orch(unit) => {
                self.keys
                    .orch_inputs(self.schema, self.orch_toolchain(unit), &self.root, unit)
            }
            Job::Host(unit) => {
                self.keys
                    .host_inputs(self.schema, &self.toolchain, &self.root, unit)
            }
        }
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
        self.build_all_with_hosts(specs, &[])
    }

    /// [`Builder::build_all`] plus host programs ([`HostUnit`]), in the
    /// same plan: each distinct one built once, on the same workers, from
    /// the same cache (its executable is a cache entry like any unit's).
    /// Their results are [`BuildOutput::hosts`], parallel to `hosts`.
    pub fn build_all_with_hosts(&self, specs: &[CallableSpec], hosts: &[HostUnit]) -> BuildOutput {
        let plan = plan::plan_with_hosts(specs, hosts);
        let mut results: Vec<Option<UnitResult>> = vec![None; plan.entries.len()];
        let mut reports: Vec<Option<UnitReport>> = vec![None; plan.entries.len()];
        let mut keys: Vec<Option<UnitKey>> = vec![None; plan.entries.len()];
        let mut queue: Vec<Queued> = Vec::new();

        for (idx, entry) in plan.entries.iter().enumerate() {
            let started = Instant::now();
            if self.cancel.is_cancelled() {
                let done = Done::new(UnitOutcome::Cancelled, Duration::ZERO, None);
                self.finish(entry, &mut reports[idx], done);
                results[idx] = Some(Err(Arc::new(CompileError::Cancelled)));
                continue;
            }
            let inputs = match self.inputs(&entry.job) {
                Ok(inputs) => inputs,
                Err(err) => {
                    let done = Done::new(UnitOutcome::Failed, Duration::ZERO, None);
                    self.finish(entry, &mut reports[idx], done);
                    results[idx] = Some(Err(Arc::new(err)));
                    continue;
                }
            };
            let key = inputs.key();
            keys[idx] = Some(key);
            let memoized = self.memo_lock().get(&key).cloned();
            if let Some((artifact, deps)) = memoized {
                // A header the scanner cannot see may have changed since.
                if deps.as_ref().is_none_or(|d| self.deps_changed(d).is_none()) {
                    let mut done = Done::new(UnitOutcome::Reused, Duration::ZERO, Some(key));
                    done.deps_unchecked = deps.is_none().then(no_deps_recorded);
                    self.finish(entry, &mut reports[idx], done);
                    results[idx] = Some(Ok(artifact));
                    continue;
                }
                self.memo_lock().remove(&key);
            }
            // Unlocked fast path: a verified hit needs no lock. Damage and
            // stale dependencies are left for the locked path to judge.
            if let Some(cache) = &self.cache
                && let Lookup::Hit { artifact, manifest } = cache.lookup(&key)
                && self.stale(&manifest).is_none()
            {
                let remote = cache.hit(&key, &manifest);
                let artifact = Arc::new(artifact);
                let deps = manifest.deps.map(Arc::new);
                let mut done = Done::new(UnitOutcome::Cached, started.elapsed(), Some(key));
                done.remote = remote;
                done.deps_unchecked = deps.is_none().then(no_deps_recorded);
                self.memo_lock().insert(key, (Arc::clone(&artifact), deps));
                self.finish(entry, &mut reports[idx], done);
                results[idx] = Some(Ok(artifact));
                continue;
            }
            queue.push(Queued { idx, key, inputs });
        }

        self.run_queue(&plan.entries, &queue, &mut results, &mut reports);

        let callables: Vec<_> = specs
            .iter()
            .zip(&plan.specs)
            .map(|(spec, spec_plan)| match spec_plan {
                Err(failures) => Err(BuildError {
                    label: spec.label.clone(),
                    failures: failures.clone(),
                }),
                Ok(spec_plan) => assemble(spec, spec_plan, &results),
            })
            .collect();
        if let Some(cache) = &self.cache {
            for ((spec, spec_plan), callable) in specs.iter().zip(&plan.specs).zip(&callables) {
                if let (Ok(spec_plan), Ok(_)) = (spec_plan, callable) {
                    self.record_callable(cache, spec, spec_plan, &keys);
                }
            }
            // A cancelled run ends quickly: the next run prunes.
            if self.published.swap(false, Ordering::Relaxed) && !self.cancel.is_cancelled() {
                cache.prune_after_publish();
            }
            // Here rather than on drop: every file of this build (keys,
            // compiled units' dependency lists, hit re-checks) is memoised
            // by now, a long-lived harness persists while it keeps running,
            // and a drop is not guaranteed (process::exit, leaked builders).
            if !self.cancel.is_cancelled() {
                self.keys.persist_digests();
            }
        }
        let hosts = plan
            .hosts
            .iter()
            .map(|&idx| {
                results
                    .get(idx)
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| Err(Arc::new(internal_missing())))
            })
            .collect();
        BuildOutput {
            callables,
            units: reports.into_iter().flatten().collect(),
            hosts,
        }
    }

    /// Runs the queued units on `workers` threads. Each thread runs one
    /// unit at a time, holding one of the builder's `workers` budget slots,
    /// and a unit runs its tools one after another, so at most `workers`
    /// tool processes are ever alive, however many `build_all` calls run.
    fn run_queue(
        &self,
        entries: &[PlanEntry],
        queue: &[Queued],
        results: &mut [Option<UnitResult>],
        reports: &mut [Option<UnitReport>],
    ) {
        let threads = self.workers.get().min(queue.len());
        let next = AtomicUsize::new(0);
        let (tx, rx) = mpsc::channel::<(usize, UnitKey, MemoResult, Done)>();
        std::thread::scope(|scope| {
            for _ in 0..threads {
                let tx = tx.clone();
                let next = &next;
                scope.spawn(move || {
                    while let Some(q) = queue.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let slot = self.budget.take();
                        // Cancelled: the rest of the queue is not started.
                        let (result, done) = if self.cancel.is_cancelled() {
                            let done =
                                Done::new(UnitOutcome::Cancelled, Duration::ZERO, Some(q.key));
                            (Err(Arc::new(CompileError::Cancelled)), done)
                        } else {
                            self.obtain(&entries[q.idx], q)
                        };
                        drop(slot);
                        if tx.send((q.idx, q.key, result, done)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            // Reporting happens here so the observer sees one call at a time.
            for (idx, key, result, done) in rx {
                let result = result.map(|(artifact, deps)| {
                    self.memo_lock().insert(key, (Arc::clone(&artifact), deps));
                    artifact
                });
                self.finish(&entries[idx], &mut reports[idx], done);
                results[idx] = Some(result);
            }
        });
    }

    /// A queued unit's artifact: from the cache under the key's lock if
    /// another process published it meanwhile, else from the compiler (and
    /// then published before the lock is released).
    fn obtain(&self, entry: &PlanEntry, q: &Queued) -> (MemoResult, Done) {
        let started = Instant::now();
        let Some(cache) = self.cache.as_ref().filter(|c| c.is_enabled()) else {
            let result = self.run_unit(entry, q.key);
            let miss = MissReason::CacheDisabled;
            return compiled(result, started.elapsed(), q.key, miss);
        };
        let guard = cache.lock(&q.key);
        let mut why = None;
        if guard.is_some() {
            match cache.lookup(&q.key) {
                Lookup::Hit { artifact, manifest } => match self.stale(&manifest) {
                    None => {
                        let remote = cache.hit(&q.key, &manifest);
                        let mut done =
                            Done::new(UnitOutcome::Cached, started.elapsed(), Some(q.key));
                        done.remote = remote;
                        done.deps_unchecked = manifest.deps.is_none().then(no_deps_recorded);
                        let deps = manifest.deps.map(Arc::new);
                        return (Ok((Arc::new(artifact), deps)), done);
                    }
                    Some(change) => {
                        // Same key, other headers: the recompiled entry
                        // replaces it.
                        cache.remove_stale(&q.key);
                        why = Some(MissReason::InputsChanged(vec![change]));
                    }
                },
                Lookup::Damaged(damage) => {
                    cache.remove_damaged(&q.key, &entry.display, &damage);
                    why = Some(MissReason::Damaged(damage.to_string()));
                }
                Lookup::Miss => {}
            }
        }
        let miss = why.unwrap_or_else(|| cache.explain(&q.inputs));
        let compile_started = Instant::now();
        let result = self.run_unit(entry, q.key);
        let compile_time = compile_started.elapsed();
        if result.as_ref().is_err_and(CompileError::is_cancelled) {
            drop(guard);
            return compiled(result, started.elapsed(), q.key, miss);
        }
        cache.count_compile(&q.key, compile_time.as_secs_f64());
        // A header edited during the compile: the bytes may not match any
        // digest we could record, so they are used but not published.
        let publishable = !matches!(
            result,
            Ok((_, Err(NoDeps::ChangedDuringCompile(_)))) | Err(_)
        );
        if let (Ok((bytes, deps)), Some(_), true) = (&result, &guard, publishable)
            && cache.publish_with_deps(
                &q.key,
                entry_kind(entry.kind),
                bytes,
                &q.inputs,
                deps.as_ref().ok().cloned(),
                &entry.display,
                compile_time.as_secs_f64(),
            )
        {
            self.published.store(true, Ordering::Relaxed);
        }
        drop(guard);
        compiled(result, started.elapsed(), q.key, miss)
    }

    /// The first file a cached unit's compile read that has changed since
    /// (`None`: all match, or the entry recorded none).
    fn stale(&self, manifest: &Manifest) -> Option<InputChange> {
        self.deps_changed(manifest.deps.as_ref()?)
    }

    fn deps_changed(&self, deps: &Deps) -> Option<InputChange> {
        let change = deps::first_change(&self.keys, &self.root, deps)?;
        Some(InputChange {
            field: change.field(),
            before: Some(change.recorded),
            after: change.now,
        })
    }

    /// Makes sure the callable entry (orchestration key plus incore keys in
    /// func_id order) exists, and marks it used.
    fn record_callable(
        &self,
        cache: &Cache,
        spec: &CallableSpec,
        spec_plan: &plan::SpecPlan,
        keys: &[Option<UnitKey>],
    ) {
        let Some(orch) = keys.get(spec_plan.orch).copied().flatten() else {
            return;
        };
        let mut incores = Vec::with_capacity(spec.incores.len());
        for (unit, &idx) in spec.incores.iter().zip(&spec_plan.incores) {
            let Some(key) = keys.get(idx).copied().flatten() else {
                return;
            };
            incores.push((unit, key));
        }
        incores.sort_by_key(|(unit, _)| unit.func_id);
        let inputs = callable_inputs(self.schema, spec, orch, &incores);
        let key = inputs.key();
        if let Lookup::Hit { manifest, .. } = cache.lookup(&key) {
            cache.hit(&key, &manifest);
            return;
        }
        let Some(guard) = cache.lock(&key) else {
            return;
        };
        match cache.lookup(&key) {
            Lookup::Hit { manifest, .. } => {
                cache.hit(&key, &manifest);
            }
            other => {
                if let Lookup::Damaged(damage) = other {
                    cache.remove_damaged(&key, &spec.label, &damage);
                }
                let listing = serde_json::to_vec_pretty(&inputs.0).unwrap_or_default();
                cache.publish(
                    &key,
                    EntryKind::Callable,
                    &listing,
                    &inputs,
                    &spec.label,
                    0.0,
                );
            }
        }
        drop(guard);
    }

    fn finish(&self, entry: &PlanEntry, slot: &mut Option<UnitReport>, done: Done) {
        let report = UnitReport {
            unit: entry.display.clone(),
            kind: entry.kind,
            outcome: done.outcome,
            duration: done.duration,
            key: done.key,
            miss: done.miss,
            remote: done.remote,
            deps_unchecked: done.deps_unchecked,
        };
        if let Some(observer) = &self.observer {
            observer(&report);
        }
        *slot = Some(report);
    }

    fn memo_lock(&self) -> std::sync::MutexGuard<'_, HashMap<UnitKey, Memo>> {
        // The memo only ever gains complete entries, so a panic elsewhere
        // cannot leave it inconsistent.
        self.memo.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn scratch_file(&self, key: UnitKey, ext: &str) -> PathBuf {
        let seq = self.sequence.fetch_add(1, Ordering::Relaxed);
        self.link_script
            .with_file_name(format!("{}-{seq}.{ext}", &key.to_hex()[..16]))
    }

    /// The builder's scratch directory (absolute).
    fn scratch_dir(&self) -> &Path {
        self.link_script.parent().unwrap_or(&self.root)
    }

    /// Where precompiled preambles' headers are kept for as long as their
    /// PCHs are: the cache's `preambles/`, or scratch without a cache.
    fn preamble_home(&self) -> PathBuf {
        match self.cache.as_ref().filter(|c| c.is_enabled()) {
            Some(cache) => cache.dir().join(crate::cache::PREAMBLES_DIR),
            None => self.scratch_dir().to_path_buf(),
        }
    }

    /// The builder's own files a compile reads (scratch copies, preamble
    /// headers): never recorded as dependencies.
    fn own_dirs(&self) -> [PathBuf; 2] {
        [self.scratch_dir().to_path_buf(), self.preamble_home()]
    }

    fn run_unit(&self, entry: &PlanEntry, key: UnitKey) -> Result<Compiled, CompileError> {
        let dep_file = self.toolchain.dep_file.then(|| self.scratch_file(key, "d"));
        let started = SystemTime::now();
        let (bytes, preamble) = match &entry.job {
            Job::Incore(unit) if unit.kind.is_hosted() => {
                self.build_hosted(unit, key, dep_file.as_deref())?
            }
            Job::Incore(unit) => (
                self.build_incore(unit, &entry.display, key, dep_file.as_deref())?,
                None,
            ),
            Job::Orch(unit) => (self.build_orch(unit, key, dep_file.as_deref())?, None),
            Job::Host(unit) => (self.build_host(unit, key, dep_file.as_deref())?, None),
        };
        // From a preamble, the compiler read the source's copy: the source
        // itself and the preamble's headers are what the entry rests on.
        let source = match (&preamble, &entry.job) {
            (Some(_), Job::Incore(unit)) => Some(unit.source.as_path()),
            _ => None,
        };
        let deps = match &dep_file {
            Some(file) => deps::record(
                &self.keys,
                &self.root,
                file,
                started,
                &self.own_dirs(),
                source.as_slice(),
            )
            .map(|mut deps| {
                if let Some(recorded) = preamble.as_ref().and_then(|p| p.deps.as_ref()) {
                    deps.extend(recorded.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                deps
            }),
            None => Err(NoDeps::Unsupported),
        };
        Ok((bytes, deps))
    }

    fn build_incore(
        &self,
        unit: &IncoreUnit,
        display: &str,
        key: UnitKey,
        dep_file: Option<&Path>,
    ) -> Result<Vec<u8>, CompileError> {
        let builtins = self.builtins(unit.core)?;
        let object = self.scratch_file(key, "o");
        compile::compile_incore(
            &self.toolchain,
            &self.root,
            unit,
            &object,
            dep_file,
            &self.cancel,
        )?;
        link::check_object(&object, display)?;
        let linked = object.with_extension("elf");
        let cwd = self.link_script.parent().unwrap_or(&self.root);
        link::link_incore(
            &self.toolchain,
            &self.link_script,
            &[&object, &builtins],
            &linked,
            cwd,
            &self.cancel,
        )?;
        link::read_image(&linked, display)
    }

    fn build_orch(
        &self,
        unit: &OrchUnit,
        key: UnitKey,
        dep_file: Option<&Path>,
    ) -> Result<Vec<u8>, CompileError> {
        let out = self.scratch_file(key, "so");
        compile::compile_orchestration(
            self.orch_toolchain(unit),
            &self.root,
            unit,
            &out,
            dep_file,
            &self.cancel,
        )
    }

    fn build_host(
        &self,
        unit: &HostUnit,
        key: UnitKey,
        dep_file: Option<&Path>,
    ) -> Result<Vec<u8>, CompileError> {
        let dir = self.scratch_file(key, "host");
        compile::compile_host(
            &self.toolchain,
            &self.root,
            unit,
            &dir,
            dep_file,
            &self.cancel,
        )
    }

    fn builtins(&self, core: CoreType) -> Result<PathBuf, CompileError> {
        let slot = match core {
            CoreType::Aic => &self.builtins[0],
            CoreType::Aiv => &self.builtins[1],
        };
        let dir = self.link_script.parent().unwrap_or(&self.root);
        slot.get_or_init(|| self.cached_builtins(core, dir).map_err(Arc::new))
            .clone()
            .map_err(CompileError::Shared)
    }

    /// The builtins object for `core`, written into `dir`: from the
    /// persistent cache's support-object tier when it holds it (verified
    /// like every entry, under the key's lock), else compiled and published
    /// there, so a cold process with a warm cache starts no compiler for
    /// it. It is not a scene unit: not counted in hits, misses or compiles.
    fn cached_builtins(&self, core: CoreType, dir: &Path) -> Result<PathBuf, CompileError> {
        let Some(cache) = self.cache.as_ref().filter(|c| c.is_enabled()) else {
            return compile::compile_builtins(&self.toolchain, core, dir, &self.cancel);
        };
        let inputs = self
            .keys
            .builtins_inputs(self.schema, &self.toolchain, core);
        let key = inputs.key();
        let display = format!("builtins/{core}");
        let guard = cache.lock(&key);
        if guard.is_some() {
            match cache.lookup_in(Tier::Objects, &key) {
                Lookup::Hit { artifact, manifest } => {
                    let out = dir.join(compile::builtins_object_name(core));
                    // Could not write it into scratch: compile it there.
                    if std::fs::write(&out, &artifact).is_ok() {
                        cache.hit(&key, &manifest);
                        return Ok(out);
                    }
                }
                Lookup::Damaged(damage) => {
                    cache.remove_damaged_in(Tier::Objects, &key, &display, &damage);
                }
                Lookup::Miss => {}
            }
        }
        let started = Instant::now();
        let out = compile::compile_builtins(&self.toolchain, core, dir, &self.cancel)?;
        let seconds = started.elapsed().as_secs_f64();
        if guard.is_some()
            && let Ok(bytes) = std::fs::read(&out)
            && cache.publish(
                &key,
                EntryKind::Builtins,
                &bytes,
                &inputs,
                &display,
                seconds,
            )
        {
            self.published.store(true, Ordering::Relaxed);
        }
        drop(guard);
        Ok(out)
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        // One stats line per builder, i.e. per run of the harness.
        if let Some(cache) = &self.cache {
            cache.write_run_stats();
        }
    }
}

/// A unit waiting for a worker, with the inputs its manifest will record.
struct Queued {
    idx: usize,
    key: UnitKey,
    inputs: KeyInputs,
}

/// How a unit finished, for its report.
struct Done {
    outcome: UnitOutcome,
    duration: Duration,
    key: Option<UnitKey>,
    miss: Option<MissReason>,
    /// A `Cached` unit served by the remote tier.
    remote: bool,
    deps_unchecked: Option<String>,
}

impl Done {
    fn new(outcome: UnitOutcome, duration: Duration, key: Option<UnitKey>) -> Self {
        Done {
            outcome,
            duration,
            key,
            miss: None,
            remote: false,
            deps_unchecked: None,
        }
    }
}

/// Why a cached unit carries no dependency list.
fn no_deps_recorded() -> String {
    "its entry records no compiler dependency list".to_owned()
}

/// A unit's artifact with the dependency list its reuse depends on.
type MemoResult = Result<Memo, Arc<CompileError>>;

fn compiled(
    result: Result<Compiled, CompileError>,
    duration: Duration,
    key: UnitKey,
    miss: MissReason,
) -> (MemoResult, Done) {
    let outcome = match &result {
        Ok(_) => UnitOutcome::Compiled,
        Err(e) if e.is_cancelled() => UnitOutcome::Cancelled,
        Err(_) => UnitOutcome::Failed,
    };
    let deps_unchecked = match &result {
        Ok((_, Err(why))) => Some(why.to_string()),
        _ => None,
    };
    let done = Done {
        outcome,
        duration,
        key: Some(key),
        miss: Some(miss),
        remote: false,
        deps_unchecked,
    };
    let result = result
        .map(|(bytes, deps)| (Arc::new(bytes), deps.ok().map(Arc::new)))
        .map_err(Arc::new);
    (result, done)
}

fn entry_kind(kind: UnitKind) -> EntryKind {
    match kind {
        UnitKind::Incore { .. } => EntryKind::Incore,
        UnitKind::Orchestration => EntryKind::Orchestration,
        UnitKind::Host => EntryKind::Host,
    }
}

/// The callable entry's inputs: incores must already be in func_id order.
fn callable_inputs(
    schema: u32,
    spec: &CallableSpec,
    orch: UnitKey,
    incores: &[(&IncoreUnit, UnitKey)],
) -> KeyInputs {
    let listed: Vec<_> = incores
        .iter()
        .map(|(unit, key)| (unit.func_id, unit.name.as_str(), unit.core, *key))
        .collect();
    key::callable_inputs(schema, &spec.orchestration.function, orch, &listed)
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
                kind: unit.kind,
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
        let tc = Toolchain::builtin("a5sim")
            .expect("toolchain")
            .with_search_path(std::env::var_os("PATH"));
        let err = Builder::new("/definitely/not/a/root", tc, BuildOptions::default())
            .expect_err("no root");
        assert!(err.to_string().contains("/definitely/not/a/root"), "{err}");
    }
}
