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
use crate::pipeline::{RunConfig, Session, select_cases, status_word};
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
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List selected cases, one `scene::case` a line.
    List(ListArgs),
    /// Compile, build fixtures and goldens, run on a card and compare.
    Run(RunArgs),
}

#[derive(Debug, Args)]
struct Selection {
    /// Only cases whose `scene::case` contains this text.
    filter: Option<String>,
    /// Platform to select and run for.
    #[arg(long, env = "SCENE_PLATFORM", default_value = "a2a3sim", value_parser = ["a2a3sim", "a5sim"])]
    platform: String,
    /// Include cases marked `manual = true`.
    #[arg(long)]
    include_manual: bool,
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
    /// Give up waiting for a busy card after this many seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    lock_timeout: Option<Duration>,
    /// Runtime library to load [default: SCENE_RUNTIME_LIB, else the built sim runtime].
    #[arg(long, value_name = "PATH")]
    runtime: Option<PathBuf>,
    /// Write the per-case JSON report here.
    #[arg(long, value_name = "FILE")]
    report_json: Option<PathBuf>,
    /// Print only failures and the summary.
    #[arg(short, long)]
    quiet: bool,
}

fn parse_workers(s: &str) -> Result<NonZeroUsize, String> {
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
    match cli.command {
        Command::List(args) => list(&layout, &args),
        Command::Run(args) => run(&layout, registry, &args),
    }
}

/// Loads every scene; malformed ones are reported and counted as failures.
fn load_scenes(dir: &Path) -> Result<(Vec<Arc<Scene>>, Vec<String>), String> {
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

fn run(layout: &Layout, registry: GoldenRegistry, args: &RunArgs) -> ExitCode {
    let (scenes, load_errors) = match load_scenes(&layout.scenes_dir) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    for e in &load_errors {
        eprintln!("error: {e}");
    }
    let sel = &args.selection;
    let mut config = match RunConfig::from_env(&layout.root) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    config.platform = sel.platform.clone();
    if let Some(d) = &args.device {
        config.devices = d.clone();
    }
    if let Some(n) = args.compile_workers {
        config.compile_workers = n;
    }
    config.lock_timeout = args.lock_timeout;
    if let Some(r) = &args.runtime {
        config.runtime_lib = Some(r.clone());
    }
    let session = match Session::new(config, registry) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
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
    report.totals.failed += load_errors.len();
    if let Some(path) = &args.report_json {
        let written = serde_json::to_vec_pretty(&report)
            .map_err(|e| e.to_string())
            .and_then(|bytes| std::fs::write(path, bytes).map_err(|e| e.to_string()));
        if let Err(e) = written {
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
