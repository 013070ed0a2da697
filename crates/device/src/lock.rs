//! Exclusive, cross-process card leases built on per-card lock files.
//!
//! Each card `N` has a lock file `card-N.lock` in the lock directory, held
//! with an exclusive `flock` (`File::lock`): the kernel drops it when the file
//! is closed, so a lease ends on drop and when its process dies, even by
//! `kill -9`. The holder writes `pid`, `holder` and `acquired` into the file
//! so that waiters can say whom they wait for.
//!
//! Cards are machine-wide, so the lock directory is too: by default one
//! directory for every user of the machine ([`DEFAULT_LOCK_DIR`]), created
//! sticky and world-writable like `/tmp` (mode 1777), with lock and ticket
//! files world-readable and -writable (0666, whatever the umask), so a
//! user can wait on and take a card another user released.
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
use crate::holder::HolderInfo;
use crate::list::DeviceList;

/// Reported to [`AcquireOptions::on_wait`] while a lease waits for a busy card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitStatus {
    /// The busy card waited for.
    pub card: u32,
    /// Its holder, if the lock file names one.
    pub holder: Option<HolderInfo>,
    /// Time since the acquire started.
    pub waited: Duration,
    /// Earlier waiters for the same cards, served first.
    pub ahead: usize,
}

impl fmt::Display for WaitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.holder {
            Some(h) => write!(f, "waiting for card {} held by {h}", self.card)?,
            None => write!(f, "waiting for card {} (holder unknown)", self.card)?,
        }
        if self.ahead > 0 {
            write!(f, "; {} waiter(s) ahead in line", self.ahead)?;
        }
        Ok(())
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

/// The default card lock directory: one path for every user and process of
/// the machine (not under `TMPDIR`, which differs between users), because
/// a card is one card whoever holds it.
pub const DEFAULT_LOCK_DIR: &str = "/tmp/scene-cards";

/// Mode of a lock directory the pool creates: sticky and world-writable,
/// like `/tmp` (everyone may add files, only owners may remove them).
pub const LOCK_DIR_MODE: u32 = 0o1777;

/// Mode of lock and ticket files: every user may open and `flock` them.
pub const LOCK_FILE_MODE: u32 = 0o666;

/// The lock directory to use: `lock_dir` (the `SCENE_LOCK_DIR` variable) if
/// given and non-empty, else [`default_lock_dir`].
pub fn resolve_lock_dir(lock_dir: Option<&Path>) -> PathBuf {
    match lock_dir.filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => default_lock_dir(),
    }
}

/// [`DEFAULT_LOCK_DIR`]: the same for every user, so two users never hold
/// one card at once.
pub fn default_lock_dir() -> PathBuf {
    PathBuf::from(DEFAULT_LOCK_DIR)
}

/// Creates `dir` (its parents as usual) with [`LOCK_DIR_MODE`], whatever
/// the umask; an existing directory is left as it is.
fn create_shared_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(LOCK_DIR_MODE).create(dir) {
        Ok(()) => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(LOCK_DIR_MODE)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Makes a file this process just created [`LOCK_FILE_MODE`] (the umask
/// narrowed it at creation).
fn share_file(file: &File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(LOCK_FILE_MODE))
}

/// Why `dir` cannot serve as the lock directory, for the error message.
fn unusable(dir: &Path, reason: impl fmt::Display) -> DeviceError {
    DeviceError::LockDirUnusable {
        dir: dir.to_path_buf(),
        reason: reason.to_string(),
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
    /// A cancelled run waits for no card ([`DeviceError::Cancelled`]).
    cancel: scene_util::Cancel,
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
    /// A pool over `devices` with lock files in `lock_dir`, created if
    /// missing with [`LOCK_DIR_MODE`]. Every card's lock file is opened
    /// (created [`LOCK_FILE_MODE`] if missing) here, so a directory this
    /// user cannot use is one clear error naming it, before any work.
    pub fn new(devices: DeviceList, lock_dir: PathBuf) -> Result<CardPool, DeviceError> {
        create_shared_dir(&lock_dir).map_err(|e| unusable(&lock_dir, e))?;
        let meta = std::fs::metadata(&lock_dir).map_err(|e| unusable(&lock_dir, e))?;
        if !meta.is_dir() {
            return Err(unusable(&lock_dir, "it is not a directory"));
        }
        let pool = CardPool {
            devices,
            lock_dir,
            retired: Arc::default(),
            cancel: scene_util::Cancel::default(),
        };
        for card in pool.devices.iter() {
            pool.open_lock(card).map_err(|e| match e {
                DeviceError::Io { source, path, .. } => {
                    unusable(&pool.lock_dir, format!("{}: {source}", path.display()))
                }
                other => other,
            })?;
        }
        Ok(pool)
    }

    /// Stops [`CardPool::acquire`] waiting (and taking a card) once
    /// `cancel` is cancelled: it returns [`DeviceError::Cancelled`].
    pub fn with_cancel(mut self, cancel: scene_util::Cancel) -> Self {
        self.cancel = cancel;
        self
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

    /// Opens `card`'s lock file read-write. A missing one is created under
    /// a private name, made [`LOCK_FILE_MODE`] and linked into place, so no
    /// other user ever sees it with the creator's umask.
    fn open_lock(&self, card: u32) -> Result<File, DeviceError> {
        let path = self.lock_path(card);
        let open = || OpenOptions::new().read(true).write(true).open(&path);
        match open() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => return other.map_err(io_err("opening lock file", &path)),
        }
        let fresh = self
            .lock_dir
            .join(format!(".card-{card}.lock.{}", unique_suffix()));
        let created = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&fresh)
            .and_then(|f| share_file(&f));
        let linked = created.and_then(|()| match std::fs::hard_link(&fresh, &path) {
            // Another process linked its own first: use that one.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        });
        let _ = std::fs::remove_file(&fresh);
        linked.map_err(io_err("creating lock file", &path))?;
        open().map_err(io_err("opening lock file", &path))
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

    /// Takes `k` free cards now, or returns `None` if fewer than `k` are free
    /// or earlier waiters are in line for them.
    pub fn try_acquire(&self, k: usize, holder: &str) -> Result<Option<CardLease>, DeviceError> {
        self.check_k(k)?;
        if !self.line().ahead_of(None, &self.healthy()).is_empty() {
            return Ok(None);
        }
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

    fn line(&self) -> WaitingLine {
        WaitingLine {
            dir: self.lock_dir.join("queue"),
        }
    }

    /// Leases `k` cards of the pool for `holder` (a label such as a case name),
    /// waiting while fewer than `k` are free.
    ///
    /// Waiters are served first come, first served: a waiter holds a ticket
    /// in the lock directory's waiting line, and nobody takes a card that an
    /// earlier live ticket is waiting for. Without the line, a process that
    /// releases and re-takes a card case after case would starve everyone
    /// who polls for it.
    pub fn acquire(
        &self,
        k: usize,
        holder: &str,
        mut opts: AcquireOptions<'_>,
    ) -> Result<CardLease, DeviceError> {
        self.check_k(k)?;
        let start = Instant::now();
        let line = self.line();
        let mut ticket: Option<Ticket> = None;
        let mut backoff = Duration::from_millis(1);
        let mut rng = jitter_seed();
        let mut last_report: Option<(u32, Option<u32>, usize, Instant)> = None;
        loop {
            if self.cancel.is_cancelled() {
                return Err(DeviceError::Cancelled);
            }
            self.check_k(k)?;
            let wanted = self.healthy();
            let ahead = line.ahead_of(ticket.as_ref().map(|t| t.name.as_str()), &wanted);
            let busy = if ahead.is_empty() {
                match self.attempt(k, holder)? {
                    // Dropping the ticket leaves the line.
                    Ok(lease) => return Ok(lease),
                    Err(card) => card,
                }
            } else {
                // Not our turn: name a card the head of the line waits for.
                ahead[0]
                    .cards
                    .iter()
                    .copied()
                    .find(|c| wanted.contains(c))
                    .unwrap_or(wanted[0])
            };
            if ticket.is_none() {
                ticket = Some(line.join(&wanted)?);
                // Joining may have put us behind someone: look again at once.
                continue;
            }
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
                    Some((c, p, n, at)) => {
                        c != busy
                            || p != pid
                            || n != ahead.len()
                            || at.elapsed() >= Duration::from_secs(1)
                    }
                };
                if due {
                    cb(&WaitStatus {
                        card: busy,
                        holder: info,
                        waited,
                        ahead: ahead.len(),
                    });
                    last_report = Some((busy, pid, ahead.len(), Instant::now()));
                }
            }
            // The head of the line polls briskly so a released card is not
            // left idle; the rest poll a little slower, since each look at the
            // line reads every ticket ahead. Randomised so competing leases
            // do not retry in lockstep.
            let cap = if ahead.is_empty() {
                Duration::from_millis(2)
            } else {
                Duration::from_millis(10)
            };
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
            backoff = (backoff * 2).min(cap);
        }
    }
}

/// The waiting line of a lock directory: one ticket file per waiting lease
/// in `<lock dir>/queue/`, named so that names sort by arrival, holding the
/// card ids the waiter wants, and flocked by its owner for as long as it
/// waits. A ticket whose lock can be taken belongs to a dead process and is
/// removed by whoever finds it.
struct WaitingLine {
    dir: PathBuf,
}

/// A live ticket seen in the line.
struct Waiter {
    cards: Vec<u32>,
}

/// Our own place in the line; leaves it on drop.
struct Ticket {
    path: PathBuf,
    name: String,
    _file: File,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // Remove first, then the lock goes with the closed file: nobody can
        // mistake the ticket for a dead waiter's in between.
        let _ = std::fs::remove_file(&self.path);
    }
}

impl WaitingLine {
    /// Takes a ticket for `cards`. It is written and locked under a hidden
    /// name, then renamed into the line, so nobody sees it unlocked.
    fn join(&self, cards: &[u32]) -> Result<Ticket, DeviceError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static SEQ: AtomicU64 = AtomicU64::new(0);
        create_shared_dir(&self.dir).map_err(io_err("creating waiting line", &self.dir))?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!(
            "{nanos:024}-{:010}-{:08}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let hidden = self.dir.join(format!(".{name}"));
        let path = self.dir.join(&name);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&hidden)
            .map_err(io_err("creating ticket", &hidden))?;
        // Other users' waiters open it to see whether it is still locked.
        share_file(&file).map_err(io_err("creating ticket", &hidden))?;
        file.lock().map_err(io_err("locking ticket", &hidden))?;
        let list: Vec<String> = cards.iter().map(u32::to_string).collect();
        file.write_all(list.join(",").as_bytes())
            .map_err(io_err("writing ticket", &hidden))?;
        std::fs::rename(&hidden, &path).map_err(io_err("entering waiting line", &path))?;
        Ok(Ticket {
            path,
            name,
            _file: file,
        })
    }

    /// Live waiters ahead of `mine` (everyone, for `None`) that want any of
    /// `cards`, oldest first. Dead waiters' tickets are removed on the way.
    fn ahead_of(&self, mine: Option<&str>, cards: &[u32]) -> Vec<Waiter> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.') && mine.is_none_or(|m| n.as_str() < m))
            .collect();
        names.sort();
        let mut ahead = Vec::new();
        for name in names {
            let path = self.dir.join(&name);
            let Ok(file) = OpenOptions::new().read(true).open(&path) else {
                continue; // left the line meanwhile
            };
            match file.try_lock() {
                Ok(()) => {
                    // Nobody holds it: its owner died while waiting.
                    let _ = std::fs::remove_file(&path);
                    continue;
                }
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(_)) => continue,
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let wanted: Vec<u32> = text
                .split(',')
                .filter_map(|c| c.trim().parse().ok())
                .collect();
            if wanted.iter().any(|c| cards.contains(c)) {
                ahead.push(Waiter { cards: wanted });
            }
        }
        ahead
    }
}

/// `<pid>-<seq>`: unique among this machine's live processes and threads.
fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
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
