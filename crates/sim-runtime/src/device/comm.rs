//! Communication domains of level-3 runs (`scene_rt_comm_create`): one
//! zeroed window and one set of signal slots per rank, shared by every
//! rank's device in this process, and the `signal` / `wait` entries of
//! `SceneCommCtx` that kernels call (`scene_comm.h`).
//!
//! A window is either the domain's own heap allocation (zeroed, outside
//! every device arena: `scene_rt_comm_create`) or device memory of the
//! rank's device (`scene_rt_comm_create2` with window addresses: a live
//! allocation of that device, its contents what the caller put there, so
//! the window is also a tensor argument of the rank's run). Either way
//! `SceneCommCtx::windows[r]` is the host address kernels use.
//!
//! Signals are `AtomicI32`s: `signal` is a release `fetch_add`, `wait` an
//! acquire load, so a rank's writes before its signal are visible to the
//! rank whose wait saw it. Waiters sleep on the domain's condition
//! variable (every signal notifies it after its add), bounded by the
//! domain's timeout. The first failure (a wait past its bound, a bad peer
//! or slot, a rank whose run failed) is the group's message; from then on
//! every wait and signal returns `SCENE_RT_E_COMM` at once and every
//! rank's run fails with it. Like every call of the ABI they return
//! `SCENE_RT_*` statuses (scene_abi.h).
//!
//! `unsafe` (allowed per item): the window allocations and dereferencing
//! the context pointers kernels pass back.

use std::alloc::Layout;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use scene_abi::{
    SCENE_COMM_MAX_RANKS, SCENE_COMM_SIGNAL_SLOTS, SCENE_RT_E_COMM, SCENE_RT_E_INVALID,
    SCENE_RT_OK, SceneCommCtx,
};

use super::lock;
use crate::error::{RtError, RtResult};

/// Default bound of a wait (`timeout_ms` of the domain options).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Window alignment (a cache line).
const WINDOW_ALIGN: usize = 64;

/// One rank's window: zeroed bytes only kernels touch (through raw
/// pointers); freed with the domain.
#[derive(Debug)]
struct Window {
    ptr: *mut u8,
    layout: Layout,
}

#[allow(unsafe_code)]
// SAFETY: the window is plain memory owned by the domain; Rust code never
// reads or writes it after allocation (kernels do, through the pointer),
// so sharing the owner across threads creates no Rust-level data race.
unsafe impl Send for Window {}
#[allow(unsafe_code)]
// SAFETY: as for `Send`: the owner hands out only the address.
unsafe impl Sync for Window {}

impl Window {
    fn new(size: u64) -> RtResult<Window> {
        let bytes = usize::try_from(size.max(1))
            .map_err(|_| RtError::Oom(format!("window of {size} bytes")))?;
        let layout = Layout::from_size_align(bytes, WINDOW_ALIGN)
            .map_err(|e| RtError::Invalid(format!("window of {size} bytes: {e}")))?;
        #[allow(unsafe_code)]
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(RtError::Oom(format!(
                "cannot allocate a communication window of {size} bytes"
            )));
        }
        Ok(Window { ptr, layout })
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        #[allow(unsafe_code)]
        // SAFETY: `ptr` came from `alloc_zeroed(layout)` and is freed once;
        // no rank runs once the last owner of the domain is gone.
        unsafe {
            std::alloc::dealloc(self.ptr, self.layout)
        };
    }
}

/// Where rank r's window is.
#[derive(Debug, Clone, Copy)]
pub enum WindowAt {
    /// The domain allocates it (zeroed heap memory).
    Heap,
    /// Device memory of the rank's device: `host` is its host address,
    /// `device` the device address of the allocation holding it (which
    /// cannot be freed while the domain lives).
    Device { host: *mut u8, device: u64 },
}

/// A communication domain: windows, signal slots, each rank's context and
/// the group's failure.
#[derive(Debug)]
pub struct Domain {
    nranks: u32,
    timeout: Duration,
    _windows: Vec<Window>,
    /// Per rank: the device allocation holding its window, if the window
    /// is device memory (`WindowAt::Device`).
    device_windows: Vec<Option<u64>>,
    signals: Vec<Box<[AtomicI32]>>,
    /// Each rank's context (`SceneKernelArgs::comm`); never resized, so
    /// the addresses handed out stay valid while the domain lives.
    ctxs: Vec<SceneCommCtx>,
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    /// Taken by signallers after their add and by waiters around their
    /// check, so no wake-up is lost.
    bell: Mutex<()>,
    rung: Condvar,
}

#[allow(unsafe_code)]
// SAFETY: the raw pointers in `ctxs` point into this domain (windows,
// signals, itself), which lives as long as any holder of the `Arc`, or
// into device memory whose allocation the rank's device refuses to free
// while it is attached to the domain (`Device::free`); the contexts are
// immutable after construction and Rust code never dereferences them.
unsafe impl Send for Domain {}
#[allow(unsafe_code)]
// SAFETY: as for `Send`; mutable state is atomics and mutexes.
unsafe impl Sync for Domain {}

impl Domain {
    /// Checks a group size (1..=`SCENE_COMM_MAX_RANKS`).
    pub fn check_ranks(nranks: u32) -> RtResult<()> {
        if nranks == 0 || nranks as usize > SCENE_COMM_MAX_RANKS {
            return Err(RtError::Invalid(format!(
                "a communication group has 1 to {SCENE_COMM_MAX_RANKS} ranks, not {nranks}"
            )));
        }
        Ok(())
    }

    /// A domain of `nranks` zeroed heap windows of `window_size` bytes.
    pub fn new(nranks: u32, window_size: u64, timeout: Duration) -> RtResult<Arc<Domain>> {
        Self::check_ranks(nranks)?;
        Self::with_windows(window_size, &vec![WindowAt::Heap; nranks as usize], timeout)
    }

    /// A domain of one window of `window_size` bytes per entry of `at`
    /// (rank r's at `at[r]`).
    pub fn with_windows(
        window_size: u64,
        at: &[WindowAt],
        timeout: Duration,
    ) -> RtResult<Arc<Domain>> {
        let nranks = u32::try_from(at.len()).unwrap_or(u32::MAX);
        Self::check_ranks(nranks)?;
        let mut windows = Vec::new();
        let mut hosts = Vec::with_capacity(at.len());
        let mut device_windows = Vec::with_capacity(at.len());
        for a in at {
            match *a {
                WindowAt::Heap => {
                    let w = Window::new(window_size)?;
                    hosts.push(w.ptr as u64);
                    windows.push(w);
                    device_windows.push(None);
                }
                WindowAt::Device { host, device } => {
                    hosts.push(host as u64);
                    device_windows.push(Some(device));
                }
            }
        }
        let signals: Vec<Box<[AtomicI32]>> = (0..nranks)
            .map(|_| {
                (0..SCENE_COMM_SIGNAL_SLOTS)
                    .map(|_| AtomicI32::new(0))
                    .collect()
            })
            .collect();
        let mut window_bases = [0u64; SCENE_COMM_MAX_RANKS];
        let mut signal_bases = [0u64; SCENE_COMM_MAX_RANKS];
        for r in 0..nranks as usize {
            window_bases[r] = hosts[r];
            signal_bases[r] = signals[r].as_ptr() as u64;
        }
        Ok(Arc::new_cyclic(|me: &Weak<Domain>| {
            let domain = me.as_ptr().cast_mut().cast::<c_void>();
            let ctxs = (0..nranks)
                .map(|rank| SceneCommCtx {
                    rank,
                    nranks,
                    window_size,
                    windows: window_bases,
                    signals: signal_bases,
                    num_signals: SCENE_COMM_SIGNAL_SLOTS,
                    reserved: 0,
                    domain,
                    signal: comm_signal,
                    wait: comm_wait,
                })
                .collect();
            Domain {
                nranks,
                timeout,
                _windows: windows,
                device_windows,
                signals,
                ctxs,
                failed: AtomicBool::new(false),
                failure: Mutex::new(None),
                bell: Mutex::new(()),
                rung: Condvar::new(),
            }
        }))
    }

    /// Rank `rank`'s context (what its kernels get).
    pub fn ctx(&self, rank: u32) -> *const SceneCommCtx {
        self.ctxs
            .get(rank as usize)
            .map_or(std::ptr::null(), std::ptr::from_ref::<SceneCommCtx>)
    }

    /// The group's size.
    pub fn nranks(&self) -> u32 {
        self.nranks
    }

    /// The device address of the allocation holding rank `rank`'s window,
    /// when the window is device memory (it must outlive the domain).
    pub fn device_window(&self, rank: u32) -> Option<u64> {
        self.device_windows.get(rank as usize).copied().flatten()
    }

    /// Records the group's failure (the first one wins) and wakes every
    /// waiter, whose waits now return `SCENE_RT_E_COMM`.
    pub fn fail(&self, message: String) {
        {
            let mut f = lock(&self.failure);
            if f.is_none() {
                *f = Some(message);
            }
        }
        self.failed.store(true, Ordering::SeqCst);
        let _g = lock(&self.bell);
        self.rung.notify_all();
    }

    /// The group's failure, if any.
    pub fn failure(&self) -> Option<String> {
        lock(&self.failure).clone()
    }

    /// A status (scene_comm.h): `SCENE_RT_E_COMM` once the group failed,
    /// `SCENE_RT_E_INVALID` for a peer or slot that does not exist (which
    /// fails the group).
    fn signal(&self, from: u32, peer: u32, slot: u32, value: i32) -> i32 {
        if self.failed.load(Ordering::SeqCst) {
            return SCENE_RT_E_COMM;
        }
        if peer >= self.nranks || slot >= SCENE_COMM_SIGNAL_SLOTS {
            self.fail(format!(
                "rank {from} signalled rank {peer} signal {slot}, which does not exist ({} ranks, {SCENE_COMM_SIGNAL_SLOTS} slots each)",
                self.nranks
            ));
            return SCENE_RT_E_INVALID;
        }
        self.signals[peer as usize][slot as usize].fetch_add(value, Ordering::Release);
        let _g = lock(&self.bell);
        self.rung.notify_all();
        SCENE_RT_OK
    }

    /// A status, as for `signal`; `SCENE_RT_E_COMM` also for a wait that
    /// timed out.
    fn wait(&self, rank: u32, from: i32, slot: u32, expected: i32) -> i32 {
        if slot >= SCENE_COMM_SIGNAL_SLOTS {
            self.fail(format!(
                "rank {rank} waited on signal {slot}, which does not exist ({SCENE_COMM_SIGNAL_SLOTS} slots)"
            ));
            return SCENE_RT_E_INVALID;
        }
        let cell = &self.signals[rank as usize][slot as usize];
        let deadline = Instant::now() + self.timeout;
        let mut bell = lock(&self.bell);
        loop {
            if cell.load(Ordering::Acquire) >= expected {
                return SCENE_RT_OK;
            }
            if self.failed.load(Ordering::SeqCst) {
                return SCENE_RT_E_COMM;
            }
            let now = Instant::now();
            if now >= deadline {
                drop(bell);
                let who = if from >= 0 && (from as u32) < self.nranks {
                    format!("rank {from}")
                } else {
                    "a peer".to_owned()
                };
                self.fail(format!(
                    "rank {rank} waited for {who} signal {slot} for {} s",
                    seconds(self.timeout)
                ));
                return SCENE_RT_E_COMM;
            }
            bell = self
                .rung
                .wait_timeout(bell, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// `30`, `1.5`, `0.25`: seconds without trailing zeros.
fn seconds(d: Duration) -> String {
    let s = format!("{:.3}", d.as_secs_f64());
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The domain and rank behind a context a kernel passed back.
fn from_ctx<'a>(ctx: *const SceneCommCtx) -> Option<(&'a Domain, u32)> {
    if ctx.is_null() {
        return None;
    }
    #[allow(unsafe_code)]
    // SAFETY: kernels only get contexts from `Domain::ctx`, which point into
    // a domain kept alive by the device for the whole run; `domain` is that
    // domain's address.
    unsafe {
        let c = &*ctx;
        let d = c.domain.cast_const().cast::<Domain>();
        (!d.is_null()).then(|| (&*d, c.rank))
    }
}

extern "C" fn comm_signal(ctx: *const SceneCommCtx, peer: u32, slot: u32, value: i32) -> i32 {
    match from_ctx(ctx) {
        Some((d, rank)) => d.signal(rank, peer, slot, value),
        None => SCENE_RT_E_INVALID,
    }
}

extern "C" fn comm_wait(ctx: *const SceneCommCtx, from: i32, slot: u32, expected: i32) -> i32 {
    match from_ctx(ctx) {
        Some((d, rank)) => d.wait(rank, from, slot, expected),
        None => SCENE_RT_E_INVALID,
    }
}

/// Parses the domain options (`timeout_ms=<ms>`; empty = defaults).
pub fn parse_options(options: &str) -> RtResult<Duration> {
    let mut timeout = DEFAULT_TIMEOUT;
    for kv in options.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        match kv.split_once('=') {
            Some(("timeout_ms", v)) => {
                let ms: u64 = v.trim().parse().map_err(|_| {
                    RtError::Invalid(format!(
                        "comm option timeout_ms={v}: not a number of milliseconds"
                    ))
                })?;
                timeout = Duration::from_millis(ms.max(1));
            }
            _ => {
                return Err(RtError::Invalid(format!(
                    "unknown comm option `{kv}` (known: timeout_ms=<ms>)"
                )));
            }
        }
    }
    Ok(timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(d: &Domain, r: u32) -> *const SceneCommCtx {
        d.ctx(r)
    }

    #[test]
    fn a_signal_releases_a_wait_and_data_before_it_is_seen() {
        let d = Domain::new(2, 64, Duration::from_secs(30)).unwrap();
        let c0 = ctx(&d, 0) as usize;
        let c1 = ctx(&d, 1) as usize;
        std::thread::scope(|s| {
            s.spawn(move || {
                let c = c0 as *const SceneCommCtx;
                #[allow(unsafe_code)]
                // SAFETY: window 1 has 64 bytes; only this thread writes it.
                unsafe {
                    let w = (*c).windows[1] as *mut u32;
                    w.write_volatile(42);
                }
                assert_eq!(comm_signal(c, 1, 3, 1), SCENE_RT_OK);
            });
            let c = c1 as *const SceneCommCtx;
            assert_eq!(comm_wait(c, 0, 3, 1), SCENE_RT_OK);
            #[allow(unsafe_code)]
            // SAFETY: the wait acquired the signal released after the write.
            let v = unsafe { ((*c).windows[1] as *const u32).read_volatile() };
            assert_eq!(v, 42);
        });
        assert_eq!(d.failure(), None);
    }

    #[test]
    fn a_wait_times_out_with_the_message_and_fails_the_group() {
        let d = Domain::new(2, 64, Duration::from_millis(50)).unwrap();
        assert_eq!(comm_wait(ctx(&d, 1), 0, 3, 1), SCENE_RT_E_COMM);
        assert_eq!(
            d.failure().as_deref(),
            Some("rank 1 waited for rank 0 signal 3 for 0.05 s")
        );
        // Every later wait and signal of the group returns at once.
        assert_eq!(comm_wait(ctx(&d, 0), -1, 0, 1), SCENE_RT_E_COMM);
        assert_eq!(comm_signal(ctx(&d, 0), 1, 0, 1), SCENE_RT_E_COMM);
    }

    #[test]
    fn unknown_senders_are_a_peer_and_bad_peers_fail() {
        let d = Domain::new(2, 64, Duration::from_millis(10)).unwrap();
        assert_eq!(comm_wait(ctx(&d, 0), -1, 7, 1), SCENE_RT_E_COMM);
        assert_eq!(
            d.failure().as_deref(),
            Some("rank 0 waited for a peer signal 7 for 0.01 s")
        );
        let d = Domain::new(2, 64, Duration::from_secs(1)).unwrap();
        assert_eq!(comm_signal(ctx(&d, 0), 5, 0, 1), SCENE_RT_E_INVALID);
        assert!(d.failure().unwrap().contains("signalled rank 5"));
        // The group failed: the next call says so, as a status.
        assert_eq!(comm_signal(ctx(&d, 0), 1, 0, 1), SCENE_RT_E_COMM);
        let d = Domain::new(2, 64, Duration::from_secs(1)).unwrap();
        assert_eq!(
            comm_wait(ctx(&d, 0), 1, SCENE_COMM_SIGNAL_SLOTS, 1),
            SCENE_RT_E_INVALID
        );
        assert_eq!(comm_wait(std::ptr::null(), 1, 0, 1), SCENE_RT_E_INVALID);
        assert_eq!(comm_signal(std::ptr::null(), 1, 0, 1), SCENE_RT_E_INVALID);
    }

    /// Device-memory windows (`scene_rt_comm_create2`): the context's
    /// window bases are the given host addresses, heap windows are mixed
    /// in as asked, and the domain knows which allocation holds each.
    #[test]
    fn windows_may_be_memory_the_caller_owns() {
        let mut mine = vec![0u8; 64];
        let host = mine.as_mut_ptr();
        let d = Domain::with_windows(
            64,
            &[
                WindowAt::Device {
                    host,
                    device: 0x1000,
                },
                WindowAt::Heap,
            ],
            Duration::from_secs(1),
        )
        .unwrap();
        #[allow(unsafe_code)]
        // SAFETY: contexts from `Domain::ctx` live as long as `d`.
        let (w0, w1) = unsafe { ((*d.ctx(0)).windows[0], (*d.ctx(1)).windows[1]) };
        assert_eq!(w0, host as u64);
        assert_ne!(w1, 0);
        assert_eq!(d.device_window(0), Some(0x1000));
        assert_eq!(d.device_window(1), None);
        assert_eq!(d.device_window(2), None);
        assert!(Domain::with_windows(64, &[], Duration::from_secs(1)).is_err());
        drop(d);
        drop(mine);
    }

    #[test]
    fn options_parse() {
        assert_eq!(parse_options("").unwrap(), DEFAULT_TIMEOUT);
        assert_eq!(
            parse_options("timeout_ms=1500").unwrap(),
            Duration::from_millis(1500)
        );
        assert!(parse_options("x=1").is_err());
        assert_eq!(seconds(Duration::from_secs(30)), "30");
    }
}
