//! The `scene` command line and the `cargo test -p scenes` target: the
//! entry points of the harness.
//!
//! This crate is the front end of `scene-harness`, as `cargo-nextest` is of
//! `nextest-runner`: it parses flags (clap, `args`), reads the environment
//! once ([`mod@env`]), resolves both (`lowargs` -> `hiargs`, as ripgrep does)
//! into one immutable configuration that produces the engine's
//! `RunConfig`, calls the engine, and prints (progress bars, case lines,
//! summaries). Every error ends as one `CliError` (`error`), printed and
//! turned into the exit status in one place ([`main`]). No stage logic
//! lives here. The `scene` binary (`src/main.rs`) and the scenes package's test
//! target are three-line `main`s that pass the scenes' [`Layout`] and
//! golden registry to [`main`] and [`testing::main`].
//!
//! Exit codes: 0 = everything selected passed, 1 = something failed,
//! 2 = usage error (bad flag, bad value, bad environment variable),
//! 3 = setup error (a tool, library or directory the run needs is missing
//! or unusable: [`EXIT_SETUP`]), 4 = the selection matched no case
//! (`--no-tests=fail`, the default; the same code as cargo-nextest's),
//! 130 / 143 = `run`, `compile` or `precompile` interrupted by SIGINT /
//! SIGTERM (see `signals`: children stopped, temp dirs removed, card
//! locks released, a partial summary).

mod args;
mod cache_cmd;
mod compile_cmd;
pub mod embedded_runtime;
pub mod env;
pub mod error;
mod hiargs;
mod html_report;
pub mod locate;
mod lowargs;
mod output;
mod parse;
mod paths;
mod precompile_cmd;
mod progress;
mod prologue;
mod replay_cmd;
mod report_cmd;
mod run_cmd;
mod setup;
mod signals;
pub mod testing;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use scene_harness::GoldenRegistry;

use crate::args::Cli;
use crate::env::Environment;
pub use crate::error::{CliError, EXIT_NO_TESTS, EXIT_SETUP};
use crate::hiargs::{HiArgs, HiCommand};
use crate::lowargs::LowArgs;

/// The exit statuses, as every `--help` ends with them (and the README says).
pub(crate) const EXIT_STATUS_HELP: &str = "Exit status: 0 all passed, 1 any failed, 2 usage error, \
3 setup error (compiler, linker, runtime library or Python not found; lock or cache directory \
unusable), 4 nothing selected, 130 interrupted by SIGINT (Ctrl-C), 143 interrupted by SIGTERM.";

/// Where the workspace and its scenes are. The binary passes the checkout
/// it was built in; [`locate`] finds the one to use at run time.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Workspace root (compilers run here).
    pub root: PathBuf,
    /// Directory holding `<scene>/scene.toml`.
    pub scenes_dir: PathBuf,
}

impl Layout {
    /// The layout of a checkout whose scenes are in `scenes_dir`
    /// (`<root>/tests/scenes`): the root is two levels up.
    pub fn for_scenes_dir(scenes_dir: PathBuf) -> Self {
        let root = scenes_dir
            .parent()
            .and_then(std::path::Path::parent)
            .map(PathBuf::from)
            .unwrap_or_else(|| scenes_dir.clone());
        Layout { root, scenes_dir }
    }
}

/// Runs the CLI with the process arguments and environment.
/// When this process was started as a device worker (the supervising
/// harness set [`scene_device::worker::WORKER_ENV`] to a job directory),
/// serves that job and returns the exit code; else `None`. Every entry
/// point calls this first, so the running executable can be its own worker.
pub fn serve_device_worker() -> Option<ExitCode> {
    let dir = std::env::var_os(scene_device::worker::WORKER_ENV).filter(|d| !d.is_empty())?;
    let code = scene_device::worker::serve(std::path::Path::new(&dir));
    Some(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// The `scene` binary: runs the command line with the process arguments
/// and environment, and is the one place that prints a [`CliError`] and
/// turns it into the exit status.
pub fn main(layout: Layout, registry: GoldenRegistry) -> ExitCode {
    if let Some(code) = serve_device_worker() {
        return code;
    }
    match run(layout, registry) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            e.print();
            ExitCode::from(e.exit_code())
        }
    }
}

/// Parses, resolves and runs the command.
fn run(built: Layout, registry: GoldenRegistry) -> Result<(), CliError> {
    let cli = Cli::try_parse()?;
    // SIGINT/SIGTERM cancel the commands that start long work; the engine
    // observes the token, so they unwind (and clean up) before exiting.
    let cancel = scene_util::Cancel::new();
    if matches!(
        cli.command,
        args::Command::Run(_) | args::Command::Compile(_) | args::Command::Precompile(_)
    ) {
        signals::install(&cancel);
    }
    let low = LowArgs::new(
        cli,
        Environment::capture(),
        std::env::current_dir().ok(),
        locate::exe_dir(),
    );
    let HiArgs {
        layout,
        verbosity,
        command,
    } = HiArgs::resolve(low, built, &cancel)?;
    match command {
        HiCommand::Cache(setup) => cache_cmd::run(&setup),
        HiCommand::List(setup) => run_cmd::list(&layout, &registry, &setup),
        HiCommand::Run(setup) => run_cmd::run(&layout, registry, verbosity, &setup),
        HiCommand::Compile(setup) => compile_cmd::run(&layout, verbosity, &setup),
        HiCommand::Precompile(setup) => precompile_cmd::run(&layout, registry, verbosity, &setup),
        HiCommand::Report(setup) => report_cmd::run(&setup),
        HiCommand::Replay(setup) => replay_cmd::run(&setup),
    }
}
