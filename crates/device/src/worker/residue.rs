//! What a case's user code can leave behind in a device worker's process,
//! for the next case on the same worker to inherit.
//!
//! The runtime's reset returns the *device* to a fresh open's state, but
//! an orchestration or a hosted kernel is host code running inside the
//! worker: it can start a thread that outlives its run, install a signal
//! handler, change the environment, or keep a file open. The next case
//! would then run in a process the earlier one shaped (a `getenv` that
//! answers differently, a handler or a thread whose code the reset just
//! unloaded, crashing the worker while an unrelated case runs). So the
//! worker takes a [`Snapshot`] once the card is open and before user code
//! runs, another after the session, and when they differ ([`Snapshot::left`])
//! it retires after replying: the next case gets a fresh worker, and the
//! case that left the residue is named in its report.
//!
//! Threads (and each thread's blocked signals and CPU affinity), child
//! processes, signal dispositions, open descriptors, the umask and the
//! resource limits are read from `/proc/self` (Linux); elsewhere only the
//! environment is compared.
//! Files an orchestration writes into its working directory need no
//! check: each case runs in a working directory of its own (`cwd/` of
//! its job directory), removed with it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The process state the next case would inherit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Snapshot {
    /// Environment variables, sorted by name.
    env: BTreeMap<OsString, OsString>,
    /// Threads by id (`None`: not knowable here).
    threads: Option<BTreeMap<u32, ThreadState>>,
    /// Child processes (of any thread), by pid, with their names.
    children: Option<BTreeMap<u32, String>>,
    /// Caught and ignored signals (`SigCgt`, `SigIgn` of /proc/self/status).
    signals: Option<(u64, u64)>,
    /// Open descriptors and what they refer to.
    fds: Option<BTreeMap<u32, String>>,
    /// Process-wide settings user code can change: the umask and the
    /// resource limits (`/proc/self/status`, `/proc/self/limits`).
    settings: Option<BTreeMap<&'static str, String>>,
}

/// What a thread that outlives a case keeps of it (an emulated core
/// thread runs every case's kernels).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ThreadState {
    /// `comm`.
    name: String,
    /// Blocked signals (`SigBlk`).
    blocked: u64,
    /// The CPUs it may run on (`Cpus_allowed_list`).
    cpus: String,
}

/// How long a thread that is gone from the program's point of view (a
/// joined thread) may still be listed by the kernel: it is listed until
/// it has finished exiting, a moment after `pthread_join` returned.
const THREAD_EXIT_GRACE: Duration = Duration::from_millis(200);
// (The same grace covers a signal mask caught while a thread starts or
// exits: see `threads_differ`.)

impl Snapshot {
    pub(super) fn take() -> Snapshot {
        Snapshot {
            env: std::env::vars_os().collect(),
            threads: threads(),
            children: children(),
            signals: signals(),
            fds: fds(),
            settings: settings(),
        }
    }

    /// What changed since `before` (taken when the case began), in words,
    /// or `None` when the process is as the case found it. Threads that
    /// are new are looked at again for a moment before they count: one
    /// the runtime just joined may still be finishing its exit.
    #[cfg(test)]
    pub(super) fn left(before: &Snapshot) -> Option<String> {
        Snapshot::left_except(before, &[])
    }

    /// [`Snapshot::left`], not counting descriptors open on `own` (the
    /// worker's own files of the case, such as its job's data file, which
    /// the worker holds open while the case is served).
    pub(super) fn left_except(before: &Snapshot, own: &[PathBuf]) -> Option<String> {
        let mut after = Snapshot::take();
        if let Some(old) = &before.threads {
            let until = Instant::now() + THREAD_EXIT_GRACE;
            // A joined thread is gone within microseconds: look again soon,
            // then less and less often (this is card time).
            let mut pause = Duration::from_micros(20);
            while after
                .threads
                .as_ref()
                .is_some_and(|now| threads_differ(old, now))
                && Instant::now() < until
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(5));
                after.threads = threads();
            }
        }
        let mut found = Vec::new();
        if let (Some(old), Some(now)) = (&before.threads, &after.threads) {
            let new: Vec<String> = now
                .iter()
                .filter(|(tid, _)| !old.contains_key(tid))
                .map(|(tid, t)| format!("`{}` (thread id {tid})", t.name))
                .collect();
            if !new.is_empty() {
                found.push(format!(
                    "{} thread(s) still running: {}",
                    new.len(),
                    new.join(", ")
                ));
            }
            let masked: Vec<String> = now
                .iter()
                .filter_map(|(tid, t)| {
                    let was = old.get(tid)?;
                    let added = t.blocked & !was.blocked;
                    (added != 0).then(|| {
                        format!(
                            "`{}` (thread id {tid}): {}",
                            t.name,
                            signal_names(added).join(", ")
                        )
                    })
                })
                .collect();
            if !masked.is_empty() {
                found.push(format!("blocked signals changed on {}", masked.join("; ")));
            }
            let pinned: Vec<String> = now
                .iter()
                .filter_map(|(tid, t)| {
                    let was = old.get(tid)?;
                    (was.cpus != t.cpus).then(|| {
                        format!("`{}` (thread id {tid}): {} -> {}", t.name, was.cpus, t.cpus)
                    })
                })
                .collect();
            if !pinned.is_empty() {
                found.push(format!("CPU affinity changed on {}", pinned.join("; ")));
            }
        }
        if let (Some(old), Some(now)) = (&before.children, &after.children) {
            let new: Vec<String> = now
                .iter()
                .filter(|(pid, _)| !old.contains_key(pid))
                .map(|(pid, name)| format!("`{name}` (pid {pid})"))
                .collect();
            if !new.is_empty() {
                found.push(format!("process(es) still running: {}", new.join(", ")));
            }
        }
        let changed: Vec<String> = before
            .env
            .iter()
            .filter(|(k, v)| after.env.get(*k) != Some(*v))
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .chain(
                after
                    .env
                    .keys()
                    .filter(|k| !before.env.contains_key(*k))
                    .map(|k| k.to_string_lossy().into_owned()),
            )
            .collect();
        if !changed.is_empty() {
            found.push(format!(
                "environment variable(s) set, changed or removed: {}",
                changed.join(", ")
            ));
        }
        if let (Some((cgt0, ign0)), Some((cgt1, ign1))) = (before.signals, after.signals)
            && (cgt0, ign0) != (cgt1, ign1)
        {
            let names = signal_names((cgt0 ^ cgt1) | (ign0 ^ ign1));
            found.push(format!(
                "signal disposition(s) changed: {}",
                names.join(", ")
            ));
        }
        if let (Some(old), Some(now)) = (&before.fds, &after.fds) {
            let new: Vec<String> = now
                .iter()
                .filter(|(fd, target)| old.get(fd) != Some(target))
                .filter(|(_, target)| !own.iter().any(|p| p.as_os_str() == target.as_str()))
                .map(|(fd, target)| format!("{fd} -> {target}"))
                .collect();
            if !new.is_empty() {
                found.push(format!("file descriptor(s) left open: {}", new.join(", ")));
            }
        }
        if let (Some(old), Some(now)) = (&before.settings, &after.settings) {
            let changed: Vec<&str> = now
                .iter()
                .filter(|(k, v)| old.get(*k) != Some(*v))
                .map(|(k, _)| *k)
                .collect();
            if !changed.is_empty() {
                found.push(format!("process settings changed: {}", changed.join(", ")));
            }
        }
        (!found.is_empty()).then(|| found.join("; "))
    }
}

/// A thread in `now` that `old` lacks, or one that blocks a signal it did
/// not block in `old`. (Only newly blocked signals count: glibc blocks
/// every signal for a moment while a thread starts, exits or forks, so a
/// snapshot can catch a thread in that state; one taken again a moment
/// later does not.)
fn threads_differ(old: &BTreeMap<u32, ThreadState>, now: &BTreeMap<u32, ThreadState>) -> bool {
    now.iter().any(|(tid, t)| match old.get(tid) {
        None => true,
        Some(was) => t.blocked & !was.blocked != 0,
    })
}

#[cfg(target_os = "linux")]
fn threads() -> Option<BTreeMap<u32, ThreadState>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(entry) = entry else { continue };
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        // A thread that exited meanwhile has no status any more: gone.
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |key| status_field(&status, key).unwrap_or_default();
        out.insert(
            tid,
            ThreadState {
                name: field("Name:").to_owned(),
                blocked: u64::from_str_radix(field("SigBlk:"), 16).unwrap_or_default(),
                cpus: field("Cpus_allowed_list:").to_owned(),
            },
        );
    }
    Some(out)
}

#[cfg(not(target_os = "linux"))]
fn threads() -> Option<BTreeMap<u32, ThreadState>> {
    None
}

#[cfg(target_os = "linux")]
fn settings() -> Option<BTreeMap<&'static str, String>> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let mut out = BTreeMap::new();
    out.insert("umask", status_field(&status, "Umask:")?.to_owned());
    out.insert(
        "resource limits",
        std::fs::read_to_string("/proc/self/limits").ok()?,
    );
    Some(out)
}

#[cfg(not(target_os = "linux"))]
fn settings() -> Option<BTreeMap<&'static str, String>> {
    None
}

/// Children of every thread (`/proc/self/task/*/children`; a kernel
/// without that file has it checked as "none").
#[cfg(target_os = "linux")]
fn children() -> Option<BTreeMap<u32, String>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let Ok(list) = std::fs::read_to_string(entry.path().join("children")) else {
            continue;
        };
        for pid in list
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
        {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            out.insert(pid, name.trim_end().to_owned());
        }
    }
    Some(out)
}

#[cfg(not(target_os = "linux"))]
fn children() -> Option<BTreeMap<u32, String>> {
    None
}

#[cfg(target_os = "linux")]
fn status_field<'s>(status: &'s str, key: &str) -> Option<&'s str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim)
}

#[cfg(target_os = "linux")]
fn signals() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let mask = |key: &str| status_field(&status, key).and_then(|v| u64::from_str_radix(v, 16).ok());
    Some((mask("SigCgt:")?, mask("SigIgn:")?))
}

#[cfg(not(target_os = "linux"))]
fn signals() -> Option<(u64, u64)> {
    None
}

#[cfg(target_os = "linux")]
fn fds() -> Option<BTreeMap<u32, String>> {
    // The names first, the links after the listing is closed: the
    // listing's own descriptor then no longer resolves and drops out.
    let names: Vec<u32> = std::fs::read_dir("/proc/self/fd")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    Some(
        names
            .into_iter()
            .filter_map(|fd| {
                let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
                Some((fd, target.display().to_string()))
            })
            .collect(),
    )
}

#[cfg(not(target_os = "linux"))]
fn fds() -> Option<BTreeMap<u32, String>> {
    None
}

/// `SIGUSR1`, ... for the bits of a /proc signal mask (bit n-1 is signal n).
fn signal_names(mask: u64) -> Vec<String> {
    (1..=64u32)
        .filter(|n| mask & (1u64 << (n - 1)) != 0)
        .map(|n| {
            let name = match n as i32 {
                libc::SIGHUP => "SIGHUP",
                libc::SIGINT => "SIGINT",
                libc::SIGQUIT => "SIGQUIT",
                libc::SIGILL => "SIGILL",
                libc::SIGTRAP => "SIGTRAP",
                libc::SIGABRT => "SIGABRT",
                libc::SIGBUS => "SIGBUS",
                libc::SIGFPE => "SIGFPE",
                libc::SIGUSR1 => "SIGUSR1",
                libc::SIGSEGV => "SIGSEGV",
                libc::SIGUSR2 => "SIGUSR2",
                libc::SIGPIPE => "SIGPIPE",
                libc::SIGALRM => "SIGALRM",
                libc::SIGTERM => "SIGTERM",
                libc::SIGCHLD => "SIGCHLD",
                libc::SIGCONT => "SIGCONT",
                libc::SIGTSTP => "SIGTSTP",
                libc::SIGTTIN => "SIGTTIN",
                libc::SIGTTOU => "SIGTTOU",
                libc::SIGURG => "SIGURG",
                libc::SIGXCPU => "SIGXCPU",
                libc::SIGXFSZ => "SIGXFSZ",
                libc::SIGVTALRM => "SIGVTALRM",
                libc::SIGPROF => "SIGPROF",
                libc::SIGWINCH => "SIGWINCH",
                libc::SIGSYS => "SIGSYS",
                _ => return format!("signal {n}"),
            };
            name.to_owned()
        })
        .collect()
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;

    /// The checks look at the whole process, so they run in a process of
    /// their own: this test binary again, with only them selected (other
    /// tests' threads and files would be residue to them).
    #[test]
    fn residue_is_seen_in_a_process_of_its_own() {
        const CHILD: &str = "SCENE_RESIDUE_TEST_CHILD";
        if std::env::var_os(CHILD).is_some() {
            return checks();
        }
        let exe = std::env::current_exe().expect("the test binary");
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "worker::residue::tests::residue_is_seen_in_a_process_of_its_own",
                "--test-threads=1",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .output()
            .expect("runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        assert!(
            text.contains("1 passed"),
            "the child ran the checks: {text}"
        );
    }

    fn checks() {
        // Untouched: nothing. A thread that came and went is no residue.
        let before = Snapshot::take();
        std::thread::spawn(|| ()).join().expect("joined");
        assert_eq!(Snapshot::left(&before), None);

        // A thread still running is named.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("leftover".into())
            .spawn(move || {
                let _ = rx.recv();
            })
            .expect("spawn");
        let left = Snapshot::left(&before).expect("a thread is running");
        assert!(
            left.contains("1 thread(s) still running: `leftover`"),
            "{left}"
        );
        drop(tx);
        t.join().expect("joined");
        assert_eq!(Snapshot::left(&before), None);

        // A child process still running.
        let mut child = std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .expect("sleep");
        let left = Snapshot::left(&before).expect("a child is running");
        assert!(
            left.contains("process(es) still running: `sleep`"),
            "{left}"
        );
        let _ = child.kill();
        let _ = child.wait();

        // An open file.
        let f = tempfile::tempfile().expect("tempfile");
        let left = Snapshot::left(&before).expect("a file is open");
        assert!(left.contains("file descriptor(s) left open: "), "{left}");
        drop(f);
        assert_eq!(Snapshot::left(&before), None);
        // Except the worker's own files of the case.
        let own = tempfile::NamedTempFile::new().expect("tempfile");
        let path = std::fs::canonicalize(own.path()).expect("canonical");
        let _open = std::fs::File::open(&path).expect("open");
        assert!(Snapshot::left(&before).is_some());
        assert_eq!(Snapshot::left_except(&before, &[path]), None);

        // The environment: names, never values. (`set_var` is unsafe in
        // edition 2024 and the workspace denies unsafe code, so a changed
        // `before` stands in for a changed process.)
        let mut changed = before.clone();
        changed
            .env
            .insert("SCENE_RESIDUE_SECRET".into(), "hunter2".into());
        let left = Snapshot::left(&changed).expect("an env change");
        assert!(left.contains("SCENE_RESIDUE_SECRET"), "{left}");
        assert!(!left.contains("hunter2"), "{left}");

        // Signal dispositions.
        let mut changed = before.clone();
        changed.signals = changed
            .signals
            .map(|(cgt, ign)| (cgt ^ (1 << (libc::SIGUSR2 - 1)), ign));
        let left = Snapshot::left(&changed).expect("a handler change");
        assert!(
            left.contains("signal disposition(s) changed: SIGUSR2"),
            "{left}"
        );

        // The umask, resource limits, a thread's CPU affinity.
        let mut changed = before.clone();
        if let Some(s) = &mut changed.settings {
            s.insert("umask", "0077".into());
        }
        let left = Snapshot::left(&changed).expect("a umask change");
        assert!(left.contains("process settings changed: umask"), "{left}");
        let mut changed = before.clone();
        if let Some(t) = changed.threads.as_mut().and_then(|t| t.values_mut().next()) {
            t.cpus = "0-1023".into();
        }
        let left = Snapshot::left(&changed).expect("an affinity change");
        assert!(left.contains("CPU affinity changed on "), "{left}");
    }

    #[test]
    fn signal_masks_read_as_names() {
        assert_eq!(
            signal_names((1 << (libc::SIGUSR1 - 1)) | (1 << 40)),
            vec!["SIGUSR1".to_owned(), "signal 41".to_owned()]
        );
    }
}
