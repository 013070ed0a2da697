//! Card leases across threads and processes. Child processes are this same
//! test executable re-run with `SCENE_TEST_CHILD` selecting a child mode.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scene_device::{
    AcquireOptions, CardPool, DeviceError, DeviceList, WaitStatus, default_lock_dir,
    resolve_lock_dir,
};

const LABEL: &str = "vector_example::small";

fn pool(dir: &Path, list: &str) -> CardPool {
    CardPool::new(list.parse().unwrap(), dir.to_path_buf()).unwrap()
}

fn child(mode: &str, test: &str, envs: &[(&str, &str)]) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("SCENE_TEST_CHILD", mode);
    c.env_remove("SCENE_DEVICES").env_remove("TASK_DEVICE");
    for (k, v) in envs {
        c.env(k, v);
    }
    c
}

fn child_mode() -> Option<String> {
    std::env::var("SCENE_TEST_CHILD").ok()
}

/// Child mode `hold`: lease card 0, say "locked", wait for stdin to close.
#[test]
fn child_hold_lock() {
    if child_mode().as_deref() != Some("hold") {
        return;
    }
    let dir = PathBuf::from(std::env::var("SCENE_TEST_LOCK_DIR").unwrap());
    let lease = pool(&dir, "0")
        .acquire(1, LABEL, AcquireOptions::default())
        .unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "\nlocked {:?}", lease.cards()).unwrap();
    out.flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

fn spawn_holder(dir: &Path) -> Child {
    let mut c = child(
        "hold",
        "child_hold_lock",
        &[("SCENE_TEST_LOCK_DIR", dir.to_str().unwrap())],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit())
    .spawn()
    .unwrap();
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "child exited before locking"
        );
        if line.contains("locked") {
            break;
        }
    }
    // Keep draining so the child never writes into a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    c
}

#[test]
fn two_processes_serialize_on_one_card() {
    if child_mode().is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut holder = spawn_holder(dir.path());
    let p = pool(dir.path(), "0");

    assert!(p.try_acquire(1, "parent").unwrap().is_none());
    let info = p.holder(0).expect("holder info in the lock file");
    assert_eq!(info.pid, holder.id());
    assert_eq!(info.label, LABEL);

    let mut seen: Vec<WaitStatus> = Vec::new();
    let mut on_wait = |s: &WaitStatus| seen.push(s.clone());
    let t = Instant::now();
    let err = p
        .acquire(
            1,
            "parent",
            AcquireOptions {
                timeout: Some(Duration::from_millis(150)),
                on_wait: Some(&mut on_wait),
            },
        )
        .unwrap_err();
    assert!(t.elapsed() >= Duration::from_millis(150));
    match &err {
        DeviceError::LockTimeout {
            card: 0,
            holder: Some(h),
            waited,
        } => {
            assert_eq!(h.pid, holder.id());
            assert!(*waited >= Duration::from_millis(150));
        }
        e => panic!("unexpected {e:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("held by pid {} ({LABEL})", holder.id())),
        "{msg}"
    );
    assert!(!seen.is_empty(), "on_wait was not called");
    assert_eq!(
        seen[0].to_string(),
        format!("waiting for card 0 held by pid {} ({LABEL})", holder.id())
    );

    holder.kill().unwrap();
    holder.wait().unwrap();
    let t = Instant::now();
    let lease = p
        .acquire(
            1,
            "parent",
            AcquireOptions {
                timeout: Some(Duration::from_secs(5)),
                on_wait: None,
            },
        )
        .unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(lease.cards(), &[0]);
    assert_eq!(p.holder(0).unwrap().pid, std::process::id());
    assert_eq!(p.holder(0).unwrap().label, "parent");
    let released = lease.release();
    assert!(released >= std::time::UNIX_EPOCH);
    assert!(p.holder(0).is_none(), "holder info cleared on release");
    assert!(p.try_acquire(1, "again").unwrap().is_some());
}

#[test]
fn holder_released_on_orderly_exit_too() {
    if child_mode().is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut holder = spawn_holder(dir.path());
    let p = pool(dir.path(), "0-1");
    // Card 1 is free: a single-card lease takes it without waiting.
    let one = p.try_acquire(1, "x").unwrap().unwrap();
    assert_eq!(one.cards(), &[1]);
    drop(one);
    // Two cards need card 0 too.
    assert!(p.try_acquire(2, "x").unwrap().is_none());
    drop(holder.stdin.take()); // child sees EOF, releases, exits
    assert!(holder.wait().unwrap().success());
    let both = p
        .acquire(
            2,
            "x",
            AcquireOptions {
                timeout: Some(Duration::from_secs(5)),
                on_wait: None,
            },
        )
        .unwrap();
    assert_eq!(both.cards(), &[0, 1]);
}

#[test]
fn too_many_cards_is_immediate() {
    if child_mode().is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = pool(dir.path(), "0,2");
    let t = Instant::now();
    let e = p.acquire(3, "x", AcquireOptions::default()).unwrap_err();
    assert!(
        matches!(
            e,
            DeviceError::TooManyCards {
                requested: 3,
                available: 2
            }
        ),
        "{e:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(1));
    assert!(matches!(
        p.try_acquire(0, "x"),
        Err(DeviceError::TooManyCards { .. })
    ));
    let l = p.try_acquire(2, "x").unwrap().unwrap();
    assert_eq!(l.cards(), &[0, 2]);
    assert!(dir.path().join("card-2.lock").is_file());
}

/// Leases k=1 and k=2 cards from a 3-card pool repeatedly; checks via the lock
/// files that nobody else holds a card while we do.
fn churn(dir: &Path, tag: &str, threads: usize, iters: usize) {
    let p = Arc::new(pool(dir, "0-2"));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let p = Arc::clone(&p);
            let tag = format!("{tag}-{t}");
            std::thread::spawn(move || {
                for i in 0..iters {
                    let k = 1 + (i + t) % 2;
                    let label = format!("{tag}-{i}");
                    let lease = p
                        .acquire(
                            k,
                            &label,
                            AcquireOptions {
                                timeout: Some(Duration::from_secs(60)),
                                on_wait: None,
                            },
                        )
                        .unwrap();
                    assert_eq!(lease.cards().len(), k);
                    for &c in lease.cards() {
                        assert_eq!(
                            p.holder(c).unwrap().label,
                            label,
                            "card {c} not exclusively ours"
                        );
                    }
                    std::thread::yield_now();
                    for &c in lease.cards() {
                        assert_eq!(
                            p.holder(c).unwrap().label,
                            label,
                            "card {c} not exclusively ours"
                        );
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// Child mode `churn`.
#[test]
fn child_churn() {
    if child_mode().as_deref() != Some("churn") {
        return;
    }
    let dir = PathBuf::from(std::env::var("SCENE_TEST_LOCK_DIR").unwrap());
    churn(&dir, &format!("pid{}", std::process::id()), 2, 40);
}

#[test]
fn mixed_leases_from_threads_and_processes_complete() {
    if child_mode().is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let children: Vec<Child> = (0..2)
        .map(|_| {
            child("churn", "child_churn", &[("SCENE_TEST_LOCK_DIR", d)])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    churn(dir.path(), "parent", 3, 40);
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
}

/// Child mode `env`: print the list resolved from this process's
/// `SCENE_DEVICES` / `TASK_DEVICE`, read as the entry point reads them.
#[test]
fn child_env() {
    if child_mode().as_deref() != Some("env") {
        return;
    }
    let scene_devices = std::env::var("SCENE_DEVICES").ok();
    let task_device = std::env::var("TASK_DEVICE").ok();
    match DeviceList::resolve(None, scene_devices.as_deref(), task_device.as_deref()) {
        Ok(l) => println!("\nLIST={l}"),
        Err(e) => println!("\nERR={e}"),
    }
}

#[test]
fn device_list_env_resolution() {
    if child_mode().is_some() {
        return;
    }
    let run = |envs: &[(&str, &str)]| -> String {
        let out = child("env", "child_env", envs).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .find_map(|l| {
                l.strip_prefix("LIST=")
                    .or(l.strip_prefix("ERR="))
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| panic!("no result in {text}"))
    };
    assert_eq!(run(&[]), "0");
    assert_eq!(run(&[("TASK_DEVICE", "5")]), "5");
    assert_eq!(
        run(&[("SCENE_DEVICES", "1-3"), ("TASK_DEVICE", "5")]),
        "1-3"
    );
    let e = run(&[("SCENE_DEVICES", "3-1")]);
    assert!(
        e.contains("reversed") && e.contains("$SCENE_DEVICES"),
        "{e}"
    );
    assert_eq!(
        DeviceList::resolve(Some("0,2-4,7"), None, None)
            .unwrap()
            .to_string(),
        "0,2-4,7"
    );
}

/// Cards are machine-wide: the default lock directory is one fixed path,
/// whoever the user and whatever their `TMPDIR`.
#[test]
fn default_lock_dir_is_machine_wide() {
    if child_mode().is_some() {
        return;
    }
    assert_eq!(default_lock_dir(), Path::new("/tmp/scene-cards"));
    assert_eq!(
        default_lock_dir(),
        Path::new(scene_device::DEFAULT_LOCK_DIR)
    );
    assert_eq!(resolve_lock_dir(None), default_lock_dir());
}

#[test]
fn lock_dir_variable_wins_unless_empty() {
    if child_mode().is_some() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    assert_eq!(resolve_lock_dir(Some(d.path())), d.path());
    assert_eq!(resolve_lock_dir(Some(Path::new(""))), default_lock_dir());
    assert_eq!(resolve_lock_dir(None), default_lock_dir());
}

/// Child mode `churn`: take card 0, keep it for 50 ms (a case's device
/// work), release it and take it again at once, as a run of many cases
/// does, until stdin closes; says "churning" once it holds it.
#[test]
fn child_churn_lock() {
    if child_mode().as_deref() != Some("churn") {
        return;
    }
    let dir = PathBuf::from(std::env::var("SCENE_TEST_LOCK_DIR").unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop_on_eof = Arc::clone(&stop);
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        stop_on_eof.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let pool = pool(&dir, "0");
    let mut announced = false;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let lease = pool.acquire(1, "churn", AcquireOptions::default()).unwrap();
        if !announced {
            let mut out = std::io::stdout().lock();
            writeln!(out, "\nchurning").unwrap();
            out.flush().unwrap();
            announced = true;
        }
        // Simulated device work, not synchronisation: the card is busy.
        std::thread::sleep(Duration::from_millis(50));
        drop(lease);
    }
}

/// A process that releases and re-takes a card with no gap does not starve
/// a waiter: the waiter's ticket puts it first in line.
#[test]
fn waiters_are_served_before_a_process_that_retakes_the_card() {
    if child_mode().is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut churn = child(
        "churn",
        "child_churn_lock",
        &[("SCENE_TEST_LOCK_DIR", dir.path().to_str().unwrap())],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit())
    .spawn()
    .unwrap();
    let mut out = BufReader::new(churn.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("churning") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "churner exited");
    }
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));

    // Without a waiting line this wait would only win if a poll happened to
    // land in the microseconds between the churner's release and re-take
    // (a few percent over 5 s); in line, it is served at the next release.
    let lease = pool(dir.path(), "0")
        .acquire(
            1,
            "waiter",
            AcquireOptions {
                timeout: Some(Duration::from_secs(5)),
                on_wait: None,
            },
        )
        .expect("a waiter in line gets the card from a churning holder");
    assert!(
        churn.try_wait().unwrap().is_none(),
        "the churner should still be running (waiting behind us)"
    );
    drop(lease);
    drop(churn.stdin.take());
    assert!(churn.wait().unwrap().success());
}

/// A ticket left by a dead waiter does not block the line.
#[test]
fn dead_waiters_tickets_are_skipped() {
    if child_mode().is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let queue = dir.path().join("queue");
    std::fs::create_dir_all(&queue).unwrap();
    // An unlocked ticket, as a killed waiter leaves it.
    std::fs::write(
        queue.join("000000000000000000000001-0000000001-00000000"),
        "0",
    )
    .unwrap();
    let lease = pool(dir.path(), "0")
        .try_acquire(1, "after a dead waiter")
        .unwrap()
        .expect("a dead waiter's ticket must not hold up the line");
    drop(lease);
    assert_eq!(
        std::fs::read_dir(&queue).unwrap().count(),
        0,
        "stale ticket not removed"
    );
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// A lock directory the pool creates is sticky and world-writable like
/// `/tmp`, and its lock and ticket files are world-readable and -writable
/// whatever the umask, so another user can flock them; a directory that
/// exists already keeps its mode.
#[test]
fn created_lock_dir_and_files_are_usable_by_every_user() {
    if child_mode().is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("shared/cards");
    let p = pool(&dir, "0-1");
    assert_eq!(mode(&dir), 0o1777);
    for card in 0..2 {
        assert_eq!(mode(&p.lock_path(card)), 0o666, "card {card}");
    }
    // Nothing but the lock files: the private names they were created
    // under are gone.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["card-0.lock", "card-1.lock"]);

    // A waiter's ticket is shared too: seen from inside the wait.
    let held = p
        .try_acquire(2, "holder")
        .unwrap()
        .expect("both cards free");
    let mut ticket_modes = Vec::new();
    let mut on_wait = |_: &WaitStatus| {
        for e in std::fs::read_dir(dir.join("queue")).unwrap() {
            ticket_modes.push(mode(&e.unwrap().path()));
        }
    };
    let err = p
        .acquire(
            1,
            "waiter",
            AcquireOptions {
                timeout: Some(Duration::from_millis(50)),
                on_wait: Some(&mut on_wait),
            },
        )
        .unwrap_err();
    assert!(matches!(err, DeviceError::LockTimeout { .. }), "{err}");
    assert!(!ticket_modes.is_empty(), "no ticket seen while waiting");
    assert!(ticket_modes.iter().all(|&m| m == 0o666), "{ticket_modes:?}");
    assert_eq!(mode(&dir.join("queue")), 0o1777);
    drop(held);

    let existing = tmp.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    std::fs::set_permissions(
        &existing,
        std::os::unix::fs::PermissionsExt::from_mode(0o750),
    )
    .unwrap();
    pool(&existing, "0");
    assert_eq!(mode(&existing), 0o750, "an existing dir's mode was changed");
}

/// A lock directory that cannot be used is one error naming it and the
/// variable that chooses another.
#[test]
fn unusable_lock_dir_is_one_clear_error() {
    if child_mode().is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    for dir in [file.clone(), file.join("cards")] {
        let err = CardPool::new("0".parse().unwrap(), dir.clone()).unwrap_err();
        assert!(matches!(err, DeviceError::LockDirUnusable { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "card lock directory {} is not usable: ",
                dir.display()
            )) && msg.contains("SCENE_LOCK_DIR"),
            "{msg}"
        );
    }
}
