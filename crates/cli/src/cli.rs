//! The `scene` command line, as a library: the scenes package's binary is a
//! three-line `main` that passes its golden registry here.
//!
//! Exit codes: 0 = everything selected passed, 1 = something failed,
//! 2 = usage error (bad flag or value).

use std::io::{IsTerminal, Write};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use scene_device::DeviceList;

use crate::golden::GoldenRegistry;
use crate::pipeline::{RunConfig, SelectedCase, Session, select_cases, status_word};
use crate::report::CaseStatus;
use crate::scene::{Scene, discover};

/// Where the scenes package lives; given by the binary at compile time.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Workspace root (compilers run here).
    pub root: PathBuf,
    /// Directory holding `<scene>/scene.toml`.
    pub scenes_dir: PathBuf,
}

#[derive(Debug, Parser)]
#[command(
    name = "scene",
    version,
    about = "Compile, run and check NPU scene tests (sim platforms: a2a3sim, a5sim)",
    long_about = None,
)]
struct Cli {
    /// Directory holding the scenes (`<name>/scene.toml`).
    #[arg(long, global = true, env = "SCENE_SCENES_DIR", value_name = "DIR")]
    scenes_dir: Option<PathBuf>,
    /// Persistent kernel cache directory [default: <workspace>/target/scene-cache].
    #[arg(long, global = true, env = "SCENE_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List selected cases, one `scene::case` a line.
    List(ListArgs),
    /// Compile, build fixtures and goldens, run on a card and compare.
    Run(RunArgs),
    /// Compile and cache every selected callable; never touches a card.
    Compile(crate::compile_cmd::CompileArgs),
    /// Inspect and maintain the persistent kernel cache.
    Cache(crate::cache_cmd::CacheArgs),
    /// Compile, build fixtures and goldens into a bundle for `run --from`; never touches a card.
    Precompile(crate::precompile_cmd::PrecompileArgs),
}

#[derive(Debug, Args)]
pub(crate) struct Selection {
    /// Only cases whose `scene::case` contains this text.
    pub(crate) filter: Option<String>,
    /// Platform to select and run for.
    #[arg(long, env = "SCENE_PLATFORM", default_value = "a2a3sim", value_parser = ["a2a3sim", "a5sim"])]
    pub(crate) platform: String,
    /// Include cases marked `manual = true`.
    #[arg(long)]
    pub(crate) include_manual: bool,
}

#[derive(Debug, Args)]
struct ListArgs {
    #[command(flatten)]
    selection: Selection,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    selection: Selection,
    /// Cards to use: `0`, `0-7`, `0,2,5`, `0,2-4,7` [default: SCENE_DEVICES, else TASK_DEVICE, else 0].
    #[arg(long, value_name = "LIST", value_parser = parse_device_list)]
    device: Option<DeviceList>,
    /// Bound on live compiler processes across the whole run [default: available parallelism].
    #[arg(long, env = "SCENE_COMPILE_WORKERS", value_name = "N", value_parser = parse_workers)]
    compile_workers: Option<NonZeroUsize>,
    /// Threads for goldens and comparisons [default: SCENE_GOLDEN_THREADS, else available parallelism, at most 8].
    #[arg(long, value_name = "N", value_parser = parse_workers)]
    golden_threads: Option<NonZeroUsize>,
    /// Give up waiting for a busy card after this many seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    lock_timeout: Option<Duration>,
    /// Runtime library to load [default: SCENE_RUNTIME_LIB, else the built sim runtime].
    #[arg(long, value_name = "PATH")]
    runtime: Option<PathBuf>,
    /// Stop a device run after this many seconds and retire its card (0 = no limit).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, default_value = "300")]
    case_timeout: Duration,
    /// Write the per-case JSON report here.
    #[arg(long, value_name = "FILE")]
    report_json: Option<PathBuf>,
    /// Write each case's inputs, outputs and goldens as .npy under DIR/<scene>/<case>/ [failing cases: always, default target/scene-dumps].
    #[arg(long, value_name = "DIR")]
    dump: Option<PathBuf>,
    /// Write a JUnit XML report here.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Print only failures and the summary.
    #[arg(short, long)]
    quiet: bool,
    /// Narrate card acquisition and release on stderr.
    #[arg(short, long)]
    verbose: bool,
    /// Run from a bundle made by `scene precompile`: no compiler, no goldens; an unusable slot is rebuilt.
    #[arg(long, value_name = "DIR")]
    from: Option<PathBuf>,
    /// One-pass mode, for comparison: take the card(s) before compiling and hold them until the run ends.
    #[arg(long)]
    hold_card: bool,
}

/// Writes `bytes` to `path` through a temp file and a rename, so a reader
/// (a CI step, a dashboard) never sees half a report.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

pub(crate) fn parse_workers(s: &str) -> Result<NonZeroUsize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => NonZeroUsize::new(n).ok_or_else(|| "must be at least 1".to_string()),
        Err(_) => Err(format!("`{s}` is not a number")),
    }
}

fn parse_device_list(s: &str) -> Result<DeviceList, String> {
    s.parse::<DeviceList>().map_err(|e| e.to_string())
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(v >= 0.0 && v.is_finite()) {
        return Err(format!("`{s}` is not a non-negative number of seconds"));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Runs the CLI with the process arguments.
pub fn main(layout: Layout, registry: GoldenRegistry) -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let layout = Layout {
        scenes_dir: cli.scenes_dir.clone().unwrap_or(layout.scenes_dir),
        ..layout
    };
    if let Some(dir) = cli.cache_dir.clone().filter(|d| !d.as_os_str().is_empty()) {
        crate::cache_cmd::set_cache_dir_flag(dir);
    }
    match cli.command {
        Command::Cache(args) => {
            crate::cache_cmd::run(&crate::cache_cmd::cache_dir(&layout.root), &args)
        }
        Command::List(args) => list(&layout, &args),
        Command::Run(args) => run(&layout, registry, &args),
        Command::Compile(args) => crate::compile_cmd::run(&layout, &args),
        Command::Precompile(args) => crate::precompile_cmd::run(&layout, registry, &args),
    }
}

/// Loads every scene; malformed ones are reported and counted as failures.
pub(crate) fn load_scenes(dir: &Path) -> Result<(Vec<Arc<Scene>>, Vec<String>), String> {
    let all = discover(dir).map_err(|e| e.to_string())?;
    let mut scenes = Vec::new();
    let mut errors = Vec::new();
    for s in all {
        match s {
            Ok(s) => scenes.push(Arc::new(s)),
            Err(e) => errors.push(e.to_string()),
        }
    }
    Ok((scenes, errors))
}

fn list(layout: &Layout, args: &ListArgs) -> ExitCode {
    let (scenes, errors) = match load_scenes(&layout.scenes_dir) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    for e in &errors {
        eprintln!("error: {e}");
    }
    let sel = &args.selection;
    let mut out = std::io::stdout().lock();
    for c in select_cases(
        &scenes,
        sel.filter.as_deref(),
        &sel.platform,
        sel.include_manual,
    ) {
        if writeln!(out, "{}", c.id()).is_err() {
            break;
        }
    }
    ExitCode::from(if errors.is_empty() { 0 } else { 1 })
}

/// What every command that runs a selection starts with: the scenes loaded
/// (malformed ones reported on stderr and counted), the cases selected for
/// the platform (a warning when none), and the run configuration for it.
pub(crate) struct Prologue {
    pub(crate) cases: Vec<SelectedCase>,
    /// Scenes whose `scene.toml` did not load; each counts as a failure.
    pub(crate) load_errors: usize,
    pub(crate) config: RunConfig,
}

/// Builds the [`Prologue`]; `Err` is the exit code to return (already reported).
pub(crate) fn prologue(
    layout: &Layout,
    sel: &Selection,
    compile_workers: Option<NonZeroUsize>,
) -> Result<Prologue, ExitCode> {
    let (scenes, load_errors) = load_scenes(&layout.scenes_dir).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(1)
    })?;
    for e in &load_errors {
        eprintln!("error: {e}");
    }
    let cases = select_cases(
        &scenes,
        sel.filter.as_deref(),
        &sel.platform,
        sel.include_manual,
    );
    if cases.is_empty() {
        eprintln!(
            "warning: no cases selected on {} (filter: {})",
            sel.platform,
            sel.filter.as_deref().unwrap_or("none")
        );
    }
    let mut config = RunConfig::from_env(&layout.root).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })?;
    config.platform = sel.platform.clone();
    if let Some(n) = compile_workers {
        config.compile_workers = n;
    }
    Ok(Prologue {
        cases,
        load_errors: load_errors.len(),
        config,
    })
}

fn run(layout: &Layout, registry: GoldenRegistry, args: &RunArgs) -> ExitCode {
    let Prologue {
        cases,
        load_errors,
        mut config,
    } = match prologue(layout, &args.selection, args.compile_workers) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if let Some(d) = &args.device {
        config.devices = d.clone();
    }
    config.lock_timeout = args.lock_timeout;
    if let Some(n) = args.golden_threads {
        config.golden_threads = n.get();
    }
    config.verbose = args.verbose;
    config.dump_dir = args
        .dump
        .as_ref()
        .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone()));
    config.case_timeout = (!args.case_timeout.is_zero()).then_some(args.case_timeout);
    if let Some(r) = &args.runtime {
        config.runtime_lib = Some(r.clone());
    }
    config.hold_card = args.hold_card;
    // Opened before anything runs: an unusable bundle (not one, or a newer
    // schema) is a bad `--from` value, not a reason to rebuild everything.
    let bundle = match args.from.as_deref().map(crate::bundle::Bundle::open) {
        None => None,
        Some(Ok(b)) => Some(b),
        Some(Err(e)) => {
            eprintln!("error: --from: {e}");
            return ExitCode::from(2);
        }
    };
    let session = match Session::new(config, registry) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let session = match bundle {
        Some(b) => session.with_bundle(b),
        None => session,
    };
    let color = std::io::stdout().is_terminal();
    let quiet = args.quiet;
    let mut on_case = |r: &crate::report::CaseReport| {
        if quiet && r.status == CaseStatus::Passed {
            return;
        }
        let word = status_word(r.status);
        let word = if color {
            match r.status {
                CaseStatus::Passed => format!("\x1b[32m{word}\x1b[0m"),
                CaseStatus::Failed => format!("\x1b[31m{word}\x1b[0m"),
                CaseStatus::Skipped => format!("\x1b[33m{word}\x1b[0m"),
            }
        } else {
            word.to_string()
        };
        println!("{word} {} ({:.3} s)", r.name, r.wall_s);
        if let Some(m) = &r.message {
            for line in m.lines() {
                println!("    {line}");
            }
        }
    };
    let mut report = session.run(&cases, &mut on_case);
    report.totals.failed += load_errors;
    let json = args.report_json.as_ref().map(|path| {
        let bytes = serde_json::to_vec_pretty(&report).map_err(|e| e.to_string());
        (path, bytes)
    });
    let junit = args
        .junit
        .as_ref()
        .map(|path| (path, Ok(report.to_junit().into_bytes())));
    for (path, bytes) in json.into_iter().chain(junit) {
        if let Err(e) = bytes.and_then(|b| write_atomically(path, &b).map_err(|e| e.to_string())) {
            eprintln!("error: writing {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    let t = &report.totals;
    println!(
        "cards: {:.3} card-s held for {:.3} s of device work; {:.3} s queued",
        t.card_seconds_held, t.device_seconds, t.queueing_seconds
    );
    println!("{}", report.summary_line());
    ExitCode::from(if report.all_passed() { 0 } else { 1 })
}
