//! Unit keys: a content hash of everything that can change a unit's output.
//!
//! A key is computed from [`KeyInputs`]: named, human-readable fields (the
//! cache schema, this crate's compile logic, platform, host, the compiler and
//! linker identity, every flag, define and include dir, and the digest of the
//! source and of every header it includes transitively). Keeping the inputs
//! as data rather than feeding them straight into a hasher lets the persistent
//! cache store them next to each artifact and explain a miss by diffing them.
//!
//! Include scan: `#include "x"` is searched in the including file's directory
//! and then the `-I` list, `#include <x>` in the `-I` list only. `#if` is not
//! evaluated (hashing a header too many only costs a spurious rebuild), and
//! headers not found under the `-I` list (system headers) are covered by the
//! compiler identity instead. The scanner sees literal directives only; what
//! the compiler actually read is recorded after each compile and re-checked
//! on every hit (`crate::deps`), so a header it misses cannot be served
//! stale.
//!
//! All paths in the inputs are the root-relative paths the compiler is given,
//! so two checkouts at different places share keys, while the same header
//! content at a different relative path does not.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::budget::Budget;
use crate::digests::{self, FileMemo, Stamp};
use crate::error::CompileError;
use crate::toolchain::{Toolchain, resolve_program};
use crate::unit::{CoreType, HostUnit, IncoreUnit, Language, OrchUnit};

/// Version of the cache layout and of the key's field set. Bump it when the
/// meaning of a stored entry changes; it is part of every key.
///
/// 2: unit manifests record the compiler's dependency list (`deps`), which
/// every hit re-checks.
pub const CACHE_SCHEMA: u32 = 2;

/// A 32-byte blake3 digest identifying one unit's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnitKey(pub [u8; 32]);

impl UnitKey {
    pub fn to_hex(&self) -> String {
        blake3::Hash::from(self.0).to_hex().to_string()
    }

    /// Parses the 64-hex-digit form written by [`UnitKey::to_hex`].
    pub fn from_hex(hex: &str) -> Option<UnitKey> {
        blake3::Hash::from_hex(hex)
            .ok()
            .map(|h| UnitKey(*h.as_bytes()))
    }
}

impl fmt::Display for UnitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Length-prefixed fields ([`scene_util::FieldHasher`]), so that
/// ("ab","c") and ("a","bc") differ, plus typed helpers for key fields.
struct KeyHasher(scene_util::FieldHasher);

impl KeyHasher {
    fn new(domain: &str) -> Self {
        KeyHasher(scene_util::FieldHasher::new(domain))
    }

    fn field(&mut self, tag: &str, bytes: &[u8]) {
        self.0.field(tag, bytes);
    }

    fn str(&mut self, tag: &str, value: &str) {
        self.field(tag, value.as_bytes());
    }

    fn path(&mut self, tag: &str, value: &Path) {
        self.field(tag, value.as_os_str().as_encoded_bytes());
    }

    fn finish(self) -> UnitKey {
        UnitKey(*self.0.finalize().as_bytes())
    }
}

/// What a cache entry holds; recorded as the `kind` key input and in the
/// manifest, as the same lowercase strings caches have always stored.
///
/// Declared in alphabetical order, so that the derived order is the order
/// of the names (listings sort by it).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// The helpers object linked into every incore image of one core type.
    Builtins,
    /// The list of unit keys one callable is assembled from.
    Callable,
    /// A case's computed golden outputs (the harness's golden cache).
    Golden,
    /// A host program's executable ([`crate::HostUnit`]).
    Host,
    /// An incore unit's text image.
    Incore,
    /// An orchestration's shared object.
    Orchestration,
    /// A hosted kernel's precompiled preamble (`preamble.rs`).
    Preamble,
}

impl EntryKind {
    pub const ALL: [EntryKind; 7] = [
        EntryKind::Builtins,
        EntryKind::Callable,
        EntryKind::Golden,
        EntryKind::Host,
        EntryKind::Incore,
        EntryKind::Orchestration,
        EntryKind::Preamble,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Builtins => "builtins",
            EntryKind::Callable => "callable",
            EntryKind::Golden => "golden",
            EntryKind::Host => "host",
            EntryKind::Incore => "incore",
            EntryKind::Orchestration => "orchestration",
            EntryKind::Preamble => "preamble",
        }
    }

    /// A compile unit of a scene (counted in hits, misses and compiles,
    /// explained with `--explain`), as opposed to a callable listing or a
    /// support object.
    pub fn is_unit(self) -> bool {
        matches!(
            self,
            EntryKind::Host | EntryKind::Incore | EntryKind::Orchestration
        )
    }
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The named inputs of one key. Sorted by name, so the key does not depend
/// on the order fields were added in; order-sensitive values (flag lists,
/// include dirs) are stored as one JSON array each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyInputs(pub BTreeMap<String, String>);

impl KeyInputs {
    fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.0.insert(name.into(), value.into());
    }

    fn list(&mut self, name: &str, values: impl IntoIterator<Item = String>) {
        let values: Vec<String> = values.into_iter().collect();
        // A JSON array keeps element boundaries visible in the manifest.
        let json = serde_json::to_string(&values).unwrap_or_default();
        self.set(name, json);
    }

    /// blake3 over the length-prefixed (name, value) pairs.
    pub fn key(&self) -> UnitKey {
        let mut h = KeyHasher::new("scene-kernels-key");
        h.field("fields", &(self.0.len() as u64).to_le_bytes());
        for (name, value) in &self.0 {
            h.str(name, value);
        }
        h.finish()
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

/// Who a tool is: where it resolved to, what its bytes are, what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolIdentity {
    pub path: String,
    pub digest: String,
    pub version: String,
}

/// Per-process memory of file digests and tool identities, so a header
/// shared by many units is read once and `cc --version` runs once; with a
/// digest store ([`KeyContext::with_digest_store`]) file digests also
/// outlive the process (see `crate::digests`).
#[derive(Debug)]
pub struct KeyContext {
    files: Mutex<HashMap<PathBuf, FileMemo>>,
    tools: Mutex<HashMap<PathBuf, (SystemTime, u64, ToolIdentity)>>,
    /// Whether a tool accepts a flag ([`KeyContext::accepts_flag`]), by
    /// the digest of its identity and the flag.
    flags: Mutex<HashMap<UnitKey, bool>>,
    /// Where `--version` outputs are persisted across processes (the cache's
    /// `tools/` dir), so a fully warm run starts no compiler process at all.
    tool_store: Option<PathBuf>,
    /// The persistent digest memo (the cache's `digests/` dir).
    digest_store: Option<DigestStore>,
    /// How old a file's mtime and ctime must be for its digest to be
    /// memoised ([`RACY_WINDOW`]; tests shorten it, since ctime cannot be
    /// set back).
    racy_window: Duration,
    /// The builder's tool-process budget, taken while `--version` runs.
    budget: Option<Arc<Budget>>,
    /// The builder's cancellation: probes run registered with it.
    cancel: scene_util::Cancel,
    /// Files read and hashed (the proof, in tests, that a memo was used).
    #[cfg(test)]
    reads: std::sync::atomic::AtomicUsize,
}

impl Default for KeyContext {
    fn default() -> Self {
        KeyContext {
            files: Mutex::default(),
            tools: Mutex::default(),
            flags: Mutex::default(),
            tool_store: None,
            digest_store: None,
            racy_window: RACY_WINDOW,
            budget: None,
            cancel: scene_util::Cancel::default(),
            #[cfg(test)]
            reads: std::sync::atomic::AtomicUsize::new(0),
        }
    }
}

/// The persistent digest memo of one context: loaded on first use, written
/// back by [`KeyContext::persist_digests`].
#[derive(Debug)]
struct DigestStore {
    path: PathBuf,
    /// The store as it was when first needed (a snapshot: entries taken
    /// from it are copied into the per-process memo).
    loaded: OnceLock<digests::Entries>,
    /// Off after [`KeyContext::forget_files`]: neither read nor written.
    off: AtomicBool,
    /// Something the store lacks (or holds with a stale use time) was
    /// memoised since the last write.
    dirty: AtomicBool,
    /// One write-back at a time (concurrent `build_all`s of one builder).
    writing: Mutex<()>,
}

/// A file modified this recently may be modified again within the same
/// timestamp tick without changing size; such files are not memoised (the
/// "racy git" problem), so an edit is never hidden by the memo.
const RACY_WINDOW: Duration = Duration::from_secs(2);

impl KeyContext {
    pub fn new(tool_store: Option<PathBuf>) -> Self {
        KeyContext {
            tool_store,
            ..KeyContext::default()
        }
    }

    /// Memoises file digests across processes in the store file at `path`
    /// (`crate::digests`; the cache's `digests/files.bin`). Not used where
    /// file metadata cannot prove a file unchanged (non-unix).
    pub fn with_digest_store(mut self, path: PathBuf) -> Self {
        if cfg!(unix) {
            self.digest_store = Some(DigestStore {
                path,
                loaded: OnceLock::new(),
                off: AtomicBool::new(false),
                dirty: AtomicBool::new(false),
                writing: Mutex::new(()),
            });
        }
        self
    }

    #[cfg(test)]
    fn with_racy_window(mut self, window: Duration) -> Self {
        self.racy_window = window;
        self
    }

    /// Runs `--version` probes under `budget`. Only for callers that hold
    /// no slot of it while computing keys (the builder plans on its own
    /// thread, outside any worker).
    pub(crate) fn with_budget(mut self, budget: Arc<Budget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Runs `--version` probes registered with `cancel` (in their own
    /// process group; terminated when it is cancelled).
    pub(crate) fn with_cancel(mut self, cancel: scene_util::Cancel) -> Self {
        self.cancel = cancel;
        self
    }

    /// Drops memoised file digests (tool identities are kept): the next key
    /// computation reads and hashes every file again. The persistent digest
    /// store is no longer consulted or written by this context, so that
    /// "again" holds for files another process stored too (benchmarks
    /// measure exactly the reading).
    pub fn forget_files(&self) {
        if let Some(store) = &self.digest_store {
            store.off.store(true, Ordering::Relaxed);
        }
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Writes the digests memoised since the last call to the persistent
    /// store, if there are any it lacks: the store on disk is re-read,
    /// merged, capped and replaced atomically. Best effort, never an error.
    pub fn persist_digests(&self) {
        let Some(store) = &self.digest_store else {
            return;
        };
        if store.off.load(Ordering::Relaxed) || !store.dirty.load(Ordering::Relaxed) {
            return;
        }
        let _writing = store.writing.lock().unwrap_or_else(PoisonError::into_inner);
        if !store.dirty.swap(false, Ordering::Relaxed) {
            return;
        }
        // Every memo of this process was used by it: all are "used now".
        let used = digests::unix_secs(SystemTime::now());
        let ours: digests::Entries = self
            .files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(path, _)| digests::persistable(path))
            .map(|(path, memo)| {
                let memo = memo.clone();
                (path.clone(), digests::Stored { memo, used })
            })
            .collect();
        digests::merge_and_write(&store.path, ours, digests::MAX_ENTRIES);
    }

    /// blake3 hex of a file's content (memoised like every key input).
    pub(crate) fn digest(&self, abs: &Path) -> std::io::Result<String> {
        self.file(abs).map(|m| m.digest)
    }

    fn file(&self, abs: &Path) -> std::io::Result<FileMemo> {
        let stamp = Stamp::of(&std::fs::metadata(abs)?);
        {
            let files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(m) = files.get(abs)
                && m.stamp == stamp
            {
                return Ok(m.clone());
            }
        }
        if let Some(memo) = self.stored(abs, stamp) {
            return Ok(memo);
        }
        let (memo, unchanged) = self.read(abs)?;
        if unchanged && memo.stamp.settled(SystemTime::now(), self.racy_window) {
            self.files
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(abs.to_path_buf(), memo.clone());
            if let Some(store) = &self.digest_store
                && digests::persistable(abs)
            {
                store.dirty.store(true, Ordering::Relaxed);
            }
        }
        Ok(memo)
    }

    /// The persistent store's memo of `abs`, if it is for this `stamp`
    /// (then also memoised for this process).
    fn stored(&self, abs: &Path, stamp: Stamp) -> Option<FileMemo> {
        let store = self.digest_store.as_ref()?;
        if store.off.load(Ordering::Relaxed) || !digests::persistable(abs) {
            return None;
        }
        let stored = store
            .loaded
            .get_or_init(|| digests::load(&store.path))
            .get(abs)
            .filter(|s| s.memo.stamp == stamp)?;
        let now = digests::unix_secs(SystemTime::now());
        if now.saturating_sub(stored.used) > digests::USED_REFRESH.as_secs() {
            store.dirty.store(true, Ordering::Relaxed);
        }
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(abs.to_path_buf(), stored.memo.clone());
        Some(stored.memo.clone())
    }

    /// Reads and hashes `abs`; `true` if its metadata (of the open file,
    /// so a rename-over cannot slip in) did not change while it was read,
    /// i.e. the memo's stamp is the content's.
    fn read(&self, abs: &Path) -> std::io::Result<(FileMemo, bool)> {
        use std::io::Read;
        #[cfg(test)]
        self.reads.fetch_add(1, Ordering::Relaxed);
        let mut file = std::fs::File::open(abs)?;
        let stamp = Stamp::of(&file.metadata()?);
        let mut bytes = Vec::with_capacity(usize::try_from(stamp.size).unwrap_or(0));
        file.read_to_end(&mut bytes)?;
        let unchanged = bytes.len() as u64 == stamp.size && Stamp::of(&file.metadata()?) == stamp;
        Ok((memo_of(stamp, &bytes), unchanged))
    }

    /// Resolved path, content digest and `--version` output of `program`.
    pub fn tool(&self, program: &Path, search_path: Option<&std::ffi::OsStr>) -> ToolIdentity {
        let Some(resolved) = resolve_program(program, search_path) else {
            return ToolIdentity {
                path: program.display().to_string(),
                digest: "not found".into(),
                version: String::new(),
            };
        };
        let meta = std::fs::metadata(&resolved).ok();
        let mtime = meta
            .as_ref()
            .and_then(|m| m.modified().ok())
            .unwrap_or(UNIX_EPOCH);
        let size = meta.as_ref().map_or(0, |m| m.len());
        {
            let tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((t, s, id)) = tools.get(&resolved)
                && *t == mtime
                && *s == size
            {
                return id.clone();
            }
        }
        let digest = match self.file(&resolved) {
            Ok(m) => m.digest,
            Err(e) => format!("unreadable: {e}"),
        };
        let version = self.tool_version(&resolved, &digest);
        let id = ToolIdentity {
            path: resolved.display().to_string(),
            digest,
            version,
        };
        self.tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(resolved, (mtime, size, id.clone()));
        id
    }

    fn tool_version(&self, resolved: &Path, digest: &str) -> String {
        let mut h = KeyHasher::new("tool-version");
        h.path("path", resolved);
        h.str("digest", digest);
        let stored = self
            .tool_store
            .as_ref()
            .map(|dir| dir.join(format!("{}.txt", h.finish().to_hex())));
        if let Some(text) = stored
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
        {
            return text;
        }
        let slot = self.budget.as_ref().map(|b| b.take());
        let probe = self
            .cancel
            .spawn(
                Command::new(resolved)
                    .arg("--version")
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped()),
            )
            .and_then(|child| child.wait_with_output());
        drop(slot);
        // A probe a cancellation cut short says nothing about the tool:
        // never persisted.
        let cut_short = self.cancel.is_cancelled();
        let version = match probe {
            Ok(out) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&out.stderr));
                if !out.status.success() {
                    text.push_str(&format!("\n({})", out.status));
                }
                text.trim_end().to_owned()
            }
            Err(e) => format!("could not run --version: {e}"),
        };
        if let Some(path) = stored.filter(|_| !cut_short) {
            // Best effort: without it the next process just runs --version.
            let _ = scene_util::write_atomically(&path, version.as_bytes());
        }
        version
    }
}

impl KeyContext {
    /// Whether `program` accepts `flag`: it preprocesses an empty C++ file
    /// with it (`-E -x c++ /dev/null`, which checks the options as a
    /// compile does, and costs a few milliseconds). Memoised as
    /// [`KeyContext::accepts`] is.
    pub(crate) fn accepts_flag(
        &self,
        program: &Path,
        search_path: Option<&std::ffi::OsStr>,
        flag: &str,
    ) -> bool {
        self.accepts(program, search_path, &[flag, "-E"], None)
    }

    /// Whether `program` with `args` accepts `source` (C++ on its standard
    /// input; `None`: an empty file), `-x c++` and the file name appended:
    /// the exit status of one compiler process. An argument [`PROBE_OUT`]
    /// is replaced by a file in a directory of the probe's own, removed
    /// after it (a link to `/dev/null` is not one everywhere: `zig c++`
    /// skips it). Memoised per tool identity
    /// (path, content, `--version`), arguments and source, in this process
    /// and in the cache's `tools/` as `--version` outputs are, so the
    /// answer (and every key it decides) follows the compiler; a probe a
    /// cancellation cut short is not remembered.
    pub(crate) fn accepts(
        &self,
        program: &Path,
        search_path: Option<&std::ffi::OsStr>,
        args: &[&str],
        source: Option<&str>,
    ) -> bool {
        let Some(resolved) = resolve_program(program, search_path) else {
            return false;
        };
        let id = self.tool(program, search_path);
        let mut h = KeyHasher::new("tool-flag");
        h.str("path", &id.path);
        h.str("digest", &id.digest);
        h.str("version", &id.version);
        for arg in args {
            h.str("arg", arg);
        }
        if let Some(text) = source {
            h.str("source", text);
        }
        let memo = h.finish();
        if let Some(&known) = self
            .flags
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&memo)
        {
            return known;
        }
        let stored = self
            .tool_store
            .as_ref()
            .map(|dir| dir.join(format!("{}.flag", memo.to_hex())));
        let remembered = stored
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| match text.trim() {
                "accepted" => Some(true),
                "refused" => Some(false),
                _ => None,
            });
        let accepted = remembered.unwrap_or_else(|| {
            let slot = self.budget.as_ref().map(|b| b.take());
            // A probe that could not be started (nowhere to write its
            // output, no such program) has no answer.
            let probe = args
                .contains(&PROBE_OUT)
                .then(|| tempfile::Builder::new().prefix("scene-probe").tempdir())
                .transpose()
                .and_then(|out_dir| {
                    let args = args.iter().map(|a| match (&out_dir, *a == PROBE_OUT) {
                        (Some(dir), true) => dir.path().join("probe.out").into_os_string(),
                        _ => (*a).into(),
                    });
                    let mut cmd = Command::new(&resolved);
                    cmd.args(args)
                        .args(["-x", "c++"])
                        .arg(if source.is_some() { "-" } else { "/dev/null" })
                        .stdin(if source.is_some() {
                            Stdio::piped()
                        } else {
                            Stdio::null()
                        })
                        .stdout(Stdio::null())
                        .stderr(Stdio::null());
                    let mut child = self.cancel.spawn(&mut cmd)?;
                    if let (Some(text), Some(mut stdin)) = (source, child.child_mut().stdin.take())
                    {
                        // A compiler that stops reading early answers with
                        // its exit status all the same.
                        let _ = std::io::Write::write_all(&mut stdin, text.as_bytes());
                    }
                    child.wait_with_output()
                });
            drop(slot);
            // Only an exit status is an answer: a compiler that could not
            // be started or was killed says nothing about the flag, and is
            // asked again by the next process.
            let answered = probe.ok().and_then(|out| out.status.code());
            let accepted = answered == Some(0);
            if let Some(path) = stored.filter(|_| answered.is_some() && !self.cancel.is_cancelled())
            {
                // Best effort: without it the next process probes again.
                let text = if accepted { "accepted\n" } else { "refused\n" };
                let _ = scene_util::write_atomically(&path, text.as_bytes());
            }
            accepted
        });
        self.flags
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(memo, accepted);
        accepted
    }
}

/// The placeholder for a probe's output file in [`KeyContext::accepts`]'s
/// arguments.
pub(crate) const PROBE_OUT: &str = "{probe-out}";

/// The memo of a file's `bytes`, read with `stamp`.
fn memo_of(stamp: Stamp, bytes: &[u8]) -> FileMemo {
    FileMemo {
        stamp,
        digest: blake3::hash(bytes).to_hex().to_string(),
        includes: Arc::new(includes(bytes)),
    }
}

fn host() -> String {
    format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
}

fn digest_str(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn common_inputs(inputs: &mut KeyInputs, schema: u32, kind: EntryKind, tc: &Toolchain) {
    inputs.set("schema", schema.to_string());
    inputs.set("kind", kind.as_str());
    inputs.set("logic", crate::COMPILE_LOGIC_TOKEN);
    inputs.set("platform", tc.platform.clone());
    inputs.set("host", host());
}

fn tool_inputs(inputs: &mut KeyInputs, role: &str, id: &ToolIdentity) {
    inputs.set(format!("{role}.path"), id.path.clone());
    inputs.set(format!("{role}.digest"), id.digest.clone());
    inputs.set(format!("{role}.version"), id.version.clone());
}

fn unit_inputs(
    inputs: &mut KeyInputs,
    source: &Path,
    include_dirs: &[PathBuf],
    defines: &[(String, String)],
) {
    inputs.set("source", path_str(source));
    inputs.list("include_dirs", include_dirs.iter().map(|d| path_str(d)));
    inputs.list("defines", define_strings(defines));
}

/// `NAME` or `NAME=value`, as a key lists defines.
fn define_strings(defines: &[(String, String)]) -> impl Iterator<Item = String> + '_ {
    defines.iter().map(|(n, v)| {
        if v.is_empty() {
            n.clone()
        } else {
            format!("{n}={v}")
        }
    })
}

/// A hosted unit's header search: its include dirs, then the include roots.
fn hosted_dirs(tc: &Toolchain, unit: &IncoreUnit) -> Vec<PathBuf> {
    let mut dirs = unit.include_dirs.clone();
    dirs.extend(tc.include_roots.iter().cloned());
    dirs
}

/// How a host program's driver is named among its key's files.
const DRIVER_NAME: &str = "<driver>";

/// How a precompiled preamble's text is named among its key's files.
const PREAMBLE_NAME: &str = "<preamble>";

impl KeyContext {
    /// Every input of an incore unit's key.
    pub fn incore_inputs(
        &self,
        schema: u32,
        tc: &Toolchain,
        root: &Path,
        unit: &IncoreUnit,
    ) -> Result<KeyInputs, CompileError> {
        let mut inputs = KeyInputs::default();
        common_inputs(&mut inputs, schema, EntryKind::Incore, tc);
        inputs.set("core", unit.core.as_str());
        if unit.kind.is_hosted() {
            // A shared object of the hosted compiler: no linker, link
            // script or builtins; image units keep exactly their fields.
            inputs.set("kind", unit.kind.as_str());
            self.hosted_inputs(&mut inputs, tc, unit);
            // Same bytes either way; keyed so turning it off recompiles
            // (and `--explain` says why).
            if tc.hosted_pch {
                inputs.set("hosted_pch", "preamble");
            }
            unit_inputs(&mut inputs, &unit.source, &unit.include_dirs, &unit.defines);
            self.source_inputs(&mut inputs, root, &unit.source, &hosted_dirs(tc, unit))?;
            return Ok(inputs);
        }
        tool_inputs(
            &mut inputs,
            "compiler",
            &self.tool(&tc.compiler, tc.search_path.as_deref()),
        );
        tool_inputs(
            &mut inputs,
            "linker",
            &self.tool(&tc.linker, tc.search_path.as_deref()),
        );
        inputs.list("flags.incore", tc.incore_flags.iter().cloned());
        inputs.list("flags.core", tc.core_flags(unit.core).iter().cloned());
        inputs.list("flags.builtins", tc.builtins_flags.iter().cloned());
        inputs.list("flags.link", tc.link_flags.iter().cloned());
        inputs.set("link_script", digest_str(&tc.link_script));
        inputs.set("builtins_source", digest_str(&tc.builtins_source));
        inputs.set("extraction", tc.extraction.to_string());
        if Language::of(&unit.source) == Language::Cxx {
            // C units keep exactly the fields (and keys) they always had.
            inputs.set("language", Language::Cxx.as_str());
            tool_inputs(
                &mut inputs,
                "cxx",
                &self.tool(&tc.cxx, tc.search_path.as_deref()),
            );
            inputs.list("flags.cxx", tc.cxx_flags.iter().cloned());
        }
        if !unit.flags.is_empty() {
            inputs.list("flags.unit", unit.flags.iter().cloned());
        }
        unit_inputs(&mut inputs, &unit.source, &unit.include_dirs, &unit.defines);
        self.source_inputs(&mut inputs, root, &unit.source, &unit.include_dirs)?;
        Ok(inputs)
    }

    /// Every input of the builtins object's key for `core`: the toolchain's
    /// compiler identity, the flags it is compiled with and its source. It
    /// is cached like a unit (in the cache's support-object tier).
    pub fn builtins_inputs(&self, schema: u32, tc: &Toolchain, core: CoreType) -> KeyInputs {
        let mut inputs = KeyInputs::default();
        common_inputs(&mut inputs, schema, EntryKind::Builtins, tc);
        inputs.set("core", core.as_str());
        tool_inputs(
            &mut inputs,
            "compiler",
            &self.tool(&tc.compiler, tc.search_path.as_deref()),
        );
        inputs.list("flags.incore", tc.incore_flags.iter().cloned());
        inputs.list("flags.core", tc.core_flags(core).iter().cloned());
        inputs.list("flags.builtins", tc.builtins_flags.iter().cloned());
        inputs.set("builtins_source", digest_str(&tc.builtins_source));
        inputs
    }

    /// The hosted compiler and the flags every hosted compile of `unit`
    /// shares with its precompiled preamble.
    fn hosted_inputs(&self, inputs: &mut KeyInputs, tc: &Toolchain, unit: &IncoreUnit) {
        tool_inputs(
            inputs,
            "hosted_cxx",
            &self.tool(&tc.hosted_cxx, tc.search_path.as_deref()),
        );
        inputs.list("flags.hosted", tc.hosted_flags.iter().cloned());
        // The shim by content, not by where it was written; only when
        // used, so other keys stay what they were.
        if tc.hosted_bf16_shim.is_some() {
            inputs.set("bf16_shim", crate::bf16::shim_digest());
        }
        if tc.hosted_pto_overlay.is_some() {
            inputs.set("pto_fast", crate::pto_fast::overlay_digest());
        }
        // Before 33c9688 a relative cache directory named these headers
        // where the compiler (run in the scenes root) found nothing: such
        // entries were built without them under the same key. This field
        // keeps every entry of that time from being hit again.
        if tc.hosted_bf16_shim.is_some() || tc.hosted_pto_overlay.is_some() {
            inputs.set("generated_headers", "by absolute path");
        }
        inputs.list("flags.core", tc.core_flags(unit.core).iter().cloned());
        // Only when there are any: keys of units without stay what they were.
        if !unit.flags.is_empty() {
            inputs.list("flags.unit", unit.flags.iter().cloned());
        }
        inputs.list(
            "include_roots",
            tc.include_roots.iter().map(|d| path_str(d)),
        );
    }

    /// Every input of the precompiled `preamble` (its directives) of
    /// hosted `unit`: what its compile shares with the unit's (compiler,
    /// flags, include dirs, defines) and the preamble's text and include
    /// closure, but not the unit's source, so kernels that open alike
    /// share one. Cached in the support-object tier.
    pub(crate) fn preamble_inputs(
        &self,
        schema: u32,
        tc: &Toolchain,
        root: &Path,
        unit: &IncoreUnit,
        preamble: &str,
    ) -> Result<KeyInputs, CompileError> {
        let mut inputs = KeyInputs::default();
        common_inputs(&mut inputs, schema, EntryKind::Preamble, tc);
        inputs.set("core", unit.core.as_str());
        self.hosted_inputs(&mut inputs, tc, unit);
        inputs.list(
            "include_dirs",
            unit.include_dirs.iter().map(|d| path_str(d)),
        );
        inputs.list("defines", define_strings(&unit.defines));
        // Not a file: its stamp is never compared.
        let memo = memo_of(Stamp::default(), preamble.as_bytes());
        let start = (PathBuf::from(PREAMBLE_NAME), memo);
        self.closure_inputs(&mut inputs, root, start, &hosted_dirs(tc, unit))?;
        Ok(inputs)
    }

    /// Every input of an orchestration's key. The orchestration is linked by
    /// the compiler driver, so the compiler identity covers its linker.
    pub fn orch_inputs(
        &self,
        schema: u32,
        tc: &Toolchain,
        root: &Path,
        unit: &OrchUnit,
    ) -> Result<KeyInputs, CompileError> {
        let mut inputs = KeyInputs::default();
        common_inputs(&mut inputs, schema, EntryKind::Orchestration, tc);
        let language = Language::of(&unit.source);
        tool_inputs(
            &mut inputs,
            "compiler",
            &self.tool(tc.compiler_for(language), tc.search_path.as_deref()),
        );
        inputs.list("flags.orch", tc.orch_flags.iter().cloned());
        if language == Language::Cxx {
            inputs.set("language", Language::Cxx.as_str());
            inputs.list("flags.cxx", tc.cxx_flags.iter().cloned());
        }
        unit_inputs(&mut inputs, &unit.source, &unit.include_dirs, &unit.defines);
        self.source_inputs(&mut inputs, root, &unit.source, &unit.include_dirs)?;
        Ok(inputs)
    }

    /// Every input of a host program's key: the C compiler's identity
    /// (it compiles and links), the host flags, the source and its include
    /// closure, and the driver's text and its include closure.
    pub fn host_inputs(
        &self,
        schema: u32,
        tc: &Toolchain,
        root: &Path,
        unit: &HostUnit,
    ) -> Result<KeyInputs, CompileError> {
        let mut inputs = KeyInputs::default();
        common_inputs(&mut inputs, schema, EntryKind::Host, tc);
        tool_inputs(
            &mut inputs,
            "compiler",
            &self.tool(&tc.compiler, tc.search_path.as_deref()),
        );
        inputs.list("flags.host", crate::compile::host_flags(tc));
        unit_inputs(&mut inputs, &unit.source, &unit.include_dirs, &unit.defines);
        inputs.set("driver", digest_str(&unit.driver));
        self.source_inputs(&mut inputs, root, &unit.source, &unit.include_dirs)?;
        // Not a file: its stamp is never compared.
        let memo = memo_of(Stamp::default(), unit.driver.as_bytes());
        let start = (PathBuf::from(DRIVER_NAME), memo);
        self.closure_inputs(&mut inputs, root, start, &unit.include_dirs)?;
        Ok(inputs)
    }

    /// `file:<path>` = content digest for the source and every resolvable
    /// header it includes, transitively; `includes:<path>` = the resolved
    /// include edges of each file, in directive order.
    fn source_inputs(
        &self,
        inputs: &mut KeyInputs,
        root: &Path,
        source: &Path,
        include_dirs: &[PathBuf],
    ) -> Result<(), CompileError> {
        let first = self.source_memo(root, source)?;
        self.closure_inputs(inputs, root, (source.to_path_buf(), first), include_dirs)
    }

    /// The source's memo, or an error naming it.
    fn source_memo(&self, root: &Path, source: &Path) -> Result<FileMemo, CompileError> {
        self.file(&root.join(source)).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                CompileError::MissingSource {
                    path: source.to_path_buf(),
                    root: root.to_path_buf(),
                }
            } else {
                CompileError::Read {
                    path: source.to_path_buf(),
                    source: e,
                }
            }
        })
    }

    /// [`KeyContext::source_inputs`] from a file already read (`first`:
    /// its path as recorded, and its memo).
    fn closure_inputs(
        &self,
        inputs: &mut KeyInputs,
        root: &Path,
        first: (PathBuf, FileMemo),
        include_dirs: &[PathBuf],
    ) -> Result<(), CompileError> {
        let source = first.0.clone();
        let mut seen = std::collections::BTreeSet::from([source]);
        let mut pending = vec![first];
        while let Some((file, memo)) = pending.pop() {
            inputs.set(format!("file:{}", path_str(&file)), memo.digest.clone());
            let mut edges = Vec::new();
            for (name, quoted) in memo.includes.iter() {
                let Some(found) = resolve_include(root, &file, name, *quoted, include_dirs) else {
                    continue;
                };
                edges.push(path_str(&found));
                if !seen.insert(found.clone()) {
                    continue;
                }
                let memo = self
                    .file(&root.join(&found))
                    .map_err(|source| CompileError::Read {
                        path: found.clone(),
                        source,
                    })?;
                pending.push((found, memo));
            }
            if !edges.is_empty() {
                inputs.list(&format!("includes:{}", path_str(&file)), edges);
            }
        }
        Ok(())
    }
}

/// Inputs of a callable entry: the orchestration key and the incore keys
/// it uses, in `func_id` order.
pub fn callable_inputs(
    schema: u32,
    orch_symbol: &str,
    orch: UnitKey,
    incores: &[(u32, &str, crate::unit::CoreType, UnitKey)],
) -> KeyInputs {
    let mut inputs = KeyInputs::default();
    inputs.set("schema", schema.to_string());
    inputs.set("kind", EntryKind::Callable.as_str());
    inputs.set("orchestration", orch.to_hex());
    inputs.set("orchestration.symbol", orch_symbol);
    for (func_id, name, core, key) in incores {
        // Zero-padded so the sorted field order is func_id order.
        inputs.set(
            format!("incore.{func_id:010}"),
            format!("{name} {core} {key}"),
        );
    }
    inputs
}

/// Identity of an incore unit's compile command, without reading any file.
/// Units with equal descriptors compile identically within one build.
pub(crate) fn incore_descriptor(unit: &IncoreUnit) -> UnitKey {
    let mut h = KeyHasher::new("incore-descriptor");
    h.str("core", unit.core.as_str());
    hash_common(&mut h, &unit.source, &unit.include_dirs, &unit.defines);
    h.finish()
}

pub(crate) fn orch_descriptor(unit: &OrchUnit) -> UnitKey {
    let mut h = KeyHasher::new("orch-descriptor");
    hash_common(&mut h, &unit.source, &unit.include_dirs, &unit.defines);
    h.finish()
}

/// Identity of a host program's build, without reading any file.
pub(crate) fn host_descriptor(unit: &HostUnit) -> UnitKey {
    let mut h = KeyHasher::new("host-descriptor");
    h.str("driver", &unit.driver);
    hash_common(&mut h, &unit.source, &unit.include_dirs, &unit.defines);
    h.finish()
}

fn hash_common(
    h: &mut KeyHasher,
    source: &Path,
    include_dirs: &[PathBuf],
    defines: &[(String, String)],
) {
    h.path("source", source);
    h.field("include_dirs", &(include_dirs.len() as u64).to_le_bytes());
    for dir in include_dirs {
        h.path("include_dir", dir);
    }
    h.field("defines", &(defines.len() as u64).to_le_bytes());
    for (name, value) in defines {
        h.str("define_name", name);
        h.str("define_value", value);
    }
}

/// Which unit a cache entry was built for, stable across edits of its
/// inputs: used to find "the unit's last entry" when explaining a miss.
pub(crate) fn unit_identity(inputs: &KeyInputs) -> UnitKey {
    let mut h = KeyHasher::new("unit-identity");
    for field in ["kind", "platform", "core", "source"] {
        h.str(field, inputs.get(field).unwrap_or(""));
    }
    h.finish()
}

/// The full key of an incore unit (fresh context, current schema).
pub fn incore_key(tc: &Toolchain, root: &Path, unit: &IncoreUnit) -> Result<UnitKey, CompileError> {
    Ok(KeyContext::default()
        .incore_inputs(CACHE_SCHEMA, tc, root, unit)?
        .key())
}

/// The full key of an orchestration (fresh context, current schema).
pub fn orch_key(tc: &Toolchain, root: &Path, unit: &OrchUnit) -> Result<UnitKey, CompileError> {
    Ok(KeyContext::default()
        .orch_inputs(CACHE_SCHEMA, tc, root, unit)?
        .key())
}

fn resolve_include(
    root: &Path,
    including: &Path,
    name: &str,
    quoted: bool,
    include_dirs: &[PathBuf],
) -> Option<PathBuf> {
    let local = quoted
        .then(|| including.parent().map(|dir| dir.join(name)))
        .flatten();
    local
        .into_iter()
        .chain(include_dirs.iter().map(|dir| dir.join(name)))
        .find(|candidate| root.join(candidate).is_file())
}

/// `#include "x"` / `#include <x>` directives, as (name, quoted).
fn includes(text: &[u8]) -> Vec<(String, bool)> {
    let text = String::from_utf8_lossy(text);
    text.lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix('#')?.trim_start();
            let rest = rest.strip_prefix("include")?.trim_start();
            let (close, quoted) = match rest.chars().next()? {
                '"' => ('"', true),
                '<' => ('>', false),
                _ => return None,
            };
            let body = &rest[1..];
            let end = body.find(close)?;
            Some((body[..end].to_owned(), quoted))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unit::CoreType;

    fn unit(source: &str) -> IncoreUnit {
        IncoreUnit {
            name: "k".into(),
            func_id: 0,
            core: CoreType::Aiv,
            kind: crate::unit::IncoreKind::Image,
            source: source.into(),
            include_dirs: vec!["inc".into()],
            defines: vec![],
            flags: vec![],
        }
    }

    #[test]
    fn parses_include_directives() {
        let found =
            includes(b"#include \"a.h\"\n  #  include <b/c.h>\n#define X\n#include MACRO\n");
        assert_eq!(
            found,
            vec![("a.h".to_owned(), true), ("b/c.h".to_owned(), false)]
        );
    }

    #[test]
    fn key_follows_header_contents() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("inc")).expect("mkdir");
        std::fs::write(root.join("k.c"), "#include \"h.h\"\n").expect("write");
        std::fs::write(root.join("inc/h.h"), "#include <g.h>\n").expect("write");
        std::fs::write(root.join("inc/g.h"), "#define A 1\n").expect("write");
        let tc = Toolchain::builtin("a5sim")
            .expect("tc")
            .with_search_path(std::env::var_os("PATH"));
        let before = incore_key(&tc, root, &unit("k.c")).expect("key");
        assert_eq!(before, incore_key(&tc, root, &unit("k.c")).expect("key"));
        std::fs::write(root.join("inc/g.h"), "#define A 2\n").expect("write");
        let after = incore_key(&tc, root, &unit("k.c")).expect("key");
        assert_ne!(before, after, "a nested header change must change the key");

        let other_tc = tc.clone().with_compiler("/bin/sh");
        assert_ne!(
            after,
            incore_key(&other_tc, root, &unit("k.c")).expect("key")
        );
        let mut aic = unit("k.c");
        aic.core = CoreType::Aic;
        assert_ne!(after, incore_key(&tc, root, &aic).expect("key"));
    }

    #[test]
    fn inputs_name_files_by_relative_path_with_include_edges() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("inc")).expect("mkdir");
        std::fs::write(root.join("k.c"), "#include \"h.h\"\n#include <stdio.h>\n").expect("w");
        std::fs::write(root.join("inc/h.h"), "int x;\n").expect("write");
        let tc = Toolchain::builtin("a5sim")
            .expect("tc")
            .with_search_path(std::env::var_os("PATH"));
        let inputs = KeyContext::default()
            .incore_inputs(CACHE_SCHEMA, &tc, root, &unit("k.c"))
            .expect("inputs");
        assert_eq!(inputs.get("includes:k.c"), Some(r#"["inc/h.h"]"#));
        assert_eq!(
            inputs.get("file:inc/h.h"),
            Some(blake3::hash(b"int x;\n").to_hex().as_str())
        );
        assert!(
            !inputs.0.keys().any(|k| k.contains("stdio")),
            "system headers are left to the compiler identity"
        );
        assert!(
            inputs
                .get("compiler.version")
                .is_some_and(|v| !v.is_empty())
        );
    }

    #[test]
    fn same_tree_at_another_path_has_the_same_key() {
        let tc = Toolchain::builtin("a5sim")
            .expect("tc")
            .with_search_path(std::env::var_os("PATH"));
        let keys: Vec<UnitKey> = (0..2)
            .map(|_| {
                let dir = tempfile::tempdir().expect("tempdir");
                std::fs::create_dir_all(dir.path().join("inc")).expect("mkdir");
                std::fs::write(dir.path().join("k.c"), "#include \"h.h\"\n").expect("w");
                std::fs::write(dir.path().join("inc/h.h"), "int x;\n").expect("w");
                incore_key(&tc, dir.path(), &unit("k.c")).expect("key")
            })
            .collect();
        assert_eq!(keys[0], keys[1]);
    }

    #[test]
    fn missing_source_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tc = Toolchain::builtin("a5sim")
            .expect("tc")
            .with_search_path(std::env::var_os("PATH"));
        let err = incore_key(&tc, dir.path(), &unit("nope/k.c")).expect_err("missing");
        assert!(err.to_string().contains("nope/k.c"), "{err}");
    }

    #[test]
    fn cxx_units_key_the_cxx_compiler_and_flags_c_units_do_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(root.join("k.c"), "int x;\n").expect("write");
        std::fs::write(root.join("k.cpp"), "int x;\n").expect("write");
        let tc = Toolchain::builtin("a5sim")
            .expect("tc")
            .with_search_path(std::env::var_os("PATH"));
        let ctx = KeyContext::default();
        let cxx = ctx
            .incore_inputs(CACHE_SCHEMA, &tc, root, &unit("k.cpp"))
            .expect("inputs");
        assert_eq!(cxx.get("language"), Some("c++"));
        assert!(cxx.get("cxx.path").is_some_and(|p| p.ends_with("c++")));
        assert!(
            cxx.get("flags.cxx")
                .is_some_and(|f| f.contains("-fno-rtti"))
        );
        let c = ctx
            .incore_inputs(CACHE_SCHEMA, &tc, root, &unit("k.c"))
            .expect("inputs");
        assert!(c.get("language").is_none() && c.get("cxx.path").is_none());

        // Another C++ compiler or C++ flag changes the C++ key only.
        let other = tc.clone().with_cxx("/bin/sh");
        assert_ne!(
            incore_key(&tc, root, &unit("k.cpp")).expect("key"),
            incore_key(&other, root, &unit("k.cpp")).expect("key")
        );
        assert_eq!(
            incore_key(&tc, root, &unit("k.c")).expect("key"),
            incore_key(&other, root, &unit("k.c")).expect("key")
        );
        let mut flagged = tc.clone();
        flagged.cxx_flags.push("-std=c++20".into());
        assert_ne!(
            incore_key(&tc, root, &unit("k.cpp")).expect("key"),
            incore_key(&flagged, root, &unit("k.cpp")).expect("key")
        );

        // A C++ orchestration is keyed by the C++ compiler.
        let orch = |source: &str| OrchUnit {
            name: "o".into(),
            source: source.into(),
            function: "f".into(),
            include_dirs: vec![],
            defines: vec![],
            flags: Vec::new(),
        };
        assert_ne!(
            orch_key(&tc, root, &orch("k.cpp")).expect("key"),
            orch_key(&other, root, &orch("k.cpp")).expect("key")
        );
        assert_eq!(
            orch_key(&tc, root, &orch("k.c")).expect("key"),
            orch_key(&other, root, &orch("k.c")).expect("key")
        );
    }

    /// A file with content `text` whose mtime is an hour old (its ctime is
    /// now: ctime cannot be set back).
    fn old_file(path: &Path, text: &str) -> SystemTime {
        std::fs::write(path, text).expect("write");
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(path)
            .and_then(|f| f.set_modified(hour_ago))
            .expect("set mtime");
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .expect("mtime")
    }

    /// A context on the store in `cache`. `settled`: every file counts as
    /// old enough to memoise (tests cannot age a ctime); otherwise the
    /// real racy window applies.
    fn stored_ctx(cache: &Path, settled: bool) -> KeyContext {
        let ctx = KeyContext::default().with_digest_store(digests::store_path(cache));
        if settled {
            ctx.with_racy_window(Duration::ZERO)
        } else {
            ctx
        }
    }

    fn reads(ctx: &KeyContext) -> usize {
        ctx.reads.load(Ordering::Relaxed)
    }

    fn hex(text: &str) -> String {
        blake3::hash(text.as_bytes()).to_hex().to_string()
    }

    fn stamp(path: &Path) -> Stamp {
        Stamp::of(&std::fs::metadata(path).expect("stat"))
    }

    /// Rewrites `probe` until the filesystem's clock has passed `ctime_ns`,
    /// so the next change of any file there gets a later ctime (timestamps
    /// come from a coarse clock: two writes within one tick share one).
    fn tick_past(probe: &Path, ctime_ns: i128) {
        for _ in 0..1_000_000 {
            std::fs::write(probe, "tick").expect("write");
            if stamp(probe).ctime_ns > ctime_ns {
                return;
            }
            std::thread::yield_now();
        }
        panic!("the filesystem clock did not advance");
    }

    #[test]
    fn a_second_context_takes_digests_from_the_store_without_reading() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (root, cache) = (dir.path().join("root"), dir.path().join("cache"));
        std::fs::create_dir_all(root.join("inc")).expect("mkdir");
        old_file(&root.join("k.c"), "#include \"h.h\"\n");
        old_file(&root.join("inc/h.h"), "#include <g.h>\nint h;\n");
        old_file(&root.join("inc/g.h"), "int g;\n");
        let tc = Toolchain::builtin("a5sim")
            .expect("tc")
            .with_search_path(std::env::var_os("PATH"));
        let plain = KeyContext::default()
            .incore_inputs(CACHE_SCHEMA, &tc, &root, &unit("k.c"))
            .expect("inputs");

        let first = stored_ctx(&cache, true);
        let inputs = first
            .incore_inputs(CACHE_SCHEMA, &tc, &root, &unit("k.c"))
            .expect("inputs");
        assert!(reads(&first) >= 3, "the first context reads every file");
        first.persist_digests();
        assert!(digests::store_path(&cache).is_file());
        assert_eq!(inputs, plain, "the store never changes a key");

        // Sources, headers and the compiler binary all come from the store.
        let second = stored_ctx(&cache, true);
        let again = second
            .incore_inputs(CACHE_SCHEMA, &tc, &root, &unit("k.c"))
            .expect("inputs");
        assert_eq!(reads(&second), 0, "nothing read in the second context");
        assert_eq!(again, plain);
        assert_eq!(again.key(), plain.key());
        assert_eq!(
            again.get("includes:inc/h.h"),
            Some(r#"["inc/g.h"]"#),
            "the stored #include directives are used"
        );
        // All hits: nothing new to write.
        let before = stamp(&digests::store_path(&cache));
        second.persist_digests();
        assert_eq!(stamp(&digests::store_path(&cache)), before);
    }

    #[test]
    fn an_edit_keeping_size_and_restoring_mtime_is_caught_by_ctime() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (file, cache) = (dir.path().join("h.h"), dir.path().join("cache"));
        let mtime = old_file(&file, "int a;\n");
        let first = stored_ctx(&cache, true);
        assert_eq!(first.digest(&file).expect("digest"), hex("int a;\n"));
        first.persist_digests();
        let stored = stamp(&file);

        tick_past(&dir.path().join("probe"), stored.ctime_ns);
        std::fs::write(&file, "int b;\n").expect("write");
        std::fs::File::options()
            .write(true)
            .open(&file)
            .and_then(|f| f.set_modified(mtime))
            .expect("restore mtime");
        let now = stamp(&file);
        assert_eq!(
            (now.dev, now.ino, now.size, now.mtime_ns),
            (stored.dev, stored.ino, stored.size, stored.mtime_ns),
            "only ctime tells the edit apart"
        );

        let second = stored_ctx(&cache, true);
        assert_eq!(second.digest(&file).expect("digest"), hex("int b;\n"));
        assert_eq!(reads(&second), 1);
    }

    #[test]
    fn a_rename_over_with_the_same_size_and_mtime_is_caught_by_inode() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (file, cache) = (dir.path().join("h.h"), dir.path().join("cache"));
        let mtime = old_file(&file, "int a;\n");
        let first = stored_ctx(&cache, true);
        assert_eq!(first.digest(&file).expect("digest"), hex("int a;\n"));
        first.persist_digests();
        let stored = stamp(&file);

        let other = dir.path().join("h.h.new");
        std::fs::write(&other, "int b;\n").expect("write");
        std::fs::File::options()
            .write(true)
            .open(&other)
            .and_then(|f| f.set_modified(mtime))
            .expect("set mtime");
        std::fs::rename(&other, &file).expect("rename");
        let now = stamp(&file);
        assert_eq!((now.size, now.mtime_ns), (stored.size, stored.mtime_ns));
        assert_ne!(now.ino, stored.ino);

        let second = stored_ctx(&cache, true);
        assert_eq!(second.digest(&file).expect("digest"), hex("int b;\n"));
        assert_eq!(reads(&second), 1);
    }

    #[test]
    fn a_corrupt_store_is_ignored_and_rewritten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (file, cache) = (dir.path().join("h.h"), dir.path().join("cache"));
        old_file(&file, "int a;\n");
        let store = digests::store_path(&cache);
        std::fs::create_dir_all(store.parent().expect("parent")).expect("mkdir");
        for junk in [
            &b""[..],
            b"scene-digests 1\n",
            b"\xff\x00 not a store at all",
        ] {
            std::fs::write(&store, junk).expect("write");
            let first = stored_ctx(&cache, true);
            assert_eq!(first.digest(&file).expect("digest"), hex("int a;\n"));
            assert_eq!(reads(&first), 1);
            first.persist_digests();
            assert!(digests::load(&store).contains_key(&file), "rewritten");
            let second = stored_ctx(&cache, true);
            assert_eq!(second.digest(&file).expect("digest"), hex("int a;\n"));
            assert_eq!(reads(&second), 0);
        }
    }

    #[test]
    fn recently_changed_files_are_not_stored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = dir.path().join("cache");
        // Written just now; and an hour-old mtime, but a ctime of now.
        let fresh = dir.path().join("fresh.h");
        std::fs::write(&fresh, "int a;\n").expect("write");
        let touched = dir.path().join("touched.h");
        old_file(&touched, "int b;\n");

        let first = stored_ctx(&cache, false);
        for file in [&fresh, &touched] {
            first.digest(file).expect("digest");
            first.digest(file).expect("digest");
        }
        assert_eq!(reads(&first), 4, "not memoised in the process either");
        first.persist_digests();
        assert!(
            !digests::store_path(&cache).exists(),
            "nothing settled, nothing written"
        );
        let second = stored_ctx(&cache, false);
        second.digest(&fresh).expect("digest");
        assert_eq!(reads(&second), 1);
    }

    #[test]
    fn forgetting_files_bypasses_the_store() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (file, cache) = (dir.path().join("h.h"), dir.path().join("cache"));
        old_file(&file, "int a;\n");
        let first = stored_ctx(&cache, true);
        first.digest(&file).expect("digest");
        first.persist_digests();

        let second = stored_ctx(&cache, true);
        second.forget_files();
        second.digest(&file).expect("digest");
        assert_eq!(reads(&second), 1, "read although the store has it");
        std::fs::remove_file(digests::store_path(&cache)).expect("rm");
        let other = dir.path().join("g.h");
        old_file(&other, "int g;\n");
        second.digest(&other).expect("digest");
        second.persist_digests();
        assert!(!digests::store_path(&cache).exists(), "and not written");
    }

    /// A compiler script that logs each call and accepts exactly `flag`.
    #[cfg(unix)]
    fn flag_compiler(dir: &Path, flag: &str) -> (PathBuf, PathBuf) {
        let log = dir.join("calls");
        let cxx = dir.join("cxx");
        scene_util::write_executable(
            &cxx,
            format!(
                "#!/bin/sh\necho \"$1\" >> '{}'\n[ \"$1\" = --version ] && {{ echo fake 1; exit 0; }}\n[ \"$1\" = '{flag}' ]\n",
                log.display()
            ),
        )
        .expect("script");
        (cxx, log)
    }

    /// The flag probe answers from the compiler's exit status, runs once
    /// per identity and flag (a second context reads the answer the first
    /// stored), and a compiler that cannot be run stores nothing.
    #[cfg(unix)]
    #[test]
    fn flag_probes_are_remembered_per_compiler_and_flag() {
        let dir = tempfile::tempdir().expect("dir");
        let tools = dir.path().join("tools");
        std::fs::create_dir_all(&tools).expect("tools");
        let (cxx, log) = flag_compiler(dir.path(), "-fno-gnu-unique");
        let probes = || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .filter(|l| *l != "--version")
                .count()
        };
        let first = KeyContext::new(Some(tools.clone()));
        assert!(first.accepts_flag(&cxx, None, "-fno-gnu-unique"));
        assert!(!first.accepts_flag(&cxx, None, "-fno-such-flag"));
        assert!(first.accepts_flag(&cxx, None, "-fno-gnu-unique"));
        assert_eq!(probes(), 2, "once per flag in a process");
        let second = KeyContext::new(Some(tools.clone()));
        assert!(second.accepts_flag(&cxx, None, "-fno-gnu-unique"));
        assert!(!second.accepts_flag(&cxx, None, "-fno-such-flag"));
        assert_eq!(probes(), 2, "and across processes, from tools/");

        let stored = || std::fs::read_dir(&tools).expect("tools").count();
        let before = stored();
        let missing = dir.path().join("no-such-compiler");
        assert!(!second.accepts_flag(&missing, None, "-fno-gnu-unique"));
        // A file that cannot be executed: no answer, nothing remembered.
        let not_exec = dir.path().join("not-executable");
        std::fs::write(&not_exec, "#!/bin/sh\nexit 0\n").expect("file");
        assert!(!second.accepts_flag(&not_exec, None, "-fno-gnu-unique"));
        assert_eq!(
            std::fs::read_dir(&tools)
                .expect("tools")
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "flag"))
                .count(),
            2,
            "only the two answers of `cxx` are stored ({before} files before, {} after)",
            stored()
        );
    }

    #[test]
    fn hex_round_trips() {
        let key = UnitKey([7; 32]);
        assert_eq!(UnitKey::from_hex(&key.to_hex()), Some(key));
        assert_eq!(UnitKey::from_hex("zz"), None);
    }
}
