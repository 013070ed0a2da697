//! `scene report`: one or more `--report-json` files (typically one per
//! `--partition` runner) as a Markdown summary (per-case phases, card-seconds
//! held vs device-seconds, totals), a merged JUnit file and a self-contained
//! HTML page (`--html`, rendered by [`crate::html_report`]).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use scene_harness::report::{CaseStatus, ReadAt, RunReport, junit_of};

use crate::error::CliError;
use crate::hiargs::ReportSetup;

/// Runs `scene report`. Exit 0 when every case of every report passed, 1
/// when any failed (the summary and JUnit are written either way), 2 when
/// a report cannot be read or an output cannot be written.
pub(crate) fn run(setup: &ReportSetup) -> Result<(), CliError> {
    let args = &setup.args;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let mut reports = Vec::new();
    for file in &args.files {
        let mut report = read_report(file)?;
        resolve_artifacts(&mut report, file, &cwd);
        reports.push(report);
    }
    warn_duplicates(&args.files, &reports);
    let merged = RunReport::merge(&reports);
    let markdown = markdown(&merged, &args.files, &cwd);
    // Markdown goes to stdout unless a file is named, or stdout carries
    // the JUnit or the HTML.
    let markdown_to = match &args.markdown {
        Some(p) => Some(p.clone()),
        None if setup.stdout_taken => None,
        None => Some(PathBuf::from("-")),
    };
    let html = args
        .html
        .as_ref()
        .map(|p| (p, html_page(p, &args.files, &reports, &cwd)));
    let outputs = markdown_to
        .iter()
        .map(|p| (p, markdown.clone().into_bytes()))
        .chain(
            args.junit
                .iter()
                .map(|p| (p, junit_of(&merged).into_bytes())),
        )
        .chain(html.map(|(p, h)| (p, h.into_bytes())));
    for (path, bytes) in outputs {
        write_output(path, &bytes).map_err(|source| CliError::WriteOutput {
            path: path.clone(),
            source,
        })?;
    }
    if let Some(path) = &setup.step_summary {
        append(path, markdown.as_bytes()).map_err(|source| CliError::AppendSummary {
            path: path.clone(),
            source,
        })?;
    }
    let failed: usize = merged.iter().map(|r| r.totals.failed).sum();
    CliError::unless(failed > 0)
}

/// Rewrites the artifact paths of `report`, read from `file`, to where
/// they are now, absolute ([`RunReport::artifact_path`]): a relative path
/// is taken against the run's recorded `working_dir` (an older report's
/// against `cwd`, as before); when the report's directory is another
/// place than the `report_dir` its run recorded (the report was moved, to
/// another machine perhaps), a path under that recorded directory is
/// rebased onto the report's directory now: it moved with the report.
/// Only if the rebased path does not exist while the recorded one still
/// does (the report alone was copied) is the recorded path kept.
fn resolve_artifacts(report: &mut RunReport, file: &Path, cwd: &Path) {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => cwd.join(d),
        _ => cwd.to_path_buf(),
    };
    // Canonical, as the page's directory is (`html_page`): a prefix test
    // against it means what it says.
    let dir = dir.canonicalize().unwrap_or(dir);
    let moved = report.report_dir.as_deref().is_some_and(|recorded| {
        let recorded = Path::new(recorded);
        recorded != dir && recorded.canonicalize().ok().as_deref() != Some(dir.as_path())
    });
    let at = ReadAt {
        dir: &dir,
        moved,
        cwd,
    };
    let mut cases = std::mem::take(&mut report.cases);
    for c in &mut cases {
        for path in [
            &mut c.trace,
            &mut c.dep_graph,
            &mut c.args_dump,
            &mut c.dump,
        ]
        .into_iter()
        .flatten()
        {
            let found = report.artifact_path(path, &at);
            let now = match found.moved_to {
                Some(m) if m.exists() || !found.recorded.exists() => m,
                _ => found.recorded,
            };
            *path = now.display().to_string();
        }
    }
    report.cases = cases;
}

/// The HTML page of `reports` (read from `files`, their artifact paths
/// resolved by [`resolve_artifacts`]) to be written to `path`: artifact
/// links under the page's directory are relative, others `file://`.
fn html_page(path: &Path, files: &[PathBuf], reports: &[RunReport], cwd: &Path) -> String {
    let cwd = cwd.to_path_buf();
    let page_dir = if path.as_os_str() == "-" {
        cwd.clone()
    } else {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let dir = if dir.is_absolute() {
            dir
        } else {
            cwd.join(dir)
        };
        // `..` and symbolic links resolved where possible, so a prefix test
        // against the artifacts' paths means what it says.
        dir.canonicalize().unwrap_or(dir)
    };
    let inputs: Vec<crate::html_report::Input<'_>> = files
        .iter()
        .zip(reports)
        .map(|(file, report)| crate::html_report::Input { file, report })
        .collect();
    crate::html_report::html(&inputs, &page_dir, &cwd)
}

/// The largest report `scene report` reads: a run of tens of thousands
/// of cases is a few tens of megabytes.
const MAX_REPORT_BYTES: u64 = 1 << 30;

/// One report file, or an error naming it.
///
/// Read as a user-named input (`scene_util::read_input_file`): a symlink
/// to a report is followed, but a FIFO (which hung the read) or a link to
/// `/dev/zero` (which read until the OOM killer) is refused.
fn read_report(path: &Path) -> Result<RunReport, CliError> {
    let failed = |source: crate::error::Source| CliError::ReadReport {
        path: path.to_path_buf(),
        source,
    };
    let bytes = scene_util::read_input_file(path, MAX_REPORT_BYTES).map_err(|e| match e {
        // The path is in the error already: only the reason.
        scene_util::ReadError::Io { source, .. } => failed(source.into()),
        e => failed(e.reason().into()),
    })?;
    RunReport::from_json(&bytes).map_err(|e| failed(e.into()))
}

/// A case in two reports (overlapping partitions, a file given twice) is
/// counted twice: say so.
fn warn_duplicates(files: &[PathBuf], reports: &[RunReport]) {
    let mut seen: std::collections::HashMap<(&str, &str), &Path> = Default::default();
    for (file, r) in files.iter().zip(reports) {
        for c in &r.cases {
            if let Some(first) = seen.insert((&r.platform, &c.name), file) {
                eprintln!(
                    "warning: {} ({}) is in both {} and {}; it is counted twice",
                    c.name,
                    r.platform,
                    first.display(),
                    file.display()
                );
            }
        }
    }
}

/// Seconds as the tables print them.
fn secs(s: f64) -> String {
    format!("{s:.3}")
}

/// A table cell: no `|` or line break may end it early.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The Markdown summary of `merged` (one report per platform), read from
/// `files`; a failure's dump path is shown relative to `cwd` when under it.
pub(crate) fn markdown(merged: &[RunReport], files: &[PathBuf], cwd: &Path) -> String {
    let mut m = String::new();
    let cases: usize = merged.iter().map(|r| r.cases.len()).sum();
    let failed: usize = merged.iter().map(|r| r.totals.failed).sum();
    let platforms: Vec<&str> = merged.iter().map(|r| r.platform.as_str()).collect();
    let _ = writeln!(
        m,
        "## Scene tests: {cases} cases, {failed} failed ({})\n",
        if platforms.is_empty() {
            "no platform".to_string()
        } else {
            platforms.join(", ")
        }
    );
    let _ = writeln!(
        m,
        "| case | verdict | compile s | fixtures s | golden s | lock wait s | device s | compare s | card-s held | device-s |"
    );
    let _ = writeln!(
        m,
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for r in merged {
        for c in &r.cases {
            let cards = c.devices.len().max(1) as f64;
            let p = &c.phases;
            let name = if merged.len() > 1 {
                format!("{} ({})", c.name, r.platform)
            } else {
                c.name.clone()
            };
            let verdict = match (c.status, c.failure_stage) {
                (CaseStatus::Passed, _) => "PASS".to_string(),
                (CaseStatus::Failed, Some(stage)) => format!("FAIL ({stage})"),
                (CaseStatus::Failed, None) => "FAIL".to_string(),
            };
            let _ = writeln!(
                m,
                "| `{}` | {verdict} | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell(&name),
                secs(p.compile_s),
                secs(p.fixtures_s),
                secs(p.golden_s),
                secs(p.lock_wait_s),
                secs(p.device_s),
                secs(p.compare_s),
                secs(p.lock_held_s * cards),
                secs(p.device_s * cards),
            );
        }
    }
    let sum = |f: &dyn Fn(&RunReport) -> f64| merged.iter().map(f).sum::<f64>();
    let count = |f: &dyn Fn(&RunReport) -> usize| merged.iter().map(f).sum::<usize>();
    let held = sum(&|r| r.totals.card_seconds_held);
    let device = sum(&|r| r.totals.device_seconds);
    let _ = writeln!(m, "\n### Totals\n");
    let _ = writeln!(m, "| total | value |");
    let _ = writeln!(m, "| --- | ---: |");
    let rows: [(&str, String); 11] = [
        ("reports", files.len().to_string()),
        ("cases", cases.to_string()),
        ("passed", count(&|r| r.totals.passed).to_string()),
        ("failures", failed.to_string()),
        ("card-seconds held", secs(held)),
        ("device-seconds", secs(device)),
        (
            "held / device",
            if device > 0.0 {
                format!("{:.2}", held / device)
            } else {
                "-".to_string()
            },
        ),
        (
            "queueing seconds",
            secs(sum(&|r| r.totals.queueing_seconds)),
        ),
        ("compile seconds", secs(sum(&|r| r.totals.compile_seconds))),
        ("cache hits", count(&|r| r.totals.units_cached).to_string()),
        (
            "units compiled",
            count(&|r| r.totals.units_compiled).to_string(),
        ),
    ];
    for (k, v) in rows {
        let _ = writeln!(m, "| {k} | {v} |");
    }
    let failures: Vec<_> = merged
        .iter()
        .flat_map(|r| r.cases.iter())
        .filter(|c| c.status == CaseStatus::Failed)
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(m, "\n### Failures\n");
        for c in failures {
            let stage = c.failure_stage.map(|s| s.to_string()).unwrap_or_default();
            let first = headline(c.message.as_deref().unwrap_or("failed"));
            let dump = c.dump.as_deref().map_or_else(String::new, |d| {
                let d = Path::new(d);
                let shown = d.strip_prefix(cwd).unwrap_or(d);
                format!(" (dump `{}`)", cell(&shown.display().to_string()))
            });
            let _ = writeln!(m, "- `{}` ({stage}): {}{dump}", cell(&c.name), cell(&first));
        }
    }
    m
}

/// The first line of a failure message, continued while a line ends
/// with `:` (up to four lines), so a cause announced by its first line
/// (`... pass 1 (scene precompile) failed compiling:`, then the kernel,
/// then the compiler's error) is shown with what it announces.
fn headline(message: &str) -> String {
    let mut lines = message.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut out = lines.next().unwrap_or("failed").to_string();
    for _ in 0..3 {
        if !out.ends_with(':') {
            break;
        }
        match lines.next() {
            Some(next) => {
                out.push(' ');
                out.push_str(next);
            }
            None => break,
        }
    }
    out
}

/// Writes `bytes` to `path` whole (0644; a device or FIFO in place), or to
/// stdout for `-`.
fn write_output(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(bytes)?;
        return out.flush();
    }
    scene_util::write_output(path, bytes, 0o644)
}

/// Appends `bytes` to `path` (GitHub's step summary file).
fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::File::options()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use scene_harness::CaseReport;
    use scene_harness::report::FailureStage;

    #[test]
    fn markdown_escapes_cells_and_lists_failures() {
        let mut a = CaseReport::new("s", "a|b");
        a.devices = vec![0, 1];
        a.phases.lock_held_s = 0.5;
        a.phases.device_s = 0.25;
        a.fail(FailureStage::Compare, "tensor `f` | mismatch\nmore");
        let r = RunReport::new("a2a3sim", vec![a, CaseReport::new("s", "ok")], 1.0);
        let m = markdown(
            &RunReport::merge(&[r]),
            &[PathBuf::from("r.json")],
            Path::new("/ws"),
        );
        assert!(m.contains("| `s::a\\|b` | FAIL (compare) |"), "{m}");
        // Two cards: the card-seconds are per card.
        assert!(m.contains("| 1.000 | 0.500 |"), "{m}");
        assert!(m.contains("| failures | 1 |"), "{m}");
        assert!(m.contains("| card-seconds held | 1.000 |"), "{m}");
        assert!(
            m.contains("- `s::a\\|b` (compare): tensor `f` \\| mismatch\n"),
            "{m}"
        );
    }

    #[test]
    fn markdown_failures_name_their_dump() {
        let mut a = CaseReport::new("s", "a");
        a.fail(
            FailureStage::Compare,
            "tensor `f` mismatch\ndump written to x",
        );
        a.dump = Some("/ws/reports/scene-report-1/dumps/s/a".into());
        let mut b = CaseReport::new("s", "b");
        b.fail(FailureStage::Compare, "off");
        b.dump = Some("/elsewhere/dumps/s/b".into());
        let r = RunReport::new("a2a3sim", vec![a, b], 1.0);
        let m = markdown(&RunReport::merge(&[r]), &[], Path::new("/ws"));
        assert!(
            m.contains(
                "- `s::a` (compare): tensor `f` mismatch (dump `reports/scene-report-1/dumps/s/a`)\n"
            ),
            "{m}"
        );
        assert!(
            m.contains("- `s::b` (compare): off (dump `/elsewhere/dumps/s/b`)\n"),
            "{m}"
        );
    }

    /// A report of `scene run --report-json <ws>/run/out/report.json` with
    /// its artifacts under `<ws>/run/out` and one outside it.
    fn run_report(ws: &Path) -> RunReport {
        let mut c = CaseReport::new("s", "c");
        c.fail(FailureStage::Compare, "mismatch");
        c.dump = Some(ws.join("run/out/dumps/s/c").display().to_string());
        c.trace = Some("out/traces/s/c.trace.json".into());
        c.args_dump = Some(ws.join("run/args/s/c").display().to_string());
        let mut r = RunReport::new("a2a3sim", vec![c], 1.0);
        r.report_dir = Some(ws.join("run/out").display().to_string());
        r.working_dir = Some(ws.join("run").display().to_string());
        r
    }

    fn mkdirs(dirs: &[PathBuf]) {
        for d in dirs {
            std::fs::create_dir_all(d).unwrap();
        }
    }

    #[test]
    fn a_moved_reports_artifacts_are_found_beside_it() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().canonicalize().unwrap();
        let original = run_report(&ws);
        let cwd = ws.join("elsewhere");
        let moved = cwd.join("reports/scene-report-1");
        mkdirs(&[
            moved.join("dumps/s/c"),
            moved.join("traces/s"),
            ws.join("run/args/s/c"),
        ]);
        // Moved (the original directory is gone): under the recorded
        // report_dir, rebased; outside it, as recorded.
        let mut r = original.clone();
        resolve_artifacts(
            &mut r,
            Path::new("reports/scene-report-1/report.json"),
            &cwd,
        );
        let c = &r.cases[0];
        let moved_s = moved.display().to_string();
        assert_eq!(c.dump.as_deref(), Some(&*format!("{moved_s}/dumps/s/c")));
        assert_eq!(
            c.trace.as_deref(),
            Some(&*format!("{moved_s}/traces/s/c.trace.json"))
        );
        assert_eq!(
            c.args_dump.as_deref(),
            Some(&*ws.join("run/args/s/c").display().to_string())
        );
        // Rebased even when nothing is there (on another machine the
        // original would not be either).
        std::fs::remove_dir_all(moved.join("dumps")).unwrap();
        let mut r = original.clone();
        resolve_artifacts(&mut r, &moved.join("report.json"), &cwd);
        assert_eq!(
            r.cases[0].dump.as_deref(),
            Some(&*format!("{moved_s}/dumps/s/c"))
        );
        // Copied alone (the originals still there, nothing beside the
        // copy): the originals.
        mkdirs(&[ws.join("run/out/dumps/s/c")]);
        let mut r = original.clone();
        resolve_artifacts(&mut r, &moved.join("report.json"), &cwd);
        assert_eq!(r.cases[0].dump, original.cases[0].dump);
        // Not moved: as recorded (the relative trace against the run's
        // working directory, not the reader's).
        let mut r = original.clone();
        resolve_artifacts(&mut r, &ws.join("run/out/report.json"), &cwd);
        assert_eq!(r.cases[0].dump, original.cases[0].dump);
        assert_eq!(
            r.cases[0].trace.as_deref(),
            Some(
                &*ws.join("run/out/traces/s/c.trace.json")
                    .display()
                    .to_string()
            )
        );
        // Not moved, named through a symbolic link: as recorded.
        std::os::unix::fs::symlink(ws.join("run"), ws.join("link")).unwrap();
        let mut r = original.clone();
        resolve_artifacts(&mut r, &ws.join("link/out/report.json"), &cwd);
        assert_eq!(r.cases[0].dump, original.cases[0].dump);
    }

    /// A report of an older `scene` (no `report_dir` / `working_dir`):
    /// relative paths against the reader's directory, as before.
    #[test]
    fn an_older_report_resolves_as_before() {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = tmp.path().canonicalize().unwrap();
        let mut r = run_report(Path::new("/ws"));
        r.report_dir = None;
        r.working_dir = None;
        resolve_artifacts(&mut r, Path::new("/somewhere/report.json"), &cwd);
        let c = &r.cases[0];
        assert_eq!(c.dump.as_deref(), Some("/ws/run/out/dumps/s/c"));
        assert_eq!(
            c.trace.as_deref(),
            Some(&*cwd.join("out/traces/s/c.trace.json").display().to_string())
        );
    }

    #[test]
    fn a_failure_headline_continues_what_its_first_line_announces() {
        assert_eq!(headline("mismatch\nmore"), "mismatch");
        assert_eq!(
            headline(
                "failed compiling:\nkernel `k` failed (exit 1):\n\nk.c:1: error: x\nk.c:2: note"
            ),
            "failed compiling: kernel `k` failed (exit 1): k.c:1: error: x"
        );
        assert_eq!(headline("a:\nb:\nc:\nd:\ne"), "a: b: c: d:");
        assert_eq!(headline("ends:"), "ends:");
        assert_eq!(headline(""), "failed");
    }
}
