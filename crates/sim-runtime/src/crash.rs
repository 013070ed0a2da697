//! Crash reports: what was running when user code took the process down.
//!
//! The harness runs a device session in a supervised worker process and
//! calls `scene_rt_crash_report(path)` before opening the device. Then
//! this module
//! - records, per thread, what it is running ([`Activity`]: a kernel block
//!   or the orchestration) in a thread-local cell;
//! - installs handlers for the signals user code raises (`SIGSEGV`,
//!   `SIGBUS`, `SIGFPE`, `SIGILL`, `SIGTRAP`, `SIGABRT`, `SIGSYS`) that write
//!   `key=value` lines to the report file: the signal, who was running, the
//!   faulting address and, for device memory, which buffer's guard it hit;
//!   then the default action is restored and the signal raised again, so
//!   the process still dies by it (one thread reports; others that fault
//!   meanwhile wait for the end);
//! - registers an `atexit` hook: `exit()` called by a kernel or the
//!   orchestration is reported too (the worker itself never exits from
//!   those threads).
//!
//! Without that call nothing is installed: a runtime loaded into a
//! host process must not take over its signals.
//!
//! Handlers are async-signal-safe: no allocation, no blocking locks
//! (`try_lock` only), formatting into a stack buffer, one `write(2)`.
//! Emulated core threads get an alternate signal stack, so a kernel that
//! overflows its stack is reported too.
//!
//! `unsafe` (allowed per item): `sigaction`, `sigaltstack`, `atexit`,
//! `open`/`write` of the report and reading the `siginfo_t`.

use std::cell::Cell;
use std::ffi::CString;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{RtError, RtResult};
use crate::memory::{Allocator, Block, DEVICE_BASE, Place};

/// What a thread is running, for crash reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    Idle,
    Orchestration,
    Kernel {
        func_id: u32,
        core: &'static str,
        block: u32,
        blocks: u32,
    },
}

thread_local! {
    static ACTIVITY: Cell<Activity> = const { Cell::new(Activity::Idle) };
    /// `(low, high, size)`: host addresses around this thread's stack (a
    /// little above where it started) and its size, if known.
    static STACK: Cell<(usize, usize, usize)> = const { Cell::new((0, 0, 0)) };
}

/// Sets this thread's activity for the duration of `f`.
pub fn running<R>(what: Activity, f: impl FnOnce() -> R) -> R {
    ACTIVITY.with(|a| a.set(what));
    let r = f();
    ACTIVITY.with(|a| a.set(Activity::Idle));
    r
}

/// Device memory as the handler sees it: the allocator (read with
/// `try_lock`), the run's arguments, and the arena's host range.
#[derive(Debug)]
pub struct MemoryView {
    pub mem: Arc<Mutex<Allocator>>,
    pub run_args: Arc<Mutex<Vec<(u64, u64)>>>,
    pub arena_base: usize,
    pub arena_len: u64,
}

static REPORT_FD: AtomicI32 = AtomicI32::new(-1);
/// Set by the first thread that reports a fatal signal: others wait for
/// the process to end instead of racing it (or dying first, unreported).
static REPORTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The `MemoryView` of the device being run (leaked on install: one per
/// worker process, alive until it exits).
static MEMORY: AtomicPtr<MemoryView> = AtomicPtr::new(std::ptr::null_mut());

const SIGNALS: [i32; 7] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGABRT,
    libc::SIGSYS,
];

/// Opens the report file and installs the handlers (once per process).
#[allow(unsafe_code)]
pub fn install(path: &str) -> RtResult<()> {
    let invalid = |why: String| RtError::Invalid(format!("crash report: {why}"));
    if REPORT_FD.load(Ordering::SeqCst) >= 0 {
        return Err(invalid("already enabled in this process".into()));
    }
    let c = CString::new(path).map_err(|_| invalid("path contains NUL".into()))?;
    // SAFETY: `c` is a valid NUL-terminated path; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return Err(invalid(format!(
            "cannot open `{path}`: {}",
            std::io::Error::last_os_error()
        )));
    }
    REPORT_FD.store(fd, Ordering::SeqCst);
    for sig in SIGNALS {
        // SAFETY: a zeroed sigaction is a valid value to fill in; the
        // handler has the SA_SIGINFO signature and is async-signal-safe.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(invalid(format!(
                "cannot install a handler for signal {sig}: {}",
                std::io::Error::last_os_error()
            )));
        }
    }
    // SAFETY: `on_exit` is an `extern "C" fn()` that only reads
    // thread-locals and writes to a file descriptor.
    unsafe { libc::atexit(on_exit) };
    Ok(())
}

/// Points the handlers at the memory of a newly opened device.
pub fn watch(memory: MemoryView) {
    let old = MEMORY.swap(Box::into_raw(Box::new(memory)), Ordering::SeqCst);
    // The previous view is leaked, not freed: a handler may be reading it.
    let _ = old;
}

/// Whether crash reporting is on (then threads want an alternate stack).
pub fn active() -> bool {
    REPORT_FD.load(Ordering::SeqCst) >= 0
}

/// Gives the calling thread an alternate signal stack and records its
/// stack bounds; undone when the guard drops (before the thread ends).
#[derive(Debug)]
pub struct ThreadGuard {
    altstack: Option<Box<[u8]>>,
}

const ALTSTACK_BYTES: usize = 64 * 1024;

/// Call first thing in a thread that runs user code, with its stack size.
#[allow(unsafe_code)]
pub fn enter_thread(stack_bytes: usize) -> ThreadGuard {
    let here = 0u8;
    let high = std::ptr::from_ref(&here) as usize;
    STACK.with(|s| s.set((high.saturating_sub(stack_bytes), high + 4096, stack_bytes)));
    if !active() {
        return ThreadGuard { altstack: None };
    }
    let mut buf = vec![0u8; ALTSTACK_BYTES].into_boxed_slice();
    let ss = libc::stack_t {
        ss_sp: buf.as_mut_ptr().cast(),
        ss_flags: 0,
        ss_size: buf.len(),
    };
    // SAFETY: `buf` outlives the registration: the guard disables the
    // alternate stack before dropping it.
    let rc = unsafe { libc::sigaltstack(&ss, std::ptr::null_mut()) };
    ThreadGuard {
        altstack: (rc == 0).then_some(buf),
    }
}

impl Drop for ThreadGuard {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        if self.altstack.is_some() {
            let ss = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disabling this thread's alternate stack before its
            // buffer is freed; no handler can be running on it now.
            unsafe { libc::sigaltstack(&ss, std::ptr::null_mut()) };
        }
    }
}

/// A fixed buffer `core::fmt` can write into without allocating.
struct StackWriter {
    buf: [u8; 1024],
    len: usize,
}

impl std::fmt::Write for StackWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGSYS => "SIGSYS",
        _ => "signal",
    }
}

fn write_activity(w: &mut StackWriter) {
    match ACTIVITY.with(Cell::get) {
        Activity::Idle => {
            let _ = writeln!(w, "who=runtime");
        }
        Activity::Orchestration => {
            let _ = writeln!(w, "who=orchestration");
        }
        Activity::Kernel {
            func_id,
            core,
            block,
            blocks,
        } => {
            let _ = writeln!(
                w,
                "who=kernel\nfunc_id={func_id}\ncore={core}\nblock={block}\nblocks={blocks}"
            );
        }
    }
}

/// Describes where an arena offset lies relative to a buffer, naming the
/// run argument it belongs to when there is one: `run argument 2 (256 bytes
/// at 0x...) at offset 256, past its end`. Used by the handler and by the
/// canary check, so both word it the same way. Returns the argument index.
pub fn describe_place(
    w: &mut impl std::fmt::Write,
    place: Place,
    run_args: &[(u64, u64)],
) -> Option<usize> {
    let (block, offset, side): (Block, i128, &str) = match place {
        Place::Before { block, distance } => (block, -i128::from(distance), ", before its start"),
        Place::After { block, distance } => (
            block,
            i128::from(block.size) + i128::from(distance),
            ", past its end",
        ),
        Place::Data { block, offset } => (block, i128::from(offset), ""),
        Place::Nowhere => {
            let _ = write!(
                w,
                "device memory that is not allocated (freed, or never allocated)"
            );
            return None;
        }
    };
    let addr = DEVICE_BASE + block.data;
    let arg = run_args
        .iter()
        .position(|&(a, size)| a <= addr && addr < a + size.max(1));
    let _ = match arg {
        Some(i) => write!(w, "run argument {i}"),
        None => write!(w, "a buffer the orchestration allocated"),
    };
    let _ = write!(
        w,
        " ({} bytes at {addr:#x}) at offset {offset}{side}",
        block.size
    );
    arg
}

#[allow(unsafe_code)]
fn write_fault(w: &mut StackWriter, sig: i32, info: *const libc::siginfo_t) {
    if info.is_null() || ![libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL].contains(&sig) {
        return;
    }
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler,
    // and these signals carry a fault address.
    #[cfg(target_os = "linux")]
    let addr = unsafe { (*info).si_addr() } as usize;
    // SAFETY: as above.
    #[cfg(not(target_os = "linux"))]
    let addr = unsafe { (*info).si_addr } as usize;
    let _ = writeln!(w, "address={addr:#x}");
    if sig != libc::SIGSEGV && sig != libc::SIGBUS {
        return;
    }
    let mem = MEMORY.load(Ordering::SeqCst);
    // SAFETY: views are leaked on install, never freed, so a non-null
    // pointer is valid for the life of the process.
    if let Some(view) = unsafe { mem.as_ref() }
        && addr >= view.arena_base
        && ((addr - view.arena_base) as u64) < view.arena_len
    {
        let off = (addr - view.arena_base) as u64;
        // try_lock: the faulting thread may be interrupted holding neither,
        // but another thread may hold them; then say less, never block.
        let place = view.mem.try_lock().ok().map(|m| m.place(off));
        let args = view.run_args.try_lock().ok();
        let _ = write!(w, "fault=write or read outside a buffer: ");
        let arg = match place {
            Some(p) => describe_place(w, p, args.as_deref().map_or(&[], |a| a.as_slice())),
            None => {
                let _ = write!(w, "device memory at {:#x}", DEVICE_BASE + off);
                None
            }
        };
        let _ = writeln!(w);
        if let Some(i) = arg {
            let _ = writeln!(w, "arg={i}");
        }
        return;
    }
    let (low, high, size) = STACK.with(Cell::get);
    if low != 0 && addr + 64 * 1024 >= low && addr < high {
        let _ = writeln!(
            w,
            "fault=stack overflow (the thread's stack is {} KiB)",
            size >> 10
        );
    } else if addr < 4096 {
        let _ = writeln!(w, "fault=NULL pointer dereference");
    } else {
        let _ = writeln!(
            w,
            "fault=address {addr:#x} is neither device memory nor the thread's stack (a wild pointer)"
        );
    }
}

#[allow(unsafe_code)]
extern "C" fn on_signal(sig: i32, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let fd = REPORT_FD.load(Ordering::SeqCst);
    if REPORTING.swap(true, Ordering::SeqCst) {
        // Another thread is reporting (several blocks often fault at
        // once); the process ends when it is done.
        loop {
            // SAFETY: pause(2) is async-signal-safe and has no preconditions.
            unsafe { libc::pause() };
        }
    }
    if fd < 0 {
        die_by(sig);
        return;
    }
    let mut w = StackWriter {
        buf: [0; 1024],
        len: 0,
    };
    let _ = writeln!(w, "signal={}", signal_name(sig));
    write_activity(&mut w);
    write_fault(&mut w, sig, info);
    // SAFETY: write(2) is async-signal-safe; the buffer is valid for `len`.
    unsafe { libc::write(fd, w.buf.as_ptr().cast(), w.len) };
    die_by(sig);
}

/// Restores the default action of `sig` and raises it: the process ends by
/// the same signal the user code caused.
#[allow(unsafe_code)]
fn die_by(sig: i32) {
    // SAFETY: signal(2) and raise(3) are async-signal-safe; SIG_DFL is a
    // valid disposition for every signal handled here.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

#[allow(unsafe_code)]
extern "C" fn on_exit() {
    let fd = REPORT_FD.load(Ordering::SeqCst);
    if fd < 0 || ACTIVITY.with(Cell::get) == Activity::Idle {
        return;
    }
    let mut w = StackWriter {
        buf: [0; 1024],
        len: 0,
    };
    let _ = writeln!(w, "exit=called");
    write_activity(&mut w);
    // SAFETY: write(2) on an open descriptor with a valid buffer.
    unsafe { libc::write(fd, w.buf.as_ptr().cast(), w.len) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_worded_with_their_run_argument() {
        let mut a = Allocator::new(1 << 20, 1 << 18, 4096);
        let b = a.alloc(256).unwrap();
        let args = [(0, 0), (DEVICE_BASE + b.data, 256)];
        let mut s = String::new();
        let arg = describe_place(&mut s, a.place(b.data + 256), &args);
        assert_eq!(arg, Some(1));
        assert!(s.starts_with("run argument 1 (256 bytes at"), "{s}");
        assert!(s.ends_with("at offset 256, past its end"), "{s}");
        let mut s = String::new();
        describe_place(&mut s, a.place(b.data - 1024), &[]);
        assert!(s.starts_with("a buffer the orchestration allocated"), "{s}");
        assert!(s.ends_with("at offset -1024, before its start"), "{s}");
    }
}
