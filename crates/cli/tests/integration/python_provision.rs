//! Python that provisions itself (issue 25 item 1), end to end with the
//! real `scene` binary, real virtual environments and a real `pip install
//! numpy` from PyPI: a plain venv whose `python3` lacks numpy is first on
//! `PATH`, `SCENE_PYTHON` is unset, and the cache directory is a fresh temp
//! dir.
//!
//! Real installs are slow (10-30 s each), so the suite makes few: one
//! shared by every step of `provisions_once_and_reuses`, one more for `uv`
//! (only where it can be installed), none for the failure paths.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{TestEnv, assert_success, in_ci, report_case, show};
use serde_json::Value;

const PROGRESS: &str = "provisioning Python environment for paged_attention_py";

/// `python3 -m venv <dir>`: a plain venv (pip, no numpy); its `bin` goes
/// first on `PATH`.
fn bare_venv(env: &TestEnv) -> PathBuf {
    let dir = env.dir.path().join("bare");
    let out = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&dir)
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "python3 -m venv: {}", show(&out));
    let lacks = Command::new(dir.join("bin/python3"))
        .args(["-c", "import numpy"])
        .output()
        .unwrap();
    assert!(!lacks.status.success(), "a fresh venv has no numpy");
    dir.join("bin")
}

/// `PATH` with `first` in front.
fn path_with(first: &Path) -> String {
    let rest = std::env::var("PATH").unwrap_or_default();
    format!("{}:{rest}", first.display())
}

/// `scene <args>` in `env`, interpreter left to the harness: `bin` first
/// on `PATH`, no `SCENE_PYTHON` / `SCENE_PYTHON_PROVISION`.
fn scene(env: &TestEnv, bin: &Path, args: &[&str]) -> Command {
    let mut cmd = env.scene(args);
    cmd.env("PATH", path_with(bin))
        .env_remove("SCENE_PYTHON")
        .env_remove("SCENE_PYTHON_PROVISION");
    cmd
}

fn run_report(env: &TestEnv, mut cmd: Command) -> (Output, Value) {
    common::output_with_report(&mut cmd, &env.report_path())
}

fn progress_lines(out: &Output) -> usize {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with(PROGRESS))
        .count()
}

/// The managed environments' directories under the cache.
fn env_dirs(env: &TestEnv) -> Vec<PathBuf> {
    let root = env.cache_dir.join("python");
    let Ok(it) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = it
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            !matches!(
                p.file_name().and_then(|n| n.to_str()),
                Some("locks" | "tmp")
            )
        })
        .collect();
    dirs.sort();
    dirs
}

/// Nothing half-built: no build directory left in `python/tmp/`.
fn no_leftovers(env: &TestEnv) {
    let tmp = env.cache_dir.join("python/tmp");
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .map(|it| it.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "leftover build directories: {left:?}");
}

/// Two `scene <args>` processes started together; their outputs. Output
/// goes to files, not pipes: a process waiting for the card must never
/// block the other on a pipe nobody reads.
fn race(env: &TestEnv, bin: &Path, args: &[&str]) -> Vec<Output> {
    use std::process::Stdio;
    let log = |i: usize, ext: &str| env.dir.path().join(format!("race-{i}.{ext}"));
    let children: Vec<_> = (0..2)
        .map(|i| {
            let file = |ext| Stdio::from(std::fs::File::create(log(i, ext)).unwrap());
            scene(env, bin, args)
                .stdout(file("stdout"))
                .stderr(file("stderr"))
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .enumerate()
        .map(|(i, mut c)| Output {
            status: c.wait().unwrap(),
            stdout: std::fs::read(log(i, "stdout")).unwrap(),
            stderr: std::fs::read(log(i, "stderr")).unwrap(),
        })
        .collect()
}

#[test]
fn provisions_once_and_reuses() {
    let env = TestEnv::new();
    let bin = bare_venv(&env);
    // Two processes race on the fresh cache: one installs, the other waits
    // for it and uses the result.
    let outs = race(&env, &bin, &["run", "paged_attention_py"]);
    let mut progress = 0;
    for out in &outs {
        assert_success(out);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("3 passed, 0 failed"),
            "{}",
            show(out)
        );
        progress += progress_lines(out);
    }
    assert_eq!(
        progress,
        1,
        "one install between the two:\n{}\n{}",
        show(&outs[0]),
        show(&outs[1])
    );
    let dirs = env_dirs(&env);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let lock = std::fs::read_to_string(dirs[0].join("requirements.lock")).unwrap();
    assert!(lock.contains("numpy=="), "{lock}");
    no_leftovers(&env);
    // The builder said what pip fetched and installed while it ran, and
    // how large the environment came out.
    let builder = outs
        .iter()
        .find(|o| progress_lines(o) == 1)
        .expect("the builder");
    let said = String::from_utf8_lossy(&builder.stderr);
    assert!(
        said.lines()
            .any(|l| l.starts_with("  pip: ") && l.contains("numpy")),
        "{said}"
    );
    let done = said
        .lines()
        .find(|l| l.starts_with("provisioned Python environment in "))
        .unwrap_or_else(|| panic!("no provisioned line:\n{said}"));
    assert!(done.contains("numpy==") && done.ends_with("MiB)"), "{done}");

    // Reused: no install, no progress line; --explain names it.
    let (out, report) = run_report(
        &env,
        scene(&env, &bin, &["run", "paged_attention_py", "--explain"]),
    );
    assert_success(&out);
    assert_eq!(progress_lines(&out), 0, "{}", show(&out));
    assert_eq!(report["totals"]["goldens_computed"], 0, "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("python environment: "))
        .unwrap_or_else(|| panic!("no environment line:\n{stdout}"));
    let numpy_pin = lock.lines().find(|l| l.starts_with("numpy==")).unwrap();
    assert!(
        line.contains(&dirs[0].display().to_string()) && line.contains(numpy_pin),
        "{line}"
    );

    // The pinned versions are part of the golden key: another lock,
    // recomputed goldens.
    std::fs::write(
        dirs[0].join("requirements.lock"),
        format!("{lock}extra==1.0\n"),
    )
    .unwrap();
    let (out, report) = run_report(&env, scene(&env, &bin, &["run", "paged_attention_py"]));
    assert_success(&out);
    assert_eq!(report["totals"]["goldens_computed"], 3, "{}", show(&out));
    assert_eq!(
        report_case(&report, "paged_attention_py::small1")["golden_miss"],
        "golden code changed"
    );

    // `scene cache stats` lists it, prune keeps it (just used), clear
    // removes it.
    let out = scene(&env, &bin, &["cache", "stats"]).output().unwrap();
    assert_success(&out);
    let stats = String::from_utf8_lossy(&out.stdout);
    assert!(stats.contains("python environments: 1,"), "{stats}");
    assert!(stats.contains(&dirs[0].display().to_string()), "{stats}");
    let out = scene(&env, &bin, &["cache", "prune"]).output().unwrap();
    assert_success(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("removed 0 Python environments"),
        "{}",
        show(&out)
    );
    assert!(dirs[0].is_dir());
    let out = scene(&env, &bin, &["cache", "clear"]).output().unwrap();
    assert_success(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("(1 environments)"),
        "{}",
        show(&out)
    );
    assert!(!env.cache_dir.join("python").exists());
}

/// The Python cases fail with the old message plus how to provision; the
/// other cases pass; nothing is provisioned.
fn check_no_provision(env: &TestEnv, out: &Output, report: &Value) {
    assert_eq!(out.status.code(), Some(1), "{}", show(out));
    for case in ["small1", "small2", "small_batch4"] {
        let c = report_case(report, &format!("paged_attention_py::{case}"));
        assert_eq!(c["status"], "failed", "{case}");
        let m = c["message"].as_str().unwrap();
        assert_eq!(m.lines().count(), 1, "{m}");
        for needle in [
            "`python3`",
            "numpy cannot be imported",
            "python3 -m pip install numpy",
            "SCENE_PYTHON_PROVISION",
        ] {
            assert!(m.contains(needle), "{needle}: {m}");
        }
    }
    assert_eq!(
        report_case(report, "paged_attention::small1")["status"],
        "passed"
    );
    assert_eq!(
        report["totals"]["passed"].as_u64().unwrap() + 3,
        report["cases"].as_array().unwrap().len() as u64,
        "every other case passes"
    );
    assert_eq!(progress_lines(out), 0);
    assert!(env_dirs(env).is_empty());
}

#[test]
fn provisioning_off_fails_python_cases_only() {
    let env = TestEnv::new();
    let bin = bare_venv(&env);
    // `paged_attention` selects the Python scene and two Rust-golden ones.
    let mut by_var = scene(&env, &bin, &["run", "paged_attention"]);
    by_var.env("SCENE_PYTHON_PROVISION", "never");
    let (out, report) = run_report(&env, by_var);
    check_no_provision(&env, &out, &report);
    let (out, report) = run_report(
        &env,
        scene(&env, &bin, &["run", "paged_attention", "--no-provision"]),
    );
    check_no_provision(&env, &out, &report);
    // A value that is neither `auto` nor `never` is a usage error.
    let mut bad = scene(&env, &bin, &["run", "paged_attention"]);
    bad.env("SCENE_PYTHON_PROVISION", "sometimes");
    let out = bad.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("SCENE_PYTHON_PROVISION"),
        "{}",
        show(&out)
    );
}

#[test]
fn an_install_that_cannot_happen_fails_python_cases_with_one_message() {
    let env = TestEnv::new();
    let bin = bare_venv(&env);
    // Nothing listens on port 9: pip finds no numpy, at once.
    let mut cmd = scene(&env, &bin, &["run", "paged_attention"]);
    cmd.env("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
        .env("PIP_RETRIES", "0")
        .env_remove("PIP_FIND_LINKS")
        .env_remove("PIP_EXTRA_INDEX_URL");
    let (out, report) = run_report(&env, cmd);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    // Tried once for the run, not once per case.
    assert_eq!(progress_lines(&out), 1, "{}", show(&out));
    let fix = format!("{} -m pip install numpy", bin.join("python3").display());
    for case in ["small1", "small2", "small_batch4"] {
        let c = report_case(&report, &format!("paged_attention_py::{case}"));
        assert_eq!(c["status"], "failed", "{case}");
        let m = c["message"].as_str().unwrap();
        assert_eq!(m.lines().count(), 1, "{m}");
        for needle in ["could not be made", "pip install", "numpy", &fix] {
            assert!(m.contains(needle), "{needle}: {m}");
        }
    }
    assert_eq!(
        report["totals"]["passed"].as_u64().unwrap() + 3,
        report["cases"].as_array().unwrap().len() as u64,
        "every other case passes: {}",
        show(&out)
    );
    assert!(env_dirs(&env).is_empty(), "{:?}", env_dirs(&env));
    no_leftovers(&env);
}

/// With `uv` on `PATH` the environment is made by `uv venv` + `uv pip
/// install`. uv is installed into the bare venv with pip; where that cannot
/// happen (offline) the test says so and skips, except under CI.
#[test]
fn uv_on_path_builds_the_environment() {
    let env = TestEnv::new();
    let bin = bare_venv(&env);
    let out = Command::new(bin.join("python3"))
        .args(["-m", "pip", "install", "--disable-pip-version-check", "uv"])
        .output()
        .unwrap();
    if !out.status.success() {
        assert!(!in_ci(), "cannot install uv under CI: {}", show(&out));
        eprintln!("SKIP: cannot install uv ({})", show(&out));
        return;
    }
    assert!(bin.join("uv").is_file());
    let (out, report) = run_report(
        &env,
        scene(&env, &bin, &["run", "paged_attention_py::small1"]),
    );
    assert_success(&out);
    assert_eq!(report["totals"]["passed"], 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("uv venv + uv pip install numpy"),
        "{stderr}"
    );
    let dirs = env_dirs(&env);
    assert_eq!(dirs.len(), 1);
    let marker = std::fs::read_to_string(dirs[0].join("scene-env.json")).unwrap();
    assert!(marker.contains("\"installer\": \"uv\""), "{marker}");
    let lock = std::fs::read_to_string(dirs[0].join("requirements.lock")).unwrap();
    assert!(lock.contains("numpy=="), "{lock}");
    no_leftovers(&env);
}

/// How long a wait of the interrupt tests may take before it fails.
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(180);

/// A package index that accepts connections and never answers: a `pip
/// install` against it waits (up to `PIP_DEFAULT_TIMEOUT`) with the
/// environment half made. `connected` gets a message per connection.
struct SilentIndex {
    url: String,
    connected: std::sync::mpsc::Receiver<()>,
}

fn silent_index() -> SilentIndex {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/simple", listener.local_addr().unwrap());
    let (tx, connected) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Held open, unanswered, until the test is gone.
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            held.push(stream);
            if tx.send(()).is_err() {
                break;
            }
        }
    });
    SilentIndex { url, connected }
}

/// The command line of process `pid` (`\0` between arguments).
fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// `pid`'s children, from `/proc/<pid>/task/*/children`.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

/// Whether `pid` exists and is not a zombie.
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s[s.rfind(')')? + 1..].split_whitespace().next()? != "Z"))
        .unwrap_or(false)
}

/// Starts `scene <args>` (selecting `paged_attention_py` alone) on a
/// fresh cache with pip pointed at a [`SilentIndex`], waits until the
/// provisioning's `pip install` has connected to it (the environment is
/// half made), sends `signal` to the scene process alone (as `kill` does;
/// a terminal's Ctrl-C reaches only `scene` too, its children being in
/// groups of their own), and checks that it exits `128 + signal` as
/// interrupted, with the partial summary (`interrupted (SIG...): ` +
/// `summary`), no `error:` line, pip stopped and nothing left that looks
/// like an environment.
fn interrupt_provisioning(
    env: &TestEnv,
    bin: &Path,
    args: &[&str],
    signal: rustix::process::Signal,
    summary: &str,
) {
    use std::process::Stdio;
    let (name, code) = match signal {
        rustix::process::Signal::INT => ("SIGINT", 130),
        _ => ("SIGTERM", 143),
    };
    let index = silent_index();
    let log = |ext: &str| env.dir.path().join(format!("{name}-{}.{ext}", args[0]));
    let file = |ext: &str| Stdio::from(std::fs::File::create(log(ext)).unwrap());
    let mut cmd = scene(env, bin, args);
    cmd.env("PIP_INDEX_URL", &index.url)
        .env("PIP_RETRIES", "0")
        .env("PIP_DEFAULT_TIMEOUT", "600")
        .env_remove("PIP_FIND_LINKS")
        .env_remove("PIP_EXTRA_INDEX_URL")
        .stdin(Stdio::null())
        .stdout(file("out"))
        .stderr(file("err"));
    let mut child = cmd.spawn().unwrap();
    let logs = || {
        format!(
            "--- stdout\n{}\n--- stderr\n{}",
            std::fs::read_to_string(log("out")).unwrap_or_default(),
            std::fs::read_to_string(log("err")).unwrap_or_default()
        )
    };
    let started = std::time::Instant::now();
    loop {
        match index
            .connected
            .recv_timeout(std::time::Duration::from_millis(100))
        {
            Ok(()) => break,
            Err(_) => {
                if let Some(status) = child.try_wait().unwrap() {
                    panic!(
                        "scene ended ({status}) before pip asked the index\n{}",
                        logs()
                    );
                }
                if started.elapsed() > DEADLINE {
                    let _ = child.kill();
                    panic!("pip never asked the index\n{}", logs());
                }
            }
        }
    }
    let scene_pid = child.id();
    let pips: Vec<u32> = children(scene_pid)
        .into_iter()
        .filter(|&p| cmdline(p).contains("-m pip install"))
        .collect();
    assert_eq!(
        pips.len(),
        1,
        "the provisioning pip, a child of scene\n{}",
        logs()
    );
    assert!(
        std::fs::read_to_string(log("err"))
            .unwrap()
            .contains(PROGRESS),
        "{}",
        logs()
    );
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, signal).unwrap();
    let (tx, exited) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let Ok(status) = exited.recv_timeout(DEADLINE) else {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        panic!("scene did not exit after {name}\n{}", logs());
    };
    let status = status.unwrap();
    let (stdout, stderr) = (
        std::fs::read_to_string(log("out")).unwrap(),
        std::fs::read_to_string(log("err")).unwrap(),
    );
    assert_eq!(status.code(), Some(code), "{status}\n{}", logs());
    assert!(
        stderr.contains(&format!("interrupted ({name}): stopping and cleaning up")),
        "{}",
        logs()
    );
    assert!(
        stdout.contains(&format!("interrupted ({name}): {summary}")),
        "{}",
        logs()
    );
    // The harness stopped pip itself: that is no setup error.
    assert!(!stderr.contains("error:"), "{}", logs());
    assert!(!stderr.contains("could not be made"), "{}", logs());
    assert!(!running(pips[0]), "pip {} still runs\n{}", pips[0], logs());
    // Nothing that a later run could take for an environment, and no
    // build directory left.
    assert!(env_dirs(env).is_empty(), "{:?}\n{}", env_dirs(env), logs());
    no_leftovers(env);
}

/// Ctrl-C while the harness provisions the Python environment used to
/// exit 3 with "a managed environment could not be made: `pip install`
/// failed: signal: 15": the run's own cancel had terminated pip, and that
/// was reported as a setup error. Now it is an interrupted run (130, the
/// partial summary), and a later run provisions the environment afresh and
/// passes.
#[test]
fn sigint_during_python_provisioning_is_an_interrupt_not_a_setup_error() {
    let env = TestEnv::new();
    let bin = bare_venv(&env);
    interrupt_provisioning(
        &env,
        &bin,
        &["run", "paged_attention_py"],
        rustix::process::Signal::INT,
        "0 passed, 0 failed, 3 not run",
    );
    let (out, report) = run_report(&env, scene(&env, &bin, &["run", "paged_attention_py"]));
    assert_success(&out);
    assert_eq!(report["totals"]["passed"], 3, "{}", show(&out));
    assert_eq!(progress_lines(&out), 1, "{}", show(&out));
    assert_eq!(env_dirs(&env).len(), 1);
    no_leftovers(&env);
}

/// As above with SIGTERM (what CI runners send): exit 143, for `scene
/// run` and for `scene precompile` (which provisions before it prepares,
/// as `run` does; no bundle is written).
#[test]
fn sigterm_during_python_provisioning_is_an_interrupt_not_a_setup_error() {
    let env = TestEnv::new();
    let bin = bare_venv(&env);
    interrupt_provisioning(
        &env,
        &bin,
        &["run", "paged_attention_py"],
        rustix::process::Signal::TERM,
        "0 passed, 0 failed, 3 not run",
    );
    let out = env.dir.path().join("bundle");
    interrupt_provisioning(
        &env,
        &bin,
        &[
            "precompile",
            "--out",
            out.to_str().unwrap(),
            "paged_attention_py",
        ],
        rustix::process::Signal::TERM,
        "precompiled 0 of 3 cases (0 stored, 0 failed, 3 not run); no bundle written",
    );
    assert!(!out.exists());
}

const DAMAGED: &str = "warning: managed Python environment ";

/// The `warning: managed Python environment ... is damaged` lines.
fn damage_warnings(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with(DAMAGED))
        .map(str::to_owned)
        .collect()
}

/// `scene run paged_attention_py::small1`: passes, having rebuilt the
/// environment once with one warning (holding `needle`) when `needle` is
/// given, else without building anything.
fn run_small1(env: &TestEnv, bin: &Path, needle: Option<&str>) {
    run_small1_with(env, bin, &[], needle)
}

/// [`run_small1`] with more arguments.
fn run_small1_with(env: &TestEnv, bin: &Path, more: &[&str], needle: Option<&str>) {
    let mut args = vec!["run", "paged_attention_py::small1"];
    args.extend_from_slice(more);
    let out = scene(env, bin, &args).output().unwrap();
    assert_success(&out);
    let warnings = damage_warnings(&out);
    match needle {
        Some(needle) => {
            assert_eq!(warnings.len(), 1, "{}", show(&out));
            assert!(
                warnings[0].contains("is damaged (")
                    && warnings[0].contains(needle)
                    && warnings[0].ends_with("; rebuilding it"),
                "{needle}: {}",
                show(&out)
            );
            assert_eq!(progress(&out), 1, "{}", show(&out));
        }
        None => {
            assert!(warnings.is_empty(), "{}", show(&out));
            assert_eq!(progress(&out), 0, "{}", show(&out));
        }
    }
    no_leftovers(env);
}

/// Progress lines of any scene (`provisioning Python environment for`).
fn progress(out: &Output) -> usize {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("provisioning Python environment for "))
        .count()
}

/// `<env>/lib/python3.X/site-packages/numpy/__init__.py`.
fn numpy_init(dir: &Path) -> PathBuf {
    let lib = dir.join("lib");
    let python = std::fs::read_dir(&lib)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .unwrap_or_else(|| panic!("no lib/python3.* in {}", dir.display()));
    python.path().join("site-packages/numpy/__init__.py")
}

/// A managed environment damaged after it was made (numpy's `__init__.py`
/// removed; `bin/python` replaced by an empty, non-executable file) used
/// to be taken as complete, and every run then exited 3 ("numpy cannot be
/// imported", or `bin/python` cannot start) with nothing ever repairing
/// it. Now every use checks the environment against the list of files its
/// builder recorded (an lstat each, no read), so the run rebuilds it under
/// the provisioning lock with one warning naming what was wrong, and
/// passes. A file changed in place to the same size passes that check: a
/// run served wholly by the caches (fixtures and golden) starts no
/// interpreter and passes; one that needs it finds the interpreter fails
/// to start, and the files' digests find the file.
#[test]
fn a_damaged_managed_environment_is_rebuilt_with_one_warning() {
    let env = TestEnv::new();
    let bin = bare_venv(&env);
    let out = scene(&env, &bin, &["run", "paged_attention_py::small1"])
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(progress(&out), 1, "{}", show(&out));
    let dirs = env_dirs(&env);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let dir = &dirs[0];
    // Used as made: no damage seen in a sound environment.
    run_small1(&env, &bin, None);

    // A package file removed.
    let init = numpy_init(dir);
    let rel = init.strip_prefix(dir).unwrap().display().to_string();
    std::fs::remove_file(&init).unwrap();
    run_small1(&env, &bin, Some(&format!("`{rel}` is missing")));
    run_small1(&env, &bin, None);

    // `bin/python` an empty file, not executable (not through the link:
    // that would empty the interpreter it was made from).
    let python = dir.join("bin/python");
    std::fs::remove_file(&python).unwrap();
    std::fs::write(&python, "").unwrap();
    run_small1(&env, &bin, Some("`bin/python` no longer links to"));
    run_small1(&env, &bin, None);

    // numpy's `__init__.py` rewritten to the same size: the cheap check
    // passes, the interpreter's start fails, the digests find the file.
    let size = std::fs::metadata(&init).unwrap().len() as usize;
    let broken = "raise ImportError('damaged')\n";
    assert!(size > broken.len());
    std::fs::write(
        &init,
        format!("{broken}{}", "#".repeat(size - broken.len())),
    )
    .unwrap();
    run_small1(&env, &bin, None);
    run_small1_with(
        &env,
        &bin,
        &["--no-golden-cache"],
        Some(&format!(
            "`{rel}` has other contents than when it was installed; found when its interpreter would not start"
        )),
    );
    run_small1(&env, &bin, None);
    assert_eq!(env_dirs(&env), dirs);
}
