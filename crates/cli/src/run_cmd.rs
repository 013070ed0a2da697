//! `scene list` and `scene run`.

use std::io::Write;
use std::path::Path;

use scene_harness::bundle::Bundle;
use scene_harness::compile::{compile_builder, scene_host_units, scene_specs};
use scene_harness::report::RunReport;
use scene_harness::{GoldenRegistry, Session, distinct_scenes};
use scene_kernels::plan_outline_with_hosts;

use crate::Layout;
use crate::error::{CliError, UsageError};
use crate::hiargs::{ListSetup, RunSetup};
use crate::output::{CaseLines, Verbosity};
use crate::paths::is_stdout;
use crate::progress::{self, UnitLines};
use crate::prologue::{LoadFailure, Prologue, load_scenes, prologue, select, unless_interrupted};

/// `scene list`: one `scene::case` a line; exit 1 if a scene did not load
/// (a custom comparison not in `registry` is a load failure).
pub(crate) fn list(
    layout: &Layout,
    registry: &GoldenRegistry,
    setup: &ListSetup,
) -> Result<(), CliError> {
    let sel = &setup.selection;
    let (scenes, errors) = load_scenes(
        &layout.scenes_dir,
        sel,
        setup.config.as_deref(),
        Some(registry),
    )?;
    let load_failed = !errors.is_empty();
    // Split as `run` splits (cases and load failures together), so a
    // partition lists exactly what it runs even when a scene failed to load.
    let (cases, _, _) = select(&scenes, errors, sel, &setup.platform);
    let mut out = std::io::stdout().lock();
    let selected: std::collections::BTreeSet<String> = cases.iter().map(|c| c.id()).collect();
    // With a partition the list is exactly what that partition runs: the
    // hardware-only cases (which no simulator runs) are left out.
    let hardware: std::collections::BTreeMap<String, String> = match sel.partition {
        Some(_) => Default::default(),
        None => scene_harness::select::hardware_only_cases(&scenes, &sel.filters)
            .iter()
            .map(|c| (c.id(), c.scene.case_platforms(c.case()).join(", ")))
            .collect(),
    };
    // In scene order: the selected cases, and the hardware-only ones marked
    // (listed for completeness; no simulator runs them).
    'scenes: for scene in &scenes {
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
                break 'scenes;
            }
        }
    }
    CliError::unless(load_failed)
}

/// `scene run`: exit 0 when every selected case passed.
pub(crate) fn run(
    layout: &Layout,
    registry: GoldenRegistry,
    verbosity: Verbosity,
    setup: &RunSetup,
) -> Result<(), CliError> {
    let stream = setup.stream;
    let Prologue {
        cases,
        load_errors,
        config,
    } = prologue(layout, &setup.engine, Some(&registry))?;
    if let Some(d) = &config.args_dump {
        crate::paths::check_dir("--dump-args", d).map_err(UsageError::from)?;
    }
    let cancel = config.cancel.clone();
    // Opened before anything runs: an unusable bundle (not one, a newer
    // schema, another platform) is a bad `--from` value, not a reason to
    // rebuild everything.
    let platform = config.platform.name().to_string();
    let open = |dir: &Path| Bundle::open(dir).and_then(|b| b.check_platform(&platform).map(|()| b));
    let bundle = match setup.from.as_deref().map(open).transpose() {
        Ok(b) => b,
        Err(e) => return Err(UsageError::From(e).into()),
    };
    let start = start_line(&StartCounts {
        cases: cases.len(),
        scenes: distinct_scenes(&cases).len(),
        load_failures: load_errors.len(),
        platform: config.platform.name(),
        from: setup.from.as_deref(),
        partition: setup.engine.selection.partition,
    });
    // Setup errors (no compiler, no runtime library, an unusable lock
    // directory, no usable Python) stop the run before any case.
    let session = Session::new(config, registry)?;
    if bundle.is_none() {
        match session.cpu().check_python(&cases) {
            Ok(()) => {}
            // Whatever failed while the user interrupted (pip, venv or the
            // worker, terminated by the run's own cancel) is the
            // interrupt's: the run below starts nothing and ends
            // interrupted, with its partial summary and 130 / 143.
            Err(_) if cancel.is_cancelled() => {}
            Err(e) => return Err(CliError::Python(e.into())),
        }
    }
    // Before the first case (and the compile bar): what this run will do.
    if !verbosity.quiet {
        stream.line(&start);
    }
    // On a terminal, the compile phase shows the bar `scene compile`
    // shows (not with `--from`: pass 2 compiles only damaged slots).
    let bar = match bundle {
        Some(_) => None,
        None => {
            let scenes = distinct_scenes(&cases);
            let specs = scene_specs(session.config(), &scenes);
            let hosts = scene_host_units(session.config(), &scenes);
            let units = plan_outline_with_hosts(&specs, &hosts).units.len();
            progress::bar(units, !verbosity.quiet)
        }
    };
    let session = match &bar {
        None => session,
        Some(bar) => session.map_cpu(|cpu| match compile_builder(cpu.config()) {
            Ok(b) => cpu.with_builder(b.with_observer(progress::observer(
                Some(bar),
                if verbosity.verbose {
                    UnitLines::All
                } else {
                    UnitLines::Work
                },
            ))),
            Err(_) => cpu,
        }),
    };
    let session = match bundle {
        Some(b) => session.with_bundle(b),
        None => session,
    };
    let lines = CaseLines::new(verbosity, stream);
    // The bar goes away before the first case line.
    let clear_bar = || {
        if let Some(bar) = &bar
            && !bar.is_finished()
        {
            bar.finish_and_clear();
        }
    };
    // Scenes that did not load are failed entries of the report (and the
    // JUnit file), not only lines on stderr: entries and totals agree.
    let load_reports: Vec<_> = load_errors.iter().map(LoadFailure::report).collect();
    for r in &load_reports {
        lines.print(r);
    }
    let selected = cases.len() + load_reports.len();
    let mut report = session
        .run(&cases, &mut |r| {
            clear_bar();
            lines.print(r);
            if setup.explain
                && let Some(why) = &r.golden_miss
            {
                stream.line(&format!("    golden computed: {why}"));
            }
        })
        .with_cases_before(load_reports);
    clear_bar();
    // Interrupted: the cases that finished and how many did not; no
    // report file (it would pass for a whole run's).
    unless_interrupted(&cancel, |what| {
        let t = &report.totals;
        let not_run = selected.saturating_sub(report.cases.len());
        stream.line(&format!(
            "{what}: {} passed, {} failed, {not_run} not run",
            t.passed, t.failed
        ));
        if setup.report_json.is_some() || setup.junit.is_some() {
            eprintln!("note: no --report-json/--junit report written: the run was interrupted");
        }
    })?;
    locate(&mut report, setup.report_json.as_deref());
    write_reports(&report, setup)?;
    let t = &report.totals;
    stream.line(&format!(
        "cards: {:.3} card-s held for {:.3} s of device work and {:.3} s of {} runtime open(s); {:.3} s queued",
        t.card_seconds_held,
        t.device_seconds,
        t.runtime_open_s,
        t.runtime_opens,
        t.queueing_seconds
    ));
    if setup.explain {
        for env in session.cpu().python_environments() {
            stream.line(&format!(
                "python environment: {} -> {}: {}",
                env.base,
                env.dir.display(),
                env.pinned()
            ));
        }
        stream.line(&format!("goldens computed: {}", t.goldens_computed));
    }
    stream.line(&report.summary_line());
    if let Some(block) = failures_block(&report) {
        stream.line(&block);
    }
    CliError::unless(!report.all_passed())
}

/// What `scene run` announces before its first case.
pub(crate) struct StartCounts<'a> {
    pub(crate) cases: usize,
    pub(crate) scenes: usize,
    pub(crate) load_failures: usize,
    pub(crate) platform: &'a str,
    pub(crate) from: Option<&'a Path>,
    pub(crate) partition: Option<scene_harness::select::Partition>,
}

/// `running 56 cases of 24 scenes on a2a3sim`, plus the bundle, the
/// partition and the scenes that did not load when there are any.
pub(crate) fn start_line(c: &StartCounts<'_>) -> String {
    let plural = |n: usize, one: &str, many: &str| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    };
    let mut line = format!(
        "running {} of {} on {}",
        plural(c.cases, "case", "cases"),
        plural(c.scenes, "scene", "scenes"),
        c.platform
    );
    if let Some(dir) = c.from {
        line.push_str(&format!(" from bundle {}", dir.display()));
    }
    if let Some(p) = c.partition {
        line.push_str(&format!(" (partition {p})"));
    }
    if c.load_failures > 0 {
        line.push_str(&format!(
            "; {} not load",
            plural(c.load_failures, "scene did", "scenes did")
        ));
    }
    line
}

/// The failed entries again, under the summary line (as cargo-nextest
/// lists them): `failures:` and one indented `scene::case` a line; `None`
/// when nothing failed.
pub(crate) fn failures_block(report: &RunReport) -> Option<String> {
    let failed: Vec<&str> = report
        .cases
        .iter()
        .filter(|c| c.status == scene_harness::report::CaseStatus::Failed)
        .map(|c| c.name.as_str())
        .collect();
    if failed.is_empty() {
        return None;
    }
    let mut block = String::from("failures:");
    for name in failed {
        block.push_str("\n    ");
        block.push_str(name);
    }
    Some(block)
}

/// Records in `report` where it is written (`report_dir`: the absolute
/// directory of `--report-json FILE`, none for stdout) and where the run
/// ran (`working_dir`), so `scene report` can find the artifacts written
/// beside the report after the two were moved together (uploaded as one
/// CI artifact, say).
fn locate(report: &mut RunReport, report_json: Option<&Path>) {
    let cwd = std::env::current_dir().ok();
    report.working_dir = cwd.as_ref().map(|d| d.display().to_string());
    report.report_dir = report_json
        .filter(|p| !is_stdout(p))
        .and_then(|p| match p.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => std::path::absolute(dir).ok(),
            _ => cwd,
        })
        .map(|d| d.display().to_string());
}

/// `--report-json` and `--junit`.
fn write_reports(report: &RunReport, setup: &RunSetup) -> Result<(), CliError> {
    let failed = |path: &Path, e: crate::error::Source| CliError::RunReport {
        path: path.to_path_buf(),
        source: e,
    };
    if let Some(path) = &setup.report_json {
        let bytes = serde_json::to_vec_pretty(report).map_err(|e| failed(path, e.into()))?;
        write_report(path, &bytes).map_err(|e| failed(path, e.into()))?;
    }
    if let Some(path) = &setup.junit {
        write_report(path, report.to_junit().as_bytes()).map_err(|e| failed(path, e.into()))?;
    }
    Ok(())
}

/// A report file, readable by everyone (0644: CI uploaders often run as
/// another user), or stdout for `-`.
fn write_report(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if is_stdout(path) {
        let mut out = std::io::stdout().lock();
        out.write_all(bytes)?;
        if !bytes.ends_with(b"\n") {
            out.write_all(b"\n")?;
        }
        return out.flush();
    }
    scene_util::write_output(path, bytes, 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;
    use scene_harness::report::{CaseReport, FailureStage};

    #[test]
    fn the_start_line_counts_cases_and_scenes() {
        let mut c = StartCounts {
            cases: 56,
            scenes: 24,
            load_failures: 0,
            platform: "a2a3sim",
            from: None,
            partition: None,
        };
        assert_eq!(start_line(&c), "running 56 cases of 24 scenes on a2a3sim");
        c.cases = 1;
        c.scenes = 1;
        assert_eq!(start_line(&c), "running 1 case of 1 scene on a2a3sim");
        c.from = Some(Path::new("b"));
        c.partition = Some("hash:1/3".parse().unwrap());
        c.load_failures = 2;
        assert_eq!(
            start_line(&c),
            "running 1 case of 1 scene on a2a3sim from bundle b (partition hash:1/3); \
             2 scenes did not load"
        );
    }

    #[test]
    fn failures_are_listed_under_the_summary_only_when_there_are_some() {
        let pass = CaseReport::new("s", "ok");
        let mut bad = CaseReport::new("paged_attention_py", "small1");
        bad.fail(FailureStage::Compare, "off");
        let mut load = CaseReport::new("broken", "load");
        load.fail(FailureStage::Load, "bad toml");
        let report = RunReport::new("a2a3sim", vec![pass.clone()], 0.0);
        assert_eq!(failures_block(&report), None);
        let report = RunReport::new("a2a3sim", vec![load, pass, bad], 0.0);
        assert_eq!(
            failures_block(&report).as_deref(),
            Some("failures:\n    broken::load\n    paged_attention_py::small1")
        );
    }
}
