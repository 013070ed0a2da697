//! Loading code: incore images mapped executable, and orchestration and
//! hosted-kernel shared objects loaded from their registered bytes.
//!
//! `unsafe` (allowed per item): mapping memory executable, entering machine
//! code at offset 0, `dlopen`/`dlsym` of orchestrations and hosted kernels,
//! and calling a hosted kernel's entry.

use std::collections::HashMap;
use std::ffi::CString;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::chip::{
    CHIP_ARRAY_WORDS, CHIP_GLOBAL_CONTEXT_INDEX, CHIP_LOCAL_CONTEXT_INDEX, CHIP_MAX_ARG_WORDS,
    ChipArgs, ChipBlock,
};
use crate::error::{RtError, RtResult};
use scene_abi::{KernelEntry, OrchEntry, SceneKernelArgs};

/// An incore image copied into its own executable mapping and entered at
/// offset 0 — the same bytes a card would receive; nothing is dlopen'ed.
#[derive(Debug)]
pub struct ExecImage {
    base: *mut u8,
    map_len: usize,
}

#[allow(unsafe_code)]
// SAFETY: the mapping is read+execute only after construction and never
// mutated, so sharing it between threads is sound.
unsafe impl Send for ExecImage {}
#[allow(unsafe_code)]
// SAFETY: as for `Send`: immutable after construction.
unsafe impl Sync for ExecImage {}

impl ExecImage {
    /// Maps `bytes` read+write, copies them, then flips the mapping to read+execute.
    #[allow(unsafe_code)]
    pub fn map(bytes: &[u8]) -> RtResult<ExecImage> {
        if bytes.is_empty() {
            return Err(RtError::Load("incore image is empty".into()));
        }
        let ps = crate::memory::page_size() as usize;
        let map_len = bytes.len().div_ceil(ps) * ps;
        // SAFETY: fresh anonymous private mapping at a kernel-chosen address; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(RtError::Load(format!(
                "cannot map {map_len} bytes for an incore image: {}",
                std::io::Error::last_os_error()
            )));
        }
        let img = ExecImage {
            base: p.cast(),
            map_len,
        };
        // SAFETY: the mapping is `map_len >= bytes.len()` bytes, writable, and
        // freshly created, so it cannot overlap `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), img.base, bytes.len()) };
        // SAFETY: `base`/`map_len` describe the mapping created above.
        let rc = unsafe { libc::mprotect(p, map_len, libc::PROT_READ | libc::PROT_EXEC) };
        if rc != 0 {
            // `img` is dropped here, which unmaps.
            return Err(RtError::Load(format!(
                "cannot make an incore image executable (mprotect): {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(img)
    }

    /// Host address the image is mapped at.
    pub fn addr(&self) -> usize {
        self.base as usize
    }

    /// Runs one block of the kernel.
    ///
    /// A kernel that faults takes the whole process down (there is no
    /// isolation in the simulator); one that never returns blocks this thread
    /// forever, which the run's deadline turns into a fatal device.
    #[allow(unsafe_code)]
    pub fn call(&self, args: &SceneKernelArgs) {
        // SAFETY: the mapping is executable and starts with `kernel_entry`
        // (the image contract of scene_kernel.h). The kernel receives a valid
        // pointer to `args` for the duration of the call, and its buffer
        // pointers were bounds-checked against live allocations at submit.
        unsafe {
            let entry: KernelEntry = std::mem::transmute::<*mut u8, KernelEntry>(self.base);
            entry(args);
        }
    }
}

impl Drop for ExecImage {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: exactly the mapping created in `map`; no task can still run
        // it because tasks hold the image through an `Arc`.
        unsafe {
            libc::munmap(self.base.cast(), self.map_len);
        }
    }
}

/// An orchestration shared object loaded from its registered bytes.
#[derive(Debug)]
pub struct OrchLib {
    lib: libloading::Library,
    hash: blake3::Hash,
}

impl OrchLib {
    /// Loads (or reuses, by content hash) the orchestration `bytes`.
    pub fn load(bytes: &[u8]) -> RtResult<Arc<OrchLib>> {
        static CACHE: LibCache<OrchLib> = OnceLock::new();
        load_cached(&CACHE, bytes, LibKind::Orchestration, |lib, hash| OrchLib {
            lib,
            hash,
        })
    }

    /// Resolves the entry symbol.
    #[allow(unsafe_code)]
    pub fn entry(&self, symbol: &str) -> RtResult<OrchEntry> {
        let name = CString::new(symbol).map_err(|_| {
            RtError::Invalid(format!("orchestration symbol {symbol:?} contains NUL"))
        })?;
        // SAFETY: the symbol is only ever called with the `SCENE_ORCH_ENTRY`
        // signature, which is the orchestration contract; the returned fn
        // pointer is kept alongside an `Arc<OrchLib>` so the library outlives it.
        let f = unsafe { self.lib.get::<OrchEntry>(name.as_bytes_with_nul()) }.map_err(|e| {
            RtError::Load(format!(
                "orchestration (blake3 {}) has no entry symbol `{symbol}`: {}",
                &self.hash.to_hex()[..16],
                dl_error(&e)
            ))
        })?;
        Ok(*f)
    }
}

/// A hosted incore kernel (`SCENE_INCORE_HOSTED`, issue 29): a shared
/// object built for the host, loaded from its registered bytes like an
/// orchestration (one loaded copy per content while any callable uses it).
#[derive(Debug)]
pub struct HostedLib {
    lib: libloading::Library,
    hash: blake3::Hash,
}

impl HostedLib {
    /// Loads (or reuses, by content hash) the hosted kernel `bytes`.
    ///
    /// Before the first hosted kernel loads, the runtime puts itself into
    /// the global scope, where a kernel's `dlsym(RTLD_DEFAULT, ...)` finds
    /// the hooks of `hooks.rs` (PTO-ISA's execution context). If that
    /// fails, `scene` kernels still run (they get their block in
    /// `SceneKernelArgs`); `chip_tensor` registrations check
    /// [`crate::hooks::promote_to_global`] themselves and are refused.
    pub fn load(bytes: &[u8]) -> RtResult<Arc<HostedLib>> {
        let _ = crate::hooks::promote_to_global();
        static CACHE: LibCache<HostedLib> = OnceLock::new();
        load_cached(&CACHE, bytes, LibKind::HostedKernel, |lib, hash| {
            HostedLib { lib, hash }
        })
    }

    /// Resolves the entry `symbol` of kernel `func_id`, called with
    /// `convention` (`void entry(const SceneKernelArgs *)` or, for
    /// `chip_tensor`, `void entry(int64_t *args)`).
    #[allow(unsafe_code)]
    pub fn entry(
        self: &Arc<Self>,
        func_id: u32,
        symbol: &str,
        convention: Convention,
    ) -> RtResult<HostedEntry> {
        let name = CString::new(symbol).map_err(|_| {
            RtError::Invalid(format!(
                "hosted kernel func_id {func_id}: entry symbol {symbol:?} contains NUL"
            ))
        })?;
        let missing = |e: libloading::Error| {
            RtError::Load(format!(
                "hosted kernel func_id {func_id} (shared object blake3 {}) has no entry symbol `{symbol}`: {}",
                &self.hash.to_hex()[..16],
                dl_error(&e)
            ))
        };
        let entry = match convention {
            // SAFETY: the symbol is only ever called with the
            // `SCENE_KERNEL_ARGS_SCENE` signature the registration declared
            // (scene_runtime.h); the fn pointer is kept in a `HostedEntry`
            // with an `Arc<HostedLib>`, so the library outlives it.
            Convention::Scene => HostedFn::Scene(
                *unsafe { self.lib.get::<KernelEntry>(name.as_bytes_with_nul()) }
                    .map_err(missing)?,
            ),
            // SAFETY: as above, with the `SCENE_KERNEL_ARGS_CHIP_TENSOR`
            // signature the registration declared.
            Convention::ChipTensor => HostedFn::ChipTensor(
                *unsafe { self.lib.get::<ChipEntry>(name.as_bytes_with_nul()) }.map_err(missing)?,
            ),
        };
        Ok(HostedEntry {
            entry,
            _lib: Arc::clone(self),
        })
    }
}

/// How a hosted kernel's entry takes its arguments (`SCENE_KERNEL_ARGS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Convention {
    /// `SCENE_KERNEL_ARGS_SCENE`: `void entry(const SceneKernelArgs *)`.
    Scene,
    /// `SCENE_KERNEL_ARGS_CHIP_TENSOR`: `void entry(int64_t *args)`, tensor
    /// words pointing at [`crate::chip::ChipTensorRecord`]s.
    ChipTensor,
}

/// `void kernel_entry(int64_t *args)` of the `chip_tensor` convention.
pub type ChipEntry = unsafe extern "C" fn(args: *mut i64);

/// A resolved hosted entry, by convention.
#[derive(Debug, Clone, Copy)]
enum HostedFn {
    Scene(KernelEntry),
    ChipTensor(ChipEntry),
}

/// The entry of a hosted kernel, with the library that holds it.
#[derive(Debug)]
pub struct HostedEntry {
    entry: HostedFn,
    /// Keeps the library loaded while `entry` may be called.
    _lib: Arc<HostedLib>,
}

impl HostedEntry {
    /// Runs one block of the kernel (on the calling emulated core thread,
    /// so the kernel's `thread_local` state stays with that core): a
    /// `scene` entry gets `args`, a `chip_tensor` entry a private copy of
    /// the task's argument words (`chip`; `None` only for a task built
    /// without them, which then gets zeros) followed by the context tail
    /// of `block` (see [`crate::chip`]).
    ///
    /// As for [`ExecImage::call`]: a fault takes the process down; a kernel
    /// that never returns blocks this thread. A C++ exception must not
    /// escape the entry (a C function: unwinding into the runtime is
    /// undefined; in practice the process aborts).
    #[allow(unsafe_code)]
    pub fn call(&self, args: &SceneKernelArgs, chip: Option<&ChipArgs>, block: ChipBlock) {
        match self.entry {
            // SAFETY: `f` was resolved from the library `_lib` keeps loaded,
            // with the `SCENE_KERNEL_ARGS_SCENE` signature the registration
            // declared; `args` is valid for the call and its buffer pointers
            // were bounds-checked against live allocations at submit.
            HostedFn::Scene(f) => unsafe { f(args) },
            HostedFn::ChipTensor(f) => {
                // The block's own copy of the words (a kernel may write its
                // `int64_t *`); the records they point at are the task's,
                // alive until its last block returns. The context tail
                // points at this block's contexts, on this frame.
                let (mut local, mut global) = block.contexts();
                let mut words = [0i64; CHIP_ARRAY_WORDS];
                if let Some(c) = chip {
                    let n = c.words().len().min(CHIP_MAX_ARG_WORDS);
                    words[..n].copy_from_slice(&c.words()[..n]);
                }
                words[CHIP_LOCAL_CONTEXT_INDEX] = std::ptr::from_mut(&mut local) as usize as i64;
                words[CHIP_GLOBAL_CONTEXT_INDEX] = std::ptr::from_mut(&mut global) as usize as i64;
                // SAFETY: `f` was resolved from the library `_lib` keeps
                // loaded, with the `SCENE_KERNEL_ARGS_CHIP_TENSOR` signature
                // the registration declared; `words` is valid for the call,
                // its tensor words point at records `chip` keeps alive, whose
                // buffers were bounds-checked against live allocations at
                // submit, and its tail at `local` / `global`, which outlive
                // the call.
                unsafe { f(words.as_mut_ptr()) }
            }
        }
    }

    /// Whether the entry takes the `chip_tensor` convention.
    pub fn is_chip_tensor(&self) -> bool {
        matches!(self.entry, HostedFn::ChipTensor(_))
    }

    /// Host address of the entry (for diagnostics).
    pub fn addr(&self) -> usize {
        match self.entry {
            HostedFn::Scene(f) => f as usize,
            HostedFn::ChipTensor(f) => f as usize,
        }
    }
}

/// The code of one incore kernel: an executable image or a hosted entry.
#[derive(Debug, Clone)]
pub enum KernelCode {
    Image(Arc<ExecImage>),
    Hosted(Arc<HostedEntry>),
}

impl KernelCode {
    /// Runs one block of the kernel with `args` (and, for a `chip_tensor`
    /// entry, the task's argument words `chip` and the context tail of
    /// `block`).
    pub fn call(&self, args: &SceneKernelArgs, chip: Option<&ChipArgs>, block: ChipBlock) {
        match self {
            KernelCode::Image(i) => i.call(args),
            KernelCode::Hosted(h) => h.call(args, chip, block),
        }
    }

    /// Whether blocks of this kernel take `chip_tensor` argument words.
    pub fn is_chip_tensor(&self) -> bool {
        matches!(self, KernelCode::Hosted(h) if h.is_chip_tensor())
    }

    /// Host address of the kernel's entry.
    pub fn addr(&self) -> usize {
        match self {
            KernelCode::Image(i) => i.addr(),
            KernelCode::Hosted(h) => h.addr(),
        }
    }
}

/// A cache of loaded shared objects by content hash: while one is alive,
/// registering the same bytes again reuses it.
type LibCache<T> = OnceLock<Mutex<HashMap<[u8; 32], Weak<T>>>>;

/// What a loaded shared object is, for file names, messages and flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LibKind {
    Orchestration,
    HostedKernel,
}

impl LibKind {
    fn what(self) -> &'static str {
        match self {
            LibKind::Orchestration => "orchestration",
            LibKind::HostedKernel => "hosted kernel",
        }
    }

    fn file_prefix(self) -> &'static str {
        match self {
            LibKind::Orchestration => "scene-orch",
            LibKind::HostedKernel => "scene-kernel",
        }
    }
}

/// Loads `bytes` as a shared object of `kind`, or returns the loaded copy
/// of the same content if one is still alive.
fn load_cached<T>(
    cache: &LibCache<T>,
    bytes: &[u8],
    kind: LibKind,
    make: impl FnOnce(libloading::Library, blake3::Hash) -> T,
) -> RtResult<Arc<T>> {
    if bytes.is_empty() {
        return Err(RtError::Load(format!(
            "{} shared object is empty",
            kind.what()
        )));
    }
    let hash = blake3::hash(bytes);
    let cache = cache.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    cache.retain(|_, w| w.strong_count() > 0);
    if let Some(lib) = cache.get(hash.as_bytes()).and_then(Weak::upgrade) {
        return Ok(lib);
    }
    refuse_gnu_unique(bytes, &hash, kind)?;
    let lib = Arc::new(make(load_from_file(bytes, &hash, kind)?, hash));
    cache.insert(*hash.as_bytes(), Arc::downgrade(&lib));
    Ok(lib)
}

/// Refuses a shared object that defines symbols with the binding
/// `STB_GNU_UNIQUE`, before it is loaded (issue 38).
///
/// g++ gives that binding to the static locals of inline functions,
/// inline variables, template static data members and `inline
/// thread_local` variables. glibc binds such a symbol process-wide by
/// name, across `RTLD_LOCAL`, and never unloads a library that defines
/// one: another kernel or orchestration with an object of the same name
/// would use this one's, and after `scene_rt_reset` the same bytes loaded
/// again would find the old objects instead of fresh ones. The harness
/// builds with `-fno-gnu-unique` (`WEAK` instead, which `RTLD_LOCAL` keeps
/// apart and `dlclose` unloads); this check keeps every other way in
/// (replayed or bundled objects, other callers of the ABI) from sharing
/// them. Bytes that are not ELF are left to the loader's own error.
fn refuse_gnu_unique(bytes: &[u8], hash: &blake3::Hash, kind: LibKind) -> RtResult<()> {
    use goblin::elf::sym::STB_GNU_UNIQUE;
    let Ok(elf) = goblin::elf::Elf::parse(bytes) else {
        return Ok(());
    };
    let names: Vec<&str> = elf
        .dynsyms
        .iter()
        .filter(|s| s.st_bind() == STB_GNU_UNIQUE && s.st_shndx != 0)
        .map(|s| elf.dynstrtab.get_at(s.st_name).unwrap_or("?"))
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    const SHOWN: usize = 6;
    let mut list = names
        .iter()
        .take(SHOWN)
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        list.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    Err(RtError::Load(format!(
        "the {} shared object ({} bytes, blake3 {}) defines {} symbol(s) with the binding \
         STB_GNU_UNIQUE ({list}), which the dynamic loader shares by name with every other \
         library of the process and never unloads, so other kernels and later cases would see \
         its objects: rebuild it with -fno-gnu-unique (g++; clang never emits the binding)",
        kind.what(),
        bytes.len(),
        &hash.to_hex()[..16],
        names.len()
    )))
}

/// Writes the bytes to a fresh private file and dlopens it, then unlinks it.
///
/// The file name embeds the content hash: the dynamic loader deduplicates by
/// name, so a name may only ever stand for one content (a reused
/// `/proc/self/fd/N` path would alias an earlier, different library). A
/// fresh name (and file) per load also means that bytes loaded again after
/// their last user released them get a fresh copy, with fresh globals,
/// even when the loader could not unload the old one.
///
/// Hosted kernels are bound at load (`RTLD_NOW`): a symbol their host
/// libraries lack is a load error here, not a crash in the middle of a run.
/// Both kinds are loaded `RTLD_LOCAL`: their symbols never serve other
/// libraries (two kernels may both define `kernel_entry`).
#[allow(unsafe_code)]
fn load_from_file(
    bytes: &[u8],
    hash: &blake3::Hash,
    kind: LibKind,
) -> RtResult<libloading::Library> {
    use std::os::unix::fs::OpenOptionsExt;
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "{}-{}-{}-{}.so",
        kind.file_prefix(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
        hash.to_hex()
    ));
    let what = kind.what();
    let io = |action: &str, e: std::io::Error| {
        RtError::Load(format!("{action} the {what} file {}: {e}", path.display()))
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .open(&path)
        .map_err(|e| io("creating", e))?;
    let written = file.write_all(bytes).and_then(|()| file.sync_data());
    drop(file);
    if let Err(e) = written {
        let _ = std::fs::remove_file(&path);
        return Err(io("writing", e));
    }
    // Loading runs the object's constructors on this (the caller's)
    // thread: whatever floating-point environment they set is not the
    // caller's business after the load.
    let lib = crate::fpenv::FpEnv::preserved(|| match kind {
        // SAFETY: loading runs the object's initialisers. The bytes are the
        // orchestration the caller registered, which is trusted host code by
        // the runtime's contract (its entry is called in-process anyway).
        LibKind::Orchestration => unsafe { libloading::Library::new(&path) },
        // SAFETY: as for orchestrations: a hosted kernel is host code the
        // caller registered to be called in-process (scene_runtime.h).
        LibKind::HostedKernel => unsafe {
            use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
            Library::open(Some(&path), RTLD_NOW | RTLD_LOCAL).map(libloading::Library::from)
        },
    });
    // The loader has mapped the file (or failed); the name can go.
    let _ = std::fs::remove_file(&path);
    lib.map_err(|e| {
        RtError::Load(format!(
            "cannot load the {what} shared object ({} bytes, blake3 {}): {}",
            bytes.len(),
            &hash.to_hex()[..16],
            dl_error(&e)
        ))
    })
}

/// A `libloading` error with its causes: its `Display` is only "dlopen
/// failed" / "dlsym failed", the loader's own words (`dlerror`) are the source.
fn dl_error(e: &libloading::Error) -> String {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}
