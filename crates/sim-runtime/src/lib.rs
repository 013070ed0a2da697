//! Simulator runtime: `libscene_sim_runtime.so` implements the device C ABI
//! of `scene_runtime.h` on the host, so scenes run without an NPU.
//!
//! What it does:
//! - device memory is one lazily committed host mapping per open device with a
//!   first-fit allocator; device addresses are opaque (`0x1000_0000_0000 +
//!   offset`), never host pointers, and every copy is bounds-checked against
//!   live allocations;
//! - incore images are the raw `.text` bytes a card would receive: they are
//!   copied into an executable mapping and entered at offset 0 with a
//!   `SceneKernelArgs` (no dlopen of image kernels);
//! - hosted incores (`scene_rt_register_callable2`, optional ABI, issue 29)
//!   are host shared objects (C++20 with its runtime): loaded like the
//!   orchestration, once per content, and their entry symbol called per
//!   block, with the same `SceneKernelArgs` (or, in the `chip_tensor`
//!   convention, the original project's `int64_t *` of tensor records and
//!   scalars: `chip.rs`), on the same core threads; the runtime puts itself
//!   into the global scope so that their `dlsym(RTLD_DEFAULT)` finds
//!   PTO-ISA's execution-context hook (`hooks.rs`);
//! - the orchestration shared object is loaded from its registered bytes
//!   (written to a private file and dlopen'ed; identical bytes are loaded once);
//! - `scene_rt_run` / `scene_rt_run2` (with each argument's dtype, shape and
//!   strides) runs the orchestration on its own thread; each submitted
//!   task gets dependencies from its arguments' directions over overlapping
//!   byte ranges (RAW, WAR, WAW) and is executed, block by block, by emulated
//!   core threads (`aic`/`aiv` options) while the orchestration keeps going;
//! - a run past `timeout_ms` returns `SCENE_RT_E_TIMEOUT` and the device turns
//!   fatal: threads stuck in a hung kernel cannot be killed and are detached.
//!
//! - every buffer sits between guard pages, with canary bytes filling its
//!   pages around the data: a kernel writing outside its buffers faults at
//!   once or is caught after its block, naming the kernel, the buffer and
//!   the offset (`memory.rs`); freed pages are inaccessible;
//! - `scene_rt_comm_create` / `_destroy` (optional ABI, level 3): a
//!   communication domain over open devices, one rank each: zeroed windows
//!   every rank addresses, atomic signal slots with release/acquire, waits
//!   bounded by the domain's `timeout_ms` (`device/comm.rs`);
//!   `scene_rt_comm_create2` the same with each rank's window in its
//!   device's memory (a live allocation, e.g. a run argument: the window
//!   as a tensor);
//! - `scene_rt_trace_enable` / `scene_rt_trace_take` (optional ABI): a record
//!   of the next run (blocks per core lane, the orchestration's operations,
//!   the complete dependency list) as JSON (`device/trace.rs`);
//! - `scene_rt_crash_report(path)` (optional ABI) makes a fatal signal or an
//!   `exit()` from user code leave a report naming what was running
//!   (`crash.rs`); the harness calls it in its device worker process.
//! - `scene_rt_args_record(dev, dir)` (optional ABI) records every later
//!   run's task arguments (views, span bytes before and after, scalars)
//!   into `dir` (`device/args_dump.rs`; `--dump-args`).
//! - `scene_rt_reset(dev)` (optional ABI, issue 28) returns an open device
//!   to the state `scene_rt_open` left it in (callables, allocations,
//!   trace and args-record state, the run counter), so one worker can
//!   serve case after case on one open device (`Device::reset`).
//!
//! What it deliberately does not do: compile anything, know about scene
//! files, goldens or cards, or isolate kernels from each other: a kernel
//! that faults kills the process it runs in, which is why the harness runs
//! device sessions in a worker process.
//!
//! Options understood by `scene_rt_open` (`key=value;...`): `platform=a2a3sim|a5sim`
//! (default a2a3sim), `aic=N`, `aiv=N` (core threads per type, default 2; 0 =
//! the platform lacks the type), `arena_mb=N` (device memory, default 256;
//! an allocation that does not fit names this option), `timeout_ms=N`
//! (run deadline, default 0 = none), `open_ms=N` / `close_ms=N` (`scene_rt_open` /
//! `scene_rt_close` take N ms longer, as a real runtime's start-up does; default 0,
//! at most 600000), `fault=hang|fatal_on_run:K|corrupt_on_run:K|none`
//! (test-only fault injection, comma-separated). Unknown keys are errors.
//!
//! The exports are plain `extern "C" fn`s, as the C ABI sees them: they
//! check NULL pointers, but Rust callers of the rlib must, like C callers,
//! pass pointers that satisfy `scene_rt_*`'s contract in `scene_runtime.h`.
//! Device handles are never dereferenced (they are keys into a table of
//! open devices), so a closed or bogus handle is an error, not a crash.
//!
//! The workspace denies `unsafe_code`; this crate allows it item by item,
//! each block with a `// SAFETY:` comment, in nine modules only: here (the
//! `no_mangle` C exports and reading their pointer arguments), `hooks`
//! (the PTO-ISA hook export, `dladdr`/`dlopen` of this library), `device`
//! (calling the orchestration), `device/orch_v2` (the orchestration's v2
//! pointer arguments), `device/comm` (level-3 windows and the contexts
//! kernels pass back), `image` (executable mappings, `dlopen`),
//! `memory` (the arena mapping and page protection), `device/trace`
//! (`clock_gettime`) and `crash` (signal
//! handlers, alternate stacks, `atexit`). An implementation of a C ABI that runs
//! machine code cannot do without it.

mod chip;
mod crash;
mod device;
pub mod error;
mod fpenv;
mod hooks;
mod image;
mod memory;
pub mod options;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, OnceLock};

use device::{Device, IncoreKind, IncoreSpec, lock};
pub use error::RtError;
pub use hooks::pto_cpu_sim_get_execution_context;
use image::Convention;
pub use memory::DEVICE_BASE;
use options::Options;
/// The ABI definitions this runtime implements, also under their own names below.
pub use scene_abi as abi;
pub use scene_abi::*;

/// Opaque device handle given to C. The runtime never dereferences a
/// `SceneDevice*` it receives: it is only a key into the table of open
/// devices, so stale or bogus handles are reported, not followed.
#[derive(Debug)]
pub struct SceneDevice {
    _id: i32,
}

type DeviceTable = HashMap<usize, (Box<SceneDevice>, Arc<Device>)>;

fn devices() -> &'static Mutex<DeviceTable> {
    static DEVICES: OnceLock<Mutex<DeviceTable>> = OnceLock::new();
    DEVICES.get_or_init(Default::default)
}

fn device(dev: *mut SceneDevice) -> Result<Arc<Device>, RtError> {
    if dev.is_null() {
        return Err(RtError::Invalid("device handle is NULL".into()));
    }
    lock(devices())
        .get(&(dev as usize))
        .map(|(_, d)| Arc::clone(d))
        .ok_or_else(|| {
            RtError::NoDevice(format!("{dev:p} is not an open device (closed already?)"))
        })
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Sets this thread's last error: what `scene_rt_last_error` returns here,
/// and what an orchestration's `scene_orch_last_error` returns on its
/// thread (scene_abi.h, "Last error").
pub(crate) fn set_last_error(msg: &str) {
    let c = CString::new(msg.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Runs `f`, turning errors (and panics) into a status plus the thread's last error.
fn ffi(call: &str, f: impl FnOnce() -> Result<(), RtError>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => SCENE_RT_OK,
        Ok(Err(e)) => {
            set_last_error(&format!("{call}: {e}"));
            e.status()
        }
        Err(_) => {
            set_last_error(&format!(
                "{call}: internal error (panic) in the simulator runtime"
            ));
            SCENE_RT_E_INVALID
        }
    }
}

/// Borrows `len` bytes at `ptr` (NULL allowed only for `len == 0`).
fn bytes<'a>(ptr: *const u8, len: u64, what: &str) -> Result<&'a [u8], RtError> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(RtError::Invalid(format!(
            "{what} is NULL but its length is {len}"
        )));
    }
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| isize::try_from(l).is_ok())
        .ok_or_else(|| RtError::Invalid(format!("{what}: length {len} too large")))?;
    #[allow(unsafe_code)]
    // SAFETY: the C caller guarantees `ptr` points at `len` readable bytes
    // that stay valid for the duration of the call (scene_runtime.h).
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

fn cstr<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, RtError> {
    if ptr.is_null() {
        return Err(RtError::Invalid(format!("{what} is NULL")));
    }
    #[allow(unsafe_code)]
    // SAFETY: the C caller passes a NUL-terminated string valid for the call.
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str()
        .map_err(|_| RtError::Invalid(format!("{what} is not UTF-8")))
}

/// ABI version implemented by this library (`SCENE_RUNTIME_ABI_VERSION`).
// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_abi_version() -> i32 {
    SCENE_RUNTIME_ABI_VERSION
}

/// Message of the last error on this thread; never NULL.
// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_last_error() -> *const c_char {
    last_error_ptr()
}

/// This thread's last error, NUL-terminated, valid until the next error
/// on this thread.
pub(crate) fn last_error_ptr() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_crash_report(path: *const c_char) -> i32 {
    ffi("scene_rt_crash_report", || {
        crash::install(cstr(path, "path")?)
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_args_record(dev: *mut SceneDevice, dir: *const c_char) -> i32 {
    ffi("scene_rt_args_record", || {
        let dev = device(dev)?;
        let dir = if dir.is_null() {
            None
        } else {
            Some(std::path::PathBuf::from(cstr(dir, "dir")?))
        };
        dev.record_args(dir);
        Ok(())
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_open(
    device_id: i32,
    options: *const c_char,
    out: *mut *mut SceneDevice,
) -> i32 {
    ffi("scene_rt_open", || {
        if out.is_null() {
            return Err(RtError::Invalid("out is NULL".into()));
        }
        let opts = if options.is_null() {
            ""
        } else {
            cstr(options, "options")?
        };
        let opts = Options::parse(opts)?.for_device(device_id);
        let open_delay = opts.open_delay;
        let dev = Arc::new(Device::open(device_id, opts)?);
        // `open_ms`: a real runtime's start-up cost, once the device is set up.
        std::thread::sleep(open_delay);
        let token = Box::new(SceneDevice { _id: device_id });
        let ptr = std::ptr::from_ref::<SceneDevice>(&token).cast_mut();
        lock(devices()).insert(ptr as usize, (token, dev));
        #[allow(unsafe_code)]
        // SAFETY: `out` is non-NULL and points at writable storage (caller contract).
        unsafe {
            *out = ptr;
        }
        Ok(())
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_close(dev: *mut SceneDevice) -> i32 {
    ffi("scene_rt_close", || {
        let close_delay = device(dev)?.opts.close_delay;
        let entry = lock(devices()).remove(&(dev as usize));
        // Dropping the last Arc shuts the core threads down (outside the table lock).
        drop(entry);
        // `close_ms`: a real runtime's tear-down cost.
        std::thread::sleep(close_delay);
        Ok(())
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_reset(dev: *mut SceneDevice) -> i32 {
    ffi("scene_rt_reset", || device(dev)?.reset())
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_malloc(dev: *mut SceneDevice, size: u64, out_addr: *mut u64) -> i32 {
    ffi("scene_rt_malloc", || {
        let d = device(dev)?;
        if out_addr.is_null() {
            return Err(RtError::Invalid("out_addr is NULL".into()));
        }
        let a = d.malloc(size)?;
        #[allow(unsafe_code)]
        // SAFETY: `out_addr` is non-NULL and writable (caller contract).
        unsafe {
            *out_addr = a;
        }
        Ok(())
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_free(dev: *mut SceneDevice, addr: u64) -> i32 {
    ffi("scene_rt_free", || device(dev)?.free(addr))
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_copy_to_device(
    dev: *mut SceneDevice,
    dst: u64,
    src: *const c_void,
    size: u64,
) -> i32 {
    ffi("scene_rt_copy_to_device", || {
        let d = device(dev)?;
        // Bounds first: the range then is known to be a sane size.
        d.check_range(dst, size, "copy to device")?;
        d.copy_to_device(dst, bytes(src.cast(), size, "src")?)
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_copy_from_device(
    dev: *mut SceneDevice,
    dst: *mut c_void,
    src: u64,
    size: u64,
) -> i32 {
    ffi("scene_rt_copy_from_device", || {
        let d = device(dev)?;
        d.check_range(src, size, "copy from device")?;
        if size == 0 {
            return d.copy_from_device(&mut [], src);
        }
        if dst.is_null() {
            return Err(RtError::Invalid(format!("dst is NULL but size is {size}")));
        }
        let len = usize::try_from(size)
            .map_err(|_| RtError::Invalid(format!("size {size} too large")))?;
        #[allow(unsafe_code)]
        // SAFETY: the caller guarantees `dst` points at `size` writable bytes
        // that nothing else accesses during the call.
        let out = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), len) };
        d.copy_from_device(out, src)
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_register_callable(
    dev: *mut SceneDevice,
    desc: *const SceneCallableDesc,
    out_handle: *mut u32,
) -> i32 {
    ffi("scene_rt_register_callable", || {
        #[allow(unsafe_code)]
        // SAFETY: a non-NULL `desc` points at a valid SceneCallableDesc (caller contract).
        let desc =
            unsafe { desc.as_ref() }.ok_or_else(|| RtError::Invalid("desc is NULL".into()))?;
        let callable = CallableParts {
            orch_so: desc.orch_so,
            orch_so_len: desc.orch_so_len,
            orch_symbol: desc.orch_symbol,
            incores: desc.incores,
            num_incores: desc.num_incores,
        };
        register(dev, &callable, out_handle, |i, inc: &SceneIncoreDesc| {
            Ok(IncoreSpec {
                func_id: inc.func_id,
                core_type: inc.core_type,
                image: bytes(inc.image, inc.image_len, &format!("incores[{i}].image"))?,
                kind: IncoreKind::Image,
            })
        })
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_register_callable2(
    dev: *mut SceneDevice,
    desc: *const SceneCallableDesc2,
    out_handle: *mut u32,
) -> i32 {
    ffi("scene_rt_register_callable2", || {
        #[allow(unsafe_code)]
        // SAFETY: a non-NULL `desc` points at a valid SceneCallableDesc2 (caller contract).
        let desc =
            unsafe { desc.as_ref() }.ok_or_else(|| RtError::Invalid("desc is NULL".into()))?;
        let callable = CallableParts {
            orch_so: desc.orch_so,
            orch_so_len: desc.orch_so_len,
            orch_symbol: desc.orch_symbol,
            incores: desc.incores,
            num_incores: desc.num_incores,
        };
        register(dev, &callable, out_handle, incore_spec2)
    })
}

/// The fields `SceneCallableDesc` and `SceneCallableDesc2` share; `D` is
/// the incore descriptor type.
struct CallableParts<D> {
    orch_so: *const u8,
    orch_so_len: u64,
    orch_symbol: *const c_char,
    incores: *const D,
    num_incores: u32,
}

/// Registration of either descriptor version: the orchestration, the
/// incores (each made an [`IncoreSpec`] by `spec`), the handle.
fn register<D>(
    dev: *mut SceneDevice,
    desc: &CallableParts<D>,
    out_handle: *mut u32,
    spec: impl for<'a> Fn(usize, &'a D) -> Result<IncoreSpec<'a>, RtError>,
) -> Result<(), RtError> {
    let d = device(dev)?;
    if out_handle.is_null() {
        return Err(RtError::Invalid("out_handle is NULL".into()));
    }
    let orch = bytes(desc.orch_so, desc.orch_so_len, "desc->orch_so")?;
    if orch.is_empty() {
        return Err(RtError::Invalid("desc->orch_so is empty".into()));
    }
    let symbol = cstr(desc.orch_symbol, "desc->orch_symbol")?;
    let incores: &[D] = if desc.num_incores == 0 {
        &[]
    } else if desc.incores.is_null() {
        return Err(RtError::Invalid(format!(
            "desc->incores is NULL but num_incores is {}",
            desc.num_incores
        )));
    } else {
        #[allow(unsafe_code)]
        // SAFETY: `incores` points at `num_incores` descriptors (caller contract).
        unsafe {
            std::slice::from_raw_parts(desc.incores, desc.num_incores as usize)
        }
    };
    let specs = incores
        .iter()
        .enumerate()
        .map(|(i, inc)| spec(i, inc))
        .collect::<Result<Vec<_>, RtError>>()?;
    let h = d.register(orch, symbol, &specs)?;
    #[allow(unsafe_code)]
    // SAFETY: `out_handle` is non-NULL and writable (caller contract).
    unsafe {
        *out_handle = h;
    }
    Ok(())
}

/// A `SceneIncoreDesc2` as an [`IncoreSpec`]: its kind and argument
/// convention checked (`chip_tensor` is a convention of hosted kernels only).
fn incore_spec2(i: usize, inc: &SceneIncoreDesc2) -> Result<IncoreSpec<'_>, RtError> {
    let image = bytes(inc.image, inc.image_len, &format!("incores[{i}].image"))?;
    let who = format!("incores[{i}] (func_id {})", inc.func_id);
    let kind = match (inc.kind, inc.args_convention) {
        (SCENE_INCORE_IMAGE, SCENE_KERNEL_ARGS_SCENE) => IncoreKind::Image,
        (SCENE_INCORE_IMAGE, c) => {
            return Err(RtError::Invalid(format!(
                "{who}: an image kernel takes SCENE_KERNEL_ARGS_SCENE (0), not args_convention {c}"
            )));
        }
        (SCENE_INCORE_HOSTED, c @ (SCENE_KERNEL_ARGS_SCENE | SCENE_KERNEL_ARGS_CHIP_TENSOR)) => {
            IncoreKind::Hosted {
                symbol: if inc.symbol.is_null() {
                    "kernel_entry"
                } else {
                    cstr(inc.symbol, &format!("incores[{i}].symbol"))?
                },
                convention: if c == SCENE_KERNEL_ARGS_SCENE {
                    Convention::Scene
                } else {
                    Convention::ChipTensor
                },
            }
        }
        (SCENE_INCORE_HOSTED, c) => {
            return Err(RtError::Invalid(format!(
                "{who}: unknown args_convention {c} (known: SCENE_KERNEL_ARGS_SCENE 0, SCENE_KERNEL_ARGS_CHIP_TENSOR 1)"
            )));
        }
        (k, _) => {
            return Err(RtError::Invalid(format!(
                "{who}: unknown kind {k} (known: SCENE_INCORE_IMAGE 0, SCENE_INCORE_HOSTED 1)"
            )));
        }
    };
    Ok(IncoreSpec {
        func_id: inc.func_id,
        core_type: inc.core_type,
        image,
        kind,
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_unregister_callable(dev: *mut SceneDevice, handle: u32) -> i32 {
    ffi("scene_rt_unregister_callable", || {
        device(dev)?.unregister(handle)
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_run(
    dev: *mut SceneDevice,
    handle: u32,
    args: *const SceneRunArg,
    num_args: u32,
) -> i32 {
    ffi("scene_rt_run", || {
        run(dev, handle, args, std::ptr::null(), num_args)
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_run2(
    dev: *mut SceneDevice,
    handle: u32,
    args: *const SceneRunArg,
    descs: *const SceneTensorDesc,
    num_args: u32,
) -> i32 {
    ffi("scene_rt_run", || run(dev, handle, args, descs, num_args))
}

fn run(
    dev: *mut SceneDevice,
    handle: u32,
    args: *const SceneRunArg,
    descs: *const SceneTensorDesc,
    num_args: u32,
) -> Result<(), RtError> {
    let d = device(dev)?;
    if num_args == 0 {
        return d.run(handle, &[], None);
    }
    if args.is_null() {
        return Err(RtError::Invalid(format!(
            "args is NULL but num_args is {num_args}"
        )));
    }
    #[allow(unsafe_code)]
    // SAFETY: `args` points at `num_args` run arguments (caller contract).
    let args = unsafe { std::slice::from_raw_parts(args, num_args as usize) };
    let descs = (!descs.is_null()).then(|| {
        #[allow(unsafe_code)]
        // SAFETY: a non-NULL `descs` points at `num_args` descriptions
        // (scene_runtime.h).
        unsafe {
            std::slice::from_raw_parts(descs, num_args as usize)
        }
    });
    d.run(handle, args, descs)
}

/// Host address at which `func_id` of callable `handle` is mapped on `dev`
/// (0 if unknown). Not part of the C ABI; for tests and diagnostics.
pub fn debug_image_addr(dev: *mut SceneDevice, handle: u32, func_id: u32) -> usize {
    device(dev)
        .ok()
        .and_then(|d| d.image_addr(handle, func_id))
        .unwrap_or(0)
}

/// The calling thread's last error message (what `scene_rt_last_error` returns),
/// for Rust callers of the rlib.
pub fn last_error_message() -> String {
    LAST_ERROR.with(|e| e.borrow().to_string_lossy().into_owned())
}

/// What a `SceneCommDomain*` points at: the domain and its devices (kept
/// until destroy, which detaches them).
#[derive(Debug)]
struct CommHandle {
    devices: Vec<Arc<Device>>,
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_comm_create(
    devs: *const *mut SceneDevice,
    nranks: u32,
    window_size: u64,
    options: *const c_char,
    out: *mut *mut c_void,
) -> i32 {
    ffi("scene_rt_comm_create", || {
        comm_create(devs, nranks, window_size, std::ptr::null(), options, out)
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_comm_create2(
    devs: *const *mut SceneDevice,
    nranks: u32,
    window_size: u64,
    window_addrs: *const u64,
    options: *const c_char,
    out: *mut *mut c_void,
) -> i32 {
    ffi("scene_rt_comm_create2", || {
        comm_create(devs, nranks, window_size, window_addrs, options, out)
    })
}

/// Both comm_create entries: heap windows when `window_addrs` is NULL,
/// else rank r's window is device memory at `window_addrs[r]` on `devs[r]`.
fn comm_create(
    devs: *const *mut SceneDevice,
    nranks: u32,
    window_size: u64,
    window_addrs: *const u64,
    options: *const c_char,
    out: *mut *mut c_void,
) -> Result<(), RtError> {
    if devs.is_null() || out.is_null() {
        return Err(RtError::Invalid("devs or out is NULL".into()));
    }
    let opts = if options.is_null() {
        ""
    } else {
        cstr(options, "options")?
    };
    let timeout = device::comm::parse_options(opts)?;
    // First: `nranks` (1..=SCENE_COMM_MAX_RANKS) is checked before any
    // slice of that length is made from the caller's pointers.
    device::comm::Domain::check_ranks(nranks)?;
    #[allow(unsafe_code)]
    // SAFETY: `devs` points at `nranks` device handles (caller contract),
    // `nranks` bounded by `check_ranks` above.
    let handles = unsafe { std::slice::from_raw_parts(devs, nranks as usize) };
    let devices = handles
        .iter()
        .map(|&d| device(d))
        .collect::<Result<Vec<_>, _>>()?;
    let domain = if window_addrs.is_null() {
        device::comm::Domain::new(nranks, window_size, timeout)?
    } else {
        #[allow(unsafe_code)]
        // SAFETY: a non-NULL `window_addrs` points at `nranks` addresses
        // (scene_runtime.h), `nranks` bounded above.
        let addrs = unsafe { std::slice::from_raw_parts(window_addrs, nranks as usize) };
        let at = devices
            .iter()
            .zip(addrs)
            .enumerate()
            .map(|(rank, (d, &addr))| d.window_at(addr, window_size, rank as u32))
            .collect::<Result<Vec<_>, _>>()?;
        device::comm::Domain::with_windows(window_size, &at, timeout)?
    };
    for (rank, d) in devices.iter().enumerate() {
        if let Err(e) = d.attach_comm(Arc::clone(&domain), rank as u32) {
            for d in &devices[..rank] {
                d.detach_comm();
            }
            return Err(e);
        }
    }
    let handle = Box::into_raw(Box::new(CommHandle { devices }));
    #[allow(unsafe_code)]
    // SAFETY: `out` is non-NULL and points at writable storage (caller contract).
    unsafe {
        *out = handle.cast();
    }
    Ok(())
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// `comm` is NULL or a handle from `scene_rt_comm_create`, destroyed once
// (caller contract).
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_comm_destroy(comm: *mut c_void) -> i32 {
    ffi("scene_rt_comm_destroy", || {
        if comm.is_null() {
            return Err(RtError::Invalid("comm is NULL".into()));
        }
        #[allow(unsafe_code)]
        // SAFETY: `comm` came from `Box::into_raw` in `scene_rt_comm_create`
        // and is destroyed once (caller contract).
        let handle = unsafe { Box::from_raw(comm.cast::<CommHandle>()) };
        for d in &handle.devices {
            d.detach_comm();
        }
        Ok(())
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_trace_enable(dev: *mut SceneDevice, flags: u32) -> i32 {
    ffi("scene_rt_trace_enable", || {
        let known = SCENE_RT_TRACE_TIMELINE | SCENE_RT_TRACE_DEPS;
        if flags & !known != 0 {
            return Err(RtError::Invalid(format!(
                "unknown trace flags {:#x} (known: SCENE_RT_TRACE_TIMELINE | SCENE_RT_TRACE_DEPS)",
                flags & !known
            )));
        }
        device(dev)?.trace_enable(flags);
        Ok(())
    })
}

// SAFETY: `no_mangle` export of the C ABI: no other symbol of the process is
// named `scene_rt_*`, and the signature is the one scene_runtime.h declares.
// Pointer arguments follow that contract (valid or NULL); NULL is checked,
// the rest is the caller's duty.
#[allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]
#[unsafe(no_mangle)]
pub extern "C" fn scene_rt_trace_take(
    dev: *mut SceneDevice,
    buf: *mut c_char,
    cap: u64,
    len: *mut u64,
) -> i32 {
    ffi("scene_rt_trace_take", || {
        let d = device(dev)?;
        if len.is_null() {
            return Err(RtError::Invalid("len is NULL".into()));
        }
        let out = if buf.is_null() || cap == 0 {
            None
        } else {
            let cap = usize::try_from(cap)
                .map_err(|_| RtError::Invalid(format!("cap {cap} too large")))?;
            #[allow(unsafe_code)]
            // SAFETY: a non-NULL `buf` points at `cap` writable bytes that
            // nothing else accesses during the call (caller contract).
            Some(unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), cap) })
        };
        let (n, _) = d.trace_take(out);
        #[allow(unsafe_code)]
        // SAFETY: `len` is non-NULL and writable (caller contract).
        unsafe {
            *len = n as u64;
        }
        Ok(())
    })
}
