//! The `scene` command line and the `cargo test -p scenes` target: the
//! entry points of the harness.
//!
//! This crate is the front end of `scene-harness`, as `cargo-nextest` is of
//! `nextest-runner`: it parses flags (clap), reads the environment once
//! ([`env`]), resolves both into one `RunConfig`, calls the engine, and
//! prints (progress bars, case lines, summaries). No stage logic lives
//! here. The `scene` binary (`src/main.rs`) and the scenes package's test
//! target are three-line `main`s that pass the scenes' [`Layout`] and
//! golden registry to [`main`] and [`testing::main`].
//!
//! Exit codes: 0 = everything selected passed, 1 = something failed,
//! 2 = usage error (bad flag, bad value, bad environment variable),
//! 3 = setup error (a tool, library or directory the run needs is missing
//! or unusable: [`EXIT_SETUP`]), 4 = the selection matched no case
//! (`--no-tests=fail`, the default; the same code as cargo-nextest's),
//! 130 / 143 = `run`, `compile` or `precompile` interrupted by SIGINT /
//! SIGTERM (see [`signals`]: children stopped, temp dirs removed, card
//! locks released, a partial summary).

mod args;
mod cache_cmd;
mod compile_cmd;
pub mod embedded_runtime;
pub mod env;
mod html_report;
pub mod locate;
mod output;
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

use crate::args::{Cli, ColorChoice, Command};
use crate::env::Environment;

/// Exit status when the selection matches no case and `--no-tests` (or
/// `SCENE_NO_TESTS`) is `fail`, as in cargo-nextest.
pub const EXIT_NO_TESTS: u8 = 4;

/// Exit status of a setup error: something the run needs is missing or
/// unusable before any case runs (the compiler or linker, the runtime
/// library, the Python interpreter, the card lock directory, the cache
/// directory). Distinct from a failed case (1), a usage error (2) and an
/// empty selection ([`EXIT_NO_TESTS`]).
pub const EXIT_SETUP: u8 = 3;

/// The exit statuses, as every `--help` ends with them (and the README says).
pub(crate) const EXIT_STATUS_HELP: &str = "Exit status: 0 all passed, 1 any failed, 2 usage error, \
3 setup error (compiler, linker, runtime library or Python not found; lock or cache directory \
unusable), 4 nothing selected, 130 interrupted by SIGINT (Ctrl-C), 143 interrupted by SIGTERM.";

/// `-q`, `-v` and `--color` (with `NO_COLOR`), global to every subcommand.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Verbosity {
    pub(crate) quiet: bool,
    pub(crate) verbose: bool,
    /// `Some(on)` when decided (`--color always|never`, `NO_COLOR`);
    /// `None` = colour when the stream written to is a terminal.
    pub(crate) color: Option<bool>,
}

impl Verbosity {
    fn new(cli: &Cli, env: &Environment) -> Self {
        let color = match cli.color {
            Some(ColorChoice::Always) => Some(true),
            Some(ColorChoice::Never) => Some(false),
            Some(ColorChoice::Auto) | None => env::no_color(env).then_some(false),
        };
        Self {
            quiet: cli.quiet,
            verbose: cli.verbose,
            color,
        }
    }
}

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

pub fn main(layout: Layout, registry: GoldenRegistry) -> ExitCode {
    if let Some(code) = serve_device_worker() {
        return code;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    // `--cache-remote` wins over `SCENE_CACHE_REMOTE` by standing in for it.
    let env = Environment::capture().with_value("SCENE_CACHE_REMOTE", cli.cache_remote.as_deref());
    let explicit_root = cli
        .root
        .clone()
        .filter(|d| !d.as_os_str().is_empty())
        .or_else(|| env.path("SCENE_ROOT"));
    let cwd = std::env::current_dir().ok();
    let layout = locate::locate(
        layout,
        explicit_root,
        cwd.as_deref(),
        locate::exe_dir().as_deref(),
    );
    let layout = Layout {
        scenes_dir: cli
            .scenes_dir
            .clone()
            .filter(|d| !d.as_os_str().is_empty())
            .or_else(|| env.path("SCENE_SCENES_DIR"))
            .unwrap_or(layout.scenes_dir),
        ..layout
    };
    let cache_dir = cli.cache_dir.as_deref();
    let verbosity = Verbosity::new(&cli, &env);
    // SIGINT/SIGTERM cancel the commands that start long work; the engine
    // observes the token, so they unwind (and clean up) before exiting.
    let cancel = scene_util::Cancel::new();
    if matches!(
        cli.command,
        Command::Run(_) | Command::Compile(_) | Command::Precompile(_)
    ) {
        signals::install(&cancel);
    }
    match cli.command {
        Command::Cache(args) => {
            let dir = env::cache_dir(&env, cache_dir, &layout.root);
            if let Err(e) = paths::check_dir("cache dir (--cache-dir, SCENE_CACHE_DIR)", &dir) {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
            let remote = match env::cache_remote(&env) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            cache_cmd::run(&dir, remote.as_ref(), &args)
        }
        Command::List(args) => run_cmd::list(&layout, &env, &registry, &args),
        Command::Run(args) => run_cmd::run(
            &layout, &env, cache_dir, registry, verbosity, &args, &cancel,
        ),
        Command::Compile(args) => {
            compile_cmd::run(&layout, &env, cache_dir, verbosity, &args, &cancel)
        }
        Command::Precompile(args) => precompile_cmd::run(
            &layout, &env, cache_dir, registry, verbosity, &args, &cancel,
        ),
        Command::Report(args) => report_cmd::run(&env, &args),
        Command::Replay(args) => replay_cmd::run(&layout, &env, cache_dir, &args),
    }
}
