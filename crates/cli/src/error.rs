//! Every way a command ends other than success, and its exit status: the
//! one error type of the CLI. Commands return `Result<(), CliError>`;
//! [`crate::main`] alone prints the error and exits with
//! [`CliError::exit_code`] (as cargo-nextest maps its `ExpectedError` in
//! one place).
//!
//! Exit statuses (the README and every `--help` list them): 0 success;
//! 1 something failed; 2 usage error (bad flag, bad value, bad environment
//! variable, an unusable output path or bundle); 3 setup error
//! ([`EXIT_SETUP`]); 4 nothing selected ([`EXIT_NO_TESTS`]); 130 / 143
//! interrupted by SIGINT / SIGTERM.

use std::path::PathBuf;

use scene_device::DeviceError;
use scene_harness::SceneError;
use scene_harness::SetupError;
use scene_harness::bundle::BundleError;
use scene_harness::platform::PlatformError;
use scene_harness::replay::ReplayError;
use scene_kernels::BuildSetupError;
use scene_kernels::cache::{CacheError, RemoteError};

use crate::paths::PathError;

/// Exit status when the selection matches no case and `--no-tests` (or
/// `SCENE_NO_TESTS`) is `fail`, as in cargo-nextest.
pub const EXIT_NO_TESTS: u8 = 4;

/// Exit status of a setup error: something the run needs is missing or
/// unusable before any case runs (the compiler or linker, the runtime
/// library, the Python interpreter, the card lock directory, the cache
/// directory). Distinct from a failed case (1), a usage error (2) and an
/// empty selection ([`EXIT_NO_TESTS`]).
pub const EXIT_SETUP: u8 = 3;

/// An error whose type belongs to a crate below that is still being
/// typed (a `String` today), kept as an error value, not as text.
pub type Source = Box<dyn std::error::Error + Send + Sync>;

/// A bad command line or environment: exit 2, before any work.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error("{name}: the value is not valid UTF-8")]
    NotUtf8 { name: String },
    #[error("{name}: {source}")]
    Variable { name: String, source: Source },
    #[error("SCENE_CACHE_REMOTE: {0}")]
    RemoteUrl(RemoteError),
    #[error(
        "--pto-isa-root / SCENE_PTO_ISA_ROOT: `{}` is not a PTO-ISA checkout (no include/pto in it)",
        .0.display()
    )]
    PtoIsaRoot(std::path::PathBuf),
    #[error("--simpler-root / SCENE_SIMPLER_ROOT: {0}")]
    SimplerRoot(scene_harness::simpler::NotASimplerCheckout),
    #[error("{0}")]
    Platform(#[from] PlatformError),
    #[error("{0}")]
    Devices(#[from] DeviceError),
    #[error(
        "cannot find this executable to start device workers: {0} (--in-process runs without them)"
    )]
    NoExecutable(std::io::Error),
    #[error("{0}")]
    Path(#[from] PathError),
    #[error("--report-json - and --junit -: only one report can go to stdout")]
    TwoReportsOnStdout,
    #[error("{0}: only one output can go to stdout")]
    OutputsOnStdout(String),
    #[error(
        "--github-summary: GITHUB_STEP_SUMMARY is not set (GitHub Actions sets it in every step)"
    )]
    NoStepSummary,
    #[error("--from: {0}")]
    From(BundleError),
    #[error("--out: {0}")]
    Out(BundleError),
    #[error(
        "{}: no such directory (give a case's directory under the --dump-args root, e.g. target/scene-args/<scene>/<case>)",
        .0.display()
    )]
    NoDumpDir(PathBuf),
}

/// Why a command did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Clap's own error, or `--help` / `--version` (clap prints them).
    #[error("{0}")]
    Args(#[from] clap::Error),
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// The engine could not be set up (a tool, the runtime library, the
    /// card lock directory).
    #[error("{}", crate::setup::message(.0))]
    Setup(#[from] SetupError),
    #[error("{}", crate::setup::toolchain_message(.0))]
    Toolchain(#[from] BuildSetupError),
    /// No usable Python for the Python goldens.
    #[error("{0}")]
    Python(Source),
    /// The kernel cache directory could not be read or changed.
    #[error("{0}")]
    Cache(#[from] CacheError),
    /// The selection matched no case under `--no-tests=fail`.
    #[error("{what}; --no-tests=warn or =pass allows this")]
    NoTests { what: String },
    /// The scenes directory could not be read.
    #[error("{0}")]
    Scenes(#[from] SceneError),
    /// A path given for test files names none.
    #[error("{0}")]
    TestFiles(scene_harness::testfiles::FindError),
    /// A tier beside the kernel cache (the golden cache, the Python
    /// environments) could not be read or changed.
    #[error("{0}")]
    CacheTier(Source),
    /// `scene run` could not write `--report-json` / `--junit`.
    #[error("writing {}: {source}", path.display())]
    RunReport { path: PathBuf, source: Source },
    /// `scene report` could not read one of its reports.
    #[error("report {}: {source}", path.display())]
    ReadReport { path: PathBuf, source: Source },
    /// `scene report` could not write an output.
    #[error("writing {}: {source}", path.display())]
    WriteOutput {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--github-summary: appending to {} (GITHUB_STEP_SUMMARY): {source}", path.display())]
    AppendSummary {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing the bundle: {0}")]
    WriteBundle(BundleError),
    /// `scene replay` could not run the task.
    #[error("{0}")]
    Replay(#[from] ReplayError),
    /// Something selected failed; the command said what already.
    #[error("failed")]
    Failed,
    /// Stopped by a signal; the command printed its partial summary.
    #[error("interrupted by signal {0}")]
    Interrupted(i32),
}

impl CliError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Args(e) => match e.use_stderr() {
                true => 2,
                false => 0,
            },
            CliError::Usage(_)
            | CliError::ReadReport { .. }
            | CliError::WriteOutput { .. }
            | CliError::AppendSummary { .. }
            | CliError::WriteBundle(_)
            | CliError::TestFiles(_)
            | CliError::Replay(_) => 2,
            CliError::Setup(_)
            | CliError::Toolchain(_)
            | CliError::Python(_)
            | CliError::Cache(_) => EXIT_SETUP,
            CliError::NoTests { .. } => EXIT_NO_TESTS,
            CliError::Scenes(_)
            | CliError::CacheTier(_)
            | CliError::RunReport { .. }
            | CliError::Failed => 1,
            CliError::Interrupted(signal) => scene_util::cancel::exit_status_for(*signal),
        }
    }

    /// Prints the error as the user sees it: clap's text for clap's
    /// errors, nothing for outcomes the command reported itself, else one
    /// `error:` line.
    pub fn print(&self) {
        match self {
            CliError::Args(e) => {
                let _ = e.print();
            }
            CliError::Failed | CliError::Interrupted(_) => {}
            other => eprintln!("error: {other}"),
        }
    }

    /// `Ok` when nothing failed, else [`CliError::Failed`].
    pub(crate) fn unless(failed: bool) -> Result<(), CliError> {
        match failed {
            true => Err(CliError::Failed),
            false => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_error_has_its_documented_status() {
        let usage = CliError::Usage(UsageError::TwoReportsOnStdout);
        assert_eq!(usage.exit_code(), 2);
        assert_eq!(
            usage.to_string(),
            "--report-json - and --junit -: only one report can go to stdout"
        );
        assert_eq!(CliError::Failed.exit_code(), 1);
        assert_eq!(CliError::Python("no numpy".into()).exit_code(), 3);
        let none = CliError::NoTests {
            what: "no cases selected on a2a3sim".into(),
        };
        assert_eq!(none.exit_code(), 4);
        assert_eq!(
            none.to_string(),
            "no cases selected on a2a3sim; --no-tests=warn or =pass allows this"
        );
        assert_eq!(
            CliError::Interrupted(scene_util::cancel::SIGINT).exit_code(),
            130
        );
        assert_eq!(
            CliError::Interrupted(scene_util::cancel::SIGTERM).exit_code(),
            143
        );
        let e = UsageError::Variable {
            name: "SCENE_NO_TESTS".into(),
            source: crate::parse::ValueError::NotNoTests("maybe".into()).into(),
        };
        assert_eq!(
            e.to_string(),
            "SCENE_NO_TESTS: `maybe` is not one of fail, warn, pass"
        );
    }
}
