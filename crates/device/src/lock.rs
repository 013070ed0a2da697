//! Exclusive, cross-process card leases built on per-card lock files.
//!
//! Each card `N` has a lock file `card-N.lock` in the lock directory, held
//! with an exclusive `flock` (`File::lock`): the kernel drops it when the file
//! is closed, so a lease ends on drop and when its process dies, even by
//! `kill -9`. The holder writes `pid`, `holder` and `acquired` into the file
//! so that waiters can say whom they wait for.
//!
//! Multi-card leases are taken with `try_lock` only, in ascending card order,
//! releasing everything on a shortfall and retrying with backoff: no process
//! ever blocks while holding a card, so leases cannot deadlock.

use std::collections::BTreeSet;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::DeviceError;
use crate::list::DeviceList;

/// Who holds a card, as recorded in its lock file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderInfo {
    pub pid: u32,
    /// Free-form label given to [`CardPool::acquire`], e.g. a case name.
    pub label: String,
    /// Unix time (seconds) the lease was acquired.
    pub acquired_unix: u64,
}

impl HolderInfo {
    fn render(&self) -> String {
        format!(
            "pid={}\nholder={}\nacquired={}\n",
            self.pid, self.label, self.acquired_unix
        )
    }

    fn parse(text: &str) -> Option<HolderInfo> {
        let mut pid = None;
        let mut label = String::new();
        let mut acquired_unix = 0;
        for line in text.lines() {
            match line.split_once('=') {
                Some(("pid", v)) => pid = v.trim().parse().ok(),
                Some(("holder", v)) => label = v.to_owned(),
                Some(("acquired", v)) => acquired_unix = v.trim().parse().unwrap_or(0),
                _ => {}
            }
        }
        Some(HolderInfo {
            pid: pid?,
            label,
            acquired_unix,
        })
    }
}

impl fmt::Display for HolderInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.label.is_empty() {
            write!(f, "pid {}", self.pid)
        } else {
            write!(f, "pid {} ({})", self.pid, self.label)
        }
    }
}

/// Reported to [`AcquireOptions::on_wait`] while a lease waits for a busy card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitStatus {
    /// The busy card waited for.
    pub card: u32,
    /// Its holder, if the lock file names one.
    pub holder: Option<HolderInfo>,
    /// Time since the acquire started.
    pub waited: Duration,
}

impl fmt::Display for WaitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.holder {
            Some(h) => write!(f, "waiting for card {} held by {h}", self.card),
            None => write!(f, "waiting for card {} (holder unknown)", self.card),
        }
    }
}

/// How [`CardPool::acquire`] waits.
#[derive(Default)]
pub struct AcquireOptions<'a> {
    /// Give up after this long (`None`: wait indefinitely).
    pub timeout: Option<Duration>,
    /// Called before the first wait, then whenever the awaited card or its
    /// holder changes, and at least every second while waiting.
    pub on_wait: Option<&'a mut dyn FnMut(&WaitStatus)>,
}

impl fmt::Debug for AcquireOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquireOptions")
            .field("timeout", &self.timeout)
            .field("on_wait", &self.on_wait.as_ref().map(|_| "FnMut"))
            .finish()
    }
}

/// `SCENE_LOCK_DIR` if set, else `<temp dir>/scene-locks-<uid>`.
pub fn default_lock_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SCENE_LOCK_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    std::env::temp_dir().join(format!("scene-locks-{}", current_uid()))
}

/// The real uid, read without libc: `/proc/self` is owned by the process's uid.
fn current_uid() -> String {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata("/proc/self") {
        Ok(m) => m.uid().to_string(),
        Err(_) => std::env::var("USER").unwrap_or_else(|_| "unknown".into()),
    }
}

/// The cards a process may use, and the directory of their lock files.
///
/// Clones share one set of retired cards: a card retired by any clone (a
/// device fault made it unusable) is never leased again by this process.
#[derive(Debug, Clone)]
pub struct CardPool {
    devices: DeviceList,
    lock_dir: PathBuf,
    retired: Arc<Mutex<BTreeSet<u32>>>,
}

/// An exclusive hold on some cards; released on drop.
#[derive(Debug)]
pub struct CardLease {
    cards: Vec<u32>,
    locks: Vec<File>,
    holder: String,
    acquired_at: SystemTime,
}

fn io_err<'p>(
    action: &'static str,
    path: &'p Path,
) -> impl FnOnce(std::io::Error) -> DeviceError + 'p {
    move |source| DeviceError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

impl CardPool {
    /// A pool over `devices` with lock files in `lock_dir` (created if missing).
    pub fn new(devices: DeviceList, lock_dir: PathBuf) -> Result<CardPool, DeviceError> {
        std::fs::create_dir_all(&lock_dir).map_err(io_err("creating lock directory", &lock_dir))?;
        Ok(CardPool {
            devices,
            lock_dir,
            retired: Arc::default(),
        })
    }

    /// Takes `card` out of service for the rest of the process (its device
    /// reported a fatal fault). Leases already held are unaffected.
    pub fn retire(&self, card: u32) {
        self.retired_set().insert(card);
    }

    /// Cards retired so far, ascending.
    pub fn retired(&self) -> Vec<u32> {
        self.retired_set().iter().copied().collect()
    }

    /// Cards of the pool not retired, in pool order.
    pub fn healthy(&self) -> Vec<u32> {
        let retired = self.retired_set();
        self.devices
            .iter()
            .filter(|c| !retired.contains(c))
            .collect()
    }

    fn retired_set(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        // The set stays consistent even if a holder panicked: inserts are atomic.
        self.retired.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A pool with lock files in [`default_lock_dir`].
    pub fn with_default_lock_dir(devices: DeviceList) -> Result<CardPool, DeviceError> {
        CardPool::new(devices, default_lock_dir())
    }

    pub fn devices(&self) -> &DeviceList {
        &self.devices
    }

    pub fn lock_dir(&self) -> &Path {
        &self.lock_dir
    }

    /// Path of card `card`'s lock file.
    pub fn lock_path(&self, card: u32) -> PathBuf {
        self.lock_dir.join(format!("card-{card}.lock"))
    }

    /// Holder recorded in `card`'s lock file (meaningful while it is locked).
    pub fn holder(&self, card: u32) -> Option<HolderInfo> {
        std::fs::read_to_string(self.lock_path(card))
            .ok()
            .and_then(|t| HolderInfo::parse(&t))
    }

    fn open_lock(&self, card: u32) -> Result<File, DeviceError> {
        let path = self.lock_path(card);
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err("opening lock file", &path))
    }

    /// One non-blocking attempt: `Ok(Ok(lease))`, or `Ok(Err(first busy card))`.
    fn attempt(&self, k: usize, holder: &str) -> Result<Result<CardLease, u32>, DeviceError> {
        let mut ids: Vec<u32> = self.healthy();
        ids.sort_unstable();
        let mut cards = Vec::with_capacity(k);
        let mut locks = Vec::with_capacity(k);
        let mut first_busy = None;
        for id in ids {
            if cards.len() == k {
                break;
            }
            let f = self.open_lock(id)?;
            match f.try_lock() {
                Ok(()) => {
                    cards.push(id);
                    locks.push(f);
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    first_busy.get_or_insert(id);
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(DeviceError::Io {
                        action: "locking",
                        path: self.lock_path(id),
                        source: e,
                    });
                }
            }
        }
        if cards.len() < k {
            // Unlocks everything taken so far (dropping the files closes them).
            drop(locks);
            return Ok(Err(first_busy.unwrap_or(0)));
        }
        let label: String = holder
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let acquired_at = SystemTime::now();
        let info = HolderInfo {
            pid: std::process::id(),
            label,
            acquired_unix: acquired_at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        for (id, f) in cards.iter().zip(&locks) {
            let path = self.lock_path(*id);
            f.set_len(0).map_err(io_err("writing lock file", &path))?;
            let mut w = f;
            w.write_all(info.render().as_bytes())
                .map_err(io_err("writing lock file", &path))?;
        }
        Ok(Ok(CardLease {
            cards,
            locks,
            holder: info.label,
            acquired_at,
        }))
    }

    /// Takes `k` free cards now, or returns `None` if fewer than `k` are free.
    pub fn try_acquire(&self, k: usize, holder: &str) -> Result<Option<CardLease>, DeviceError> {
        self.check_k(k)?;
        Ok(self.attempt(k, holder)?.ok())
    }

    fn check_k(&self, k: usize) -> Result<(), DeviceError> {
        if k == 0 || k > self.devices.len() {
            return Err(DeviceError::TooManyCards {
                requested: k,
                available: self.devices.len(),
            });
        }
        let healthy = self.healthy().len();
        if k > healthy {
            return Err(DeviceError::NotEnoughHealthyCards {
                requested: k,
                healthy,
                retired: self.retired(),
            });
        }
        Ok(())
    }

    /// Leases `k` cards of the pool for `holder` (a label such as a case name),
    /// waiting while fewer than `k` are free.
    pub fn acquire(
        &self,
        k: usize,
        holder: &str,
        mut opts: AcquireOptions<'_>,
    ) -> Result<CardLease, DeviceError> {
        self.check_k(k)?;
        let start = Instant::now();
        let mut backoff = Duration::from_millis(2);
        let mut rng = jitter_seed();
        let mut last_report: Option<(u32, Option<u32>, Instant)> = None;
        loop {
            self.check_k(k)?;
            let busy = match self.attempt(k, holder)? {
                Ok(lease) => return Ok(lease),
                Err(card) => card,
            };
            let waited = start.elapsed();
            let info = self.holder(busy);
            if opts.timeout.is_some_and(|t| waited >= t) {
                return Err(DeviceError::LockTimeout {
                    card: busy,
                    holder: info,
                    waited,
                });
            }
            if let Some(cb) = opts.on_wait.as_mut() {
                let pid = info.as_ref().map(|h| h.pid);
                let due = match last_report {
                    None => true,
                    Some((c, p, at)) => {
                        c != busy || p != pid || at.elapsed() >= Duration::from_secs(1)
                    }
                };
                if due {
                    cb(&WaitStatus {
                        card: busy,
                        holder: info,
                        waited,
                    });
                    last_report = Some((busy, pid, Instant::now()));
                }
            }
            // Randomised backoff so that competing leases do not retry in lockstep.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let jitter = Duration::from_micros(rng % (backoff.as_micros() as u64 + 1));
            let mut nap = backoff / 2 + jitter;
            if let Some(t) = opts.timeout {
                nap = nap
                    .min(t.saturating_sub(start.elapsed()))
                    .max(Duration::from_micros(100));
            }
            std::thread::sleep(nap);
            backoff = (backoff * 2).min(Duration::from_millis(100));
        }
    }
}

fn jitter_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one((
        std::process::id(),
        std::thread::current().id(),
        Instant::now(),
    )) | 1
}

impl CardLease {
    /// The leased card ids, ascending.
    pub fn cards(&self) -> &[u32] {
        &self.cards
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    pub fn acquired_at(&self) -> SystemTime {
        self.acquired_at
    }

    /// Releases the cards now; returns the release time, read just before
    /// unlocking so that no later holder's `acquired_at` can precede it.
    pub fn release(mut self) -> SystemTime {
        let at = SystemTime::now();
        self.unlock_all();
        at
    }

    fn unlock_all(&mut self) {
        for f in self.locks.drain(..) {
            // Clear the holder record first so nobody reads a stale one, then
            // unlock; closing the file would release the lock anyway.
            let _ = f.set_len(0);
            let _ = f.unlock();
        }
    }
}

impl Drop for CardLease {
    fn drop(&mut self) {
        self.unlock_all();
    }
}
