//! Loading a device runtime shared object and calling it through a safe API.
//!
//! This is the only module of the crate with `unsafe` code: resolving the
//! `scene_rt_*` symbols and calling them across the C ABI of
//! `include/scene_runtime.h`.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::{Path, PathBuf};

use scene_abi::{
    SCENE_DIR_IN, SCENE_DIR_INOUT, SCENE_DIR_OUT, SCENE_DIR_SCALAR, SCENE_INCORE_HOSTED,
    SCENE_INCORE_IMAGE, SCENE_KERNEL_ARGS_CHIP_TENSOR, SCENE_KERNEL_ARGS_SCENE, SCENE_RT_E_INVALID,
    SCENE_RT_OK, SCENE_RUNTIME_ABI_VERSION, SceneCallableDesc, SceneCallableDesc2, SceneIncoreDesc,
    SceneIncoreDesc2, SceneRunArg, SceneTensorDesc, runtime_version_supported,
};

use crate::error::RuntimeError;
use crate::held::HeldCard;

/// File name of the simulator runtime built by `scene-sim-runtime`.
#[cfg(target_os = "macos")]
pub const RUNTIME_LIB_NAME: &str = "libscene_sim_runtime.dylib";
/// File name of the simulator runtime built by `scene-sim-runtime`.
#[cfg(not(target_os = "macos"))]
pub const RUNTIME_LIB_NAME: &str = "libscene_sim_runtime.so";

/// Where the built simulator runtime is, for callers given no runtime path
/// (the entry point applies `SCENE_RUNTIME_LIB` before asking):
/// [`RUNTIME_LIB_NAME`] next to the current executable: in its directory, its
/// `deps/` subdirectory, or its parent (test executables live in
/// `target/<profile>/deps`, binaries in `target/<profile>`). When several
/// exist, the most recently built one wins (cargo refreshes them separately).
pub fn default_runtime_path() -> Result<PathBuf, RuntimeError> {
    let mut searched = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        searched.push(dir.join(RUNTIME_LIB_NAME));
        searched.push(dir.join("deps").join(RUNTIME_LIB_NAME));
        if let Some(parent) = dir.parent() {
            searched.push(parent.join(RUNTIME_LIB_NAME));
        }
    }
    let newest = searched
        .iter()
        .filter_map(|p| {
            let m = std::fs::metadata(p).ok().filter(|m| m.is_file())?;
            Some((m.modified().ok(), p))
        })
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p.clone());
    newest.ok_or(RuntimeError::NotFound {
        name: RUNTIME_LIB_NAME.to_owned(),
        searched,
    })
}

type Dev = *mut c_void;

/// Every entry point, resolved once at load.
#[derive(Debug, Clone, Copy)]
struct Api {
    open: unsafe extern "C" fn(i32, *const c_char, *mut Dev) -> i32,
    close: unsafe extern "C" fn(Dev) -> i32,
    malloc: unsafe extern "C" fn(Dev, u64, *mut u64) -> i32,
    free: unsafe extern "C" fn(Dev, u64) -> i32,
    copy_to_device: unsafe extern "C" fn(Dev, u64, *const c_void, u64) -> i32,
    copy_from_device: unsafe extern "C" fn(Dev, *mut c_void, u64, u64) -> i32,
    register_callable: unsafe extern "C" fn(Dev, *const SceneCallableDesc, *mut u32) -> i32,
    unregister_callable: unsafe extern "C" fn(Dev, u32) -> i32,
    run: unsafe extern "C" fn(Dev, u32, *const SceneRunArg, u32) -> i32,
    run2: unsafe extern "C" fn(Dev, u32, *const SceneRunArg, *const SceneTensorDesc, u32) -> i32,
    last_error: unsafe extern "C" fn() -> *const c_char,
    /// Optional (`scene_rt_crash_report`): runtimes without it give no
    /// crash context.
    crash_report: Option<unsafe extern "C" fn(*const c_char) -> i32>,
    /// Optional (`scene_rt_comm_create` / `_destroy`, level 3): runtimes
    /// without them cannot run rank groups.
    comm_create: Option<CommCreate>,
    comm_destroy: Option<unsafe extern "C" fn(*mut c_void) -> i32>,
    /// Optional (`scene_rt_comm_create2`): runtimes without it cannot put
    /// a rank's window in its device memory (`[comm] window_tensor`).
    comm_create2: Option<CommCreate2>,
    /// Optional (`scene_rt_trace_enable` / `_take`, issue 19): runtimes
    /// without them cannot give traces or dependency graphs.
    trace_enable: Option<unsafe extern "C" fn(Dev, u32) -> i32>,
    trace_take: Option<TraceTake>,
    /// Optional (`scene_rt_args_record`, `--dump-args`): runtimes without
    /// it cannot record task arguments.
    args_record: Option<unsafe extern "C" fn(Dev, *const c_char) -> i32>,
    /// Optional (`scene_rt_reset`, issue 28): runtimes without it cannot
    /// clean an open device; the device is closed and reopened instead.
    reset: Option<unsafe extern "C" fn(Dev) -> i32>,
    /// Optional (`scene_rt_register_callable2`, issue 29): runtimes
    /// without it run image kernels only.
    register_callable2: Option<RegisterCallable2>,
}

type RegisterCallable2 = unsafe extern "C" fn(Dev, *const SceneCallableDesc2, *mut u32) -> i32;

type TraceTake = unsafe extern "C" fn(Dev, *mut c_char, u64, *mut u64) -> i32;

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock runtime trace records
/// use (`scene_rt_trace_enable`), shared by every process of the machine,
/// so the harness can place a worker's records on its own timeline.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists on the supported systems.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

type CommCreate =
    unsafe extern "C" fn(*const Dev, u32, u64, *const c_char, *mut *mut c_void) -> i32;

type CommCreate2 =
    unsafe extern "C" fn(*const Dev, u32, u64, *const u64, *const c_char, *mut *mut c_void) -> i32;

// ---- public types ------------------------------------------------------------

/// Direction of a tensor argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    In,
    Out,
    InOut,
}

impl Direction {
    fn to_c(self) -> u32 {
        match self {
            Direction::In => SCENE_DIR_IN,
            Direction::Out => SCENE_DIR_OUT,
            Direction::InOut => SCENE_DIR_INOUT,
        }
    }
}

/// One argument of a run, in orchestration-signature order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunArg {
    Tensor {
        direction: Direction,
        addr: u64,
        size: u64,
    },
    /// Raw bits (e.g. `f32::to_bits(x) as u64`).
    Scalar(u64),
}

impl RunArg {
    /// A tensor argument covering the whole of `buf`.
    pub fn tensor(direction: Direction, buf: DeviceBuffer) -> RunArg {
        RunArg::Tensor {
            direction,
            addr: buf.addr,
            size: buf.size,
        }
    }

    fn to_c(self) -> SceneRunArg {
        match self {
            RunArg::Tensor {
                direction,
                addr,
                size,
            } => SceneRunArg {
                direction: direction.to_c(),
                reserved: 0,
                value: addr,
                size,
            },
            RunArg::Scalar(v) => SceneRunArg {
                direction: SCENE_DIR_SCALAR,
                reserved: 0,
                value: v,
                size: 0,
            },
        }
    }
}

/// A device allocation (not freed automatically: see [`DeviceSession::free`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceBuffer {
    /// Opaque device address.
    pub addr: u64,
    pub size: u64,
}

/// One incore kernel of a callable: an image, or a hosted shared object.
#[derive(Debug, Clone, Copy)]
pub struct IncoreImageRef<'a> {
    pub func_id: u32,
    /// [`SCENE_CORE_AIC`](scene_abi::SCENE_CORE_AIC) or
    /// [`SCENE_CORE_AIV`](scene_abi::SCENE_CORE_AIV).
    pub core_type: u32,
    /// [`IncoreKind::Image`]: the raw position-independent `.text` image,
    /// entered at offset 0. [`IncoreKind::Hosted`]: the bytes of a host
    /// shared object.
    pub image: &'a [u8],
    /// What `image` is (`SCENE_INCORE_*`).
    pub kind: IncoreKind<'a>,
}

impl<'a> IncoreImageRef<'a> {
    /// A raw `.text` image (`SCENE_INCORE_IMAGE`).
    pub fn image(func_id: u32, core_type: u32, image: &'a [u8]) -> Self {
        IncoreImageRef {
            func_id,
            core_type,
            image,
            kind: IncoreKind::Image,
        }
    }

    /// A hosted kernel (`SCENE_INCORE_HOSTED`): the bytes of a host shared
    /// object whose `symbol` (`None`: `kernel_entry`) is
    /// `void entry(const SceneKernelArgs *)` ([`ArgsConvention::Scene`]).
    pub fn hosted(func_id: u32, core_type: u32, so: &'a [u8], symbol: Option<&'a str>) -> Self {
        IncoreImageRef {
            func_id,
            core_type,
            image: so,
            kind: IncoreKind::Hosted {
                symbol,
                args: ArgsConvention::Scene,
            },
        }
    }

    /// Whether this incore needs `scene_rt_register_callable2`.
    pub fn is_hosted(&self) -> bool {
        matches!(self.kind, IncoreKind::Hosted { .. })
    }
}

/// What the bytes of an [`IncoreImageRef`] are (`SCENE_INCORE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IncoreKind<'a> {
    /// `SCENE_INCORE_IMAGE`: a raw `.text` image entered at offset 0.
    #[default]
    Image,
    /// `SCENE_INCORE_HOSTED` (issue 29): a host ELF shared object, loaded
    /// with `dlopen`; `symbol` (`None`: `kernel_entry`) is called per block.
    Hosted {
        symbol: Option<&'a str>,
        args: ArgsConvention,
    },
}

/// How a hosted kernel's entry takes its arguments (`SCENE_KERNEL_ARGS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ArgsConvention {
    /// `SCENE_KERNEL_ARGS_SCENE`: `void entry(const SceneKernelArgs *)`.
    #[default]
    Scene,
    /// `SCENE_KERNEL_ARGS_CHIP_TENSOR`: `void kernel_entry(int64_t *args)`
    /// of the original project (tensor records and scalars; a runtime may
    /// refuse it; the simulator implements it).
    ChipTensor,
}

impl ArgsConvention {
    /// The `SCENE_KERNEL_ARGS_*` value.
    pub fn to_abi(self) -> u32 {
        match self {
            ArgsConvention::Scene => SCENE_KERNEL_ARGS_SCENE,
            ArgsConvention::ChipTensor => SCENE_KERNEL_ARGS_CHIP_TENSOR,
        }
    }

    /// The convention of a `SCENE_KERNEL_ARGS_*` value, `None` if unknown.
    pub fn from_abi(v: u32) -> Option<Self> {
        match v {
            SCENE_KERNEL_ARGS_SCENE => Some(ArgsConvention::Scene),
            SCENE_KERNEL_ARGS_CHIP_TENSOR => Some(ArgsConvention::ChipTensor),
            _ => None,
        }
    }
}

/// What [`DeviceSession::register`] uploads: an orchestration shared object
/// plus its incore kernels (images, or hosted shared objects).
#[derive(Debug, Clone)]
pub struct CallableImage<'a> {
    pub orch_so: &'a [u8],
    pub orch_symbol: &'a str,
    pub incores: Vec<IncoreImageRef<'a>>,
}

/// A registered callable on one device session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallableHandle(pub u32);

/// A loaded device runtime.
///
/// Taking a [`HeldCard`] (a [`crate::CardLease`], or the card a supervising
/// process holds for a device worker) in [`Runtime::load`] makes "a runtime
/// is loaded only while a card is held" a type-level fact.
#[derive(Debug)]
pub struct Runtime {
    api: Api,
    path: PathBuf,
    abi_version: i32,
    // Keeps the fn pointers in `api` valid; never unloaded before them.
    _lib: libloading::Library,
}

impl Runtime {
    /// Loads the runtime at `path`, resolves every `scene_rt_*` symbol and
    /// checks the ABI version by the one policy of `scene_abi.h`: at least
    /// [`SCENE_RUNTIME_ABI_VERSION`] (whose symbols it resolves), any newer
    /// one accepted, since versions only add.
    pub fn load(_card: &dyn HeldCard, path: &Path) -> Result<Runtime, RuntimeError> {
        // SAFETY: loading a shared object runs its initialisers; the path names
        // a device runtime chosen by the user (SCENE_RUNTIME_LIB or the build),
        // which is trusted native code by design.
        let lib =
            unsafe { libloading::Library::new(path) }.map_err(|source| RuntimeError::Load {
                path: path.to_owned(),
                source,
            })?;
        macro_rules! sym {
            ($name:literal) => {{
                // SAFETY: the symbol is declared in scene_runtime.h with exactly
                // the signature of the `Api` field it is stored in; the copied
                // fn pointer lives in `Runtime` next to the library that owns it.
                let s = unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|source| {
                    RuntimeError::MissingSymbol {
                        path: path.to_owned(),
                        symbol: $name,
                        source,
                    }
                })?;
                *s
            }};
        }
        // The version first: a runtime of another ABI version is refused
        // as such, not for a symbol that version lacks.
        let abi_version: unsafe extern "C" fn() -> i32 = sym!("scene_rt_abi_version");
        // SAFETY: `scene_rt_abi_version` takes no arguments and has no preconditions.
        let found = unsafe { abi_version() };
        if !runtime_version_supported(found) {
            return Err(RuntimeError::AbiMismatch {
                found,
                expected: SCENE_RUNTIME_ABI_VERSION,
            });
        }
        let api = Api {
            open: sym!("scene_rt_open"),
            close: sym!("scene_rt_close"),
            malloc: sym!("scene_rt_malloc"),
            free: sym!("scene_rt_free"),
            copy_to_device: sym!("scene_rt_copy_to_device"),
            copy_from_device: sym!("scene_rt_copy_from_device"),
            register_callable: sym!("scene_rt_register_callable"),
            unregister_callable: sym!("scene_rt_unregister_callable"),
            run: sym!("scene_rt_run"),
            run2: sym!("scene_rt_run2"),
            last_error: sym!("scene_rt_last_error"),
            // SAFETY: as for `sym!`: declared in scene_runtime.h with this
            // signature; absent in runtimes that do not offer it.
            crash_report: unsafe { lib.get(b"scene_rt_crash_report\0") }
                .ok()
                .map(|s| *s),
            // SAFETY: as for `sym!`: declared in scene_runtime.h with this
            // signature; absent in runtimes without level-3 support.
            comm_create: unsafe { lib.get(b"scene_rt_comm_create\0") }
                .ok()
                .map(|s| *s),
            // SAFETY: as above.
            comm_destroy: unsafe { lib.get(b"scene_rt_comm_destroy\0") }
                .ok()
                .map(|s| *s),
            // SAFETY: as for `sym!`: declared in scene_runtime.h with this
            // signature; absent in runtimes without device-memory windows.
            comm_create2: unsafe { lib.get(b"scene_rt_comm_create2\0") }
                .ok()
                .map(|s| *s),
            // SAFETY: as for `sym!`: declared in scene_runtime.h with this
            // signature; absent in runtimes without traces.
            trace_enable: unsafe { lib.get(b"scene_rt_trace_enable\0") }
                .ok()
                .map(|s| *s),
            // SAFETY: as above.
            trace_take: unsafe { lib.get(b"scene_rt_trace_take\0") }
                .ok()
                .map(|s| *s),
            // SAFETY: as for `sym!`: declared in scene_runtime.h with this
            // signature; absent in runtimes that cannot dump task arguments.
            args_record: unsafe { lib.get(b"scene_rt_args_record\0") }
                .ok()
                .map(|s| *s),
            // SAFETY: as for `sym!`: declared in scene_runtime.h with this
            // signature; absent in runtimes that cannot reset an open device.
            reset: unsafe { lib.get(b"scene_rt_reset\0") }.ok().map(|s| *s),
            // SAFETY: as for `sym!`: declared in scene_runtime.h with this
            // signature; absent in runtimes without hosted kernels.
            register_callable2: unsafe { lib.get(b"scene_rt_register_callable2\0") }
                .ok()
                .map(|s| *s),
        };
        Ok(Runtime {
            api,
            path: path.to_owned(),
            abi_version: found,
            _lib: lib,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn abi_version(&self) -> i32 {
        self.abi_version
    }

    /// Whether the runtime offers `scene_rt_reset` (optional, issue 28):
    /// without it, a device is closed and reopened between cases instead.
    pub fn has_reset(&self) -> bool {
        self.api.reset.is_some()
    }

    /// Whether the runtime offers `scene_rt_register_callable2` (optional,
    /// issue 29): without it, callables with hosted incores
    /// ([`IncoreKind::Hosted`]) cannot be registered.
    pub fn has_hosted_kernels(&self) -> bool {
        self.api.register_callable2.is_some()
    }

    /// The runtime's last error message on this thread.
    fn last_error(&self) -> String {
        // SAFETY: `scene_rt_last_error` has no preconditions and returns NULL
        // or a NUL-terminated string valid until the next call on this thread;
        // it is copied immediately.
        unsafe {
            let p = (self.api.last_error)();
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        }
    }

    fn check(&self, call: &'static str, status: i32) -> Result<(), RuntimeError> {
        if status == SCENE_RT_OK {
            Ok(())
        } else {
            Err(RuntimeError::Call {
                call,
                status,
                message: self.last_error(),
            })
        }
    }

    /// Asks the runtime to describe a fatal signal, or an `exit()` from user
    /// code, in the file at `path` (see `scene_rt_crash_report`). `Ok(false)`
    /// when the runtime does not offer it. Only for a process that exists
    /// to run one device session: the runtime takes over its fatal signals.
    pub fn enable_crash_report(&self, path: &Path) -> Result<bool, RuntimeError> {
        let Some(f) = self.api.crash_report else {
            return Ok(false);
        };
        let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
            RuntimeError::InvalidArgument(format!("{} contains NUL", path.display()))
        })?;
        // SAFETY: `c` is NUL-terminated and outlives the call, which copies
        // what it needs (scene_runtime.h).
        let status = unsafe { f(c.as_ptr()) };
        self.check("scene_rt_crash_report", status)?;
        Ok(true)
    }

    /// Creates a communication domain over `devices` (rank r on
    /// `devices[r]`) with windows of `window_size` bytes; `options` are the
    /// domain's (`timeout_ms=`). Destroyed on drop.
    pub fn comm_create<'s>(
        &'s self,
        devices: &[&DeviceSession<'s>],
        window_size: u64,
        options: &str,
    ) -> Result<CommDomain<'s>, RuntimeError> {
        self.comm_create_at(devices, window_size, None, options)
    }

    /// As [`Runtime::comm_create`]; with `window_addrs`, rank r's window
    /// is the device memory at `window_addrs[r]` on `devices[r]` (a live
    /// allocation of at least `window_size` bytes there, e.g. a run
    /// argument), through `scene_rt_comm_create2`.
    pub fn comm_create_at<'s>(
        &'s self,
        devices: &[&DeviceSession<'s>],
        window_size: u64,
        window_addrs: Option<&[u64]>,
        options: &str,
    ) -> Result<CommDomain<'s>, RuntimeError> {
        let (Some(create), Some(destroy)) = (self.api.comm_create, self.api.comm_destroy) else {
            return Err(RuntimeError::InvalidArgument(format!(
                "the runtime `{}` has no scene_rt_comm_create / scene_rt_comm_destroy: it cannot run level-3 (multi-rank) scenes",
                self.path.display()
            )));
        };
        let opts = CString::new(options).map_err(|_| {
            RuntimeError::InvalidArgument(format!("comm options {options:?} contain NUL"))
        })?;
        let devs: Vec<Dev> = devices.iter().map(|d| d.dev).collect();
        let n = u32::try_from(devs.len())
            .map_err(|_| RuntimeError::InvalidArgument(format!("{} ranks", devs.len())))?;
        let mut comm: *mut c_void = std::ptr::null_mut();
        let (call, status) = match window_addrs {
            None => (
                "scene_rt_comm_create",
                // SAFETY: `devs` holds `n` open device handles and `opts`
                // is NUL-terminated, both outliving the call; `comm` is a
                // valid out-pointer.
                unsafe { create(devs.as_ptr(), n, window_size, opts.as_ptr(), &mut comm) },
            ),
            Some(addrs) => {
                let Some(create2) = self.api.comm_create2 else {
                    return Err(RuntimeError::InvalidArgument(format!(
                        "the runtime `{}` has no scene_rt_comm_create2: it cannot make a tensor the communication window ([comm] window_tensor)",
                        self.path.display()
                    )));
                };
                if addrs.len() != devs.len() {
                    return Err(RuntimeError::InvalidArgument(format!(
                        "{} window addresses for {} ranks",
                        addrs.len(),
                        devs.len()
                    )));
                }
                (
                    "scene_rt_comm_create2",
                    // SAFETY: as above; `addrs` holds `n` addresses and
                    // outlives the call.
                    unsafe {
                        create2(
                            devs.as_ptr(),
                            n,
                            window_size,
                            addrs.as_ptr(),
                            opts.as_ptr(),
                            &mut comm,
                        )
                    },
                )
            }
        };
        self.check(call, status)?;
        Ok(CommDomain {
            rt: self,
            comm,
            destroy,
        })
    }

    /// The error of a trace request to a runtime without the symbol.
    fn no_trace(&self, symbol: &str) -> RuntimeError {
        RuntimeError::InvalidArgument(format!(
            "the runtime `{}` has no {symbol}: it cannot record traces or dependency graphs (--trace, --dep-graph)",
            self.path.display()
        ))
    }

    /// Opens device `device_id` with a `key=value;...` options string.
    pub fn open(&self, device_id: u32, options: &str) -> Result<DeviceSession<'_>, RuntimeError> {
        let id = i32::try_from(device_id).map_err(|_| {
            RuntimeError::InvalidArgument(format!("device id {device_id} does not fit the ABI"))
        })?;
        let opts = CString::new(options).map_err(|_| {
            RuntimeError::InvalidArgument(format!("options {options:?} contain NUL"))
        })?;
        let mut dev: Dev = std::ptr::null_mut();
        // SAFETY: `opts` is NUL-terminated and outlives the call; `dev` is a
        // valid out-pointer.
        let status = unsafe { (self.api.open)(id, opts.as_ptr(), &mut dev) };
        self.check("scene_rt_open", status)?;
        if dev.is_null() {
            return Err(RuntimeError::Call {
                call: "scene_rt_open",
                status: SCENE_RT_E_INVALID,
                message: "runtime returned success but a NULL device".into(),
            });
        }
        Ok(DeviceSession {
            rt: self,
            dev,
            device_id,
            closed: false,
        })
    }
}

/// A communication domain of a [`Runtime`] (`scene_rt_comm_create`);
/// destroyed on drop, before its devices are closed.
#[derive(Debug)]
pub struct CommDomain<'rt> {
    rt: &'rt Runtime,
    comm: *mut c_void,
    destroy: unsafe extern "C" fn(*mut c_void) -> i32,
}

impl CommDomain<'_> {
    /// Destroys the domain, reporting the runtime's status.
    pub fn destroy(mut self) -> Result<(), RuntimeError> {
        let comm = std::mem::replace(&mut self.comm, std::ptr::null_mut());
        // SAFETY: `comm` came from `scene_rt_comm_create` and, nulled in
        // `self`, is destroyed exactly once.
        let status = unsafe { (self.destroy)(comm) };
        self.rt.check("scene_rt_comm_destroy", status)
    }
}

impl Drop for CommDomain<'_> {
    fn drop(&mut self) {
        if !self.comm.is_null() {
            // SAFETY: as in `destroy`: a live handle, destroyed once.
            let _ = unsafe { (self.destroy)(self.comm) };
        }
    }
}

/// An open device of a [`Runtime`]; closed on drop.
#[derive(Debug)]
pub struct DeviceSession<'rt> {
    rt: &'rt Runtime,
    dev: Dev,
    device_id: u32,
    closed: bool,
}

// SAFETY: the device handle is an opaque token the runtime accepts from any
// thread (the ABI has no thread affinity, and the last-error message is read
// on the same thread as the call that set it). The session is not `Sync`:
// calls on one session are not made concurrently.
unsafe impl Send for DeviceSession<'_> {}

impl DeviceSession<'_> {
    pub fn device_id(&self) -> u32 {
        self.device_id
    }

    pub fn malloc(&self, size: u64) -> Result<DeviceBuffer, RuntimeError> {
        let mut addr = 0;
        // SAFETY: `self.dev` is an open device; `addr` is a valid out-pointer.
        let status = unsafe { (self.rt.api.malloc)(self.dev, size, &mut addr) };
        self.rt.check("scene_rt_malloc", status)?;
        Ok(DeviceBuffer { addr, size })
    }

    pub fn free(&self, addr: u64) -> Result<(), RuntimeError> {
        // SAFETY: `self.dev` is an open device; the runtime validates `addr`.
        let status = unsafe { (self.rt.api.free)(self.dev, addr) };
        self.rt.check("scene_rt_free", status)
    }

    /// Copies `data` to device address `addr`.
    pub fn copy_to(&self, addr: u64, data: &[u8]) -> Result<(), RuntimeError> {
        // SAFETY: `data` is `data.len()` readable bytes for the call; the
        // runtime bounds-checks the device range.
        let status = unsafe {
            (self.rt.api.copy_to_device)(self.dev, addr, data.as_ptr().cast(), data.len() as u64)
        };
        self.rt.check("scene_rt_copy_to_device", status)
    }

    /// Fills `out` from device address `addr`.
    pub fn copy_from(&self, addr: u64, out: &mut [u8]) -> Result<(), RuntimeError> {
        // SAFETY: `out` is `out.len()` writable bytes borrowed exclusively for
        // the call; the runtime bounds-checks the device range.
        let status = unsafe {
            (self.rt.api.copy_from_device)(
                self.dev,
                out.as_mut_ptr().cast(),
                addr,
                out.len() as u64,
            )
        };
        self.rt.check("scene_rt_copy_from_device", status)
    }

    /// Registers a callable: through `scene_rt_register_callable` when
    /// every incore is an image (as before issue 29), through
    /// `scene_rt_register_callable2` when any is hosted (an error naming the
    /// runtime and the symbol when the runtime lacks it).
    pub fn register(&self, callable: &CallableImage<'_>) -> Result<CallableHandle, RuntimeError> {
        let symbol = CString::new(callable.orch_symbol).map_err(|_| {
            RuntimeError::InvalidArgument(format!(
                "orchestration symbol {:?} contains NUL",
                callable.orch_symbol
            ))
        })?;
        if let Some(hosted) = callable.incores.iter().find(|i| i.is_hosted()) {
            return self.register2(callable, &symbol, hosted.func_id);
        }
        let incores: Vec<SceneIncoreDesc> = callable
            .incores
            .iter()
            .map(|i| SceneIncoreDesc {
                func_id: i.func_id,
                core_type: i.core_type,
                image: i.image.as_ptr(),
                image_len: i.image.len() as u64,
            })
            .collect();
        let num_incores = u32::try_from(incores.len())
            .map_err(|_| RuntimeError::InvalidArgument(format!("{} incores", incores.len())))?;
        let desc = SceneCallableDesc {
            orch_so: callable.orch_so.as_ptr(),
            orch_so_len: callable.orch_so.len() as u64,
            orch_symbol: symbol.as_ptr(),
            incores: incores.as_ptr(),
            num_incores,
        };
        let mut handle = 0;
        // SAFETY: `desc` and everything it points to (`symbol`, `incores`, the
        // borrowed byte slices) outlive the call; `handle` is a valid out-pointer.
        let status = unsafe { (self.rt.api.register_callable)(self.dev, &desc, &mut handle) };
        self.rt.check("scene_rt_register_callable", status)?;
        Ok(CallableHandle(handle))
    }

    /// [`DeviceSession::register`] of a callable with hosted incores
    /// (`hosted_func_id` is the first, for the message when the runtime
    /// cannot).
    fn register2(
        &self,
        callable: &CallableImage<'_>,
        symbol: &CString,
        hosted_func_id: u32,
    ) -> Result<CallableHandle, RuntimeError> {
        let Some(f) = self.rt.api.register_callable2 else {
            return Err(RuntimeError::InvalidArgument(format!(
                "the runtime `{}` has no scene_rt_register_callable2: it cannot run hosted incore kernels (func_id {hosted_func_id} is one)",
                self.rt.path.display()
            )));
        };
        // Entry symbols, kept alive for the call.
        let entries = callable
            .incores
            .iter()
            .map(|i| match i.kind {
                IncoreKind::Hosted {
                    symbol: Some(s), ..
                } => CString::new(s).map(Some).map_err(|_| {
                    RuntimeError::InvalidArgument(format!(
                        "entry symbol {s:?} of hosted kernel func_id {} contains NUL",
                        i.func_id
                    ))
                }),
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let incores: Vec<SceneIncoreDesc2> = callable
            .incores
            .iter()
            .zip(&entries)
            .map(|(i, entry)| {
                let (kind, args_convention) = match i.kind {
                    IncoreKind::Image => (SCENE_INCORE_IMAGE, SCENE_KERNEL_ARGS_SCENE),
                    IncoreKind::Hosted { args, .. } => (SCENE_INCORE_HOSTED, args.to_abi()),
                };
                SceneIncoreDesc2 {
                    func_id: i.func_id,
                    core_type: i.core_type,
                    kind,
                    args_convention,
                    image: i.image.as_ptr(),
                    image_len: i.image.len() as u64,
                    symbol: entry.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
                    reserved: [0; 4],
                }
            })
            .collect();
        let num_incores = u32::try_from(incores.len())
            .map_err(|_| RuntimeError::InvalidArgument(format!("{} incores", incores.len())))?;
        let desc = SceneCallableDesc2 {
            orch_so: callable.orch_so.as_ptr(),
            orch_so_len: callable.orch_so.len() as u64,
            orch_symbol: symbol.as_ptr(),
            incores: incores.as_ptr(),
            num_incores,
        };
        let mut handle = 0;
        // SAFETY: `desc` and everything it points to (`symbol`, `incores`,
        // `entries`, the borrowed byte slices) outlive the call; `handle` is
        // a valid out-pointer.
        let status = unsafe { f(self.dev, &desc, &mut handle) };
        self.rt.check("scene_rt_register_callable2", status)?;
        Ok(CallableHandle(handle))
    }

    pub fn unregister(&self, handle: CallableHandle) -> Result<(), RuntimeError> {
        // SAFETY: `self.dev` is an open device; the runtime validates the handle.
        let status = unsafe { (self.rt.api.unregister_callable)(self.dev, handle.0) };
        self.rt.check("scene_rt_unregister_callable", status)
    }

    /// Runs a callable to completion.
    pub fn run(&self, handle: CallableHandle, args: &[RunArg]) -> Result<(), RuntimeError> {
        let c: Vec<SceneRunArg> = args.iter().map(|a| a.to_c()).collect();
        let n = u32::try_from(c.len())
            .map_err(|_| RuntimeError::InvalidArgument(format!("{} run args", c.len())))?;
        // SAFETY: `c` holds `n` run arguments and outlives the call.
        let status = unsafe { (self.rt.api.run)(self.dev, handle.0, c.as_ptr(), n) };
        self.rt.check("scene_rt_run", status)
    }

    /// [`DeviceSession::run`] with each argument's metadata (`descs[i]`,
    /// one per argument; scalars' are ignored): what the orchestration
    /// reads with `scene_orch_desc`.
    pub fn run_described(
        &self,
        handle: CallableHandle,
        args: &[RunArg],
        descs: &[SceneTensorDesc],
    ) -> Result<(), RuntimeError> {
        if descs.len() != args.len() {
            return Err(RuntimeError::InvalidArgument(format!(
                "{} run args but {} descriptions",
                args.len(),
                descs.len()
            )));
        }
        let c: Vec<SceneRunArg> = args.iter().map(|a| a.to_c()).collect();
        let n = u32::try_from(c.len())
            .map_err(|_| RuntimeError::InvalidArgument(format!("{} run args", c.len())))?;
        // SAFETY: `c` and `descs` hold `n` entries each and outlive the call.
        let status =
            unsafe { (self.rt.api.run2)(self.dev, handle.0, c.as_ptr(), descs.as_ptr(), n) };
        self.rt.check("scene_rt_run", status)
    }

    /// Records the following runs (`SCENE_RT_TRACE_*` flags, 0 = off);
    /// fails, naming the runtime and the symbol, if the runtime cannot.
    pub fn trace_enable(&self, flags: u32) -> Result<(), RuntimeError> {
        let Some(f) = self.rt.api.trace_enable else {
            return Err(self.rt.no_trace("scene_rt_trace_enable"));
        };
        // SAFETY: `self.dev` is an open device; flags are plain bits.
        let status = unsafe { f(self.dev, flags) };
        self.rt.check("scene_rt_trace_enable", status)
    }

    /// The record of the last traced run (JSON text), `None` if there is
    /// none (`scene_rt_trace_take`).
    pub fn trace_take(&self) -> Result<Option<String>, RuntimeError> {
        let Some(f) = self.rt.api.trace_take else {
            return Err(self.rt.no_trace("scene_rt_trace_take"));
        };
        let mut len = 0u64;
        // SAFETY: a NULL buffer with cap 0 only asks for the length; `len`
        // is a valid out-pointer.
        let status = unsafe { f(self.dev, std::ptr::null_mut(), 0, &mut len) };
        self.rt.check("scene_rt_trace_take", status)?;
        if len == 0 {
            return Ok(None);
        }
        let mut buf = vec![0u8; len as usize];
        let mut got = 0u64;
        // SAFETY: `buf` is `len` writable bytes for the call; `got` is a
        // valid out-pointer.
        let status = unsafe { f(self.dev, buf.as_mut_ptr().cast(), len, &mut got) };
        self.rt.check("scene_rt_trace_take", status)?;
        buf.truncate(got.min(len) as usize);
        String::from_utf8(buf).map(Some).map_err(|_| {
            RuntimeError::InvalidArgument(
                "scene_rt_trace_take returned text that is not UTF-8".into(),
            )
        })
    }

    /// Records the task arguments of every later run on this device into
    /// `dir` (`scene_rt_args_record`, optional): an error naming the
    /// runtime when it lacks the symbol.
    pub fn record_args(&self, dir: &Path) -> Result<(), RuntimeError> {
        let Some(f) = self.rt.api.args_record else {
            return Err(RuntimeError::InvalidArgument(format!(
                "the runtime `{}` has no scene_rt_args_record: it cannot dump task arguments (--dump-args)",
                self.rt.path.display()
            )));
        };
        let c = CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|_| {
            RuntimeError::InvalidArgument(format!("{} contains NUL", dir.display()))
        })?;
        // SAFETY: `self.dev` is an open device; `c` is NUL-terminated and
        // outlives the call, which copies it (scene_runtime.h).
        let status = unsafe { f(self.dev, c.as_ptr()) };
        self.rt.check("scene_rt_args_record", status)
    }

    /// Returns the device to the state [`Runtime::open`] left it in
    /// (`scene_rt_reset`, optional): callables unregistered, allocations
    /// freed, trace and argument recording off, per-session counters
    /// restarted. Not while a run is in progress on it. An error naming
    /// the runtime when it lacks the symbol (see [`Runtime::has_reset`]).
    pub fn reset(&self) -> Result<(), RuntimeError> {
        let Some(f) = self.rt.api.reset else {
            return Err(RuntimeError::InvalidArgument(format!(
                "the runtime `{}` has no scene_rt_reset: close and reopen the device instead",
                self.rt.path.display()
            )));
        };
        // SAFETY: `self.dev` is an open device; no run is in progress on it
        // (calls on one session are not concurrent: the session is not `Sync`).
        let status = unsafe { f(self.dev) };
        self.rt.check("scene_rt_reset", status)
    }

    /// Closes the device, reporting the runtime's status (drop ignores it).
    pub fn close(mut self) -> Result<(), RuntimeError> {
        self.closed = true;
        // SAFETY: `self.dev` is open and, with `closed` set, never used again.
        let status = unsafe { (self.rt.api.close)(self.dev) };
        self.rt.check("scene_rt_close", status)
    }
}

impl Drop for DeviceSession<'_> {
    fn drop(&mut self) {
        if !self.closed {
            // SAFETY: `self.dev` is open and is not used after this.
            let _ = unsafe { (self.rt.api.close)(self.dev) };
        }
    }
}
