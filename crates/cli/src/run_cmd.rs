//! `scene list` and `scene run`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use scene_harness::bundle::Bundle;
use scene_harness::report::RunReport;
use scene_harness::{GoldenRegistry, Session, select_cases};

use crate::Layout;
use crate::args::{ListArgs, RunArgs};
use crate::env::{Environment, resolve_platform};
use crate::output::CaseLines;
use crate::prologue::{LoadFailure, Prologue, load_scenes, prologue};

/// `scene list`: one `scene::case` a line; exit 1 if a scene did not load.
pub(crate) fn list(layout: &Layout, env: &Environment, args: &ListArgs) -> ExitCode {
    let sel = &args.selection;
    let platform = match resolve_platform(env, &layout.root, sel.platform.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let (scenes, errors) = match load_scenes(&layout.scenes_dir) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    for e in &errors {
        eprintln!("error: {}", e.message);
    }
    let mut out = std::io::stdout().lock();
    let selected: std::collections::BTreeSet<String> = select_cases(
        &scenes,
        sel.filter.as_deref(),
        platform.scenes(),
        sel.include_manual,
    )
    .iter()
    .map(|c| c.id())
    .collect();
    let hardware: std::collections::BTreeMap<String, String> =
        scene_harness::select::hardware_only_cases(&scenes, sel.filter.as_deref())
            .iter()
            .map(|c| (c.id(), c.scene.case_platforms(c.case()).join(", ")))
            .collect();
    // In scene order: the selected cases, and the hardware-only ones marked
    // (listed for completeness; no simulator runs them).
    for scene in &scenes {
        for case in &scene.cases {
            let id = format!("{}::{}", scene.name, case.name);
            let line = if selected.contains(&id) {
                id
            } else if let Some(p) = hardware.get(&id) {
                format!("{id}  [hardware only: {p}]")
            } else {
                continue;
            };
            if writeln!(out, "{line}").is_err() {
                return ExitCode::from(if errors.is_empty() { 0 } else { 1 });
            }
        }
    }
    ExitCode::from(if errors.is_empty() { 0 } else { 1 })
}

/// `scene run`: exit 0 when every selected case passed.
pub(crate) fn run(
    layout: &Layout,
    env: &Environment,
    cache_dir: Option<&Path>,
    registry: GoldenRegistry,
    args: &RunArgs,
) -> ExitCode {
    // Checked before any work: a report that cannot be written fails now.
    for (flag, path) in [
        ("--report-json", &args.report_json),
        ("--junit", &args.junit),
    ] {
        if let Some(path) = path
            && let Err(e) = crate::paths::check_output_file(flag, path)
        {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    let Prologue {
        cases,
        load_errors,
        config,
    } = match prologue(
        layout,
        env,
        cache_dir,
        &args.selection,
        &args.flags(),
        args.no_tests,
    ) {
        Ok(p) => p,
        Err(code) => return code,
    };
    // Opened before anything runs: an unusable bundle (not one, a newer
    // schema, another platform) is a bad `--from` value, not a reason to
    // rebuild everything.
    let platform = config.platform.name().to_string();
    let open = |dir: &Path| Bundle::open(dir).and_then(|b| b.check_platform(&platform).map(|()| b));
    let bundle = match args.from.as_deref().map(open) {
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
    let lines = CaseLines::new(args.quiet);
    // Scenes that did not load are failed entries of the report (and the
    // JUnit file), not only lines on stderr: entries and totals agree.
    let load_reports: Vec<_> = load_errors.iter().map(LoadFailure::report).collect();
    for r in &load_reports {
        lines.print(r);
    }
    let report = session
        .run(&cases, &mut |r| lines.print(r))
        .with_cases_before(load_reports);
    if let Err(code) = write_reports(&report, args) {
        return code;
    }
    let t = &report.totals;
    println!(
        "cards: {:.3} card-s held for {:.3} s of device work; {:.3} s queued",
        t.card_seconds_held, t.device_seconds, t.queueing_seconds
    );
    println!("{}", report.summary_line());
    ExitCode::from(if report.all_passed() { 0 } else { 1 })
}

/// `--report-json` and `--junit`.
fn write_reports(report: &RunReport, args: &RunArgs) -> Result<(), ExitCode> {
    let json = args.report_json.as_ref().map(|path| {
        let bytes = serde_json::to_vec_pretty(report).map_err(|e| e.to_string());
        (path, bytes)
    });
    let junit = args
        .junit
        .as_ref()
        .map(|path| (path, Ok(report.to_junit().into_bytes())));
    for (path, bytes) in json.into_iter().chain(junit) {
        if let Err(e) =
            bytes.and_then(|b| scene_util::write_atomically(path, &b).map_err(|e| e.to_string()))
        {
            eprintln!("error: writing {}: {e}", path.display());
            return Err(ExitCode::from(1));
        }
    }
    Ok(())
}
