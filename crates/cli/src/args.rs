//! The command line, as clap types. With the environment they are the
//! low-level half of the configuration ([`crate::lowargs`]);
//! [`crate::hiargs`] resolves both into the one configuration a command
//! runs with.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use scene_device::DeviceList;
use scene_harness::platform::PlatformName;
use scene_harness::select::{Partition, PartitionError};

use crate::parse::{
    NoTests, parse_bytes, parse_count, parse_days, parse_rounds, parse_seconds, parse_threads,
    parse_warmup,
};

#[derive(Debug, Parser)]
#[command(
    name = "scene",
    version,
    about = "Compile, run and check NPU scene tests (sim platforms: a2a3sim, a5sim)",
    long_about = None,
    after_help = crate::EXIT_STATUS_HELP,
)]
pub(crate) struct Cli {
    /// Workspace root: scenes in DIR/tests/scenes, headers in DIR/crates/device/include [env: SCENE_ROOT] [default: the nearest directory holding tests/scenes, from the current directory up, else from this executable's directory up].
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) root: Option<PathBuf>,
    /// Directory holding the scenes (`<name>/scene.toml`) [env: SCENE_SCENES_DIR].
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) scenes_dir: Option<PathBuf>,
    /// Persistent kernel cache directory [env: SCENE_CACHE_DIR] [default: <workspace>/target/scene-cache].
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// Remote kernel cache tier behind the local one: redis://host:port/db, s3://bucket/prefix or file:///path [env: SCENE_CACHE_REMOTE].
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) cache_remote: Option<String>,
    /// A PTO-ISA checkout: its `include` directory becomes an include root of hosted kernels (`build = "hosted"`) [env: SCENE_PTO_ISA_ROOT].
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) pto_isa_root: Option<String>,
    /// A checkout of the original project (hw-native-sys/simpler): its kernels (`args = "chip_tensor"`) get the include dirs, defines and language standard its own sim build gives them, and its `build/pto-isa` is the PTO-ISA root unless one is named [env: SCENE_SIMPLER_ROOT].
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) simpler_root: Option<String>,
    /// Print less: only failures and summaries.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub(crate) quiet: bool,
    /// Print more: every compile unit, card acquisition and release.
    #[arg(short, long, global = true)]
    pub(crate) verbose: bool,
    /// Colour the PASS/FAIL words: auto (on a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, global = true, value_name = "WHEN", value_enum)]
    pub(crate) color: Option<ColorChoice>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List selected cases, one `scene::case` a line.
    List(ListArgs),
    /// Compile, build fixtures and goldens, run on a card and compare.
    #[command(after_help = crate::EXIT_STATUS_HELP)]
    Run(Box<RunArgs>),
    /// Compile and cache every selected callable; never touches a card.
    #[command(after_help = crate::EXIT_STATUS_HELP)]
    Compile(CompileArgs),
    /// Inspect and maintain the persistent kernel cache.
    Cache(CacheArgs),
    /// Compile, build fixtures and goldens into a bundle for `run --from`; never touches a card.
    #[command(after_help = crate::EXIT_STATUS_HELP)]
    Precompile(PrecompileArgs),
    /// Summarise `run --report-json` files (e.g. one per partition): a Markdown table, a merged JUnit, an HTML page.
    Report(ReportArgs),
    /// Re-run one task recorded by `run --dump-args` alone on the simulator, its kernel compiled from the scene's current sources, and compare its outputs bit for bit with the recorded ones (exit 0: they match, 1: they differ, 2: the replay could not run).
    Replay(ReplayArgs),
}

// --- scene replay (issue 19) ---
#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// A case's dump directory: <dump-args root>/<scene>/<case> (a rank group: <...>/<case>/rank<R>).
    #[arg(value_name = "DIR")]
    pub(crate) dir: PathBuf,
    /// The task id: its 0-based submit index in the recorded run (`task<N>/` in DIR).
    #[arg(value_name = "TASK")]
    pub(crate) task: String,
    /// The scene's directory, if it moved since the recording [default: the one in DIR/manifest.json].
    #[arg(long, value_name = "DIR")]
    pub(crate) scene: Option<PathBuf>,
    /// Cards to use: `0`, `0-7`, `0,2,5` [default: SCENE_DEVICES, else TASK_DEVICE, else 0].
    #[arg(long, value_name = "LIST", value_parser = parse_device_list)]
    pub(crate) device: Option<DeviceList>,
    /// Runtime library to load [env: SCENE_RUNTIME_LIB] [default: the built sim runtime].
    #[arg(long, value_name = "PATH")]
    pub(crate) runtime: Option<PathBuf>,
    /// Stop the replay's run after this many seconds (0 = no limit) [default: 300].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub(crate) case_timeout: Option<Duration>,
    /// Run the session in this process instead of a supervised worker (for debuggers).
    #[arg(long)]
    pub(crate) in_process: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// `scene run --report-json` files to summarise, e.g. one per `--partition`.
    #[arg(required = true, value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
    /// Write the Markdown summary here (`-` = stdout) [default: stdout, unless `--junit -`].
    #[arg(long, value_name = "FILE")]
    pub(crate) markdown: Option<PathBuf>,
    /// Write one JUnit XML file merging every report (`-` = stdout).
    #[arg(long, value_name = "FILE")]
    pub(crate) junit: Option<PathBuf>,
    /// Write one self-contained HTML page (`-` = stdout): a summary per report, the card timeline across the reports (one per process), the case table with verdicts, failures, phase bars and links to traces and dumps.
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<PathBuf>,
    /// Also append the Markdown summary to the file named by GITHUB_STEP_SUMMARY (GitHub Actions' job summary).
    #[arg(long)]
    pub(crate) github_summary: bool,
}

#[derive(Debug, Args)]
pub(crate) struct Selection {
    /// Only cases whose `scene::case` contains one of these texts (any of them; none = every case). A `.py` file, or a directory written as a path (`dir/`, `./dir`, `/abs/dir`), names test files of the original project (hw-native-sys/simpler's `test_*.py`) to run instead of the scenes dir.
    #[arg(value_name = "FILTER|PATH")]
    pub(crate) filters: Vec<String>,
    /// The positional arguments that are paths of test files (taken out of `filters`).
    #[arg(skip)]
    pub(crate) paths: Vec<PathBuf>,
    /// Platform to select and run for [env: SCENE_PLATFORM] [default: a2a3sim] [built in: a2a3sim, a5sim; more in scene-platforms.toml].
    #[arg(long, value_name = "PLATFORM")]
    pub(crate) platform: Option<PlatformName>,
    /// Include cases marked `manual = true`.
    #[arg(long)]
    pub(crate) include_manual: bool,
    /// Take only partition K of N of the selection (K from 1), as `cargo nextest --partition`: `hash:K/N` (by a stable hash of `scene::case`) or `slice:K/N` (every N-th of the sorted selection).
    #[arg(long, value_name = "KIND:K/N", value_parser = parse_partition)]
    pub(crate) partition: Option<Partition>,
}

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    pub(crate) selection: Selection,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) selection: Selection,
    /// When the selection matches no case: fail (exit 4), warn, or pass [possible values: fail, warn, pass] [env: SCENE_NO_TESTS] [default: fail].
    #[arg(long, value_name = "WHAT", value_parser = parse_no_tests)]
    pub(crate) no_tests: Option<NoTests>,
    /// Cards to use: `0`, `0-7`, `0,2,5`, `0,2-4,7` [default: SCENE_DEVICES, else TASK_DEVICE, else 0].
    #[arg(long, value_name = "LIST", value_parser = parse_device_list)]
    pub(crate) device: Option<DeviceList>,
    /// Bound on live compiler processes across the whole run [env: SCENE_COMPILE_WORKERS] [default: available parallelism].
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub(crate) compile_workers: Option<NonZeroUsize>,
    /// Threads for goldens and comparisons, at most 1024 [env: SCENE_GOLDEN_THREADS] [default: available parallelism, at most 8].
    #[arg(long, value_name = "N", value_parser = parse_threads)]
    pub(crate) golden_threads: Option<NonZeroUsize>,
    /// Give up waiting for a busy card after this many seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub(crate) lock_timeout: Option<Duration>,
    /// Runtime library to load [env: SCENE_RUNTIME_LIB] [default: the built sim runtime].
    #[arg(long, value_name = "PATH")]
    pub(crate) runtime: Option<PathBuf>,
    /// Stop a device run after this many seconds and retire its card (0 = no limit) [default: 300].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub(crate) case_timeout: Option<Duration>,
    /// Write the per-case JSON report here (`-` = stdout; case lines then go to stderr).
    #[arg(long, value_name = "FILE")]
    pub(crate) report_json: Option<PathBuf>,
    /// Write each case's inputs, outputs and goldens as .npy under DIR/<scene>/<case>/ [failing cases: always, default target/scene-dumps, env SCENE_FAILURE_DUMP_DIR].
    #[arg(long, value_name = "DIR")]
    pub(crate) dump: Option<PathBuf>,
    /// Write a JUnit XML report here (`-` = stdout; case lines then go to stderr).
    #[arg(long, value_name = "FILE")]
    pub(crate) junit: Option<PathBuf>,
    /// Fail a case whose tensors need more than BYTES (suffixes K, M, G, T; 0 = no bound) before allocating them [env: SCENE_MAX_CASE_BYTES] [default: a quarter of physical memory].
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub(crate) max_case_bytes: Option<u64>,
    /// Run from a bundle made by `scene precompile`: no compiler, no goldens; an unusable slot is rebuilt.
    #[arg(long, value_name = "DIR")]
    pub(crate) from: Option<PathBuf>,
    /// One-pass mode, for comparison: take the card(s) before compiling and hold them until the run ends.
    #[arg(long)]
    pub(crate) hold_card: bool,
    /// Diagnose `manual_dep` misuse: fail a task whose manual access overlaps another task's, one writing, with nothing ordering them (off by default: kernels may write parts of a manual tensor the runtime cannot see).
    #[arg(long)]
    pub(crate) race_check: bool,
    /// Run device sessions in this process instead of a supervised worker (for debuggers); a crashing kernel then ends the whole run.
    #[arg(long)]
    pub(crate) in_process: bool,
    /// Compute every golden; neither read nor write the golden cache [env: SCENE_NO_GOLDEN_CACHE].
    #[arg(long)]
    pub(crate) no_golden_cache: bool,
    /// Never make a managed Python environment for Python goldens; a python3 without numpy (or a scene's requirements) fails those cases [env: SCENE_PYTHON_PROVISION=never].
    #[arg(long)]
    pub(crate) no_provision: bool,
    /// Say why each golden was computed rather than read from the golden cache, and which managed Python environments were used.
    #[arg(long)]
    pub(crate) explain: bool,
    /// Benchmark: run each case's device stage N times in one session on one card hold (compile, fixtures, goldens once), compare every round, report min/median/max device time; at most 10000 [default: 1].
    #[arg(long, value_name = "N", value_parser = parse_rounds)]
    pub(crate) rounds: Option<u32>,
    /// With --rounds: K more runs first, compared but not timed; at most 10000 [default: 0].
    #[arg(long, value_name = "K", value_parser = parse_warmup)]
    pub(crate) warmup: Option<u32>,
    // ---- issue 19: traces and dependency graphs ----
    /// Write each case's swimlane trace (Chrome/Perfetto trace-event JSON: host phases, orchestration, every task block per core lane) to DIR/<scene>/<case>.trace.json; with --rounds, the last measured round.
    #[arg(long, value_name = "DIR")]
    pub(crate) trace: Option<PathBuf>,
    /// Write each case's task dependency graph (RAW/WAR/WAW edges with tensor and byte range) to DIR/<scene>/<case>.dot (+ .svg when Graphviz `dot` is on PATH, + .deps.json).
    #[arg(long, value_name = "DIR")]
    pub(crate) dep_graph: Option<PathBuf>,
    /// Record every task's arguments (views, bytes before and after as .npy, scalars, func_id, blocks) under DIR/<scene>/<case>/, for `scene replay` [default DIR: <workspace>/target/scene-args].
    /// (An empty value, what a bare `--dump-args` gives, means the default.)
    #[arg(long, value_name = "DIR", num_args = 0..=1, require_equals = true, default_missing_value = "", value_parser = clap::builder::OsStringValueParser::new())]
    pub(crate) dump_args: Option<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct CompileArgs {
    #[command(flatten)]
    pub(crate) selection: Selection,
    /// When the selection matches no case: fail (exit 4), warn, or pass [possible values: fail, warn, pass] [env: SCENE_NO_TESTS] [default: fail].
    #[arg(long, value_name = "WHAT", value_parser = parse_no_tests)]
    pub(crate) no_tests: Option<NoTests>,
    /// Bound on live compiler/linker processes across all selected scenes [env: SCENE_COMPILE_WORKERS] [default: available parallelism].
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub(crate) compile_workers: Option<NonZeroUsize>,
    /// Print every unit with the reason it was compiled or reused.
    #[arg(long)]
    pub(crate) explain: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PrecompileArgs {
    #[command(flatten)]
    pub(crate) selection: Selection,
    /// When the selection matches no case: fail (exit 4), warn, or pass [possible values: fail, warn, pass] [env: SCENE_NO_TESTS] [default: fail].
    #[arg(long, value_name = "WHAT", value_parser = parse_no_tests)]
    pub(crate) no_tests: Option<NoTests>,
    /// Bundle directory to write (replaced atomically if it is a bundle already).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// Bound on live compiler/linker processes across all selected scenes [env: SCENE_COMPILE_WORKERS] [default: available parallelism].
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub(crate) compile_workers: Option<NonZeroUsize>,
    /// Fail a case whose tensors need more than BYTES (suffixes K, M, G, T; 0 = no bound) before allocating them [env: SCENE_MAX_CASE_BYTES] [default: a quarter of physical memory].
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub(crate) max_case_bytes: Option<u64>,
    /// Compute every golden; neither read nor write the golden cache [env: SCENE_NO_GOLDEN_CACHE].
    #[arg(long)]
    pub(crate) no_golden_cache: bool,
    /// Never make a managed Python environment for Python goldens [env: SCENE_PYTHON_PROVISION=never].
    #[arg(long)]
    pub(crate) no_provision: bool,
}

#[derive(Debug, Args)]
pub(crate) struct CacheArgs {
    #[command(subcommand)]
    pub(crate) command: CacheCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum CacheCommand {
    /// Entries, bytes, and hits/misses/compiles and time saved of the last runs.
    Stats {
        /// How many recent runs to show.
        #[arg(long, default_value_t = 10, value_name = "N")]
        runs: usize,
    },
    /// Check every entry against its manifest; remove and report damaged
    /// ones (exit 1 if any were damaged).
    Verify,
    /// Remove entries unused for longer than --max-age, then the least
    /// recently used until the cache is under --max-size.
    Prune {
        /// Maximum age in days since last use [default: 14].
        #[arg(long, value_name = "DAYS", value_parser = parse_days)]
        max_age: Option<Duration>,
        /// Maximum total size, in bytes (suffixes K, M, G, T = powers of 1024) [default: 5G].
        #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
        max_size: Option<u64>,
    },
    /// Remove every entry.
    Clear,
}

fn parse_partition(s: &str) -> Result<Partition, PartitionError> {
    s.parse()
}

fn parse_no_tests(s: &str) -> Result<NoTests, crate::parse::ValueError> {
    s.parse()
}

fn parse_device_list(s: &str) -> Result<DeviceList, scene_device::DeviceError> {
    s.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_args_takes_its_directory_only_after_an_equals_sign() {
        let run = |argv: &[&str]| match Cli::try_parse_from(argv).unwrap().command {
            Command::Run(r) => (r.dump_args, r.selection.filters),
            other => panic!("{other:?}"),
        };
        let (dump, filter) = run(&["scene", "run", "--dump-args", "scalar_data"]);
        assert_eq!(
            dump.as_deref(),
            Some(std::ffi::OsStr::new("")),
            "bare: the default"
        );
        assert_eq!(filter, ["scalar_data"]);
        let (dump, filter) = run(&["scene", "run", "--dump-args=/tmp/a", "x"]);
        assert_eq!(dump.as_deref(), Some(std::ffi::OsStr::new("/tmp/a")));
        assert_eq!(filter, ["x"]);
        assert_eq!(run(&["scene", "run"]).0, None);
    }

    #[test]
    fn the_filter_is_zero_or_more_words_on_every_selecting_command() {
        let filters = |argv: &[&str]| match Cli::try_parse_from(argv).unwrap().command {
            Command::Run(r) => r.selection.filters,
            Command::List(l) => l.selection.filters,
            Command::Compile(c) => c.selection.filters,
            Command::Precompile(p) => p.selection.filters,
            other => panic!("{other:?}"),
        };
        assert!(filters(&["scene", "run"]).is_empty());
        assert_eq!(filters(&["scene", "run", "softmax"]), ["softmax"]);
        assert_eq!(
            filters(&["scene", "run", "softmax", "rmsnorm"]),
            ["softmax", "rmsnorm"]
        );
        assert_eq!(
            filters(&["scene", "run", "--from", "b", "softmax", "rmsnorm"]),
            ["softmax", "rmsnorm"]
        );
        assert_eq!(filters(&["scene", "list", "a", "b", "c"]), ["a", "b", "c"]);
        assert_eq!(filters(&["scene", "compile", "a", "b"]), ["a", "b"]);
        assert_eq!(
            filters(&["scene", "precompile", "a", "--out", "d", "b"]),
            ["a", "b"]
        );
    }
}
