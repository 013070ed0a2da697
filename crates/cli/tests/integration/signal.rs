//! Issue 25 item 5, "Signals": real SIGINT/SIGTERM sent to the real `scene`
//! binary in the middle of its work. Each test waits for a sign that the
//! work really started (a compiler running, a card held), signals the
//! scene process alone (`kill -INT <pid>`: its children do not get it, so
//! the harness must stop them itself), then checks the exit status, the
//! partial summary, that no child is left running, that temp dirs and
//! staging dirs are gone, that the card is free and the cache verifies.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{TestEnv, copy_scene, show};

/// How long any wait of these tests may take before it fails the test.
const DEADLINE: Duration = Duration::from_secs(120);

/// Kills the child when the test ends, failed or not.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A test env with `decode_layer` (many units) and `vector_example`, a
/// private `TMPDIR`, and a C compiler wrapper that runs `cc`, except for
/// the `silu_mul.c` units of `decode_layer`: those write their pid into
/// `pids/` first and take 60 s, so a signal finds a compiler running.
struct Setup {
    env: TestEnv,
    tmpdir: PathBuf,
    pids: PathBuf,
    cc: PathBuf,
}

fn setup() -> Setup {
    setup_with("")
}

/// [`setup`], the wrapper running `prelude` (shell) first.
fn setup_with(prelude: &str) -> Setup {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "decode_layer", "decode_layer");
    copy_scene(&env, "vector_example", "vector_example");
    let tmpdir = env.dir.path().join("tmp");
    let pids = env.dir.path().join("pids");
    std::fs::create_dir_all(&tmpdir).unwrap();
    std::fs::create_dir_all(&pids).unwrap();
    let cc = env.dir.path().join("slow-cc");
    scene_util::write_executable(
        &cc,
        format!(
            "#!/bin/sh\n{prelude}\n\
             for a in \"$@\"; do\n\
               case \"$a\" in *silu_mul.c) echo $$ > '{}/'$$; sleep 60;; esac\n\
             done\n\
             exec cc \"$@\"\n",
            pids.display()
        ),
    )
    .unwrap();
    Setup {
        env,
        tmpdir,
        pids,
        cc,
    }
}

impl Setup {
    /// `scene <args>` with the wrapper compiler and the private TMPDIR,
    /// stdout and stderr to files (`<tag>.out`, `<tag>.err`).
    fn spawn(
        &self,
        args: &[&str],
        tag: &str,
        configure: impl FnOnce(&mut std::process::Command),
    ) -> KillOnDrop {
        let log = |ext: &str| std::fs::File::create(self.log_path(tag, ext)).unwrap();
        let mut cmd = self.env.scene(args);
        cmd.env("SCENE_CC", &self.cc)
            .env("TMPDIR", &self.tmpdir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log("out")))
            .stderr(Stdio::from(log("err")));
        configure(&mut cmd);
        KillOnDrop(cmd.spawn().unwrap())
    }

    fn log_path(&self, tag: &str, ext: &str) -> PathBuf {
        self.env.dir.path().join(format!("{tag}.{ext}"))
    }

    fn log(&self, tag: &str, ext: &str) -> String {
        std::fs::read_to_string(self.log_path(tag, ext)).unwrap_or_default()
    }

    fn logs(&self, tag: &str) -> String {
        format!(
            "--- stdout\n{}\n--- stderr\n{}",
            self.log(tag, "out"),
            self.log(tag, "err")
        )
    }

    /// The pid of the first slow compiler, once one runs.
    fn wait_for_slow_compiler(&self, child: &mut KillOnDrop, tag: &str) -> u32 {
        let found = wait_until(|| {
            assert!(
                child.0.try_wait().unwrap().is_none(),
                "scene ended before the slow compile started\n{}",
                self.logs(tag)
            );
            std::fs::read_dir(&self.pids)
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .next()
        });
        found.unwrap_or_else(|| panic!("no compiler of silu_mul.c started\n{}", self.logs(tag)))
    }

    /// No scene-kernels-* work dir and no *.tmp-* staging dir under the
    /// test's TMPDIR, cache dir or scenes dir.
    fn assert_no_leftovers(&self, tag: &str) {
        let mut found = Vec::new();
        for root in [&self.tmpdir, &self.env.cache_dir, self.env.dir.path()] {
            walk(root, &mut |p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                if name.starts_with("scene-kernels-") || name.contains(".tmp-") {
                    found.push(p.to_path_buf());
                }
            });
        }
        assert!(found.is_empty(), "leftovers: {found:?}\n{}", self.logs(tag));
    }

    fn assert_cache_verifies(&self) {
        let out = self.env.scene(&["cache", "verify"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    }
}

/// Polls `f` every 20 ms until it gives a value or [`DEADLINE`] passes.
fn wait_until<T>(mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    while start.elapsed() < DEADLINE {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Waits for the child to exit, at most [`DEADLINE`].
fn wait_exit(child: &mut KillOnDrop) -> ExitStatus {
    wait_until(|| child.0.try_wait().unwrap()).expect("scene did not exit after the signal")
}

/// kill(2) to the scene process alone (not its process group).
fn send(child: &KillOnDrop, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_child(&child.0);
    rustix::process::kill_process(pid, signal).expect("kill");
}

/// Live (not zombie) processes whose process group is `pgid`, from /proc.
fn group_members(pgid: u32) -> Vec<u32> {
    proc_stats()
        .into_iter()
        .filter(|s| s.pgrp == pgid && s.state != "Z")
        .map(|s| s.pid)
        .collect()
}

/// Asserts that the process group `pgid` empties: its members were sent
/// SIGTERM and are on their way out (orphans are reaped by init), within
/// [`DEADLINE`].
fn assert_group_ends(pgid: u32, logs: &str) {
    let ended = wait_until(|| group_members(pgid).is_empty().then_some(()));
    assert!(
        ended.is_some(),
        "process group {pgid} still has {:?}\n{logs}",
        group_members(pgid)
    );
}

/// Processes whose parent is `ppid`, from /proc.
fn children_of(ppid: u32) -> Vec<u32> {
    proc_stats()
        .into_iter()
        .filter(|s| s.ppid == ppid)
        .map(|s| s.pid)
        .collect()
}

struct Stat {
    pid: u32,
    state: String,
    ppid: u32,
    pgrp: u32,
}

fn proc_stats() -> Vec<Stat> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp ...`; comm may hold spaces.
        let Some(rest) = text.rfind(')').map(|i| &text[i + 1..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if let (Some(state), Some(ppid), Some(pgrp)) = (
            f.first(),
            f.get(1).and_then(|v| v.parse().ok()),
            f.get(2).and_then(|v| v.parse().ok()),
        ) {
            out.push(Stat {
                pid,
                state: (*state).to_owned(),
                ppid,
                pgrp,
            });
        }
    }
    out
}

/// Whether `pid` runs (exists and is not a zombie: an orphan's parent
/// is init, which reaps it in its own time).
fn alive(pid: u32) -> bool {
    proc_stats().iter().any(|s| s.pid == pid && s.state != "Z")
}

/// The process group of `pid`.
fn pgid_of(pid: u32) -> u32 {
    proc_stats()
        .iter()
        .find(|s| s.pid == pid)
        .map(|s| s.pgrp)
        .unwrap_or_else(|| panic!("no process {pid}"))
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        f(&p);
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            walk(&p, f);
        }
    }
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    walk(dir, &mut |p| {
        if p.is_file() {
            out.insert(p.to_path_buf(), std::fs::read(p).unwrap());
        }
    });
    out
}

/// SIGINT while compilers run: they are stopped, nothing half-built is
/// left in TMPDIR or the cache, the cache verifies, and the summary says
/// what was and was not built; exit 130.
#[test]
fn sigint_mid_compile_stops_compilers_and_cleans_up() {
    let s = setup();
    let mut child = s.spawn(&["compile", "--compile-workers", "2"], "compile", |_| {});
    let slow = s.wait_for_slow_compiler(&mut child, "compile");
    send(&child, rustix::process::Signal::INT);
    let status = wait_exit(&mut child);
    let logs = s.logs("compile");
    assert_eq!(status.code(), Some(130), "{status:?}\n{logs}");
    assert!(
        s.log("compile", "out")
            .contains("interrupted (SIGINT): compiled 2 callables:"),
        "{logs}"
    );
    assert!(s.log("compile", "out").contains("not started"), "{logs}");
    // The slow compiler and everything in its process group (its `sleep`)
    // are gone, and scene left no child behind.
    assert!(!alive(slow), "compiler {slow} still runs\n{logs}");
    assert_group_ends(slow, &logs);
    s.assert_no_leftovers("compile");
    s.assert_cache_verifies();
}

/// SIGTERM while a device worker holds the card: the worker is stopped,
/// the card released, its job dir removed; exit 143 with the summary.
#[test]
fn sigterm_mid_device_run_stops_the_worker_and_frees_the_card() {
    let s = setup();
    let mut child = s.spawn(
        &[
            "run",
            "vector_example::small",
            "--case-timeout",
            "600",
            "--verbose",
        ],
        "run",
        |cmd| {
            // The run never finishes on its own (test-only knob).
            cmd.env("SCENE_RUNTIME_OPTIONS", "fault=hang");
        },
    );
    let held = wait_until(|| {
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "scene ended before it held the card\n{}",
            s.logs("run")
        );
        s.log("run", "err").contains("acquired card").then_some(())
    });
    assert!(held.is_some(), "no card acquired\n{}", s.logs("run"));
    let scene_pid = child.0.id();
    // The device worker: scene's child with a job directory.
    let workers: Vec<(u32, PathBuf)> = children_of(scene_pid)
        .into_iter()
        .filter_map(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let dir = env
                .split(|&b| b == 0)
                .find_map(|kv| kv.strip_prefix(b"SCENE_DEVICE_WORKER="))?;
            Some((
                pid,
                PathBuf::from(String::from_utf8_lossy(dir).into_owned()),
            ))
        })
        .collect();
    assert_eq!(workers.len(), 1, "{workers:?}\n{}", s.logs("run"));
    let (worker, job_dir) = workers[0].clone();
    assert!(job_dir.is_dir(), "{}", job_dir.display());
    let pool = scene_device::CardPool::new("0".parse().unwrap(), s.env.lock_dir.clone()).unwrap();
    assert!(
        pool.try_acquire(1, "signal_test").unwrap().is_none(),
        "card 0 is free while the run holds it"
    );

    send(&child, rustix::process::Signal::TERM);
    let status = wait_exit(&mut child);
    let logs = s.logs("run");
    assert_eq!(status.code(), Some(143), "{status:?}\n{logs}");
    assert!(
        s.log("run", "out")
            .contains("interrupted (SIGTERM): 0 passed, 0 failed, 1 not run"),
        "{logs}"
    );
    assert!(!alive(worker), "device worker {worker} still runs\n{logs}");
    assert_group_ends(worker, &logs);
    assert!(
        !job_dir.exists(),
        "job dir {} left behind",
        job_dir.display()
    );
    assert!(
        pool.try_acquire(1, "signal_test").unwrap().is_some(),
        "card 0 still locked after the interrupted run exited\n{logs}"
    );
    s.assert_no_leftovers("run");
    s.assert_cache_verifies();
}

/// SIGINT during `precompile --out DIR`: no bundle staging dir is left and
/// the bundle already at DIR is untouched.
#[test]
fn sigint_mid_precompile_keeps_the_previous_bundle() {
    let s = setup();
    let out_dir = s.env.dir.path().join("bundle");
    let out = out_dir.to_str().unwrap();
    // The staging dir of a precompile killed outright (a second signal),
    // by a pid that is gone: swept by the next precompile.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let stale = s.env.dir.path().join(format!("bundle.tmp-{}", gone.id()));
    std::fs::create_dir_all(stale.join("slot")).unwrap();
    // A previous bundle (vector_example has no slow unit).
    let mut first = s.spawn(
        &["precompile", "vector_example", "--out", out],
        "first",
        |_| {},
    );
    let status = wait_exit(&mut first);
    assert!(status.success(), "{status:?}\n{}", s.logs("first"));
    assert!(!stale.exists(), "a dead precompile's staging dir was kept");
    let before = snapshot(&out_dir);
    assert!(!before.is_empty());

    let mut child = s.spawn(
        &["precompile", "--out", out, "--compile-workers", "2"],
        "second",
        |_| {},
    );
    let slow = s.wait_for_slow_compiler(&mut child, "second");
    let staging = s
        .env
        .dir
        .path()
        .join(format!("bundle.tmp-{}", child.0.id()));
    assert!(
        staging.is_dir(),
        "the bundle is staged at {}",
        staging.display()
    );
    send(&child, rustix::process::Signal::INT);
    let status = wait_exit(&mut child);
    let logs = s.logs("second");
    assert_eq!(status.code(), Some(130), "{status:?}\n{logs}");
    assert!(
        s.log("second", "out")
            .contains("interrupted (SIGINT): precompiled"),
        "{logs}"
    );
    assert!(
        s.log("second", "out").contains("no bundle written"),
        "{logs}"
    );
    assert!(!alive(slow), "compiler {slow} still runs\n{logs}");
    assert_group_ends(slow, &logs);
    assert!(!staging.exists(), "staging dir left behind\n{logs}");
    assert!(
        snapshot(&out_dir) == before,
        "the previous bundle changed\n{logs}"
    );
    s.assert_no_leftovers("second");
    s.assert_cache_verifies();
}

/// A second SIGINT while the first one's cleanup waits (here for a
/// compiler that ignores SIGTERM) exits at once, 130, killing the
/// compiler; the kernel cache still verifies (entries are only published
/// by rename).
#[test]
fn a_second_sigint_exits_at_once_and_leaves_the_cache_whole() {
    // SIGTERM ignored by the wrapper and, inherited, by its `sleep`.
    let s = setup_with("trap '' TERM");
    let mut child = s.spawn(&["compile", "--compile-workers", "2"], "twice", |_| {});
    let slow = s.wait_for_slow_compiler(&mut child, "twice");
    send(&child, rustix::process::Signal::INT);
    let handled = wait_until(|| {
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "scene ended though its compiler ignores SIGTERM\n{}",
            s.logs("twice")
        );
        s.log("twice", "err")
            .contains("interrupted (SIGINT): stopping")
            .then_some(())
    });
    assert!(handled.is_some(), "{}", s.logs("twice"));
    send(&child, rustix::process::Signal::INT);
    let started = Instant::now();
    let status = wait_exit(&mut child);
    let logs = s.logs("twice");
    assert_eq!(status.code(), Some(130), "{status:?}\n{logs}");
    assert!(
        started.elapsed() < AT_ONCE,
        "the second signal did not exit at once\n{logs}"
    );
    assert_group_ends(slow, &logs);
    s.assert_cache_verifies();
}

/// Below the CLI's grace before it kills children that ignore SIGTERM
/// (10 s), so the test sees the second signal's exit, not the grace's.
const AT_ONCE: Duration = Duration::from_secs(8);

/// One SIGINT and a compiler that ignores SIGTERM: after the grace the
/// compiler is killed and the run still unwinds and cleans up.
#[test]
fn a_compiler_ignoring_sigterm_is_killed_after_the_grace() {
    let s = setup_with("trap '' TERM");
    let mut child = s.spawn(&["compile", "--compile-workers", "2"], "grace", |_| {});
    let slow = s.wait_for_slow_compiler(&mut child, "grace");
    send(&child, rustix::process::Signal::INT);
    let status = wait_exit(&mut child);
    let logs = s.logs("grace");
    assert_eq!(status.code(), Some(130), "{status:?}\n{logs}");
    assert!(
        s.log("grace", "out")
            .contains("interrupted (SIGINT): compiled"),
        "{logs}"
    );
    assert_group_ends(slow, &logs);
    s.assert_no_leftovers("grace");
    s.assert_cache_verifies();
}

/// SIGINT while a Python golden runs: the Python worker is stopped (it
/// never sees the signal itself: no `KeyboardInterrupt` traceback), the
/// case counts as not run; exit 130.
#[test]
fn sigint_mid_python_golden_stops_the_python_worker() {
    let numpy = std::process::Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !numpy && !common::in_ci() {
        eprintln!("SKIP: python3 with numpy is not installed (`python3 -m pip install numpy`)");
        return;
    }
    let s = setup();
    let dir = copy_scene(&s.env, "vector_example", "pyvec");
    let mark = s.env.dir.path().join("python.pid");
    std::fs::write(
        dir.join("golden.py"),
        "import os, time\n\n\
         def compute_golden(tensors, params):\n    \
             with open(os.environ['SIGNAL_TEST_MARK'] + '.tmp', 'w') as f:\n        \
                 f.write(str(os.getpid()))\n    \
             os.rename(os.environ['SIGNAL_TEST_MARK'] + '.tmp', os.environ['SIGNAL_TEST_MARK'])\n    \
             time.sleep(600)\n",
    )
    .unwrap();
    let toml = std::fs::read_to_string(dir.join("scene.toml")).unwrap();
    std::fs::write(
        dir.join("scene.toml"),
        toml.replace(
            "golden = \"vector_example\"",
            "golden = { python = \"golden.py\" }",
        ),
    )
    .unwrap();
    let mut child = s.spawn(
        &["run", "pyvec::small", "--no-golden-cache"],
        "python",
        |cmd| {
            cmd.env("SIGNAL_TEST_MARK", &mark);
        },
    );
    let python = wait_until(|| {
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "scene ended before the golden ran\n{}",
            s.logs("python")
        );
        std::fs::read_to_string(&mark)
            .ok()?
            .trim()
            .parse::<u32>()
            .ok()
    });
    let python = python.unwrap_or_else(|| panic!("the golden never ran\n{}", s.logs("python")));
    // Its own group (led by `python3` itself or by a wrapper such as a
    // pyenv shim that runs the interpreter as its child).
    let group = pgid_of(python);
    assert_ne!(
        group,
        pgid_of(child.0.id()),
        "the worker has a group of its own"
    );
    send(&child, rustix::process::Signal::INT);
    let status = wait_exit(&mut child);
    let logs = s.logs("python");
    assert_eq!(status.code(), Some(130), "{status:?}\n{logs}");
    assert!(
        s.log("python", "out")
            .contains("interrupted (SIGINT): 0 passed, 0 failed, 1 not run"),
        "{logs}"
    );
    assert!(!logs.contains("KeyboardInterrupt"), "{logs}");
    assert_group_ends(group, &logs);
    assert!(!alive(python), "Python worker {python} still runs\n{logs}");
    s.assert_no_leftovers("python");
}
