//! Shared helpers of the scenes integration tests: a temp environment per
//! test (lock dir, cache dir, scenes dir) and a `Command` for the real
//! `scene` binary in it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct TestEnv {
    pub dir: tempfile::TempDir,
    pub lock_dir: PathBuf,
    pub cache_dir: PathBuf,
    /// `None`: the package's own scenes.
    pub scenes_dir: Option<PathBuf>,
}

/// The `scenes` package directory (`tests/`), read at run time first: a
/// nextest archive run with `--workspace-remap` points `CARGO_MANIFEST_DIR`
/// at the checkout it runs in, while the compile-time value names the build
/// machine's (see crates/cli/tests/integration/archive.rs).
pub fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// The `scene` binary under test, read at run time first: nextest sets
/// `NEXTEST_BIN_EXE_scene` to where an archive was extracted.
pub fn scene_exe() -> PathBuf {
    std::env::var_os("NEXTEST_BIN_EXE_scene")
        .or_else(|| std::env::var_os("CARGO_BIN_EXE_scene"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_scene")))
}

/// The built simulator runtime the `scene` binary loads: the newest of the
/// copies beside it (cargo refreshes `deps/` on every build, the one beside
/// the binary only when the runtime crate is a requested target).
pub fn built_runtime() -> PathBuf {
    let exe = scene_exe();
    let dir = exe.parent().expect("the binary has a directory");
    [dir.to_path_buf(), dir.join("deps")]
        .iter()
        .map(|d| d.join("libscene_sim_runtime.so"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
        .expect("libscene_sim_runtime.so is built beside the scene binary")
}

/// The scenes package's scenes, `tests/scenes/` of the workspace.
pub fn package_scenes_dir() -> PathBuf {
    workspace_root().join("tests").join("scenes")
}

/// The workspace root (two levels above `crates/cli`).
pub fn workspace_root() -> PathBuf {
    let dir = manifest_dir();
    dir.ancestors().nth(2).map(Path::to_path_buf).unwrap_or(dir)
}

impl TestEnv {
    /// The package's own scenes, with private lock and cache dirs.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("scenes-test")
            .tempdir()
            .unwrap();
        let lock_dir = dir.path().join("locks");
        let cache_dir = dir.path().join("cache");
        Self {
            dir,
            lock_dir,
            cache_dir,
            scenes_dir: None,
        }
    }

    /// An empty private scenes dir; fill it with [`copy_scene`].
    pub fn with_scenes(_: &[&str]) -> Self {
        let mut env = Self::new();
        let scenes = env.dir.path().join("scenes");
        std::fs::create_dir_all(&scenes).unwrap();
        env.scenes_dir = Some(scenes);
        env
    }

    /// [`TestEnv::scene`] run by a copy of the binary alone in a
    /// directory of this env (a hard link where the file system allows,
    /// else a copy), as an installed `scene` is: no runtime library beside
    /// it, so a run loads the simulator runtime the binary carries. The
    /// root and scenes are named, since they are not above it.
    pub fn lone_scene(&self, args: &[&str]) -> Command {
        let bin = self.dir.path().join("lone-bin");
        let exe = bin.join("scene");
        if !exe.exists() {
            std::fs::create_dir_all(&bin).unwrap();
            if std::fs::hard_link(scene_exe(), &exe).is_err() {
                scene_util::copy_executable(&scene_exe(), &exe).unwrap();
            }
        }
        let like = self.scene(args);
        let mut cmd = Command::new(&exe);
        cmd.args(like.get_args());
        for (k, v) in like.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let scenes = self.scenes_dir.clone().unwrap_or_else(package_scenes_dir);
        cmd.env_remove("SCENE_RUNTIME_LIB")
            .arg("--root")
            .arg(workspace_root())
            .arg("--scenes-dir")
            .arg(scenes);
        cmd
    }

    pub fn scene(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(scene_exe());
        cmd.args(args)
            .env("SCENE_LOCK_DIR", &self.lock_dir)
            .env("SCENE_CACHE_DIR", &self.cache_dir)
            // Failing cases dump their tensors; keep those in the temp dir.
            .env(
                "SCENE_FAILURE_DUMP_DIR",
                self.dir.path().join("failure-dumps"),
            )
            .env_remove("SCENE_DEVICES")
            .env_remove("TASK_DEVICE")
            .env_remove("SCENE_PLATFORM")
            .env_remove("SCENE_CC")
            .env_remove("SCENE_LD")
            .env_remove("SCENE_HOSTED_CXX")
            .env_remove("SCENE_PTO_ISA_ROOT")
            .env_remove("SCENE_SIMPLER_ROOT")
            .env_remove("SCENE_COMPILE_WORKERS")
            .env_remove("NO_COLOR");
        match &self.scenes_dir {
            Some(d) => cmd.env("SCENE_SCENES_DIR", d),
            None => cmd.env_remove("SCENE_SCENES_DIR"),
        };
        // Python goldens run with numpy without a pip install per test
        // (crates/cli/tests/integration/python_provision.rs removes this to test provisioning).
        if let Some(python) = test_python() {
            cmd.env("SCENE_PYTHON", python);
        }
        cmd
    }

    /// A path in the env's temp dir for a `--report-json` file, new on
    /// every call (`report-1.json`, `report-2.json`, ...).
    pub fn report_path(&self) -> PathBuf {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        self.dir.path().join(format!("report-{n}.json"))
    }

    /// Runs `scene <args> --report-json <new path>` to completion; returns
    /// its output and the report it wrote (`Value::Null` when it wrote
    /// none). Success is not checked: see [`assert_success`].
    pub fn run_with_report(&self, args: &[&str]) -> (Output, serde_json::Value) {
        self.run_with_report_using(args, |_| {})
    }

    /// [`TestEnv::run_with_report`] with `configure` applied to the command
    /// first (environment variables, a current directory).
    pub fn run_with_report_using(
        &self,
        args: &[&str],
        configure: impl FnOnce(&mut Command),
    ) -> (Output, serde_json::Value) {
        let mut cmd = self.scene(args);
        configure(&mut cmd);
        output_with_report(&mut cmd, &self.report_path())
    }
}

/// Appends `--report-json <report>` to `cmd` (a `scene run` command), runs
/// it to completion and returns its output and the report it wrote
/// (`Value::Null` when it wrote none; a stale file is removed first).
pub fn output_with_report(cmd: &mut Command, report: &Path) -> (Output, serde_json::Value) {
    let _ = std::fs::remove_file(report);
    let out = cmd.arg("--report-json").arg(report).output().unwrap();
    (out, read_report_or_null(report))
}

/// A process's exit status, stdout and stderr, for assertion messages.
pub fn show(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts that the process succeeded, showing its output if not.
pub fn assert_success(out: &Output) {
    assert!(out.status.success(), "{}", show(out));
}

/// Copies the package scene `from` into the env's scenes dir as `to`.
pub fn copy_scene(env: &TestEnv, from: &str, to: &str) -> PathBuf {
    let dst = env
        .scenes_dir
        .as_ref()
        .expect("env has its own scenes dir")
        .join(to);
    copy_dir(&package_scenes_dir().join(from), &dst);
    let toml = dst.join("scene.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        text.replace(&format!("name = \"{from}\""), &format!("name = \"{to}\"")),
    )
    .unwrap();
    dst
}

pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

pub fn read_report(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

/// The second hosted compiler `SCENE_TEST_HOSTED_CXX` names (`.ci/run`
/// installs `zig c++`, clang-based); `None` (after saying so) when it is
/// unset outside CI. Under CI it must be set: the tests that need it never
/// skip there.
pub fn second_hosted_cxx() -> Option<std::ffi::OsString> {
    let cxx = std::env::var_os("SCENE_TEST_HOSTED_CXX");
    if cxx.is_none() {
        assert!(
            !in_ci(),
            "CI must set SCENE_TEST_HOSTED_CXX (.ci/run installs zig c++)"
        );
        eprintln!(
            "skipped: set SCENE_TEST_HOSTED_CXX to a clang-based C++20 compiler (e.g. a `zig c++` wrapper)"
        );
    }
    cxx
}

/// True under CI (`CI` set and not empty), where tests that depend on an
/// installed tool must not skip.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// The case `name` (`scene::case`) of a run report; panics naming the
/// report when it has no such case.
pub fn report_case<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["cases"]
        .as_array()
        .unwrap_or_else(|| panic!("no cases in {report:#}"))
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name} in {report:#}"))
}

/// The report at `path`, or `Value::Null` when there is no file there.
pub fn read_report_or_null(path: &Path) -> serde_json::Value {
    if path.exists() {
        read_report(path)
    } else {
        serde_json::Value::Null
    }
}

pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Runs `n` `scene` processes at once with `args` plus a private
/// `--report-json`, requires each to succeed, and returns their reports.
pub fn run_concurrently(
    env: &TestEnv,
    n: usize,
    args: &[&str],
    tag: &str,
) -> Vec<serde_json::Value> {
    use std::process::Stdio;
    let reports: Vec<PathBuf> = (0..n)
        .map(|i| env.dir.path().join(format!("{tag}-{i}.json")))
        .collect();
    let children: Vec<_> = reports
        .iter()
        .map(|r| {
            let mut full: Vec<&str> = args.to_vec();
            full.extend(["--report-json", r.to_str().unwrap()]);
            // Files, not pipes: a process must never block on a pipe the
            // test is not reading while it holds a card another one waits for.
            let log = |ext: &str| std::fs::File::create(r.with_extension(ext)).unwrap();
            env.scene(&full)
                .stdout(Stdio::from(log("stdout")))
                .stderr(Stdio::from(log("stderr")))
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, mut c) in children.into_iter().enumerate() {
        let status = c.wait().unwrap();
        let log =
            |ext: &str| std::fs::read_to_string(reports[i].with_extension(ext)).unwrap_or_default();
        assert!(
            status.success(),
            "{tag}: process {i} failed ({status})\nstdout:\n{}\nstderr:\n{}",
            log("stdout"),
            log("stderr")
        );
    }
    reports.iter().map(|r| read_report(r)).collect()
}

/// Asserts that no card was held by two cases at once across `reports`;
/// returns the lock intervals per card.
pub fn assert_no_card_held_twice(
    reports: &[serde_json::Value],
) -> std::collections::BTreeMap<u64, Vec<(f64, f64)>> {
    let mut per_card: std::collections::BTreeMap<u64, Vec<(f64, f64)>> = Default::default();
    for r in reports {
        for c in r["cases"].as_array().unwrap() {
            let interval = (
                c["lock"]["acquired_at"].as_f64().unwrap(),
                c["lock"]["released_at"].as_f64().unwrap(),
            );
            for d in c["devices"].as_array().unwrap() {
                per_card
                    .entry(d.as_u64().unwrap())
                    .or_default()
                    .push(interval);
            }
        }
    }
    for (card, iv) in per_card.iter_mut() {
        iv.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in iv.windows(2) {
            assert!(w[0].1 <= w[1].0, "card {card} held twice at once: {w:?}");
        }
    }
    per_card
}

/// Copies the package scene `from` as `to`, needing `devices` cards per case.
pub fn copy_scene_with_devices(env: &TestEnv, from: &str, to: &str, devices: usize) -> PathBuf {
    let dir = copy_scene(env, from, to);
    let toml = dir.join("scene.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    assert!(text.contains("level = 2\n"));
    std::fs::write(
        &toml,
        text.replace("level = 2\n", &format!("level = 2\ndevices = {devices}\n")),
    )
    .unwrap();
    dir
}

/// Lines of a child's piped stderr, read as they come.
pub type StderrLines = std::io::Lines<std::io::BufReader<std::process::ChildStderr>>;

/// Takes `child`'s piped stderr and reads it up to the first line containing
/// `needle`; returns that line and the rest of the stream (drain it, so the
/// child never blocks on a full pipe). Panics if the child closes stderr first.
pub fn stderr_line_containing(
    child: &mut std::process::Child,
    needle: &str,
) -> (String, StderrLines) {
    use std::io::BufRead;
    let stderr = child.stderr.take().expect("stderr must be piped");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let line = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("child's stderr ended without a line containing {needle:?}"));
    (line, lines)
}

/// Runs `cmd` to completion and asserts it succeeded, showing its output if not.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert_success(&out);
    out
}

/// Whether this machine lets an unprivileged process hide directories from
/// its children (a user + mount namespace, `unshare -r -m`). Some hosts
/// forbid it (Ubuntu 24.04 restricts unprivileged user namespaces; macOS
/// has none).
pub fn can_hide_dirs() -> bool {
    Command::new("unshare")
        .args(["-r", "-m", "true"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// A command running `program` with every directory of `hide` covered by an
/// empty tmpfs, so neither it nor its children can read what was there; a
/// plain `Command::new(program)` when the host cannot hide directories
/// (callers say so: [`can_hide_dirs`]). Arguments, environment and
/// current directory are the caller's, as with any `Command`.
pub fn command_hiding(hide: &[PathBuf], program: &Path) -> Command {
    if hide.is_empty() || !can_hide_dirs() {
        return Command::new(program);
    }
    let mut cmd = Command::new("unshare");
    cmd.args(["-r", "-m", "--", "sh", "-c"]).arg(
        r#"set -e
while [ "$1" != "--" ]; do mount -t tmpfs none "$1"; shift; done
shift
exec "$@""#,
    );
    cmd.arg("sh").args(hide).arg("--").arg(program);
    cmd
}

/// The directories a relocated run must not need: the checkout and the
/// target directory the test binaries were built in (when it is elsewhere).
pub fn build_machine_dirs() -> Vec<PathBuf> {
    let root = workspace_root();
    let mut dirs = vec![root.clone()];
    // <target>/<profile>/scene
    if let Some(target) = scene_exe().parent().and_then(Path::parent)
        && !target.starts_with(&root)
    {
        dirs.push(target.to_path_buf());
    }
    dirs
}

/// An interpreter with numpy for the tests that need one but are not about
/// provisioning: `None` when `python3` has numpy (use it as it is), else
/// the `bin/python` of a managed environment made once for the whole test
/// suite in `$CARGO_TARGET_TMPDIR/scene-test-python` (under the
/// provisioning lock, so test binaries running at once install once).
/// Memoised per test binary. When it cannot be made (no network), `None`:
/// the Python cases then fail saying why.
pub fn test_python() -> Option<PathBuf> {
    use scene_harness::golden::python::provision::{EnvCache, Installer, probe, requirement_set};
    static PYTHON: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let reqs = requirement_set(&[]);
            let found = match probe(Path::new("python3"), &reqs) {
                Ok(p) => p,
                Err(why) => {
                    eprintln!("note: no python3 for the Python goldens: {why}");
                    return None;
                }
            };
            if found.missing.is_empty() {
                return None;
            }
            let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scene-test-python");
            let cancel = scene_util::Cancel::default();
            match EnvCache::new(root).ensure(
                &found,
                &reqs,
                &Installer { uv: None },
                &cancel,
                |dir, _| {
                    eprintln!(
                        "note: python3 lacks numpy; provisioning a test environment in {}",
                        dir.display()
                    )
                },
            ) {
                Ok(env) => Some(env.python),
                Err(e) => {
                    eprintln!("note: cannot provision numpy for the tests: {e}");
                    None
                }
            }
        })
        .clone()
}

/// The `N passed, M failed` line of `scene run`'s output: the last line
/// of that shape (the `failures:` block, when there is one, follows it).
pub fn summary_line(stdout: &str) -> Option<&str> {
    stdout.lines().rev().find(|l| {
        let words: Vec<&str> = l.split(' ').collect();
        matches!(
            words.as_slice(),
            [p, "passed,", f, "failed", ..]
                if p.parse::<u64>().is_ok() && f.trim_end_matches(',').parse::<u64>().is_ok()
        )
    })
}

/// Runs `cmd` to completion, killing it and failing the test past
/// `secs` seconds.
pub fn output_within(cmd: &mut Command, secs: u64, what: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what}: did not finish in {secs} s; stderr:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Output {
        status,
        stdout: std::fs::read(&out_path).unwrap(),
        stderr: std::fs::read(&err_path).unwrap(),
    }
}
