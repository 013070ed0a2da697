//! The low-level half of the configuration: what the user said, and
//! nothing derived. The command line as clap parsed it ([`crate::args`]),
//! the environment as captured ([`Environment`]), and where the process
//! runs from. [`crate::hiargs`] resolves it into the one configuration
//! every command runs with (ripgrep's `LowArgs` -> `HiArgs`).

use std::ffi::OsString;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use scene_device::DeviceList;
use scene_harness::platform::PlatformName;

use crate::args::{Cli, ColorChoice, Command, CompileArgs, PrecompileArgs, ReplayArgs, RunArgs};
use crate::env::Environment;
use crate::parse::NoTests;

/// The command line, the environment and the process's places.
#[derive(Debug)]
pub(crate) struct LowArgs {
    /// `--root`.
    pub(crate) root: Option<PathBuf>,
    /// `--scenes-dir`.
    pub(crate) scenes_dir: Option<PathBuf>,
    /// `--cache-dir`.
    pub(crate) cache_dir: Option<PathBuf>,
    pub(crate) quiet: bool,
    pub(crate) verbose: bool,
    pub(crate) color: Option<ColorChoice>,
    pub(crate) command: Command,
    /// The environment, `--cache-remote` standing in for
    /// `SCENE_CACHE_REMOTE`.
    pub(crate) env: Environment,
    /// The working directory (the root is searched from it up).
    pub(crate) cwd: Option<PathBuf>,
    /// This executable's directory (the root and the headers are searched
    /// from it).
    pub(crate) exe_dir: Option<PathBuf>,
}

impl LowArgs {
    /// Clap's values with the environment `env` captured for them.
    pub(crate) fn new(
        cli: Cli,
        env: Environment,
        cwd: Option<PathBuf>,
        exe_dir: Option<PathBuf>,
    ) -> Self {
        // `--cache-remote` wins over `SCENE_CACHE_REMOTE` by standing in for it.
        let env = env.with_value("SCENE_CACHE_REMOTE", cli.cache_remote.as_deref());
        // Likewise `--pto-isa-root` for `SCENE_PTO_ISA_ROOT`.
        let env = env.with_value("SCENE_PTO_ISA_ROOT", cli.pto_isa_root.as_deref());
        // And `--simpler-root` for `SCENE_SIMPLER_ROOT`.
        let env = env.with_value("SCENE_SIMPLER_ROOT", cli.simpler_root.as_deref());
        LowArgs {
            root: cli.root,
            scenes_dir: cli.scenes_dir,
            cache_dir: cli.cache_dir,
            quiet: cli.quiet,
            verbose: cli.verbose,
            color: cli.color,
            command: cli.command,
            env,
            cwd,
            exe_dir,
        }
    }
}

/// What the command line says about the engine's configuration; `None` =
/// not given.
#[derive(Clone, Debug, Default)]
pub(crate) struct Flags {
    pub(crate) platform: Option<PlatformName>,
    pub(crate) compile_workers: Option<NonZeroUsize>,
    pub(crate) devices: Option<DeviceList>,
    pub(crate) golden_threads: Option<NonZeroUsize>,
    pub(crate) lock_timeout: Option<Duration>,
    pub(crate) runtime: Option<PathBuf>,
    /// `Some(ZERO)` = no limit.
    pub(crate) case_timeout: Option<Duration>,
    pub(crate) dump: Option<PathBuf>,
    pub(crate) verbose: bool,
    pub(crate) hold_card: bool,
    /// `--race-check`: the runtime's `manual_dep` race check on.
    pub(crate) race_check: bool,
    /// `--in-process`: no device worker process.
    pub(crate) in_process: bool,
    /// `--max-case-bytes`; `Some(0)` = no bound.
    pub(crate) max_case_bytes: Option<u64>,
    /// `--no-golden-cache`.
    pub(crate) no_golden_cache: bool,
    /// `--no-provision`: `SCENE_PYTHON_PROVISION=never`.
    pub(crate) no_provision: bool,
    /// `--no-tests`.
    pub(crate) no_tests: Option<NoTests>,
    /// `--rounds`, `--warmup`.
    pub(crate) rounds: Option<u32>,
    pub(crate) warmup: Option<u32>,
    /// `--trace`, `--dep-graph`.
    pub(crate) trace: Option<PathBuf>,
    pub(crate) dep_graph: Option<PathBuf>,
    /// `--dump-args[=DIR]`: empty = the default directory.
    pub(crate) dump_args: Option<OsString>,
    /// Whether the command uses cards at all (`run`, `replay`, the test
    /// target): only then are the card variables read, so a bad
    /// `SCENE_DEVICES` cannot break `scene compile`.
    pub(crate) uses_cards: bool,
}

impl Flags {
    /// `scene run`'s; `verbose`: `-v`, which narrates card acquisition and
    /// release.
    pub(crate) fn run(args: &RunArgs, verbose: bool) -> Self {
        Flags {
            platform: args.selection.platform.clone(),
            compile_workers: args.compile_workers,
            devices: args.device.clone(),
            golden_threads: args.golden_threads,
            lock_timeout: args.lock_timeout,
            runtime: args.runtime.clone(),
            case_timeout: args.case_timeout,
            dump: args.dump.clone(),
            verbose,
            hold_card: args.hold_card,
            race_check: args.race_check,
            in_process: args.in_process,
            max_case_bytes: args.max_case_bytes,
            no_golden_cache: args.no_golden_cache,
            no_provision: args.no_provision,
            no_tests: args.no_tests,
            rounds: args.rounds,
            warmup: args.warmup,
            trace: args.trace.clone(),
            dep_graph: args.dep_graph.clone(),
            dump_args: args.dump_args.clone(),
            uses_cards: true,
        }
    }

    /// `scene compile`'s: it never touches a card.
    pub(crate) fn compile(args: &CompileArgs) -> Self {
        Flags {
            platform: args.selection.platform.clone(),
            compile_workers: args.compile_workers,
            no_tests: args.no_tests,
            ..Flags::default()
        }
    }

    /// `scene precompile`'s: it never touches a card.
    pub(crate) fn precompile(args: &PrecompileArgs) -> Self {
        Flags {
            platform: args.selection.platform.clone(),
            compile_workers: args.compile_workers,
            max_case_bytes: args.max_case_bytes,
            no_golden_cache: args.no_golden_cache,
            no_provision: args.no_provision,
            no_tests: args.no_tests,
            ..Flags::default()
        }
    }

    /// `scene replay`'s, on the platform the task was recorded on.
    pub(crate) fn replay(args: &ReplayArgs, platform: Option<PlatformName>) -> Self {
        Flags {
            platform,
            devices: args.device.clone(),
            runtime: args.runtime.clone(),
            case_timeout: args.case_timeout,
            in_process: args.in_process,
            uses_cards: true,
            ..Flags::default()
        }
    }

    /// The `cargo test -p scenes` target's: no command line, cards.
    pub(crate) fn test_target() -> Self {
        Flags {
            uses_cards: true,
            ..Flags::default()
        }
    }
}
