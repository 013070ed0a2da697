//! Hooks a hosted kernel's libraries find in the process (issue 29).
//!
//! PTO-ISA's CPU backend (`pto/common/cpu_stub.hpp`) looks for the
//! simulator it runs in with `dlsym(RTLD_DEFAULT, "pto_cpu_sim_*")`; without
//! a hook, `get_block_idx()` reads its own thread-local default (0), so a
//! multi-block kernel would compute block 0's share in every block. What it
//! asks for, and what the simulator provides:
//!
//! - `pto_cpu_sim_get_execution_context(&block, &subblock, &subblock_dim)`:
//!   **provided**. The calling emulated core thread's current block
//!   (`block_idx`) and sub-block: a vector kernel of a mixed task with two
//!   vector kernels is sub-block 0 (slot AIV0) or 1 (AIV1) of 2, any other
//!   kernel sub-block 0 of 1; outside a kernel block (the orchestration, a
//!   kernel's own threads) 0, 0, 1.
//! - `pto_cpu_sim_set_execution_context`: not provided. PTO's own launcher
//!   calls it to tell a simulator which block it runs; here the simulator
//!   decides the block, a kernel does not.
//! - `pto_cpu_sim_get_task_cookie` (control bits a task carries, read by
//!   quantising conversions): not provided; the simulator has no such bits
//!   to give, and PTO's default (0) is what a task without them gets.
//! - `pto_sim_get_subblock_id`: not provided (the execution context already
//!   says sub-block 0).
//! - `pto_sim_get_pipe_shared_state(pipe_key, size)` (storage shared by
//!   the cube and vector halves of one mixed block, for `TPUSH`/`TPOP`
//!   pipes): **provided**. Inside a kernel of a mixed block
//!   (`device/cluster.rs`), `size` zeroed bytes (64-byte aligned) per
//!   pipe key, the same for every kernel of the block and fresh for each
//!   block, kept until the block's last kernel returns; NULL elsewhere (a
//!   plain task, the orchestration), where PTO falls back to one
//!   process-wide static per pipe.
//! - `pto_cpu_sim_get_shared_storage`: not provided (it takes a key string
//!   and PTO asks it only when the hook above is absent).
//!
//! The hooks must be visible to `dlsym(RTLD_DEFAULT, ...)`, but the harness
//! loads the runtime `RTLD_LOCAL`: [`promote_to_global`] moves this library
//! into the global scope before the first hosted kernel loads.
//!
//! `unsafe` (allowed per item): the `no_mangle` export, writing through its
//! out-pointers, and `dladdr` / `dlopen` / `dlsym` of this library itself.

use std::cell::{Cell, UnsafeCell};
use std::collections::HashMap;
use std::ffi::{CStr, c_void};
use std::sync::Mutex;
use std::sync::OnceLock;

/// What the calling emulated core thread runs: block, sub-block and
/// sub-block count.
type Context = (u32, u32, u32);

thread_local! {
    /// The block the calling emulated core thread is running, if any.
    static BLOCK: Cell<Option<Context>> = const { Cell::new(None) };
    /// The pipe states of the mixed block it runs (null otherwise).
    static PIPES: Cell<*const PipeStates> = const { Cell::new(std::ptr::null()) };
}

/// 64 bytes of pipe storage, aligned as a cache line (more than any
/// member of PTO's pipe state needs).
#[repr(C, align(64))]
struct Line([u8; 64]);

/// The `TPUSH`/`TPOP` pipe states of one mixed block, by pipe key: what
/// `pto_sim_get_pipe_shared_state` hands its kernels. Kernels write the
/// bytes through the pointers it returns (hence the `UnsafeCell`s); a
/// state's allocation never moves, and lives as long as this value.
#[derive(Default)]
pub(crate) struct PipeStates {
    states: Mutex<HashMap<u64, Box<[UnsafeCell<Line>]>>>,
}

impl std::fmt::Debug for PipeStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipeStates").finish_non_exhaustive()
    }
}

#[allow(unsafe_code)]
// SAFETY: the map is behind a mutex; the bytes of a state are only read
// and written by kernels through the raw pointers handed out (PTO
// synchronises them with the mutex it builds inside), never by Rust.
unsafe impl Sync for PipeStates {}
#[allow(unsafe_code)]
// SAFETY: as for `Sync`: the value owns plain bytes.
unsafe impl Send for PipeStates {}

impl PipeStates {
    /// The state of `key`: at least `size` zeroed bytes on first use, the
    /// same bytes after; NULL when an earlier use of the key asked for
    /// fewer bytes (two pipes that disagree on their state's size).
    fn get(&self, key: u64, size: usize) -> *mut c_void {
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        let lines = states.entry(key).or_insert_with(|| {
            (0..size.div_ceil(64).max(1))
                .map(|_| UnsafeCell::new(Line([0; 64])))
                .collect()
        });
        if lines.len() * 64 < size {
            return std::ptr::null_mut();
        }
        UnsafeCell::raw_get(lines.as_ptr()).cast::<c_void>()
    }
}

/// Runs `f` (one kernel block) with the calling thread's execution context
/// saying block `block_idx`, sub-block `sub_block.0` of `sub_block.1` (a
/// vector kernel of a mixed task with two: its lane; else 0 of 1);
/// afterwards (even if `f` unwinds) it says "no block" again.
pub(crate) fn in_block<R>(
    block_idx: u32,
    sub_block: (u32, u32),
    pipes: Option<&PipeStates>,
    f: impl FnOnce() -> R,
) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            BLOCK.with(|b| b.set(None));
            PIPES.with(|p| p.set(std::ptr::null()));
        }
    }
    BLOCK.with(|b| b.set(Some((block_idx, sub_block.0, sub_block.1.max(1)))));
    PIPES.with(|p| p.set(pipes.map_or(std::ptr::null(), std::ptr::from_ref)));
    let _reset = Reset;
    f()
}

/// The calling thread's context (`None` outside a kernel block).
pub(crate) fn current_block() -> Option<Context> {
    BLOCK.with(Cell::get)
}

/// PTO-ISA's execution-context hook (`GetExecutionContextHookFn` of
/// `pto/common/cpu_stub.hpp`): the calling emulated core thread's block,
/// sub-block 0, sub-block count 1; outside a kernel block 0, 0, 1. NULL
/// out-pointers are skipped.
// SAFETY: `no_mangle` export: no other symbol of the process is named
// `pto_cpu_sim_get_execution_context` but the hook PTO-ISA looks for, whose
// signature (three `uint32_t *`) this is. The pointers are checked for NULL;
// non-NULL ones are the caller's writable `uint32_t`s (PTO passes locals).
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn pto_cpu_sim_get_execution_context(
    block_idx: *mut u32,
    subblock_id: *mut u32,
    subblock_dim: *mut u32,
) {
    let (block, sub, dim) = current_block().unwrap_or((0, 0, 1));
    for (p, v) in [(block_idx, block), (subblock_id, sub), (subblock_dim, dim)] {
        if !p.is_null() {
            // SAFETY: non-NULL out-pointer of the hook's contract (above).
            unsafe { p.write(v) };
        }
    }
}

/// PTO-ISA's pipe-state hook (`GetPipeSharedStateInjectedHookFn` of
/// `pto/common/cpu_stub.hpp`): the calling kernel's mixed block's state of
/// pipe `pipe_key` (see [`PipeStates`]), or NULL outside a mixed block.
// SAFETY: `no_mangle` export: no other symbol of the process is named
// `pto_sim_get_pipe_shared_state` but the hook PTO-ISA looks for, whose
// signature (`uint64_t, size_t` -> `void *`) this is. The thread-local
// pointer is set by `in_block` from a `PipeStates` the calling thread
// keeps alive (its block's `Arc`) for the whole kernel call, and reset
// before that ends.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub extern "C" fn pto_sim_get_pipe_shared_state(pipe_key: u64, size: usize) -> *mut c_void {
    let pipes = PIPES.with(Cell::get);
    // SAFETY: see above: non-null only while its `PipeStates` is alive.
    match unsafe { pipes.as_ref() } {
        Some(p) => p.get(pipe_key, size),
        None => std::ptr::null_mut(),
    }
}

/// Makes this library's exports (the hooks above, and the `scene_rt_*`
/// calls) visible to `dlsym(RTLD_DEFAULT, ...)`, once per loaded copy of
/// the runtime. `Err` says why they are not.
///
/// The harness loads the runtime `RTLD_LOCAL`, so its symbols serve no
/// other library, and `dlsym(RTLD_DEFAULT)` from a hosted kernel (PTO-ISA's
/// way of finding the simulator) would not see them. Opening our own file
/// again with `RTLD_NOLOAD | RTLD_GLOBAL` loads nothing (`RTLD_NOLOAD`: the
/// already loaded copy, or NULL) but adds that copy to the global scope
/// (glibc and musl promote an already loaded object this way). The extra
/// reference is dropped at once: the object stays global while it is
/// loaded, and leaves the global scope when the harness unloads it, so a
/// later, different runtime file is not shadowed by this one. The result is
/// checked the way a kernel would see it: `dlsym(RTLD_DEFAULT)` must return
/// this very function.
pub(crate) fn promote_to_global() -> Result<(), HooksHidden> {
    static DONE: OnceLock<Result<(), HooksHidden>> = OnceLock::new();
    DONE.get_or_init(promote).clone()
}

const HOOK: &CStr = c"pto_cpu_sim_get_execution_context";

/// Why the hooks stay invisible to `dlsym(RTLD_DEFAULT)`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub(crate) struct HooksHidden(String);

#[allow(unsafe_code)]
fn promote() -> Result<(), HooksHidden> {
    let ours = pto_cpu_sim_get_execution_context as *const c_void;
    // What a kernel's `dlsym(RTLD_DEFAULT)` finds. Not our own
    // `dlsym(RTLD_DEFAULT)`: glibc searches the caller's scope, and ours
    // holds this library even while it is local. The main program's handle
    // (`dlopen(NULL)`) searches the global scope only, which is what a
    // kernel loaded `RTLD_LOCAL` sees beyond its own dependencies.
    let visible = || {
        // SAFETY: `dlopen(NULL)` returns the main program's handle (loads
        // nothing); closed below.
        let main = unsafe { libc::dlopen(std::ptr::null(), libc::RTLD_NOW) };
        if main.is_null() {
            return false;
        }
        // SAFETY: `main` is a live handle; the name is NUL-terminated.
        let found = unsafe { libc::dlsym(main, HOOK.as_ptr()) }.cast_const();
        // SAFETY: the handle `dlopen` returned above, closed once.
        unsafe { libc::dlclose(main) };
        found == ours
    };
    if visible() {
        return Ok(());
    }
    // SAFETY: `Dl_info` is plain data (pointers and integers); all zero is
    // a valid value, overwritten by `dladdr`.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `ours` is an address inside this library; `info` is writable.
    let found = unsafe { libc::dladdr(ours, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return Err(HooksHidden(
            "dladdr cannot name the file the simulator runtime was loaded from".into(),
        ));
    }
    // SAFETY: `dli_fname` is the loader's NUL-terminated name of a loaded
    // object, valid while it stays loaded (this library: it is running).
    let file = unsafe { CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: RTLD_NOLOAD loads nothing and runs no initialiser: it returns
    // the already loaded copy (this one, found by its name) or NULL.
    let h = unsafe {
        libc::dlopen(
            info.dli_fname,
            libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_GLOBAL,
        )
    };
    if h.is_null() {
        return Err(HooksHidden(format!(
            "dlopen({file}, RTLD_NOLOAD | RTLD_GLOBAL) failed: {}",
            dl_error()
        )));
    }
    // SAFETY: `h` is the handle the successful dlopen above returned, closed
    // once; the runtime's own reference keeps the object loaded.
    unsafe { libc::dlclose(h) };
    if visible() {
        Ok(())
    } else {
        Err(HooksHidden(format!(
            "`{}` of {file} is still not what dlsym(RTLD_DEFAULT) finds (is the runtime linked into an executable instead of loaded as a shared object?)",
            HOOK.to_string_lossy()
        )))
    }
}

/// The loader's last error text.
#[allow(unsafe_code)]
fn dl_error() -> String {
    // SAFETY: `dlerror` returns NULL or a NUL-terminated string valid until
    // the next dl* call on this thread; it is copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "no loaded object has that name".into()
    } else {
        // SAFETY: non-NULL `dlerror` result (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One state per key, zeroed, the same bytes on every request of its
    /// size or less, refused for more; nothing outside a mixed block.
    #[test]
    fn pipe_states_are_per_key_and_only_inside_a_mixed_block() {
        assert!(pto_sim_get_pipe_shared_state(1, 8).is_null());
        let pipes = PipeStates::default();
        in_block(3, (0, 2), Some(&pipes), || {
            let a = pto_sim_get_pipe_shared_state(1, 100);
            assert!(!a.is_null());
            assert_eq!(a as usize % 64, 0);
            // SAFETY: 100 zeroed bytes at `a`, alive with `pipes`.
            #[allow(unsafe_code)]
            let bytes = unsafe { std::slice::from_raw_parts(a.cast::<u8>(), 100) };
            assert!(bytes.iter().all(|&b| b == 0));
            assert_eq!(pto_sim_get_pipe_shared_state(1, 64), a);
            assert_ne!(pto_sim_get_pipe_shared_state(2, 64), a);
            assert!(pto_sim_get_pipe_shared_state(1, 129).is_null());
        });
        assert!(pto_sim_get_pipe_shared_state(1, 8).is_null());
    }
}
