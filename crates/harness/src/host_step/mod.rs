//! C host steps of level-3 scenes (`host = { c = "host.c", function = "F" }`,
//! [`crate::scene::steps`]): built by the kernel builder (a
//! `scene_kernels::HostUnit`, in the compile stage with the callables, so
//! through the kernel cache like every compile) into one executable per
//! (scene, source, function) and run, per step of a case, as a child
//! process (started through the run's `Cancel`), so a host function that
//! crashes fails its case, never the harness.
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
use std::sync::{Arc, Mutex};

use scene_golden::Tensor;
use scene_kernels::{Builder, HostUnit};

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
pub type BuildKey = (PathBuf, PathBuf, String);

/// A host function's build key with what building it gave: the
/// executable's bytes, or why there are none.
pub type BuiltHost = (BuildKey, Result<Arc<Vec<u8>>, HostStepError>);

/// The [`BuildKey`] of `function` in `source` of `scene`.
pub fn build_key(scene: &Scene, source: &Path, function: &str) -> BuildKey {
    (scene.dir.clone(), source.to_path_buf(), function.to_owned())
}

/// The host program of a C host step: `source` (relative to the scene
/// directory, as written) linked with [`DRIVER`], which calls `function`;
/// a unit of the kernel builder like every compile (`-O2 -std=gnu11`, the
/// platform's `-D` flags, `-I` the ABI headers), so the kernel cache keys,
/// shares and serves it.
pub fn host_unit(config: &RunConfig, scene: &Scene, source: &Path, function: &str) -> HostUnit {
    let file = source.file_name().unwrap_or(source.as_os_str());
    let abi = &config.abi_include_dir;
    HostUnit {
        label: scene.name.clone(),
        name: format!("{}:{function}", file.to_string_lossy()),
        source: scene.relative_to(&config.root, source),
        driver: Arc::from(DRIVER),
        include_dirs: vec![crate::config::root_relative(&config.root, abi)],
        defines: vec![("SCENE_HOST_ENTRY".to_owned(), function.to_owned())],
    }
}

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

/// The run's host functions, each obtained once: built in the compile
/// stage ([`HostBuilds::add_built`]), installed from a bundle slot
/// ([`HostBuilds::install`]), or else built on first use. Every build is a
/// unit of the kernel builder (`scene_kernels::HostUnit`): keyed, cached
/// (local and remote tiers), locked and budgeted like the callables' units;
/// this only writes the executables it is given where the steps run them.
#[derive(Debug, Default)]
pub struct HostBuilds {
    dir: Mutex<Option<tempfile::TempDir>>,
    built: Mutex<HashMap<BuildKey, Result<PathBuf, HostStepError>>>,
}

impl HostBuilds {
    /// The executable of `function` in `source` (relative to the scene
    /// directory): the one the compile stage built or a bundle slot
    /// installed, else built now by `builder` (from its cache when it
    /// holds it).
    pub fn executable(
        &self,
        builder: &Builder,
        config: &RunConfig,
        scene: &Scene,
        source: &Path,
        function: &str,
    ) -> Result<PathBuf, HostStepError> {
        self.obtain(build_key(scene, source, function), |n| {
            let unit = host_unit(config, scene, source, function);
            let mut out = builder.build_all_with_hosts(&[], std::slice::from_ref(&unit));
            match out.hosts.pop() {
                Some(Ok(bytes)) => self.write(n, function, &bytes),
                Some(Err(e)) => Err(HostStepError::Build(e.to_string())),
                None => Err(HostStepError::Build("the builder returned nothing".into())),
            }
        })
    }

    /// Takes what the compile stage built: each executable is written
    /// where its steps run it, each failure kept as the answer for its
    /// steps. What is already there (installed or built) stays.
    pub fn add_built(&self, hosts: &[BuiltHost]) {
        for (key, result) in hosts {
            // The answer is kept for the steps; nothing to return here.
            let _ = self.obtain(key.clone(), |n| match result {
                Ok(bytes) => self.write(n, &key.2, bytes),
                Err(e) => Err(e.clone()),
            });
        }
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
        self.obtain(build_key(scene, source, function), |n| {
            self.write(n, function, bytes)
        })
    }

    /// The answer for `key`: the one given first (built, installed or
    /// failed), else `make`'s, given the number of answers so far (which
    /// names its executable) and kept for every later caller.
    fn obtain(
        &self,
        key: BuildKey,
        make: impl FnOnce(usize) -> Result<PathBuf, HostStepError>,
    ) -> Result<PathBuf, HostStepError> {
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(done) = built.get(&key) {
            return done.clone();
        }
        let result = make(built.len());
        built.insert(key, result.clone());
        result
    }

    /// Writes the `n`th executable of the run (for `function`).
    fn write(&self, n: usize, function: &str, bytes: &[u8]) -> Result<PathBuf, HostStepError> {
        let exe = self.dir()?.join(format!("host{n}-{function}"));
        write_executable(&exe, bytes).map(|()| exe)
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
}

/// Writes `bytes` as an executable file (mode 0755) that starts even while
/// other threads spawn processes (no `ETXTBSY`: see `scene_util::exe`).
fn write_executable(path: &Path, bytes: &[u8]) -> Result<(), HostStepError> {
    scene_util::write_executable(path, bytes)
        .map_err(|e| HostStepError::Build(format!("{}: {e}", path.display())))
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
