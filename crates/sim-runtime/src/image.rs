//! Loading code: incore images mapped executable, and orchestration shared
//! objects loaded from their registered bytes.
//!
//! `unsafe` (allowed per item): mapping memory executable, entering machine
//! code at offset 0, and `dlopen`/`dlsym` of the orchestration.

use std::collections::HashMap;
use std::ffi::CString;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

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
        static CACHE: OnceLock<Mutex<HashMap<[u8; 32], Weak<OrchLib>>>> = OnceLock::new();
        if bytes.is_empty() {
            return Err(RtError::Load("orchestration shared object is empty".into()));
        }
        let hash = blake3::hash(bytes);
        let cache = CACHE.get_or_init(Default::default);
        let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.retain(|_, w| w.strong_count() > 0);
        if let Some(lib) = cache.get(hash.as_bytes()).and_then(Weak::upgrade) {
            return Ok(lib);
        }
        let lib = Arc::new(OrchLib {
            lib: load_from_file(bytes, &hash)?,
            hash,
        });
        cache.insert(*hash.as_bytes(), Arc::downgrade(&lib));
        Ok(lib)
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
                "orchestration (blake3 {}) has no entry symbol `{symbol}`: {e}",
                &self.hash.to_hex()[..16]
            ))
        })?;
        Ok(*f)
    }
}

/// Writes the bytes to a fresh private file and dlopens it, then unlinks it.
///
/// The file name embeds the content hash: the dynamic loader deduplicates by
/// name, so a name may only ever stand for one content (a reused
/// `/proc/self/fd/N` path would alias an earlier, different library).
#[allow(unsafe_code)]
fn load_from_file(bytes: &[u8], hash: &blake3::Hash) -> RtResult<libloading::Library> {
    use std::os::unix::fs::OpenOptionsExt;
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "scene-orch-{}-{}-{}.so",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
        hash.to_hex()
    ));
    let io =
        |what: &str, e: std::io::Error| RtError::Load(format!("{what} {}: {e}", path.display()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .open(&path)
        .map_err(|e| io("creating the orchestration file", e))?;
    let written = file.write_all(bytes).and_then(|()| file.sync_data());
    drop(file);
    if let Err(e) = written {
        let _ = std::fs::remove_file(&path);
        return Err(io("writing the orchestration file", e));
    }
    // SAFETY: loading runs the object's initialisers. The bytes are the
    // orchestration the caller registered, which is trusted host code by the
    // runtime's contract (its entry is called in-process anyway).
    let lib = unsafe { libloading::Library::new(&path) };
    // The loader has mapped the file (or failed); the name can go.
    let _ = std::fs::remove_file(&path);
    lib.map_err(|e| {
        RtError::Load(format!(
            "cannot load the orchestration shared object ({} bytes, blake3 {}): {e}",
            bytes.len(),
            &hash.to_hex()[..16]
        ))
    })
}
