//! C host steps of level-3 scenes (`host = { c = "host.c", function = "F" }`,
//! [`crate::scene::steps`]): built with the host toolchain's C compiler
//! into one executable per (scene, source, function) and run, per step of
//! a case, as a child process (started through the run's `Cancel`), so a
//! host function that crashes fails its case, never the harness.
//!
//! The executable is the scene's source linked with `driver.c` (embedded
//! here), which reads the step's tensors from files the harness writes,
//! calls the function with `SceneHostArgs` (`scene_host.h`, beside the
//! other ABI headers) and writes every tensor back. The harness takes back
//! the tensors the step writes and checks that the ones it only reads are
//! unchanged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use scene_golden::Tensor;

use crate::config::RunConfig;
use crate::scene::Scene;

/// The driver linked with every C host function.
pub const DRIVER: &str = include_str!("driver.c");

/// Why a C host step could not be built or run.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HostStepError {
    #[error("cannot build it: {0}")]
    Build(String),
    #[error("{0}")]
    Failed(String),
    #[error("it crashed ({0})")]
    Crashed(String),
    #[error("it changed `{0}`, which the step only reads (name it in `writes`)")]
    ChangedRead(String),
    #[error("exchange files: {0}")]
    Exchange(String),
    #[error("it did not return within {secs} s (the case timeout); it was killed")]
    Timeout { secs: f64 },
}

/// A host function's build: the scene directory, the source as written,
/// the function.
type BuildKey = (PathBuf, PathBuf, String);

/// A host step of a case whose function could not be built or installed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("scene `{scene}`, steps[{step}], {kind}: {error}")]
pub struct StepBuildError {
    pub scene: String,
    pub step: usize,
    /// The step as [`crate::scene::steps::StepKind`] displays it.
    pub kind: String,
    pub error: HostStepError,
}

/// The run's built host functions, each built once, on first use.
#[derive(Debug, Default)]
pub struct HostBuilds {
    dir: Mutex<Option<tempfile::TempDir>>,
    built: Mutex<HashMap<BuildKey, Result<PathBuf, HostStepError>>>,
}

impl HostBuilds {
    /// The executable of `function` in `source` (relative to the scene
    /// directory), building it the first time it is asked for.
    pub fn executable(
        &self,
        config: &RunConfig,
        scene: &Scene,
        source: &Path,
        function: &str,
    ) -> Result<PathBuf, HostStepError> {
        let key = (scene.dir.clone(), source.to_path_buf(), function.to_owned());
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(done) = built.get(&key) {
            return done.clone();
        }
        let result = self.build(config, scene, source, function, built.len());
        built.insert(key, result.clone());
        result
    }

    /// Installs a host function built elsewhere (a bundle slot's, built
    /// by pass 1): later [`HostBuilds::executable`] calls for it return
    /// it without compiling. The first one installed or built wins.
    pub fn install(
        &self,
        scene: &Scene,
        source: &Path,
        function: &str,
        bytes: &[u8],
    ) -> Result<PathBuf, HostStepError> {
        let key = (scene.dir.clone(), source.to_path_buf(), function.to_owned());
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(done) = built.get(&key) {
            return done.clone();
        }
        let result = self.dir().and_then(|dir| {
            let exe = dir.join(format!("host{}-{function}", built.len()));
            write_executable(&exe, bytes).map(|()| exe)
        });
        built.insert(key, result.clone());
        result
    }

    /// The run's build directory, made on first use.
    fn dir(&self) -> Result<PathBuf, HostStepError> {
        let mut dir = self.dir.lock().unwrap_or_else(|p| p.into_inner());
        if dir.is_none() {
            *dir = Some(
                tempfile::Builder::new()
                    .prefix("scene-host-")
                    .tempdir()
                    .map_err(|e| HostStepError::Build(format!("a build directory: {e}")))?,
            );
        }
        Ok(dir
            .as_ref()
            .map(|d| d.path().to_path_buf())
            .unwrap_or_default())
    }

    fn build(
        &self,
        config: &RunConfig,
        scene: &Scene,
        source: &Path,
        function: &str,
        n: usize,
    ) -> Result<PathBuf, HostStepError> {
        let dir = self.dir()?;
        let driver = dir.join("scene_host_driver.c");
        if !driver.is_file() {
            std::fs::write(&driver, DRIVER)
                .map_err(|e| HostStepError::Build(format!("{}: {e}", driver.display())))?;
        }
        let exe = dir.join(format!("host{n}-{function}"));
        let tc = config.platform.toolchain();
        let compiler = tc
            .resolve(&tc.compiler)
            .unwrap_or_else(|| tc.compiler.clone());
        let mut cmd = Command::new(&compiler);
        cmd.current_dir(&config.root)
            .arg("-O2")
            .arg("-std=gnu11")
            .arg("-I")
            .arg(&config.abi_include_dir)
            .arg(format!("-DSCENE_HOST_ENTRY={function}"));
        // The platform's defines, as the orchestration sees them.
        cmd.args(tc.orch_flags.iter().filter(|f| f.starts_with("-D")));
        cmd.arg(scene.relative_to(&config.root, source))
            .arg(&driver)
            .arg("-o")
            .arg(&exe)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = config
            .cancel
            .spawn(&mut cmd)
            .and_then(|c| c.wait_with_output())
            .map_err(|e| HostStepError::Build(format!("{}: {e}", compiler.display())))?;
        if !out.status.success() {
            return Err(HostStepError::Build(format!(
                "{} failed ({}):\n{}",
                compiler.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim_end()
            )));
        }
        Ok(exe)
    }
}

/// Writes `bytes` as an executable file (mode 0755).
fn write_executable(path: &Path, bytes: &[u8]) -> Result<(), HostStepError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |e: std::io::Error| HostStepError::Build(format!("{}: {e}", path.display()));
    std::fs::write(path, bytes).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).map_err(err)
}

/// One tensor a host step sees: its name, value and whether it writes it.
#[derive(Debug)]
pub struct HostTensor<'a> {
    pub name: &'a str,
    pub tensor: &'a Tensor,
    pub writes: bool,
}

/// Runs `exe` on `tensors`; returns the new value of every written one,
/// in the order given.
pub fn run(
    exe: &Path,
    nranks: usize,
    tensors: &[HostTensor<'_>],
    cancel: &scene_util::Cancel,
    deadline: Option<std::time::Duration>,
) -> Result<Vec<Tensor>, HostStepError> {
    let xerr = |e: std::io::Error| HostStepError::Exchange(e.to_string());
    let dir = tempfile::Builder::new()
        .prefix("scene-host-step-")
        .tempdir()
        .map_err(xerr)?;
    let mut manifest = format!("nranks {nranks}\n");
    let mut paths = Vec::new();
    for (i, t) in tensors.iter().enumerate() {
        let path = dir.path().join(format!("t{i}"));
        std::fs::write(&path, t.tensor.bytes()).map_err(xerr)?;
        let shape: Vec<String> = t.tensor.shape().iter().map(usize::to_string).collect();
        manifest.push_str(&format!(
            "tensor {} {} {} {} {} {} {}\n",
            t.name,
            t.tensor.dtype().name(),
            u8::from(t.writes),
            shape.len(),
            shape.join(" "),
            t.tensor.bytes().len(),
            path.display()
        ));
        paths.push(path);
    }
    // `ndim 0` leaves a double space; the driver's tokenizer skips it.
    let manifest_path = dir.path().join("manifest");
    std::fs::write(&manifest_path, manifest).map_err(xerr)?;
    let mut cmd = Command::new(exe);
    cmd.arg(&manifest_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cancel
        .spawn(&mut cmd)
        .map_err(|e| HostStepError::Failed(format!("cannot start {}: {e}", exe.display())))?;
    let out = wait_within(child, deadline)
        .map_err(|e| HostStepError::Failed(format!("waiting for {}: {e}", exe.display())))?;
    let Some(out) = out else {
        return Err(HostStepError::Timeout {
            secs: deadline.map_or(0.0, |d| d.as_secs_f64()),
        });
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = out.status.signal() {
            return Err(HostStepError::Crashed(format!(
                "{}{}",
                scene_util::cancel::signal_name(sig),
                last_lines(&stderr)
            )));
        }
        let said: Vec<&str> = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("scene-host: "))
            .collect();
        return Err(HostStepError::Failed(if said.is_empty() {
            format!("exited with {}{}", out.status, last_lines(&stderr))
        } else {
            said.join("\n")
        }));
    }
    let mut written = Vec::new();
    for (t, path) in tensors.iter().zip(&paths) {
        let mut out_path = path.clone().into_os_string();
        out_path.push(".out");
        let bytes = std::fs::read(&out_path).map_err(xerr)?;
        if t.writes {
            let new = Tensor::from_bytes(t.tensor.dtype(), t.tensor.shape(), bytes)
                .map_err(|e| HostStepError::Exchange(format!("`{}`: {e}", t.name)))?;
            written.push(new);
        } else if bytes != t.tensor.bytes() {
            return Err(HostStepError::ChangedRead(t.name.to_owned()));
        }
    }
    Ok(written)
}

/// Waits for `child` with its output; past `deadline` its process group
/// is killed and reaped, and the answer is `None`. Its pipes are read
/// meanwhile, so a chatty function never blocks on a full pipe.
fn wait_within(
    mut child: scene_util::cancel::CancelChild,
    deadline: Option<std::time::Duration>,
) -> std::io::Result<Option<std::process::Output>> {
    use std::io::Read;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = drain(
        child
            .child_mut()
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .child_mut()
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let watch = child.exit_watch();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        watch.wait();
        let _ = tx.send(());
    });
    let timed_out = match deadline {
        Some(d) => rx.recv_timeout(d).is_err(),
        None => rx.recv().is_err(),
    };
    if timed_out {
        child.kill_group();
        // The watcher has seen the exit before the child is reaped, so it
        // never waits on a pid that could be reused.
        let _ = rx.recv();
    }
    let status = child.wait()?;
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    Ok((!timed_out).then_some(std::process::Output {
        status,
        stdout,
        stderr,
    }))
}

/// The last few lines of a child's stderr, after a newline (empty if none).
fn last_lines(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.trim_end().lines().collect();
    if lines.is_empty() {
        return String::new();
    }
    let from = lines.len().saturating_sub(5);
    format!("\n{}", lines[from..].join("\n"))
}
