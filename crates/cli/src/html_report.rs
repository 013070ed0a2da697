//! `scene report --html FILE`: one or more `--report-json` files as one
//! self-contained HTML page (inline CSS, inline SVG, a few lines of inline
//! script; nothing is fetched): a summary per input report, a card timeline
//! across the reports (one report = one process; a bar per card hold, from
//! the cases' `lock` intervals), and the case table with verdicts, failure
//! messages, per-case phase bars and links to the case's trace, dependency
//! graph, argument dump and tensor dump.
//!
//! Every string that comes from a report is escaped ([`esc`]); no report
//! text is ever placed inside a `<script>` or `<style>`.
//!
//! The page records its own health for tests and curious readers: a script
//! at the top of `<head>` notes every uncaught error, failed resource load
//! and `console.error` in the root element's `data-page-errors` attribute,
//! and the script at the end of `<body>` sets `data-rendered="1"` and puts
//! the page coordinates of the timeline and the case table in
//! `data-layout` (crates/cli/tests/integration/html_report.rs reads both from Chromium's
//! `--dump-dom` and checks a screenshot against them).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use scene_harness::report::{CaseReport, CaseStatus, RunReport};

/// Timeline bar fill of a passed case (the browser test looks for it).
pub(crate) const PASS_RGB: (u8, u8, u8) = (0x2e, 0x9e, 0x44);
/// Timeline bar fill of a failed case (the browser test looks for it).
pub(crate) const FAIL_RGB: (u8, u8, u8) = (0xd6, 0x27, 0x28);
/// Background of the case table's header row (the browser test looks for it).
pub(crate) const HEADER_RGB: (u8, u8, u8) = (0x24, 0x3b, 0x6b);

/// The phases of a case's bar: report field, legend label, colour.
const PHASES: [(&str, &str); 6] = [
    ("compile", "#6c8ebf"),
    ("fixtures", "#9c6ade"),
    ("golden", "#e0a030"),
    ("lock wait", "#b0b0b0"),
    ("device", "#17a2b8"),
    ("compare", "#8c564b"),
];

/// Stripe colours telling the processes (input reports) apart.
const PROCESS_COLOURS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#9467bd", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000",
];

fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// `s` as HTML text or a quoted attribute value.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes a path for a URL: unreserved bytes and `/` stay.
fn percent_encode_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Where the page links an artifact path from a report: a path under the
/// page's directory (`page_dir`, canonical) becomes a relative link (the
/// page and its artifacts can be moved or uploaded together), anything
/// else a `file://` URL. A relative path is taken relative to `cwd`
/// (`scene report` has made the paths of the reports it read absolute
/// already, rebased when a report moved: `report_cmd::resolve_artifacts`).
/// An existing artifact reached through a symbolic link (`/tmp` a link
/// to `/private/tmp`, say) is compared by its canonical path too.
fn artifact_href(path: &str, page_dir: &Path, cwd: &Path) -> String {
    let p = Path::new(path);
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    };
    if let Ok(rel) = abs.strip_prefix(page_dir) {
        return percent_encode_path(&rel.to_string_lossy());
    }
    if let Ok(canonical) = abs.canonicalize()
        && let Ok(rel) = canonical.strip_prefix(page_dir)
    {
        return percent_encode_path(&rel.to_string_lossy());
    }
    format!("file://{}", percent_encode_path(&abs.to_string_lossy()))
}

/// One input report: the file it was read from and its contents.
#[derive(Debug)]
pub(crate) struct Input<'a> {
    pub(crate) file: &'a Path,
    pub(crate) report: &'a RunReport,
}

fn secs(s: f64) -> String {
    format!("{s:.3}")
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS UTC`.
fn utc(t: f64) -> String {
    if !t.is_finite() {
        return "-".into();
    }
    let whole = t.floor();
    let nanos = ((t - whole) * 1e9) as u32;
    chrono::DateTime::from_timestamp(whole as i64, nanos.min(999_999_999))
        .map(|d| d.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| "-".into())
}

fn phase_values(c: &CaseReport) -> [f64; 6] {
    let p = &c.phases;
    [
        p.compile_s,
        p.fixtures_s,
        p.golden_s,
        p.lock_wait_s,
        p.device_s,
        p.compare_s,
    ]
    .map(|v| if v.is_finite() && v > 0.0 { v } else { 0.0 })
}

const HOOK_SCRIPT: &str = r#"(function(){var d=document.documentElement,errs=[];
function note(m){errs.push(String(m));d.setAttribute('data-page-errors',errs.join('\n'));}
window.addEventListener('error',function(e){if(e&&e.message){note(e.message);}else{var t=e&&e.target;note('failed to load '+((t&&(t.src||t.href))||'a resource'));}},true);
window.addEventListener('unhandledrejection',function(e){note('unhandled rejection: '+(e&&e.reason));});
var ce=console.error;console.error=function(){note('console.error: '+Array.prototype.join.call(arguments,' '));return ce.apply(console,arguments);};})();"#;

const MAIN_SCRIPT: &str = r#"(function(){var d=document.documentElement;
var cb=document.getElementById('failures-only');
if(cb){cb.addEventListener('change',function(){var rows=document.querySelectorAll('#cases tbody tr');
for(var i=0;i<rows.length;i++){rows[i].hidden=cb.checked&&rows[i].getAttribute('data-verdict')!=='failed';}});}
function rect(id){var e=document.getElementById(id);if(!e){return null;}var b=e.getBoundingClientRect();
return [Math.round(b.left+window.scrollX),Math.round(b.top+window.scrollY),Math.round(b.width),Math.round(b.height)];}
d.setAttribute('data-layout',JSON.stringify({timeline:rect('timeline'),cases:rect('cases')}));
d.setAttribute('data-rendered','1');})();"#;

fn style() -> String {
    format!(
        r#"body{{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:14px;color:#222;margin:16px 24px;background:#fff}}
h1{{font-size:20px;margin:0 0 12px}}h2{{font-size:16px;margin:20px 0 8px}}
table{{border-collapse:collapse}}th,td{{padding:3px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}}
th{{background:{header};color:#fff;font-weight:600}}td.num,th.num{{text-align:right;font-variant-numeric:tabular-nums}}
tr.failed td{{background:#fdf0ef}}tr:target td{{outline:2px solid #f0b400}}
.badge{{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-weight:600;font-size:12px}}
.badge.passed{{background:#1e7b34}}.badge.failed{{background:#b02020}}
code{{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:13px}}
pre{{white-space:pre-wrap;margin:4px 0;font-size:12px;max-width:70ch}}details summary{{cursor:pointer}}
.legend{{margin:4px 0 8px;font-size:12px}}.legend span.sw{{display:inline-block;width:12px;height:12px;vertical-align:-2px;margin:0 4px 0 12px;border:1px solid #0003}}
.muted{{color:#777}}svg text{{font-family:system-ui,sans-serif}}a{{color:#1a55b0}}"#,
        header = hex(HEADER_RGB)
    )
}

/// The HTML page of `inputs`. `page_dir` is the directory the page is
/// written to and `cwd` the directory relative artifact paths are read
/// against (see [`artifact_href`]).
pub(crate) fn html(inputs: &[Input<'_>], page_dir: &Path, cwd: &Path) -> String {
    let cases: usize = inputs.iter().map(|i| i.report.cases.len()).sum();
    let failed: usize = inputs.iter().map(|i| i.report.totals.failed).sum();
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Scene report: {cases} cases, {failed} failed</title>\n\
         <script>{HOOK_SCRIPT}</script>\n<style>{}</style>\n</head>\n<body>\n",
        style()
    );
    let _ = writeln!(
        h,
        "<h1>Scene report: {cases} cases, {failed} failed, {} report{}</h1>",
        inputs.len(),
        if inputs.len() == 1 { "" } else { "s" }
    );
    summary(&mut h, inputs);
    timeline(&mut h, inputs);
    case_table(&mut h, inputs, page_dir, cwd);
    let _ = write!(h, "<script>{MAIN_SCRIPT}</script>\n</body>\n</html>\n");
    h
}

fn process_colour(i: usize) -> &'static str {
    PROCESS_COLOURS[i % PROCESS_COLOURS.len()]
}

fn process_swatch(i: usize) -> String {
    format!(
        "<span class=\"sw\" style=\"background:{}\"></span>P{}",
        process_colour(i),
        i + 1
    )
}

fn summary(h: &mut String, inputs: &[Input<'_>]) {
    h.push_str("<h2>Summary</h2>\n<table id=\"summary\">\n<thead><tr><th>process</th><th>report</th><th>platform</th><th>started</th>\
        <th class=\"num\">wall s</th><th class=\"num\">cases</th><th class=\"num\">passed</th><th class=\"num\">failed</th>\
        <th class=\"num\">skipped</th><th class=\"num\">card-s held</th><th class=\"num\">device-s</th>\
        <th class=\"num\">queueing s</th><th class=\"num\">compile s</th></tr></thead>\n<tbody>\n");
    let mut total = [0.0f64; 5];
    let mut counts = [0usize; 4];
    for (i, input) in inputs.iter().enumerate() {
        let r = input.report;
        let t = &r.totals;
        let _ = writeln!(
            h,
            "<tr><td class=\"legend\">{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            process_swatch(i),
            esc(&input.file.display().to_string()),
            esc(&r.platform),
            esc(&utc(r.started_at)),
            secs(t.wall_s),
            r.cases.len(),
            t.passed,
            t.failed,
            t.skipped,
            secs(t.card_seconds_held),
            secs(t.device_seconds),
            secs(t.queueing_seconds),
            secs(t.compile_seconds),
        );
        for (acc, v) in total.iter_mut().zip([
            t.wall_s,
            t.card_seconds_held,
            t.device_seconds,
            t.queueing_seconds,
            t.compile_seconds,
        ]) {
            *acc += v;
        }
        for (acc, v) in counts
            .iter_mut()
            .zip([r.cases.len(), t.passed, t.failed, t.skipped])
        {
            *acc += v;
        }
    }
    if inputs.len() > 1 {
        let _ = writeln!(
            h,
            "<tr><td><b>all</b></td><td></td><td></td><td></td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            secs(total[0]),
            counts[0],
            counts[1],
            counts[2],
            counts[3],
            secs(total[1]),
            secs(total[2]),
            secs(total[3]),
            secs(total[4]),
        );
    }
    h.push_str("</tbody>\n</table>\n");
}

/// One card hold of one case: which process, which case (its row id),
/// which card, and when.
struct Hold<'a> {
    process: usize,
    row: usize,
    case: &'a CaseReport,
    card: Option<u32>,
    from: f64,
    to: f64,
}

/// A step of 1, 2 or 5 x 10^k giving about `target` ticks over `span`.
fn tick_step(span: f64, target: f64) -> f64 {
    let raw = (span / target).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

fn timeline(h: &mut String, inputs: &[Input<'_>]) {
    let mut holds = Vec::new();
    let mut no_hold = 0usize;
    let mut row = 0usize;
    for (process, input) in inputs.iter().enumerate() {
        for case in &input.report.cases {
            match &case.lock {
                Some(l) if l.acquired_at.is_finite() && l.released_at.is_finite() => {
                    let (from, to) = (l.acquired_at, l.released_at.max(l.acquired_at));
                    if case.devices.is_empty() {
                        holds.push(Hold {
                            process,
                            row,
                            case,
                            card: None,
                            from,
                            to,
                        });
                    }
                    for &d in &case.devices {
                        holds.push(Hold {
                            process,
                            row,
                            case,
                            card: Some(d),
                            from,
                            to,
                        });
                    }
                }
                _ => no_hold += 1,
            }
            row += 1;
        }
    }
    h.push_str("<h2>Card timeline</h2>\n");
    let _ = write!(
        h,
        "<div class=\"legend\">one row per card, one bar per card hold (from the cases' lock intervals), \
         the stripe on top names the process (input report):\
         <span class=\"sw\" style=\"background:{}\"></span>passed<span class=\"sw\" style=\"background:{}\"></span>failed",
        hex(PASS_RGB),
        hex(FAIL_RGB)
    );
    for (i, input) in inputs.iter().enumerate() {
        let _ = write!(
            h,
            "{} <code>{}</code>",
            process_swatch(i),
            esc(&input.file.display().to_string())
        );
    }
    h.push_str("</div>\n");
    if holds.is_empty() {
        let _ = writeln!(
            h,
            "<p id=\"timeline\" class=\"muted\">No case held a card ({no_hold} case{} without a lock interval).</p>",
            if no_hold == 1 { "" } else { "s" }
        );
        return;
    }
    let t0 = holds.iter().map(|x| x.from).fold(f64::INFINITY, f64::min);
    let t1 = holds.iter().map(|x| x.to).fold(f64::NEG_INFINITY, f64::max);
    let span = (t1 - t0).max(1e-3);
    let mut cards: Vec<Option<u32>> = holds.iter().map(|x| x.card).collect();
    cards.sort();
    cards.dedup();
    let (width, left, right, top, lane, bar) = (1100.0, 80.0, 16.0, 26.0, 30.0, 22.0);
    let plot = width - left - right;
    let height = top + lane * cards.len() as f64 + 6.0;
    let x_of = |t: f64| left + (t - t0) / span * plot;
    let _ = writeln!(
        h,
        "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"card timeline\">"
    );
    // Axis: seconds from the first acquisition.
    let step = tick_step(span, 8.0);
    let mut k = 0.0f64;
    while k * step <= span + 1e-12 {
        let t = k * step;
        let x = x_of(t0 + t);
        let label = if step >= 1.0 {
            format!("+{t:.0} s")
        } else if step >= 0.01 {
            format!("+{t:.2} s")
        } else {
            format!("+{t:.4} s")
        };
        let _ = writeln!(
            h,
            "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{height}\" stroke=\"#e4e4e4\"/>\
             <text x=\"{x:.1}\" y=\"14\" font-size=\"11\" text-anchor=\"middle\" fill=\"#555\">{label}</text>",
            top - 6.0
        );
        k += 1.0;
    }
    for (i, card) in cards.iter().enumerate() {
        let y = top + lane * i as f64;
        let name = card.map_or_else(|| "card ?".to_string(), |c| format!("card {c}"));
        let _ = writeln!(
            h,
            "<text x=\"6\" y=\"{:.1}\" font-size=\"12\" fill=\"#222\">{name}</text>\
             <line x1=\"{left}\" y1=\"{:.1}\" x2=\"{}\" y2=\"{:.1}\" stroke=\"#ccc\"/>",
            y + lane / 2.0 + 4.0,
            y + lane,
            width - right,
            y + lane
        );
    }
    for hold in &holds {
        let lane_i = cards.iter().position(|c| *c == hold.card).unwrap_or(0);
        let y = top + lane * lane_i as f64 + (lane - bar) / 2.0;
        let x = x_of(hold.from);
        let w = ((hold.to - hold.from) / span * plot).max(8.0);
        let failed = hold.case.status == CaseStatus::Failed;
        let fill = hex(if failed { FAIL_RGB } else { PASS_RGB });
        let card = hold
            .card
            .map_or_else(|| "an unnamed card".to_string(), |c| format!("card {c}"));
        let title = format!(
            "P{} {} on {card}: held {} s, from +{} s to +{} s ({})",
            hold.process + 1,
            hold.case.name,
            secs(hold.to - hold.from),
            secs(hold.from - t0),
            secs(hold.to - t0),
            if failed { "failed" } else { "passed" }
        );
        let label = format!("P{} {}", hold.process + 1, hold.case.name);
        let _ = write!(
            h,
            "<a href=\"#case-{}\"><g><title>{}</title>\
             <rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{bar}\" fill=\"{fill}\" stroke=\"#fff\" stroke-width=\"1\"/>\
             <rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"4\" fill=\"{}\"/>",
            hold.row,
            esc(&title),
            process_colour(hold.process)
        );
        // The label only where it fits (about 6.5 px a character).
        if w >= label.chars().count() as f64 * 6.5 + 8.0 {
            let _ = write!(
                h,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#fff\">{}</text>",
                x + 4.0,
                y + bar - 5.0,
                esc(&label)
            );
        }
        h.push_str("</g></a>\n");
    }
    h.push_str("</svg>\n");
    let _ = writeln!(
        h,
        "<p class=\"muted\">Time 0 = {} (the first card acquisition); {} hold{}; {no_hold} case{} never held a card.</p>",
        esc(&utc(t0)),
        holds.len(),
        if holds.len() == 1 { "" } else { "s" },
        if no_hold == 1 { "" } else { "s" }
    );
}

fn phase_bar(h: &mut String, c: &CaseReport, scale: f64) {
    const W: f64 = 220.0;
    let v = phase_values(c);
    let tip: Vec<String> = PHASES
        .iter()
        .zip(v)
        .map(|((name, _), s)| format!("{name} {}", secs(s)))
        .collect();
    let _ = write!(
        h,
        "<svg class=\"phases\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"14\" viewBox=\"0 0 {W} 14\">\
         <title>{}</title><rect x=\"0\" y=\"0\" width=\"{W}\" height=\"14\" fill=\"#f3f3f3\"/>",
        esc(&tip.join(", "))
    );
    let mut x = 0.0;
    for ((name, colour), s) in PHASES.iter().zip(v) {
        if s <= 0.0 || scale <= 0.0 {
            continue;
        }
        let w = s / scale * W;
        let _ = write!(
            h,
            "<rect x=\"{x:.2}\" y=\"1\" width=\"{w:.2}\" height=\"12\" fill=\"{colour}\"><title>{name} {} s</title></rect>",
            secs(s)
        );
        x += w;
    }
    h.push_str("</svg>");
}

fn links(h: &mut String, c: &CaseReport, page_dir: &Path, cwd: &Path) {
    let mut parts = Vec::new();
    let mut link = |label: &str, path: &str| {
        parts.push(format!(
            "<a href=\"{}\" title=\"{}\">{label}</a>",
            esc(&artifact_href(path, page_dir, cwd)),
            esc(path)
        ));
    };
    if let Some(t) = &c.trace {
        link("trace", t);
    }
    if let Some(g) = &c.dep_graph {
        link("graph", g);
        let svg = PathBuf::from(g).with_extension("svg");
        let svg_abs = if svg.is_absolute() {
            svg.clone()
        } else {
            cwd.join(&svg)
        };
        if svg_abs.is_file() {
            link("svg", &svg.to_string_lossy());
        }
    }
    if let Some(a) = &c.args_dump {
        link("args", a);
    }
    if let Some(d) = &c.dump {
        link("dump", d);
    }
    h.push_str(&parts.join(" "));
}

fn case_table(h: &mut String, inputs: &[Input<'_>], page_dir: &Path, cwd: &Path) {
    let scale = inputs
        .iter()
        .flat_map(|i| i.report.cases.iter())
        .map(|c| phase_values(c).iter().sum::<f64>())
        .fold(0.0, f64::max);
    h.push_str("<h2>Cases</h2>\n<div class=\"legend\">phases (bar widths on one scale, the longest case fills its bar):");
    for (name, colour) in PHASES {
        let _ = write!(
            h,
            "<span class=\"sw\" style=\"background:{colour}\"></span>{name}"
        );
    }
    h.push_str(
        " <label style=\"margin-left:24px\"><input type=\"checkbox\" id=\"failures-only\"> failures only</label></div>\n",
    );
    h.push_str(
        "<table id=\"cases\">\n<thead><tr><th>process</th><th>case</th><th>verdict</th><th>failure</th>\
         <th class=\"num\">wall s</th><th>cards</th><th>phases</th><th class=\"num\">device s (rounds min / median / max)</th>\
         <th>golden cached</th><th>artifacts</th></tr></thead>\n<tbody>\n",
    );
    let mut row = 0usize;
    for (process, input) in inputs.iter().enumerate() {
        for c in &input.report.cases {
            let verdict = match c.status {
                CaseStatus::Passed => "passed",
                CaseStatus::Failed => "failed",
            };
            let _ = write!(
                h,
                "<tr id=\"case-{row}\" class=\"{verdict}\" data-verdict=\"{verdict}\"><td class=\"legend\">{}</td>\
                 <td><code>{}</code></td><td><span class=\"badge {verdict}\">{}</span></td><td>",
                process_swatch(process),
                esc(&c.name),
                if c.status == CaseStatus::Passed {
                    "PASS"
                } else {
                    "FAIL"
                }
            );
            if c.status == CaseStatus::Failed {
                let stage = c
                    .failure_stage
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "unknown stage".into());
                let message = c.message.as_deref().unwrap_or("");
                let mut lines = message.lines();
                let first = lines.next().unwrap_or("");
                if lines.next().is_some() {
                    let _ = write!(
                        h,
                        "<details><summary><b>{}</b>: {}</summary><pre>{}</pre></details>",
                        esc(&stage),
                        esc(first),
                        esc(message)
                    );
                } else {
                    let _ = write!(h, "<b>{}</b>: {}", esc(&stage), esc(first));
                }
            }
            let devices: Vec<String> = c.devices.iter().map(u32::to_string).collect();
            let _ = write!(
                h,
                "</td><td class=\"num\">{}</td><td>{}</td><td>",
                secs(c.wall_s),
                if devices.is_empty() {
                    "-".to_string()
                } else {
                    devices.join(", ")
                }
            );
            phase_bar(h, c, scale);
            let rounds = match &c.rounds {
                Some(r) => format!(
                    "{} <span class=\"muted\">({} rounds, {} warmup: {:.6} / {:.6} / {:.6})</span>",
                    secs(c.phases.device_s),
                    r.n,
                    r.warmup,
                    r.device_s.min,
                    r.device_s.median,
                    r.device_s.max
                ),
                None => secs(c.phases.device_s),
            };
            let _ = write!(
                h,
                "</td><td class=\"num\">{rounds}</td><td>{}</td><td>",
                if c.golden_cached { "yes" } else { "no" }
            );
            links(h, c, page_dir, cwd);
            h.push_str("</td></tr>\n");
            row += 1;
        }
    }
    h.push_str("</tbody>\n</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use scene_harness::report::{FailureStage, LockInterval, RoundStats, RoundsReport};

    fn case(scene: &str, name: &str, devices: &[u32], from: f64, to: f64) -> CaseReport {
        let mut c = CaseReport::new(scene, name);
        c.devices = devices.to_vec();
        c.lock = Some(LockInterval {
            acquired_at: from,
            released_at: to,
        });
        c.phases.compile_s = 0.5;
        c.phases.device_s = to - from;
        c.phases.lock_held_s = to - from;
        c
    }

    fn page(reports: &[(&str, RunReport)]) -> String {
        let inputs: Vec<Input<'_>> = reports
            .iter()
            .map(|(f, r)| Input {
                file: Path::new(f),
                report: r,
            })
            .collect();
        html(&inputs, Path::new("/out"), Path::new("/work"))
    }

    #[test]
    fn report_text_is_escaped_everywhere() {
        let mut bad = case("s<script>", "a&b\"c'd", &[0], 10.0, 11.0);
        bad.fail(
            FailureStage::Compare,
            "tensor `f` <b>mismatch</b> & more\n</script><script>alert(1)</script>",
        );
        bad.trace = Some("traces/x\"><script>alert(2)</script>.json".into());
        let r = RunReport::new("a2a3<sim>", vec![bad], 1.0);
        let h = page(&[("rep<1>.json", r)]);
        assert!(!h.contains("<script>alert"), "{h}");
        assert!(!h.contains("<b>mismatch"), "{h}");
        assert!(!h.contains("s<script>"), "{h}");
        assert!(h.contains("s&lt;script&gt;::a&amp;b&quot;c&#39;d"), "{h}");
        assert!(h.contains("&lt;b&gt;mismatch&lt;/b&gt; &amp; more"), "{h}");
        assert!(h.contains("a2a3&lt;sim&gt;"), "{h}");
        assert!(h.contains("rep&lt;1&gt;.json"), "{h}");
        // Exactly the page's own two scripts.
        assert_eq!(h.matches("<script>").count(), 2, "{h}");
        assert_eq!(h.matches("</script>").count(), 2, "{h}");
    }

    #[test]
    fn nothing_is_fetched() {
        let r = RunReport::new("a2a3sim", vec![case("s", "c", &[0], 1.0, 2.0)], 1.0);
        let h = page(&[("a.json", r)]);
        // The SVG namespace URI is an identifier, not a fetch.
        let h = h.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        for needle in [
            " src=", "<link", "@import", "url(", "http://", "https://", "//",
        ] {
            assert!(!h.contains(needle), "{needle} in {h}");
        }
    }

    #[test]
    fn timeline_has_a_bar_per_card_hold_across_processes() {
        let mut f = case("s", "bad", &[1], 12.0, 13.0);
        f.fail(FailureStage::Compare, "x");
        let a = RunReport::new(
            "a2a3sim",
            vec![
                case("s", "one", &[0], 10.0, 11.0),
                case("l3", "group", &[0, 1], 14.0, 15.0),
            ],
            5.0,
        );
        let mut no_lock = CaseReport::new("s", "nolock");
        no_lock.fail(FailureStage::Compile, "cc: error");
        let b = RunReport::new("a2a3sim", vec![f, no_lock], 5.0);
        let h = page(&[("a.json", a), ("b.json", b)]);
        let svg = &h[h.find("<svg id=\"timeline\"").unwrap()..];
        let svg = &svg[..svg.find("</svg>").unwrap()];
        // one, group x2 (two cards), bad.
        assert_eq!(svg.matches("<a href=\"#case-").count(), 4, "{svg}");
        assert_eq!(svg.matches(&hex(PASS_RGB)).count(), 3, "{svg}");
        assert_eq!(svg.matches(&hex(FAIL_RGB)).count(), 1, "{svg}");
        assert!(
            svg.contains(">card 0<") && svg.contains(">card 1<"),
            "{svg}"
        );
        // Each process's stripe colour.
        assert_eq!(svg.matches(PROCESS_COLOURS[0]).count(), 3, "{svg}");
        assert_eq!(svg.matches(PROCESS_COLOURS[1]).count(), 1, "{svg}");
        assert!(svg.contains("P2 s::bad on card 1"), "{svg}");
        // Bars link to the rows of the table, which are numbered across reports.
        assert!(svg.contains("href=\"#case-2\""), "{svg}");
        assert!(h.contains("<tr id=\"case-2\" class=\"failed\""), "{h}");
        assert!(h.contains("<tr id=\"case-3\" class=\"failed\""), "{h}");
        assert!(h.contains("1 case never held a card"), "{h}");
    }

    #[test]
    fn table_shows_failures_rounds_golden_and_links() {
        let mut c = case("s", "r", &[0], 1.0, 2.0);
        c.rounds = Some(RoundsReport {
            n: 20,
            warmup: 2,
            device_s: RoundStats {
                min: 0.001,
                median: 0.002,
                max: 0.004,
            },
            per_round_s: vec![],
            failed_warmup: vec![],
            failed: vec![],
        });
        c.golden_cached = true;
        c.trace = Some("/out/traces/s/r.trace.json".into());
        c.dep_graph = Some("/elsewhere/g/s/r.dot".into());
        c.args_dump = Some("dumps/s r".into());
        c.dump = Some("/out/reports/scene-report-1/dumps/s/r".into());
        c.fail(FailureStage::Device, "first line\nsecond line");
        let h = page(&[("a.json", RunReport::new("a2a3sim", vec![c], 1.0))]);
        assert!(
            h.contains("20 rounds, 2 warmup: 0.001000 / 0.002000 / 0.004000"),
            "{h}"
        );
        assert!(h.contains("<td>yes</td>"), "{h}");
        assert!(
            h.contains("<summary><b>device</b>: first line</summary>"),
            "{h}"
        );
        assert!(h.contains("<pre>first line\nsecond line</pre>"), "{h}");
        // Under the page's directory: relative; elsewhere: file://.
        assert!(h.contains("href=\"traces/s/r.trace.json\""), "{h}");
        assert!(h.contains("href=\"file:///elsewhere/g/s/r.dot\""), "{h}");
        assert!(h.contains("href=\"file:///work/dumps/s%20r\""), "{h}");
        assert!(
            h.contains(
                "<a href=\"reports/scene-report-1/dumps/s/r\" \
                 title=\"/out/reports/scene-report-1/dumps/s/r\">dump</a>"
            ),
            "{h}"
        );
        // Phase bars: the compile and device segments of the one case.
        assert!(h.contains("<title>compile 0.500 s</title>"), "{h}");
        assert!(h.contains("<title>device 1.000 s</title>"), "{h}");
    }

    /// An artifact reached through a symbolic link to the page's
    /// directory is linked relatively (the page's directory is canonical).
    #[test]
    fn artifacts_through_a_symlink_are_relative_to_the_page() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir_all(real.join("dumps/s/c")).unwrap();
        std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();
        let page_dir = real.canonicalize().unwrap();
        let via_link = tmp.path().join("link/dumps/s/c");
        let href = artifact_href(&via_link.to_string_lossy(), &page_dir, tmp.path());
        assert_eq!(href, "dumps/s/c");
        // A missing one cannot be resolved: file://.
        let gone = tmp.path().join("link/dumps/s/gone");
        let href = artifact_href(&gone.to_string_lossy(), &page_dir, tmp.path());
        assert!(href.starts_with("file://"), "{href}");
    }

    #[test]
    fn no_holds_no_svg() {
        let mut c = CaseReport::new("s", "c");
        c.fail(FailureStage::Compile, "e");
        let h = page(&[("a.json", RunReport::new("a2a3sim", vec![c], 1.0))]);
        assert!(h.contains("<p id=\"timeline\""), "{h}");
        assert!(!h.contains("<svg id=\"timeline\""), "{h}");
    }

    #[test]
    fn ticks_are_round() {
        for (span, step) in [(10.0, 2.0), (0.03, 0.005), (100.0, 20.0), (7.0, 1.0)] {
            let got = tick_step(span, 8.0);
            assert!((got - step).abs() < step * 1e-9, "{span}: {got}");
        }
    }
}
