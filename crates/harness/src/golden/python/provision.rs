//! Python that provisions itself: managed virtual environments for Python
//! goldens, under `<cache dir>/python/`.
//!
//! When no interpreter was named (`SCENE_PYTHON` unset) and the `python3`
//! found lacks what a scene needs (its `requirements`, default `numpy`), the
//! harness makes a virtual environment from that interpreter, installs the
//! requirements once and uses its `bin/python`:
//!
//! - `<root>/<key>/` is one environment; the key is blake3 over the
//!   interpreter's identity (its resolved executable, `sys.version`,
//!   implementation) and the sorted requirement set.
//! - It is built aside in `<root>/tmp/` (with `uv` when it is on `PATH`, else
//!   `python3 -m venv` and `pip`), its exact versions written to
//!   `requirements.lock` (`pip freeze`), its marker `scene-env.json` written
//!   last, then renamed into place: a directory without the marker is a
//!   half-built one, never used, removed by the next builder or by prune.
//! - One process builds a key at a time (`<root>/locks/<key>.lock`, the
//!   kernel cache's `lock_file`); the others wait and find it built.
//! - A use touches the marker (its mtime is the environment's last use, for
//!   `scene cache prune`).
//!
//! Environments are used through `bin/python` only (never their scripts,
//! whose `#!` lines name the build directory), so the rename is harmless.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use scene_kernels::cache::{LEFTOVER_AGE, lock_file, try_lock_file};
use scene_util::Cancel;
use serde::{Deserialize, Serialize};

/// What a Python golden needs when its scene declares nothing.
pub const DEFAULT_REQUIREMENTS: &[&str] = &["numpy"];

/// The marker written last into a complete environment.
pub const MARKER: &str = "scene-env.json";

/// The exact versions installed (`pip freeze`).
pub const LOCK_FILE: &str = "requirements.lock";

/// Format of the marker and of keys; bump to orphan old environments.
const SCHEMA: u32 = 1;

/// Largest marker or lock file read.
const MAX_SMALL_FILE: u64 = 1 << 20;

pub use crate::config::{Provision, UnknownProvision};

mod files;
pub use files::{EnvDamage, FILES};

/// A scene's requirements, or the default; sorted, without duplicates (the
/// set is part of the environment's key).
pub fn requirement_set(declared: &[String]) -> Vec<String> {
    let mut set: Vec<String> = if declared.is_empty() {
        DEFAULT_REQUIREMENTS.iter().map(|s| s.to_string()).collect()
    } else {
        declared.to_vec()
    };
    // The driver itself imports numpy.
    if !set.iter().any(|r| requirement_name(r) == "numpy") {
        set.push("numpy".into());
    }
    set.sort();
    set.dedup();
    set
}

/// The distribution name of a requirement specifier, normalised
/// (`NumPy >= 2` -> `numpy`).
fn requirement_name(spec: &str) -> String {
    spec.trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .map(|c| match c {
            '.' | '_' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// `numpy 'ml_dtypes>=0.4'`: the requirements as shell words, for messages.
pub fn shell_words(reqs: &[String]) -> String {
    reqs.iter()
        .map(|r| {
            if r.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
            {
                r.clone()
            } else {
                format!("'{}'", r.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Run by the interpreter: who it is, and which requirements it lacks.
const PROBE: &str = r#"
import json, os, re, sys
reqs = json.loads(sys.argv[1])
out = {"executable": sys.executable, "resolved": os.path.realpath(sys.executable),
       "version": sys.version, "implementation": sys.implementation.name, "missing": []}
try:
    import importlib.metadata as md
except Exception:
    md = None
Req = None
def requirement(text):
    global Req
    if Req is None:
        for mod in ("packaging.requirements", "pip._vendor.packaging.requirements"):
            try:
                Req = __import__(mod, fromlist=["Requirement"]).Requirement
                break
            except Exception:
                pass
    return Req(text) if Req else None
for r in reqs:
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", r)
    if md is None or name is None:
        out["missing"].append(r)
        continue
    plain = r.strip() == name.group(1)
    req = None
    if not plain:
        try:
            req = requirement(r)
        except Exception:
            req = None
        if req is None:
            out["missing"].append(r)
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
    try:
        have = md.version(req.name if req else name.group(1))
    except Exception:
        out["missing"].append(r)
        continue
    if req is not None and req.specifier and not req.specifier.contains(have, prereleases=True):
        out["missing"].append("%s (has %s)" % (r, have))
try:
    import numpy
except Exception as e:
    if not any(m.split()[0].lower().startswith("numpy") for m in out["missing"]):
        out["missing"].append("numpy (import fails: %s)" % e)
print(json.dumps(out))
"#;

/// What [`probe`] found out about an interpreter.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Probe {
    /// `sys.executable`: what to make an environment from.
    pub executable: String,
    /// Its resolved path (symbolic links followed), for the key.
    pub resolved: String,
    pub version: String,
    pub implementation: String,
    /// Requirements it does not satisfy (empty: use it as it is).
    pub missing: Vec<String>,
}

/// How long the probe may take: an interpreter that hangs at start must
/// not hang the run (as generous as the worker's own start).
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// Why [`probe`] learnt nothing about an interpreter.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{0}")]
    Encode(#[source] serde_json::Error),
    #[error("cannot start `{}`: {source}", python.display())]
    Start {
        python: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{}` did not answer within {secs} s", python.display())]
    Timeout { python: PathBuf, secs: u64 },
    #[error("{0}")]
    Wait(#[source] io::Error),
    #[error("`{}` failed ({status}): {last_lines}", python.display())]
    Failed {
        python: PathBuf,
        status: std::process::ExitStatus,
        last_lines: String,
    },
    #[error("`{}` answered `{line}`: {source}", python.display())]
    Answer {
        python: PathBuf,
        line: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Starts `python` once to ask who it is and which of `reqs` it lacks.
pub fn probe(python: &Path, reqs: &[String]) -> Result<Probe, ProbeError> {
    probe_with(python, reqs, &Cancel::default())
}

/// [`probe`], the interpreter started through `cancel` (a run's probe is
/// one of its children: cancelling terminates it).
pub fn probe_with(python: &Path, reqs: &[String], cancel: &Cancel) -> Result<Probe, ProbeError> {
    let arg = serde_json::to_string(reqs).map_err(ProbeError::Encode)?;
    run_json(python, PROBE, &arg, cancel)
}

/// The versions a Python cache key records, as the interpreter's
/// distribution metadata states them: what the worker's `hello` reports,
/// without importing numpy or torch (a warm run whose fixtures, goldens and
/// test-file descriptions all come from the cache starts no worker).
/// `numpy` is `None` when no numpy distribution is installed.
const VERSIONS: &str = r#"
import json, sys
out = {"python": sys.version.split()[0], "numpy": None, "torch": None, "packages": []}
import importlib.metadata as md
for name in ("numpy", "torch"):
    try:
        out[name] = md.version(name)
    except Exception:
        pass
try:
    out["packages"] = sorted({"%s==%s" % (d.metadata["Name"], d.version) for d in md.distributions()})
except Exception as e:
    out["packages"] = ["unknown: %s" % e]
print(json.dumps(out))
"#;

/// What [`metadata_versions`] found.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct MetadataVersions {
    pub python: String,
    pub numpy: Option<String>,
    pub torch: Option<String>,
    pub packages: Vec<String>,
}

/// `python`'s versions from its distribution metadata (the `VERSIONS`
/// script).
pub fn metadata_versions(python: &Path, cancel: &Cancel) -> Result<MetadataVersions, ProbeError> {
    run_json(python, VERSIONS, "", cancel)
}

/// Runs `script` (with `arg`) under `python` and parses the last line it
/// prints as JSON; bounded by [`PROBE_TIMEOUT`].
fn run_json<T: serde::de::DeserializeOwned>(
    python: &Path,
    script: &str,
    arg: &str,
    cancel: &Cancel,
) -> Result<T, ProbeError> {
    let mut child = cancel
        .spawn(
            Command::new(python)
                .args(["-c", script, arg])
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .map_err(|source| ProbeError::Start {
            python: python.to_path_buf(),
            source,
        })?;
    let pipes = child.child_mut();
    let (stdout, stderr) = (pipes.stdout.take(), pipes.stderr.take());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::Read;
        let err = std::thread::spawn(move || {
            let mut e = Vec::new();
            if let Some(mut s) = stderr {
                let _ = s.read_to_end(&mut e);
            }
            e
        });
        let mut o = Vec::new();
        if let Some(mut s) = stdout {
            let _ = s.read_to_end(&mut o);
        }
        let _ = tx.send((o, err.join().unwrap_or_default()));
    });
    let Ok((stdout, stderr)) = rx.recv_timeout(PROBE_TIMEOUT) else {
        let _ = child.kill();
        return Err(ProbeError::Timeout {
            python: python.to_path_buf(),
            secs: PROBE_TIMEOUT.as_secs(),
        });
    };
    let status = child.wait().map_err(ProbeError::Wait)?;
    let out = Output {
        status,
        stdout,
        stderr,
    };
    if !out.status.success() {
        return Err(ProbeError::Failed {
            python: python.to_path_buf(),
            status: out.status,
            last_lines: last_lines(&out, 3),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or("");
    serde_json::from_str(line).map_err(|source| ProbeError::Answer {
        python: python.to_path_buf(),
        line: line.to_owned(),
        source,
    })
}

/// The key of the environment for `probe`'s interpreter and `reqs`.
pub fn env_key(probe: &Probe, reqs: &[String]) -> String {
    let mut h = scene_util::FieldHasher::new("scene-python-env");
    h.field("schema", &SCHEMA.to_le_bytes())
        .field("resolved", probe.resolved.as_bytes())
        .field("version", probe.version.as_bytes())
        .field("implementation", probe.implementation.as_bytes());
    for r in reqs {
        h.field("requirement", r.as_bytes());
    }
    h.finalize().to_hex()[..32].to_string()
}

/// A complete environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedEnv {
    /// `<root>/<key>`.
    pub dir: PathBuf,
    /// `<dir>/bin/python`: the interpreter the worker runs.
    pub python: PathBuf,
    /// The interpreter it was made from.
    pub base: String,
    pub requirements: Vec<String>,
    /// `requirements.lock`: the exact versions installed.
    pub lock: String,
    /// Which build of the environment this is (the marker's `built`).
    pub built: String,
}

impl ManagedEnv {
    /// The pinned versions, `numpy==2.1.3, ...`.
    pub fn pinned(&self) -> String {
        let pins: Vec<&str> = self
            .lock
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        pins.join(", ")
    }
}

/// The marker of a complete environment.
#[derive(Debug, Serialize, Deserialize)]
struct Marker {
    schema: u32,
    key: String,
    base: String,
    version: String,
    requirements: Vec<String>,
    installer: String,
    seconds: f64,
    /// Names this build (absent in markers written before it existed).
    #[serde(default)]
    built: String,
}

/// Why an environment could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A command of the build failed or could not start.
    #[error("`{command}` failed: {why}")]
    Command { command: String, why: String },
    /// Installed, yet the environment still lacks something.
    #[error("the new environment still lacks {0}")]
    Incomplete(String),
    /// Installed, yet what was written cannot be read back.
    #[error("the new environment still lacks {0}")]
    Unreadable(#[source] EnvReadError),
    /// The run was cancelled (SIGINT, SIGTERM) before the environment was
    /// complete: the commands the cancel terminated did not fail, and
    /// nothing of the build is left.
    #[error("interrupted before the environment was complete")]
    Interrupted,
}

/// Why a directory is not a complete environment.
#[derive(Debug, thiserror::Error)]
pub enum EnvReadError {
    #[error("{file}: {source}")]
    Read {
        file: &'static str,
        #[source]
        source: scene_util::ReadError,
    },
    #[error("{MARKER}: {0}")]
    Marker(#[source] serde_json::Error),
    #[error("{MARKER} names another schema or key")]
    OtherKey,
    #[error("bin/python is missing")]
    NoPython,
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> ProvisionError + '_ {
    move |source| ProvisionError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// How an environment is built: `uv` when given (found on `PATH`), else
/// the interpreter's `venv` and `pip`.
#[derive(Clone, Debug)]
pub struct Installer {
    pub uv: Option<PathBuf>,
}

impl Installer {
    /// For the progress line: `python3 -m venv + pip install numpy`.
    pub fn describe(&self, python: &str, reqs: &[String]) -> String {
        match &self.uv {
            Some(_) => format!("uv venv + uv pip install {}", shell_words(reqs)),
            None => format!("{python} -m venv + pip install {}", shell_words(reqs)),
        }
    }

    fn name(&self) -> &'static str {
        if self.uv.is_some() { "uv" } else { "pip" }
    }

    fn venv(&self, base: &str, dir: &Path) -> Command {
        match &self.uv {
            Some(uv) => {
                let mut c = Command::new(uv);
                c.args(["venv", "--quiet", "--python", base]).arg(dir);
                c
            }
            None => {
                let mut c = Command::new(base);
                c.args(["-m", "venv"]).arg(dir);
                c
            }
        }
    }

    fn install(&self, python: &Path, reqs: &[String]) -> Command {
        match &self.uv {
            Some(uv) => {
                let mut c = Command::new(uv);
                c.args(["pip", "install", "--python"])
                    .arg(python)
                    .args(reqs);
                c
            }
            None => {
                let mut c = Command::new(python);
                c.args([
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "--no-input",
                ])
                .args(reqs);
                c
            }
        }
    }

    fn freeze(&self, python: &Path) -> Command {
        match &self.uv {
            Some(uv) => {
                let mut c = Command::new(uv);
                c.args(["pip", "freeze", "--python"]).arg(python);
                c
            }
            None => {
                let mut c = Command::new(python);
                c.args(["-m", "pip", "freeze", "--disable-pip-version-check"]);
                c
            }
        }
    }
}

/// `prog arg ...`, for messages.
fn command_line(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The last `n` non-empty lines of a command's stderr, else its stdout.
fn last_lines(out: &Output, n: usize) -> String {
    let pick = |b: &[u8]| {
        let text = String::from_utf8_lossy(b);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(n)..].join(" | ")
    };
    let err = pick(&out.stderr);
    if err.is_empty() {
        pick(&out.stdout)
    } else {
        err
    }
}

/// Runs `cmd` to completion (output captured); `Err` names it and says why.
/// Registered with `cancel`, so an interrupted run stops pip or uv too
/// (the half-built environment is then removed with its build directory).
fn run(cmd: Command, cancel: &Cancel) -> Result<Output, ProvisionError> {
    run_showing(cmd, cancel, &mut |_| {})
}

/// Whether a line of pip's or uv's output says what is being fetched or
/// installed: the lines a user waiting on a large install (torch: 2.8 GB
/// of wheels) wants to see, without pip's dependency chatter.
fn progress_line(line: &str) -> bool {
    const SAID: [&str; 9] = [
        "Collecting ",
        "Downloading ",
        "Processing ",
        "Using cached ",
        "Installing collected packages",
        "Successfully installed ",
        "Resolved ",
        "Prepared ",
        "Installed ",
    ];
    let line = line.trim_start();
    SAID.iter().any(|s| line.starts_with(s))
}

/// [`run`], showing its progress as it comes: each [`progress_line`] of
/// its output (stdout or stderr) goes to `show` while the command runs;
/// all of it is kept for the error message. Ended by the run's own cancel
/// (or racing it), a failure is `Interrupted`, not the command's.
fn run_showing(
    mut cmd: Command,
    cancel: &Cancel,
    show: &mut dyn FnMut(&str),
) -> Result<Output, ProvisionError> {
    use std::io::{BufRead, BufReader, Read};
    let command = command_line(&cmd);
    let failed = |why: String| ProvisionError::Command {
        command: command.clone(),
        why,
    };
    if cancel.is_cancelled() {
        return Err(ProvisionError::Interrupted);
    }
    let mut child = cancel
        .spawn(
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .env("PYTHONDONTWRITEBYTECODE", "1"),
        )
        .map_err(|e| failed(e.to_string()))?;
    let (tx, rx) = std::sync::mpsc::channel::<(bool, Vec<u8>)>();
    // One reader per pipe, so neither fills while the other is read; each
    // line is sent tagged with its pipe (`true`: stderr).
    fn forward(
        pipe: impl Read + Send + 'static,
        is_err: bool,
        tx: std::sync::mpsc::Sender<(bool, Vec<u8>)>,
    ) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            let mut lines = BufReader::new(pipe);
            loop {
                let mut line = Vec::new();
                match lines.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) if tx.send((is_err, line)).is_err() => break,
                    Ok(_) => {}
                }
            }
        })
    }
    let pipes = child.child_mut();
    let readers: Vec<_> = [
        pipes.stdout.take().map(|p| forward(p, false, tx.clone())),
        pipes.stderr.take().map(|p| forward(p, true, tx.clone())),
    ]
    .into_iter()
    .flatten()
    .collect();
    drop(tx);
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    for (is_err, line) in rx {
        let text = String::from_utf8_lossy(&line);
        if progress_line(&text) {
            show(text.trim());
        }
        if is_err { &mut stderr } else { &mut stdout }.extend_from_slice(&line);
    }
    for r in readers {
        let _ = r.join();
    }
    let status = child.wait().map_err(|e| failed(e.to_string()))?;
    if !status.success() && cancel.is_cancelled() {
        return Err(ProvisionError::Interrupted);
    }
    let out = Output {
        status,
        stdout,
        stderr,
    };
    if !out.status.success() {
        return Err(ProvisionError::Command {
            command,
            why: format!("{}: {}", out.status, last_lines(&out, 4)),
        });
    }
    Ok(out)
}

/// The environments under one root (`<cache dir>/python`).
#[derive(Clone, Debug)]
pub struct EnvCache {
    root: PathBuf,
}

impl EnvCache {
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn lock_path(&self, key: &str) -> PathBuf {
        self.root.join("locks").join(format!("{key}.lock"))
    }

    /// The complete, undamaged environment of `key` (touched: used); else
    /// why the directory there is not one (`None`: there is none).
    fn complete(&self, key: &str) -> Result<ManagedEnv, Option<EnvDamage>> {
        let dir = self.root.join(key);
        if std::fs::symlink_metadata(&dir).is_err() {
            return Err(None);
        }
        let env = read_env(&dir, key).map_err(|e| Some(EnvDamage::Marker(e)))?;
        // The warm path's check: an lstat per file, no file read.
        files::check(&dir).map_err(Some)?;
        let _ = scene_util::touch_regular_file(&dir.join(MARKER));
        Ok(env)
    }

    /// The key's lock, held until dropped.
    fn lock(&self, key: &str) -> Result<scene_kernels::cache::KeyLock, ProvisionError> {
        let lock = self.lock_path(key);
        if let Some(parent) = lock.parent() {
            std::fs::create_dir_all(parent).map_err(at(parent))?;
        }
        lock_file(&lock).map_err(at(&lock))
    }

    /// The environment of `probe`'s interpreter with `reqs`: the one there
    /// is, else one built now (once across processes: under the key's lock).
    /// `progress` is called before a build starts, only by the builder,
    /// with why the directory there could not be used (a damaged
    /// environment is rebuilt; `None`: there was none).
    pub fn ensure(
        &self,
        probe: &Probe,
        reqs: &[String],
        installer: &Installer,
        cancel: &Cancel,
        progress: impl FnOnce(&Path, Option<&EnvDamage>),
    ) -> Result<ManagedEnv, ProvisionError> {
        let key = env_key(probe, reqs);
        if let Ok(env) = self.complete(&key) {
            return Ok(env);
        }
        let _held = self.lock(&key)?;
        let damage = match self.complete(&key) {
            Ok(env) => return Ok(env),
            Err(damage) => damage,
        };
        self.build(probe, reqs, installer, cancel, &key, |dir| {
            progress(dir, damage.as_ref())
        })
    }

    /// `broken`, an environment of `probe`'s interpreter with `reqs` whose
    /// interpreter would not start although it passed the cheap check:
    /// rebuilt (under the key's lock) when its files' contents are not
    /// what was installed, as [`EnvCache::ensure`] does. `Ok(None)`: they
    /// are, so the failure is not the environment's. A process that
    /// rebuilt it meanwhile wins: its environment is returned.
    pub fn repair(
        &self,
        probe: &Probe,
        reqs: &[String],
        installer: &Installer,
        cancel: &Cancel,
        broken: &ManagedEnv,
        progress: impl FnOnce(&Path, Option<&EnvDamage>),
    ) -> Result<Option<ManagedEnv>, ProvisionError> {
        let key = env_key(probe, reqs);
        let _held = self.lock(&key)?;
        let damage = match self.complete(&key) {
            Ok(env) if env.built != broken.built => return Ok(Some(env)),
            Ok(env) => match files::verify(&env.dir) {
                Ok(()) => return Ok(None),
                Err(damage) => Some(damage),
            },
            Err(damage) => damage,
        };
        self.build(probe, reqs, installer, cancel, &key, |dir| {
            progress(dir, damage.as_ref())
        })
        .map(Some)
    }

    /// Builds the environment of `key` in place of whatever is there; the
    /// caller holds the key's lock. A failure leaves nothing: the build
    /// directory is removed, and a cancelled build is
    /// [`ProvisionError::Interrupted`].
    fn build(
        &self,
        probe: &Probe,
        reqs: &[String],
        installer: &Installer,
        cancel: &Cancel,
        key: &str,
        progress: impl FnOnce(&Path),
    ) -> Result<ManagedEnv, ProvisionError> {
        self.build_inner(probe, reqs, installer, cancel, key, progress)
            .map_err(|e| match cancel.is_cancelled() {
                true => ProvisionError::Interrupted,
                false => e,
            })
    }

    fn build_inner(
        &self,
        probe: &Probe,
        reqs: &[String],
        installer: &Installer,
        cancel: &Cancel,
        key: &str,
        progress: impl FnOnce(&Path),
    ) -> Result<ManagedEnv, ProvisionError> {
        let dest = self.root.join(key);
        // Half-built (no marker) or damaged: never used, replaced.
        scene_util::remove_any(&dest).map_err(at(&dest))?;
        let tmp_root = self.root.join("tmp");
        std::fs::create_dir_all(&tmp_root).map_err(at(&tmp_root))?;
        // Build directories of this key are made only under its lock, which
        // we hold: any there is a killed builder's (a second Ctrl-C exits at
        // once), removed now rather than by prune days later.
        sweep_builds(&tmp_root, key);
        progress(&dest);
        let started = Instant::now();
        // Removed on any failure below (dropped), kept only when renamed.
        let tmp = tempfile::Builder::new()
            .prefix(&format!("{key}-"))
            .tempdir_in(&tmp_root)
            .map_err(at(&tmp_root))?;
        let env_dir = tmp.path().join("env");
        // Messages name the environment where it will live, not the build
        // directory that is gone by then.
        let named = |e: ProvisionError| match e {
            ProvisionError::Command { command, why } => ProvisionError::Command {
                command: command
                    .replace(&env_dir.display().to_string(), &dest.display().to_string()),
                why,
            },
            e => e,
        };
        run(installer.venv(&probe.executable, &env_dir), cancel).map_err(named)?;
        let python = env_dir.join("bin").join("python");
        // A large install (torch) takes minutes: say what it fetches.
        let tool = installer.name();
        run_showing(installer.install(&python, reqs), cancel, &mut |line| {
            eprintln!("  {tool}: {line}");
        })
        .map_err(named)?;
        let frozen = run(installer.freeze(&python), cancel).map_err(named)?;
        let lock_text = String::from_utf8_lossy(&frozen.stdout).into_owned();
        let check = probe_with(&python, reqs, cancel).map_err(|why| ProvisionError::Command {
            command: format!("{} -c <probe>", python.display()),
            why: why.to_string(),
        })?;
        if !check.missing.is_empty() {
            return Err(ProvisionError::Incomplete(check.missing.join(", ")));
        }
        let lock_path = env_dir.join(LOCK_FILE);
        scene_util::write_atomically(&lock_path, lock_text.as_bytes()).map_err(at(&lock_path))?;
        // What the environment is made of, before the marker that makes it
        // complete: every use checks it.
        files::write(&env_dir).map_err(at(&env_dir.join(files::FILES)))?;
        let marker = Marker {
            schema: SCHEMA,
            key: key.to_owned(),
            base: probe.executable.clone(),
            version: probe.version.clone(),
            requirements: reqs.to_vec(),
            installer: installer.name().into(),
            seconds: started.elapsed().as_secs_f64(),
            built: build_id(),
        };
        let json = serde_json::to_vec_pretty(&marker).map_err(io::Error::other);
        let marker_path = env_dir.join(MARKER);
        json.and_then(|j| scene_util::write_atomically(&marker_path, &j))
            .map_err(at(&marker_path))?;
        std::fs::rename(&env_dir, &dest).map_err(at(&dest))?;
        drop(tmp);
        read_env(&dest, key).map_err(ProvisionError::Unreadable)
    }
}

/// Removes the build directories of `key` in `tmp_root` (`<key>-*`).
fn sweep_builds(tmp_root: &Path, key: &str) {
    let prefix = format!("{key}-");
    for entry in std::fs::read_dir(tmp_root).into_iter().flatten().flatten() {
        if entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(&prefix))
        {
            let _ = scene_util::remove_any(&entry.path());
        }
    }
}

/// Names one build of an environment (the marker's `built`): another
/// build of the same key has another.
fn build_id() -> String {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}.{:09}-{}",
        now.as_secs(),
        now.subsec_nanos(),
        std::process::id()
    )
}

/// A complete environment read from `dir`: its marker (this schema, this
/// key), its lock file, its `bin/python`.
fn read_env(dir: &Path, key: &str) -> Result<ManagedEnv, EnvReadError> {
    let read = |file: &'static str| {
        scene_util::read_regular_file(&dir.join(file), None, MAX_SMALL_FILE)
            .map_err(|source| EnvReadError::Read { file, source })
    };
    let m: Marker = serde_json::from_slice(&read(MARKER)?).map_err(EnvReadError::Marker)?;
    if m.schema != SCHEMA || m.key != key {
        return Err(EnvReadError::OtherKey);
    }
    let lock = read(LOCK_FILE)?;
    let python = dir.join("bin").join("python");
    if !python.exists() {
        return Err(EnvReadError::NoPython);
    }
    Ok(ManagedEnv {
        dir: dir.to_path_buf(),
        python,
        base: m.base,
        requirements: m.requirements,
        lock: String::from_utf8_lossy(&lock).into_owned(),
        built: m.built,
    })
}

/// One environment as `scene cache stats` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvInfo {
    pub key: String,
    pub dir: PathBuf,
    pub bytes: u64,
    /// `None`: half-built (no marker); prune removes it.
    pub env: Option<ManagedEnv>,
    pub last_used: SystemTime,
}

/// What [`EnvCache::prune`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvPruneReport {
    pub removed: usize,
    pub freed_bytes: u64,
    pub kept: usize,
    /// Unused too long but locked by a process building or using it.
    pub busy: usize,
    /// Half-built environments and leftover build directories removed.
    pub leftovers: usize,
}

/// Maintenance: `scene cache stats|prune|clear`.
impl EnvCache {
    /// Every environment directory (complete or not).
    pub fn list(&self) -> Result<Vec<EnvInfo>, ProvisionError> {
        let it = match std::fs::read_dir(&self.root) {
            Ok(it) => it,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(at(&self.root)(e)),
        };
        let mut out = Vec::new();
        for entry in it {
            let entry = entry.map_err(at(&self.root))?;
            let Some(key) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if key == "locks" || key == "tmp" {
                continue;
            }
            let dir = entry.path();
            let env = read_env(&dir, &key).ok();
            let last_used =
                scene_util::mtime_or_epoch(&dir.join(MARKER)).max(scene_util::mtime_or_epoch(&dir));
            out.push(EnvInfo {
                bytes: dir_size(&dir),
                key,
                dir,
                env,
                last_used,
            });
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    /// Removes environments unused for longer than `max_age` (and any
    /// half-built one), each under its key's lock so a build in progress
    /// is kept; then build directories left by killed builders.
    pub fn prune(&self, max_age: Duration) -> Result<EnvPruneReport, ProvisionError> {
        let now = SystemTime::now();
        let age = |t: SystemTime| now.duration_since(t).unwrap_or(Duration::ZERO);
        let mut r = EnvPruneReport::default();
        for e in self.list()? {
            if e.env.is_some() && age(e.last_used) <= max_age {
                r.kept += 1;
                continue;
            }
            let lock = self.lock_path(&e.key);
            let held = match try_lock_file(&lock) {
                Ok(Some(h)) => Some(h),
                Ok(None) => {
                    r.busy += 1;
                    continue;
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound => None,
                Err(err) => return Err(at(&lock)(err)),
            };
            scene_util::remove_any(&e.dir).map_err(at(&e.dir))?;
            if held.is_some() {
                // Unlinked while held: a waiter finds it gone and relocks.
                let _ = std::fs::remove_file(&lock);
            }
            if e.env.is_some() {
                r.removed += 1;
                r.freed_bytes += e.bytes;
            } else {
                r.leftovers += 1;
            }
        }
        let tmp = self.root.join("tmp");
        if let Ok(it) = std::fs::read_dir(&tmp) {
            for t in it.filter_map(Result::ok) {
                let path = t.path();
                if age(scene_util::mtime_or_epoch(&path)) > LEFTOVER_AGE
                    && scene_util::remove_any(&path).is_ok()
                {
                    r.leftovers += 1;
                }
            }
        }
        Ok(r)
    }

    /// Removes every environment; returns how many there were.
    pub fn clear(&self) -> Result<usize, ProvisionError> {
        let n = self.list()?.len();
        scene_util::remove_dir_if_exists(&self.root).map_err(at(&self.root))?;
        Ok(n)
    }
}

/// Bytes of the files under `dir`, links not followed.
pub(crate) fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(it) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in it.filter_map(Result::ok) {
            match e.path().symlink_metadata() {
                Ok(m) if m.is_dir() => todo.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_and_uv_progress_lines_are_told_from_chatter() {
        for said in [
            "Collecting torch",
            "Processing /wheels/torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl",
            "  Downloading torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl (539.1 MB)",
            "  Using cached numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.whl (16.9 MB)",
            "Installing collected packages: numpy",
            "Successfully installed numpy-2.4.6",
            "Resolved 30 packages in 1.21s",
            "Prepared 30 packages in 2m 03s",
            "Installed 30 packages in 5.02s",
        ] {
            assert!(progress_line(said), "{said}");
        }
        for chatter in [
            "Requirement already satisfied: numpy in ./lib/python3.11/site-packages",
            "  Preparing metadata (pyproject.toml): started",
            " + numpy==2.4.6",
            "",
        ] {
            assert!(!progress_line(chatter), "{chatter}");
        }
    }

    #[test]
    fn a_command_shows_its_progress_while_keeping_all_its_output() {
        let script = "echo 'Collecting numpy'; echo 'Requirement already satisfied: pip'; \
                      echo '  Downloading numpy.whl (16.9 MB)' >&2; echo 'Successfully installed numpy-2.4.6'";
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        let mut shown = Vec::new();
        let out = run_showing(cmd, &Cancel::new(), &mut |l| shown.push(l.to_owned())).unwrap();
        // Lines of one stream keep their order; stdout and stderr interleave
        // as they come.
        let from_stdout: Vec<&String> = shown
            .iter()
            .filter(|l| !l.starts_with("Downloading"))
            .collect();
        assert_eq!(
            from_stdout,
            ["Collecting numpy", "Successfully installed numpy-2.4.6"]
        );
        assert!(
            shown.contains(&"Downloading numpy.whl (16.9 MB)".to_owned()),
            "{shown:?}"
        );
        assert_eq!(shown.len(), 3, "{shown:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("Requirement already satisfied: pip"),
            "{stdout}"
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("Downloading numpy.whl"));

        // A failure names the command and its last lines, as `run` does.
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "echo 'Collecting nothing'; echo 'ERROR: No matching distribution' >&2; exit 1",
        ]);
        let mut shown = Vec::new();
        match run_showing(cmd, &Cancel::new(), &mut |l| shown.push(l.to_owned())) {
            Err(ProvisionError::Command { command, why }) => {
                assert!(command.starts_with("sh -c"), "{command}");
                assert!(why.contains("No matching distribution"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(shown, ["Collecting nothing"]);
    }

    #[test]
    fn requirement_sets_always_hold_numpy_and_are_sorted() {
        assert_eq!(requirement_set(&[]), ["numpy"]);
        let declared = vec!["ml_dtypes".to_string(), "numpy>=1.26".into()];
        assert_eq!(requirement_set(&declared), ["ml_dtypes", "numpy>=1.26"]);
        assert_eq!(requirement_set(&["scipy".to_string()]), ["numpy", "scipy"]);
        assert_eq!(requirement_set(&["NumPy==2.0".to_string()]), ["NumPy==2.0"]);
        assert_eq!(
            shell_words(&["numpy".into(), "a>=1".into()]),
            "numpy 'a>=1'"
        );
    }

    #[test]
    fn provision_values() {
        assert_eq!("auto".parse::<Provision>(), Ok(Provision::Auto));
        assert_eq!("never".parse::<Provision>(), Ok(Provision::Never));
        assert!("sometimes".parse::<Provision>().is_err());
    }

    /// The real probe on python3: pip is there (and new enough), a pip
    /// older than 1 is not, an unknown distribution is not.
    #[test]
    fn probe_checks_versions_against_specifiers() {
        let reqs: Vec<String> = [
            "pip>=1",
            "pip<1",
            "no-such-dist-for-scenes",
            "pip; python_version < '3'",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let p = match probe(Path::new("python3"), &reqs) {
            Ok(p) => p,
            Err(why @ ProbeError::Start { .. }) => {
                eprintln!("SKIP: no python3: {why}");
                return;
            }
            Err(why) => panic!("{why}"),
        };
        assert!(!p.resolved.is_empty() && !p.version.is_empty(), "{p:?}");
        assert!(!p.missing.iter().any(|m| m == "pip>=1"), "{p:?}");
        assert!(
            p.missing.iter().any(|m| m.starts_with("pip<1 (has ")),
            "{p:?}"
        );
        assert!(
            p.missing.iter().any(|m| m == "no-such-dist-for-scenes"),
            "{p:?}"
        );
        // A marker that does not apply is no requirement.
        assert!(
            !p.missing.iter().any(|m| m.contains("python_version")),
            "{p:?}"
        );
    }

    fn fake_probe() -> Probe {
        Probe {
            executable: "/nonexistent/python3".into(),
            resolved: "/nonexistent/python3.11".into(),
            version: "3.11.7".into(),
            implementation: "cpython".into(),
            missing: vec!["numpy".into()],
        }
    }

    #[test]
    fn keys_follow_interpreter_and_requirements() {
        let p = fake_probe();
        let reqs = requirement_set(&[]);
        let k = env_key(&p, &reqs);
        assert_eq!(k.len(), 32);
        assert_eq!(k, env_key(&p, &reqs));
        let mut other = p.clone();
        other.version = "3.12.1".into();
        assert_ne!(k, env_key(&other, &reqs));
        assert_ne!(k, env_key(&p, &requirement_set(&["scipy".into()])));
    }

    #[test]
    fn a_failed_build_leaves_nothing_and_prune_removes_half_built_envs() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = EnvCache::new(tmp.path().join("python"));
        let p = fake_probe();
        let reqs = requirement_set(&[]);
        let mut progressed = false;
        let err = cache
            .ensure(
                &p,
                &reqs,
                &Installer { uv: None },
                &Cancel::default(),
                |_, _| progressed = true,
            )
            .unwrap_err();
        assert!(progressed);
        assert!(
            err.to_string().contains("/nonexistent/python3 -m venv"),
            "{err}"
        );
        let left: Vec<_> = std::fs::read_dir(cache.root().join("tmp"))
            .unwrap()
            .collect();
        assert!(left.is_empty(), "{left:?}");
        assert!(cache.list().unwrap().is_empty());
        // A directory without its marker is half-built: listed as such,
        // never used, pruned.
        let key = env_key(&p, &reqs);
        std::fs::create_dir_all(cache.root().join(&key).join("bin")).unwrap();
        let listed = cache.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].env.is_none());
        assert!(cache.complete(&key).is_err());
        let r = cache.prune(Duration::from_secs(86400)).unwrap();
        assert_eq!((r.removed, r.leftovers, r.kept), (0, 1, 0));
        assert!(cache.list().unwrap().is_empty());

        // A complete environment: reused without a build, kept while
        // used, pruned once unused for longer than the max age.
        let dir = cache.root().join(&key);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::os::unix::fs::symlink("/bin/true", dir.join("bin/python")).unwrap();
        std::fs::write(dir.join(LOCK_FILE), "numpy==2.1.3\n").unwrap();
        let marker = Marker {
            schema: SCHEMA,
            key: key.clone(),
            base: p.executable.clone(),
            version: p.version.clone(),
            requirements: reqs.clone(),
            installer: "pip".into(),
            seconds: 1.0,
            built: "1".into(),
        };
        files::write(&dir).unwrap();
        std::fs::write(dir.join(MARKER), serde_json::to_vec(&marker).unwrap()).unwrap();
        let env = cache
            .ensure(
                &p,
                &reqs,
                &Installer { uv: None },
                &Cancel::default(),
                |_, _| panic!("no build"),
            )
            .unwrap();
        assert_eq!(env.python, dir.join("bin/python"));
        assert_eq!(env.pinned(), "numpy==2.1.3");
        let day = Duration::from_secs(86400);
        let r = cache.prune(day).unwrap();
        assert_eq!((r.removed, r.kept), (0, 1));
        std::fs::File::options()
            .write(true)
            .open(dir.join(MARKER))
            .unwrap()
            .set_modified(SystemTime::now() - 2 * day)
            .unwrap();
        std::fs::File::open(&dir)
            .unwrap()
            .set_modified(SystemTime::now() - 2 * day)
            .unwrap();
        let r = cache.prune(day).unwrap();
        assert_eq!((r.removed, r.kept), (1, 0), "{r:?}");
        assert!(r.freed_bytes > 0);
        assert!(!dir.exists());
        assert_eq!(cache.clear().unwrap(), 0);
        assert!(!cache.root().exists());
    }

    /// A complete stand-in environment of `key` under `cache` (its
    /// `bin/python` a link to /bin/true), as a build leaves it.
    fn complete_env(cache: &EnvCache, p: &Probe, reqs: &[String]) -> PathBuf {
        let key = env_key(p, reqs);
        let dir = cache.root().join(&key);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("lib/numpy")).unwrap();
        std::fs::write(dir.join("lib/numpy/__init__.py"), "import sys\n").unwrap();
        std::os::unix::fs::symlink("/bin/true", dir.join("bin/python")).unwrap();
        std::fs::write(dir.join(LOCK_FILE), "numpy==2.1.3\n").unwrap();
        files::write(&dir).unwrap();
        let marker = Marker {
            schema: SCHEMA,
            key,
            base: p.executable.clone(),
            version: p.version.clone(),
            requirements: reqs.to_vec(),
            installer: "pip".into(),
            seconds: 1.0,
            built: build_id(),
        };
        std::fs::write(dir.join(MARKER), serde_json::to_vec(&marker).unwrap()).unwrap();
        dir
    }

    /// A package file removed from a complete environment: the next
    /// `ensure` does not hand it out, tells the builder why (naming the
    /// file) and replaces it (here the build itself fails, the interpreter
    /// being fake: the damaged directory is gone all the same).
    #[test]
    fn a_damaged_environment_is_rebuilt_naming_the_damage() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = EnvCache::new(tmp.path().join("python"));
        let p = fake_probe();
        let reqs = requirement_set(&[]);
        let dir = complete_env(&cache, &p, &reqs);
        let installer = Installer { uv: None };
        let env = cache
            .ensure(&p, &reqs, &installer, &Cancel::default(), |_, _| {
                panic!("no build")
            })
            .unwrap();
        assert_eq!(env.dir, dir);
        std::fs::remove_file(dir.join("lib/numpy/__init__.py")).unwrap();
        let mut why = None;
        let err = cache
            .ensure(&p, &reqs, &installer, &Cancel::default(), |d, damage| {
                assert_eq!(d, dir);
                why = damage.map(ToString::to_string);
            })
            .unwrap_err();
        assert_eq!(why.as_deref(), Some("`lib/numpy/__init__.py` is missing"));
        assert!(matches!(err, ProvisionError::Command { .. }), "{err}");
        assert!(!dir.exists());

        // An environment without the file list (made before it existed) is
        // rebuilt too, once, saying so.
        let dir = complete_env(&cache, &p, &reqs);
        std::fs::remove_file(dir.join(FILES)).unwrap();
        let mut why = None;
        let _ = cache.ensure(&p, &reqs, &installer, &Cancel::default(), |_, damage| {
            why = damage.map(ToString::to_string);
        });
        assert!(
            why.as_deref()
                .is_some_and(|w| w.contains("has no scene-env.files")),
            "{why:?}"
        );
    }

    /// `repair` of an environment whose files are as installed changes
    /// nothing (the interpreter's failure is not the environment's); of one
    /// whose file changed in place, same size, it rebuilds; of one another
    /// process rebuilt meanwhile, it returns that one.
    #[test]
    fn repair_rebuilds_only_an_environment_whose_contents_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = EnvCache::new(tmp.path().join("python"));
        let p = fake_probe();
        let reqs = requirement_set(&[]);
        let installer = Installer { uv: None };
        let dir = complete_env(&cache, &p, &reqs);
        let env = cache
            .ensure(&p, &reqs, &installer, &Cancel::default(), |_, _| {
                panic!("no build")
            })
            .unwrap();
        let no_build = |_: &Path, _: Option<&EnvDamage>| panic!("no build");
        let same = cache
            .repair(&p, &reqs, &installer, &Cancel::default(), &env, no_build)
            .unwrap();
        assert_eq!(same, None);
        let mut other = env.clone();
        other.built = "an older build".into();
        let newer = cache
            .repair(&p, &reqs, &installer, &Cancel::default(), &other, no_build)
            .unwrap();
        assert_eq!(newer, Some(env.clone()));
        std::fs::write(dir.join("lib/numpy/__init__.py"), "import sy!\n").unwrap();
        let mut why = None;
        let _ = cache.repair(
            &p,
            &reqs,
            &installer,
            &Cancel::default(),
            &env,
            |_, damage| {
                why = damage.map(ToString::to_string);
            },
        );
        assert_eq!(
            why.as_deref(),
            Some("`lib/numpy/__init__.py` has other contents than when it was installed")
        );
        assert!(!dir.exists());
    }

    /// A build of a cancelled run ends `Interrupted` (not as a failed
    /// command), and the build directory a killed builder left for the key
    /// (a second Ctrl-C exits at once) is removed by the next builder.
    #[test]
    fn an_interrupted_build_is_no_failure_and_killed_builds_are_swept() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = EnvCache::new(tmp.path().join("python"));
        let p = fake_probe();
        let reqs = requirement_set(&[]);
        let key = env_key(&p, &reqs);
        let killed = cache.root().join("tmp").join(format!("{key}-killed"));
        std::fs::create_dir_all(killed.join("env/bin")).unwrap();
        let other_key = cache.root().join("tmp").join("0123-other");
        std::fs::create_dir_all(&other_key).unwrap();
        let cancel = Cancel::default();
        cancel.cancel(scene_util::cancel::SIGINT);
        let err = cache
            .ensure(&p, &reqs, &Installer { uv: None }, &cancel, |_, _| {})
            .unwrap_err();
        assert!(matches!(err, ProvisionError::Interrupted), "{err}");
        assert!(!killed.exists());
        assert!(
            other_key.exists(),
            "another key's build is not ours to remove"
        );
        assert!(cache.list().unwrap().is_empty());
    }
}
