//! The persistent, content-addressed kernel cache shared by every process.
//!
//! Entries are keyed by [`crate::key::KeyInputs::key`]: incore and
//! orchestration artifacts one entry per compile unit, plus one callable
//! entry per assembled callable (the orchestration key and the incore keys
//! it uses, in `func_id` order). An orchestration edit therefore recompiles
//! only the orchestration, and an incore shared by several scenes (same
//! source, flags and toolchain) compiles once.
//!
//! Protocol:
//! - read: unlocked; the manifest and artifact are verified (schema, key,
//!   size, blake3) before the bytes are used. Any damage is a miss.
//! - miss: take the key's exclusive lock, read again (another process may
//!   have published meanwhile), compile, publish, unlock. N processes
//!   missing the same key run the compiler once.
//! - publish: artifact then manifest written into a temp dir inside the
//!   cache, synced, renamed into place (see [`LocalDisk`]).
//! - damage found under the lock: the entry is removed, a warning names it,
//!   and the unit recompiles.
//!
//! Support objects that are not scene units (the builtins object linked into
//! every incore image of a core type, hosted kernels' precompiled
//! preambles) are cached the same way, under the same
//! protocol and locks, in a second tier (`objects/`), so `entries/` holds
//! exactly a scene's units and callables. Whole-cache operations ([`prune`],
//! [`verify_all`], [`stats`], [`clear`]) cover both tiers, each through the
//! [`Storage`] trait.
//!
//! A third tier (`goldens/store/`, [`Tier::Goldens`]) holds the harness's
//! computed goldens ([`EntryKind::Golden`]): same entries, same checks, same
//! locks, same remote; this crate only stores them (the harness's golden
//! cache decides their keys and contents, and runs prune, verify, stats and
//! clear on that tier with the functions above: [`prune_in`], ...).
//!
//! With a remote configured ([`CacheConfig::remote`]), every tier is a
//! [`TieredStorage`]: the local directory first, a remote store (Redis, S3,
//! a shared folder) read through on a local miss and written after a local
//! publish, every remote entry verified before use (see `tiered.rs`). The
//! tiers share one [`Remote`], so its first failure disables it for all.
//!
//! Layout (`<dir>` = `target/scene-cache/` of the workspace by default):
//!
//! ```text
//! <dir>/entries/<aa>/<key>/{artifact,manifest.json}   entries, sharded by key prefix
//! <dir>/objects/<aa>/<key>/{artifact,manifest.json}   support objects (builtins, preambles), same shape
//! <dir>/goldens/store/<aa>/<key>/{artifact,...}       computed goldens, same shape
//! <dir>/goldens/{last,fixtures}/                      the golden cache's own records
//! <dir>/locks/<aa>/<key>.lock                         per-key flock files, every tier
//! <dir>/units/<unit id>.json                          last inputs per unit (explain)
//! <dir>/tools/<id>.txt                                memoised `--version` outputs
//! <dir>/tools/<id>.flag                               memoised flag probes (`-fno-gnu-unique`)
//! <dir>/tools/bf16-<digest>/stdfloat                   the bf16 shim (`bf16.rs`), rewritten when missing
//! <dir>/tools/pto-fast-<digest>/pto/cpu/TMatmul.hpp    the matmul fast path's overlay (`pto_fast.rs`), likewise
//! <dir>/digests/files.bin                             memoised file digests + #includes
//!                                                     (by dev, inode, size, mtime, ctime)
//! <dir>/preambles/<key>.hpp                           what preamble PCHs were compiled from
//! <dir>/stats.jsonl                                   one line per process run
//! ```

mod explain;
mod lock;

/// Where the headers of cached precompiled preambles live (`<dir>/preambles/`).
pub(crate) const PREAMBLES_DIR: &str = "preambles";
mod manifest;
mod prune;
mod remote;
mod resp;
mod storage;
mod tiered;

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

pub use explain::{InputChange, MissReason, diff};
/// Per-key lock files with the cache's protocol (re-checked after locking,
/// so a file pruned while a waiter blocked on it is relocked): `lock_key`
/// for a key of any tier (the harness's golden cache), `lock_file` /
/// `try_lock_file` for other per-directory locks (Python environments).
pub use lock::{KeyLock, lock as lock_file, lock_key, try_lock as try_lock_file};
pub use manifest::{
    Checked, Damage, Manifest, read_verified, verify, verify_artifact, verify_manifest,
};
pub use prune::{
    CachePruneReport, CacheStats, CacheVerifyReport, ClearReport, ContentCheck, LEFTOVER_AGE,
    PrunePolicy, PruneReport, RunStats, StatKind, TierStats, VerifyReport, clear, prune, prune_in,
    prune_locks, stats, stats_in, verify_all, verify_in, verify_in_with,
};
pub use remote::{
    DEFAULT_REMOTE_TIMEOUT, Remote, RemoteConfig, RemoteError, S3Settings, UrlProblem,
    check_remote_url, redact_url,
};
pub use storage::{
    EntryInfo, GOLDEN_STORE, GOLDENS_DIR, LocalDisk, MAX_MANIFEST_BYTES, Part, RawEntry, Storage,
    StorageError,
};
pub use tiered::TieredStorage;

use scene_util::write_atomically;

pub use crate::key::EntryKind;
use crate::key::{self, KeyInputs, UnitKey};

/// Receives cache warnings (damaged entries, an unusable cache directory).
pub type WarnSink = Arc<dyn Fn(&str) + Send + Sync>;

/// Errors of the cache's own operations (opening, verify, prune, clear).
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cache directory `{}` is unusable: {source}", path.display())]
    Unusable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// How a [`crate::Builder`] uses the persistent cache.
#[derive(Clone)]
pub struct CacheConfig {
    pub dir: PathBuf,
    /// Part of every key and checked on every read. Always
    /// [`key::CACHE_SCHEMA`] outside tests that prove a bump invalidates.
    pub schema: u32,
    pub prune: PrunePolicy,
    /// Prune (at most once per process) after the first build that
    /// published something.
    pub prune_after_publish: bool,
    /// Where warnings go; default: `warning: ...` on stderr.
    pub warn: WarnSink,
    /// A second tier behind the local directory (`SCENE_CACHE_REMOTE`).
    pub remote: Option<RemoteConfig>,
}

impl CacheConfig {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        CacheConfig {
            dir: dir.into(),
            schema: key::CACHE_SCHEMA,
            prune: PrunePolicy::default(),
            prune_after_publish: true,
            warn: Arc::new(|msg| eprintln!("warning: {msg}")),
            remote: None,
        }
    }

    /// Adds (or, with `None`, removes) the remote tier.
    pub fn with_remote(mut self, remote: Option<RemoteConfig>) -> Self {
        self.remote = remote;
        self
    }

    pub fn with_warn(mut self, warn: WarnSink) -> Self {
        self.warn = warn;
        self
    }
}

impl fmt::Debug for CacheConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheConfig")
            .field("dir", &self.dir)
            .field("schema", &self.schema)
            .field("prune", &self.prune)
            .field("prune_after_publish", &self.prune_after_publish)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

/// Which of a cache's stores an entry lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Scene units and callables (`entries/`).
    Entries,
    /// Support objects such as the builtins (`objects/`).
    Objects,
    /// Computed goldens (`goldens/store/`).
    Goldens,
}

impl Tier {
    pub const ALL: [Tier; 3] = [Tier::Entries, Tier::Objects, Tier::Goldens];

    /// The tier entries of `kind` are published to.
    pub fn of(kind: EntryKind) -> Tier {
        match kind {
            EntryKind::Builtins | EntryKind::Preamble => Tier::Objects,
            EntryKind::Golden => Tier::Goldens,
            EntryKind::Host
            | EntryKind::Incore
            | EntryKind::Orchestration
            | EntryKind::Callable => Tier::Entries,
        }
    }

    /// The tier's name in remote object paths.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Entries => "entries",
            Tier::Objects => "objects",
            Tier::Goldens => "goldens",
        }
    }

    /// The tier's local store in the cache directory `dir`.
    pub fn local(self, dir: &Path) -> LocalDisk {
        match self {
            Tier::Entries => LocalDisk::new(dir),
            Tier::Objects => LocalDisk::objects(dir),
            Tier::Goldens => LocalDisk::goldens(dir),
        }
    }

    fn index(self) -> usize {
        match self {
            Tier::Entries => 0,
            Tier::Objects => 1,
            Tier::Goldens => 2,
        }
    }
}

/// The result of reading one key.
#[derive(Debug)]
pub enum Lookup {
    Hit {
        artifact: Vec<u8>,
        manifest: Manifest,
    },
    Miss,
    Damaged(Damage),
}

#[derive(Debug, Serialize, Deserialize)]
struct UnitRecord {
    key: String,
    inputs: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    compiles: AtomicU64,
    compile_us: AtomicU64,
    saved_us: AtomicU64,
    /// Scene units served by the remote tier.
    remote_hits: AtomicU64,
    /// Scene units compiled after the remote tier had no usable entry.
    remote_misses: AtomicU64,
}

/// An open cache directory.
pub struct Cache {
    config: CacheConfig,
    /// Indexed by [`Tier::index`].
    tiers: [Arc<dyn Storage>; 3],
    /// The same tiers when a remote is configured (for its counters).
    tiered: Option<[Arc<TieredStorage>; 3]>,
    remote: Option<Arc<Remote>>,
    /// Set after a failure to lock or publish: the rest of the process
    /// compiles without caching instead of failing or warning per unit.
    disabled: AtomicBool,
    warned: AtomicBool,
    pruned: AtomicBool,
    counters: Counters,
    damaged: Mutex<Vec<UnitKey>>,
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("config", &self.config)
            .field("disabled", &self.disabled)
            .finish_non_exhaustive()
    }
}

fn to_us(seconds: f64) -> u64 {
    (seconds.max(0.0) * 1e6) as u64
}

impl Cache {
    /// Creates the directory if needed and checks it can be locked. A
    /// relative directory is made absolute first: compilers run in
    /// another directory and are handed headers the cache generates
    /// (`tools/`) by path, which must name the same files there.
    pub fn open(mut config: CacheConfig) -> Result<Cache, CacheError> {
        if let Ok(abs) = std::path::absolute(&config.dir) {
            config.dir = abs;
        }
        let dir = &config.dir;
        let unusable = |source| CacheError::Unusable {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(unusable)?;
        let tag = dir.join("CACHEDIR.TAG");
        if !tag.exists() {
            write_atomically(
                &tag,
                b"Signature: 8a477f597d28d172789f06886806bc55\n\
                  # scene kernel cache (scene cache clear removes it)\n",
            )
            .map_err(unusable)?;
        }
        // Probe: if this fails every key lock would too.
        let probe = lock::lock(&dir.join(lock::LOCKS_DIR).join("probe.lock")).map_err(unusable)?;
        drop(probe);
        // A remote that cannot even be set up (a bad URL) warns and the
        // run goes on with the local tier alone, as for one that is down.
        let remote = config.remote.as_ref().and_then(|r| {
            Remote::open(r, config.schema, config.warn.clone())
                .inspect_err(|e| {
                    (config.warn)(&format!("{e}; continuing with the local cache only"))
                })
                .ok()
                .map(Arc::new)
        });
        let tiered = remote.as_ref().map(|r| {
            Tier::ALL.map(|tier| {
                Arc::new(TieredStorage::new(
                    tier.local(dir),
                    Arc::clone(r),
                    tier.name(),
                    config.schema,
                ))
            })
        });
        let tiers: [Arc<dyn Storage>; 3] = match &tiered {
            Some(t) => t.clone().map(|t| t as Arc<dyn Storage>),
            None => Tier::ALL.map(|tier| Arc::new(tier.local(dir)) as Arc<dyn Storage>),
        };
        Ok(Cache {
            tiers,
            tiered,
            remote,
            config,
            disabled: AtomicBool::new(false),
            warned: AtomicBool::new(false),
            pruned: AtomicBool::new(false),
            counters: Counters::default(),
            damaged: Mutex::new(Vec::new()),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.config.dir
    }

    pub fn schema(&self) -> u32 {
        self.config.schema
    }

    /// The store of scene units and callables.
    pub fn storage(&self) -> &dyn Storage {
        self.tier(Tier::Entries)
    }

    /// The store of `tier`.
    pub fn tier(&self, tier: Tier) -> &dyn Storage {
        self.tiers[tier.index()].as_ref()
    }

    /// The store of `tier`, to keep beyond this cache's lifetime: the
    /// harness's golden cache publishes through [`Tier::Goldens`] of the
    /// run's kernel cache, so both use the one remote (one warning, one
    /// set of counters).
    pub fn tier_handle(&self, tier: Tier) -> Arc<dyn Storage> {
        Arc::clone(&self.tiers[tier.index()])
    }

    pub fn is_enabled(&self) -> bool {
        !self.disabled.load(Ordering::Relaxed)
    }

    /// Warns once per process and stops using the cache.
    fn degrade(&self, what: &str) {
        self.disabled.store(true, Ordering::Relaxed);
        if !self.warned.swap(true, Ordering::Relaxed) {
            (self.config.warn)(&format!(
                "kernel cache `{}` disabled for this run: {what}; compiling without it",
                self.config.dir.display()
            ));
        }
    }

    /// Reads and verifies `key` among scene units and callables. Does not
    /// remove damaged entries: an unlocked reader may not judge an entry a
    /// locked publisher replaces.
    pub fn lookup(&self, key: &UnitKey) -> Lookup {
        self.lookup_in(Tier::Entries, key)
    }

    /// [`Cache::lookup`] in `tier`.
    pub fn lookup_in(&self, tier: Tier, key: &UnitKey) -> Lookup {
        if !self.is_enabled() {
            return Lookup::Miss;
        }
        match read_verified(self.tier(tier), key, Some(self.config.schema)) {
            Ok(None) => Lookup::Miss,
            Ok(Some(Ok((manifest, artifact)))) => Lookup::Hit { artifact, manifest },
            Ok(Some(Err(damage))) => Lookup::Damaged(damage),
            Err(e) => {
                self.degrade(&e.to_string());
                Lookup::Miss
            }
        }
    }

    /// The remote tier, if one is configured and could be set up.
    pub fn remote(&self) -> Option<&Remote> {
        self.remote.as_deref()
    }

    fn tiered(&self, tier: Tier) -> Option<&TieredStorage> {
        Some(self.tiered.as_ref()?[tier.index()].as_ref())
    }

    /// Records a hit: refreshes the entry's mtime and counts the time
    /// saved. Returns whether the entry came from the remote tier (a
    /// "remote hit", now copied into the local one).
    pub fn hit(&self, key: &UnitKey, manifest: &Manifest) -> bool {
        let tier = Tier::of(manifest.kind);
        // A failed touch only makes the entry look older to prune.
        let _ = self.tier(tier).touch(key);
        let remote = self.tiered(tier).is_some_and(|t| t.take_remote_hit(key));
        if manifest.kind.is_unit() {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            self.counters
                .saved_us
                .fetch_add(to_us(manifest.compile_s), Ordering::Relaxed);
            if remote {
                self.counters.remote_hits.fetch_add(1, Ordering::Relaxed);
            }
        }
        remote
    }

    /// The key's exclusive lock (one lock directory for every tier; keys
    /// of different kinds never collide), or `None` (after one warning) if locking
    /// is impossible, in which case the caller compiles without caching.
    pub fn lock(&self, key: &UnitKey) -> Option<KeyLock> {
        if !self.is_enabled() {
            return None;
        }
        match lock::lock_key(&self.config.dir, key) {
            Ok(l) => Some(l),
            Err(e) => {
                self.degrade(&format!("cannot lock: {e}"));
                None
            }
        }
    }

    /// Removes a damaged scene entry (call with the key's lock held) and
    /// says so.
    pub fn remove_damaged(&self, key: &UnitKey, unit: &str, damage: &Damage) {
        self.remove_damaged_in(Tier::Entries, key, unit, damage);
    }

    /// [`Cache::remove_damaged`] in `tier`.
    pub fn remove_damaged_in(&self, tier: Tier, key: &UnitKey, unit: &str, damage: &Damage) {
        let storage = self.tier(tier);
        (self.config.warn)(&format!(
            "kernel cache entry `{}` (for {unit}) is damaged ({damage}); removed, recompiling",
            storage.describe(key)
        ));
        self.damaged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(*key);
        if let Err(e) = storage.remove(key) {
            self.degrade(&e.to_string());
        }
    }

    /// Removes an entry whose recorded dependencies no longer match (call
    /// with the key's lock held), so the recompiled one can take its place.
    pub fn remove_stale(&self, key: &UnitKey) {
        self.remove_stale_in(Tier::Entries, key);
    }

    /// [`Cache::remove_stale`] in `tier`.
    pub fn remove_stale_in(&self, tier: Tier, key: &UnitKey) {
        if let Err(e) = self.tier(tier).remove(key) {
            self.degrade(&e.to_string());
        }
    }

    /// Why `inputs` had to be compiled, judged against the unit's last entry.
    pub fn explain(&self, inputs: &KeyInputs) -> MissReason {
        if !self.is_enabled() {
            return MissReason::CacheDisabled;
        }
        let Some(record) = std::fs::read(self.unit_record_path(inputs))
            .ok()
            .and_then(|b| serde_json::from_slice::<UnitRecord>(&b).ok())
        else {
            return MissReason::NoPreviousEntry;
        };
        if record.key == inputs.key().to_hex() {
            return MissReason::Evicted;
        }
        MissReason::InputsChanged(diff(&record.inputs, &inputs.0))
    }

    fn unit_record_path(&self, inputs: &KeyInputs) -> PathBuf {
        self.config
            .dir
            .join("units")
            .join(format!("{}.json", key::unit_identity(inputs).to_hex()))
    }

    /// Publishes a freshly compiled artifact (call with the key's lock held)
    /// in the tier of its kind, and remembers a unit's inputs as its last
    /// entry.
    pub fn publish(
        &self,
        key: &UnitKey,
        kind: EntryKind,
        artifact: &[u8],
        inputs: &KeyInputs,
        unit: &str,
        compile_s: f64,
    ) -> bool {
        self.publish_with_deps(key, kind, artifact, inputs, None, unit, compile_s)
    }

    /// [`Cache::publish`] recording the compiler's dependency list.
    #[allow(clippy::too_many_arguments)]
    pub fn publish_with_deps(
        &self,
        key: &UnitKey,
        kind: EntryKind,
        artifact: &[u8],
        inputs: &KeyInputs,
        deps: Option<crate::deps::Deps>,
        unit: &str,
        compile_s: f64,
    ) -> bool {
        if !self.is_enabled() {
            return false;
        }
        let manifest = Manifest::new(*key, kind, artifact, inputs, unit, compile_s).with_deps(deps);
        let storage = self.tier(Tier::of(kind));
        if let Err(e) = storage.put(key, artifact, &manifest.to_bytes()) {
            self.degrade(&e.to_string());
            return false;
        }
        if kind.is_unit() {
            let record = UnitRecord {
                key: key.to_hex(),
                inputs: inputs.0.clone(),
            };
            let bytes = serde_json::to_vec(&record).unwrap_or_default();
            // Only explanations depend on it; losing it is harmless.
            let _ = write_atomically(&self.unit_record_path(inputs), &bytes);
        }
        true
    }

    /// Counts one unit that had to be compiled (successfully or not).
    pub fn count_compile(&self, key: &UnitKey, seconds: f64) {
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        if self
            .tiered(Tier::Entries)
            .is_some_and(|t| t.remote_missed(key))
        {
            self.counters.remote_misses.fetch_add(1, Ordering::Relaxed);
        }
        self.counters.compiles.fetch_add(1, Ordering::Relaxed);
        self.counters
            .compile_us
            .fetch_add(to_us(seconds), Ordering::Relaxed);
    }

    /// Keys removed as damaged by this process.
    pub fn damaged_keys(&self) -> Vec<UnitKey> {
        self.damaged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Runs prune once per process, if configured to after a publish.
    pub fn prune_after_publish(&self) {
        if !self.config.prune_after_publish
            || !self.is_enabled()
            || self.pruned.swap(true, Ordering::Relaxed)
        {
            return;
        }
        if let Err(e) = prune(&self.config.dir, &self.config.prune) {
            (self.config.warn)(&format!("kernel cache prune failed: {e}"));
        }
    }

    /// This process's counters so far.
    pub fn run_stats(&self) -> RunStats {
        let c = &self.counters;
        RunStats {
            unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            pid: std::process::id(),
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            compiles: c.compiles.load(Ordering::Relaxed),
            compile_s: c.compile_us.load(Ordering::Relaxed) as f64 / 1e6,
            saved_s: c.saved_us.load(Ordering::Relaxed) as f64 / 1e6,
            remote_hits: c.remote_hits.load(Ordering::Relaxed),
            remote_misses: c.remote_misses.load(Ordering::Relaxed),
            remote_errors: self
                .remote
                .as_ref()
                .map_or(0, |r| r.counters.errors.load(Ordering::Relaxed)),
            remote_read_bytes: self
                .remote
                .as_ref()
                .map_or(0, |r| r.counters.read_bytes.load(Ordering::Relaxed)),
            remote_written_bytes: self
                .remote
                .as_ref()
                .map_or(0, |r| r.counters.written_bytes.load(Ordering::Relaxed)),
        }
    }

    /// Appends this process's counters to `stats.jsonl` (once, at the end
    /// of a run; nothing if the cache was not consulted).
    pub fn write_run_stats(&self) {
        let stats = self.run_stats();
        if stats.hits + stats.misses == 0 || !self.is_enabled() {
            return;
        }
        let Ok(mut line) = serde_json::to_vec(&stats) else {
            return;
        };
        line.push(b'\n');
        let path = self.config.dir.join(prune::STATS_FILE);
        // One short O_APPEND write per process, so concurrent runs do not
        // interleave inside a line.
        let written = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(&line));
        if let Err(e) = written {
            (self.config.warn)(&format!(
                "cannot record cache stats in `{}`: {e}",
                path.display()
            ));
        }
    }
}
