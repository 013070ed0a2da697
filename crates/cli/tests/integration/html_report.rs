//! `scene report --html FILE` in a real headless browser: two real `scene
//! run` processes (one with a failing case) write JSON reports, `scene
//! report --html` renders them into one page, and Chromium loads it.
//!
//! The page notes its own health on its root element (see
//! crates/cli/src/html_report.rs): `data-page-errors` collects every
//! uncaught error, failed resource load and `console.error`,
//! `data-rendered="1"` is set by its last script, and `data-layout` holds
//! the page coordinates of the card timeline and the case table. Chromium's
//! `--dump-dom` shows those attributes; `--screenshot` shows the pixels, and
//! the test finds the timeline's bar colours inside the timeline's box and
//! the table's header colour inside the table's box. Chromium's own log of
//! the page's console (`--enable-logging=stderr`) must be empty too.
//!
//! Chromium is found through `SCENE_CHROMIUM`, else `chromium`,
//! `chromium-browser`, `google-chrome-stable`, `google-chrome` on PATH (a
//! candidate must answer `--version`: Ubuntu's `chromium-browser` can be a
//! stub asking for a snap). Without one the tests print why and skip;
//! under CI (`CI` set) they fail, unless `.ci/run`, which installs
//! Debian's `chromium`, could not install one and said so in
//! `SCENE_CHROMIUM_UNAVAILABLE`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{TestEnv, in_ci, read_report};
use scene_harness::report::{CaseReport, FailureStage, LockInterval, RunReport};

/// The page's colours the screenshot is searched for (the constants of
/// crates/cli/src/html_report.rs).
const PASS_RGB: [u8; 3] = [0x2e, 0x9e, 0x44];
const FAIL_RGB: [u8; 3] = [0xd6, 0x27, 0x28];
const HEADER_RGB: [u8; 3] = [0x24, 0x3b, 0x6b];

/// A generous limit for one Chromium run on a loaded 2-core machine.
const BROWSER_TIMEOUT_S: u32 = 240;

/// Skips with a message; under CI only when `.ci/run` could not install
/// Chromium and said so in `SCENE_CHROMIUM_UNAVAILABLE`.
fn skip(what: &str) {
    match std::env::var("SCENE_CHROMIUM_UNAVAILABLE") {
        Ok(why) if !why.is_empty() => eprintln!("SKIPPED: {what} ({why})"),
        _ => {
            assert!(
                !in_ci(),
                "{what}: CI must not skip this test (.ci/run installs chromium)"
            );
            eprintln!("SKIPPED: {what}");
        }
    }
}

/// Whether `exe --version` answers like a Chrome/Chromium.
fn answers_version(exe: &Path) -> Result<(), String> {
    let out = Command::new("timeout")
        .arg("60")
        .arg(exe)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && (text.contains("Chromium") || text.contains("Chrome")) {
        Ok(())
    } else {
        Err(format!(
            "{} --version: {:?}: {}{}",
            exe.display(),
            out.status,
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The browser to test with; `Err` says why there is none.
fn find_chromium() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("SCENE_CHROMIUM").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        // Named explicitly: a broken one is an error, not a reason to skip.
        if let Err(e) = answers_version(&p) {
            panic!("SCENE_CHROMIUM: {e}");
        }
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut tried = Vec::new();
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome-stable",
        "google-chrome",
    ] {
        for dir in std::env::split_paths(&path) {
            let exe = dir.join(name);
            if !exe.is_file() {
                continue;
            }
            match answers_version(&exe) {
                Ok(()) => return Ok(exe),
                Err(e) => tried.push(e),
            }
        }
    }
    Err(if tried.is_empty() {
        "no Chromium: SCENE_CHROMIUM is unset and none of chromium, chromium-browser, \
         google-chrome-stable, google-chrome is on PATH (Debian: apt-get install chromium)"
            .to_string()
    } else {
        format!("no working Chromium: {}", tried.join("; "))
    })
}

/// Headless Chromium with a private profile, removed on drop.
struct Browser {
    exe: PathBuf,
    home: tempfile::TempDir,
}

impl Browser {
    fn new() -> Option<Self> {
        match find_chromium() {
            Ok(exe) => Some(Self {
                exe,
                home: tempfile::Builder::new()
                    .prefix("scenes-chromium")
                    .tempdir()
                    .unwrap(),
            }),
            Err(why) => {
                skip(&why);
                None
            }
        }
    }

    /// Runs Chromium on `page` with `args`, within [`BROWSER_TIMEOUT_S`].
    fn run(&self, page: &Path, size: (u32, u32), args: &[String]) -> Output {
        let profile = self.home.path().join("profile");
        let out = Command::new("timeout")
            .args(["--kill-after=10", &BROWSER_TIMEOUT_S.to_string()])
            .arg(&self.exe)
            .args([
                "--headless",
                "--disable-gpu",
                // Needed as root; the page is our own.
                "--no-sandbox",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                // The page's console messages on stderr, as `...:CONSOLE...] "text", source: ...`.
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(format!("--window-size={},{}", size.0, size.1))
            .args(args)
            .arg(format!("file://{}", page.display()))
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join("config"))
            .env("XDG_CACHE_HOME", self.home.path().join("cache"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} on {}: {:?}\n{}",
            self.exe.display(),
            page.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The page's DOM after its scripts ran, and what it wrote to the
    /// browser's console (Chromium's own log lines about the page).
    fn dump_dom(&self, page: &Path, size: (u32, u32)) -> (String, Vec<String>) {
        let out = self.run(page, size, &["--dump-dom".into()]);
        let console = String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .map(str::to_string)
            .collect();
        (String::from_utf8(out.stdout).unwrap(), console)
    }

    fn screenshot(&self, page: &Path, size: (u32, u32), png: &Path) -> Image {
        self.run(page, size, &[format!("--screenshot={}", png.display())]);
        Image::read(png)
    }
}

/// What a loaded page says about itself (its root element's attributes).
#[derive(Debug)]
struct PageHealth {
    rendered: bool,
    errors: Option<String>,
    /// `name -> [x, y, width, height]` in page pixels.
    layout: serde_json::Value,
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// Reads the root element's `data-*` attributes from a `--dump-dom`.
fn page_health(dom: &str) -> PageHealth {
    let start = dom.find("<html").expect("a root element");
    let end = start + dom[start..].find("<head").expect("a head");
    let root = &dom[start..end];
    let attr = |name: &str| {
        let key = format!(" {name}=\"");
        let at = root.find(&key)? + key.len();
        let len = root[at..].find('"')?;
        Some(unescape(&root[at..at + len]))
    };
    PageHealth {
        rendered: attr("data-rendered").as_deref() == Some("1"),
        errors: attr("data-page-errors"),
        layout: attr("data-layout")
            .map(|l| serde_json::from_str(&l).unwrap())
            .unwrap_or(serde_json::Value::Null),
    }
}

/// A decoded screenshot, 8-bit RGB.
struct Image {
    width: u32,
    height: u32,
    rgb: Vec<u8>,
}

impl Image {
    fn read(path: &Path) -> Self {
        let file = std::fs::File::open(path)
            .unwrap_or_else(|e| panic!("screenshot {}: {e}", path.display()));
        let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
        decoder.set_transformations(png::Transformations::normalize_to_color8());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        let channels = match info.color_type {
            png::ColorType::Rgb => 3,
            png::ColorType::Rgba => 4,
            other => panic!("screenshot {}: colour type {other:?}", path.display()),
        };
        let rgb = buf[..info.buffer_size()]
            .chunks_exact(channels)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect();
        Self {
            width: info.width,
            height: info.height,
            rgb,
        }
    }

    /// Pixels of `colour` (within 3 per channel) inside `rect` (`[x, y, w,
    /// h]`, clipped to the image).
    fn count(&self, rect: &serde_json::Value, colour: [u8; 3]) -> usize {
        let r: Vec<i64> = rect
            .as_array()
            .unwrap_or_else(|| panic!("not a rectangle: {rect}"))
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        let (x0, y0) = (r[0].max(0) as u32, r[1].max(0) as u32);
        let x1 = ((r[0] + r[2]).max(0) as u32).min(self.width);
        let y1 = ((r[1] + r[3]).max(0) as u32).min(self.height);
        let mut n = 0;
        for y in y0..y1 {
            for x in x0..x1 {
                let i = ((y * self.width + x) * 3) as usize;
                if (0..3).all(|c| self.rgb[i + c].abs_diff(colour[c]) <= 3) {
                    n += 1;
                }
            }
        }
        n
    }
}

/// `scene report --html page a.json b.json ...`: its exit code and the page.
fn render(env: &TestEnv, page: &Path, reports: &[&Path]) -> (Option<i32>, String) {
    let mut args = vec![
        "report".to_string(),
        "--html".to_string(),
        page.display().to_string(),
        "--markdown".to_string(),
        env.dir.path().join("summary.md").display().to_string(),
    ];
    args.extend(reports.iter().map(|r| r.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = env.scene(&args).output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), std::fs::read_to_string(page).unwrap())
}

#[test]
fn two_processes_render_a_page_chromium_loads_cleanly_and_shows() {
    let Some(browser) = Browser::new() else {
        return;
    };
    let env = TestEnv::new();
    let (a, b) = (env.dir.path().join("a.json"), env.dir.path().join("b.json"));
    // Two real processes sharing the card locks: one passes, one's only
    // case is corrupted on its first (only) run and fails in compare.
    let mut pass = env.scene(&[
        "run",
        "vector_example",
        "--report-json",
        a.to_str().unwrap(),
    ]);
    pass.env_remove("SCENE_RUNTIME_OPTIONS")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut fail = env.scene(&["run", "scalar_data", "--report-json", b.to_str().unwrap()]);
    fail.env("SCENE_RUNTIME_OPTIONS", "fault=corrupt_on_run:1")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let (mut pass, mut fail) = (pass.spawn().unwrap(), fail.spawn().unwrap());
    assert!(pass.wait().unwrap().success(), "vector_example passes");
    assert_eq!(fail.wait().unwrap().code(), Some(1), "scalar_data fails");
    let reports = [read_report(&a), read_report(&b)];
    let mut holds = 0;
    let mut names = Vec::new();
    for r in &reports {
        for c in r["cases"].as_array().unwrap() {
            assert!(c["lock"].is_object(), "every case held a card: {c}");
            holds += c["devices"].as_array().unwrap().len();
            names.push(c["name"].as_str().unwrap().to_string());
        }
    }
    let failed = &reports[1]["cases"][0];
    assert_eq!(failed["failure_stage"], "compare", "{failed}");

    let out = env.dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let page = out.join("report.html");
    let (code, html) = render(&env, &page, &[&a, &b]);
    assert_eq!(code, Some(1), "a report with a failure exits 1");
    // The page as written: one bar per card hold, every case in the table.
    assert_eq!(
        html.matches("<a href=\"#case-").count(),
        holds,
        "one timeline bar per card per case"
    );
    for n in &names {
        assert!(
            html.contains(&format!("<code>{n}</code>")),
            "{n} in the table"
        );
    }
    assert!(html.contains("P1 vector_example::") && html.contains("P2 scalar_data::"));
    assert!(html.contains("<b>compare</b>: tensor `result` mismatch"));

    // (1) It loads without an error and its scripts ran.
    let size = (1400, 1000);
    let (dom, console) = browser.dump_dom(&page, size);
    let health = page_health(&dom);
    assert_eq!(health.errors, None, "the page logged errors");
    assert!(
        console.is_empty(),
        "the page wrote to the console: {console:#?}"
    );
    assert!(health.rendered, "the page's last script ran: {health:?}");
    let (timeline, table) = (&health.layout["timeline"], &health.layout["cases"]);
    // (2) A screenshot tall enough for both shows both: the timeline's
    // bars in both verdict colours inside the timeline's box, the table's
    // header inside the table's box.
    let bottom = [timeline, table]
        .iter()
        .map(|r| r[1].as_i64().unwrap() + r[3].as_i64().unwrap())
        .max()
        .unwrap();
    let size = (1400, (bottom as u32 + 40).max(600));
    let img = browser.screenshot(&page, size, &env.dir.path().join("shot.png"));
    assert_eq!((img.width, img.height), size);
    // A bar is at least 8 px wide and 22 px high (less its 4 px process
    // stripe and its 1 px white outline): over 100 pixels of its colour.
    let (green, red) = (img.count(timeline, PASS_RGB), img.count(timeline, FAIL_RGB));
    assert!(
        green >= 60 && red >= 60,
        "timeline bars: {green} passed and {red} failed pixels in {timeline}"
    );
    let header = img.count(table, HEADER_RGB);
    eprintln!(
        "screenshot {}x{}: timeline {timeline}: {green} passed / {red} failed bar pixels; \
         table {table}: {header} header pixels",
        img.width, img.height
    );
    assert!(header >= 2000, "table header: {header} pixels in {table}");
}

#[test]
fn hostile_report_text_stays_text_in_the_browser() {
    let Some(browser) = Browser::new() else {
        return;
    };
    let env = TestEnv::new();
    let mut c = CaseReport::new("s<script>console.error('name')</script>", "c&\"'");
    c.devices = vec![3];
    c.lock = Some(LockInterval {
        acquired_at: 1000.0,
        released_at: 1001.0,
    });
    c.fail(
        FailureStage::Compare,
        "<img src=x onerror=\"console.error('img')\">\n</pre></details><script>console.error('msg')</script>",
    );
    c.trace = Some("t\"><script>console.error('href')</script>.json".into());
    let report = env.dir.path().join("evil.json");
    std::fs::write(
        &report,
        serde_json::to_vec(&RunReport::new("a2a3sim", vec![c], 1.0)).unwrap(),
    )
    .unwrap();
    let page = env.dir.path().join("evil.html");
    let (code, _) = render(&env, &page, &[&report]);
    assert_eq!(code, Some(1));
    let (dom, console) = browser.dump_dom(&page, (1400, 1000));
    let health = page_health(&dom);
    assert_eq!(health.errors, None, "report text ran as markup");
    assert!(console.is_empty(), "{console:#?}");
    assert!(health.rendered, "{health:?}");
    // The text is on the page as text.
    assert!(dom.contains("s&lt;script&gt;console.error('name')&lt;/script&gt;::c&amp;\"'"));
    assert!(dom.contains("&lt;img src=x onerror=\"console.error('img')\"&gt;"));
}

/// The checks can fail: a page whose script throws, logs an error or loads
/// a missing resource is caught, and one whose last script never ran is
/// not `rendered`.
#[test]
fn a_broken_page_is_caught() {
    let Some(browser) = Browser::new() else {
        return;
    };
    let env = TestEnv::new();
    let mut c = CaseReport::new("s", "c");
    c.devices = vec![0];
    c.lock = Some(LockInterval {
        acquired_at: 1000.0,
        released_at: 1001.0,
    });
    let report = env.dir.path().join("r.json");
    std::fs::write(
        &report,
        serde_json::to_vec(&RunReport::new("a2a3sim", vec![c], 1.0)).unwrap(),
    )
    .unwrap();
    let page = env.dir.path().join("good.html");
    let (code, html) = render(&env, &page, &[&report]);
    assert_eq!(code, Some(0));
    let (dom, console) = browser.dump_dom(&page, (1400, 1000));
    let good = page_health(&dom);
    assert!(good.rendered && good.errors.is_none(), "{good:?}");
    assert!(console.is_empty(), "{console:#?}");

    let at = html.find("<h1>").unwrap();
    let broken = format!(
        "{}<script>noSuchFunction();</script><script>console.error('deliberate');</script>\
         <img src=\"missing.png\" alt=\"\">{}",
        &html[..at],
        &html[at..]
    );
    let page = env.dir.path().join("broken.html");
    std::fs::write(&page, broken).unwrap();
    let (dom, console) = browser.dump_dom(&page, (1400, 1000));
    let health = page_health(&dom);
    let errors = health.errors.unwrap_or_default();
    assert!(errors.contains("noSuchFunction"), "{errors}");
    assert!(errors.contains("console.error: deliberate"), "{errors}");
    assert!(errors.contains("missing.png"), "{errors}");
    // Chromium's own console log saw the same.
    let console = console.join("\n");
    assert!(console.contains("noSuchFunction"), "{console}");
    assert!(console.contains("deliberate"), "{console}");

    // A syntax error in the page's last script: it never runs.
    let page = env.dir.path().join("unrendered.html");
    std::fs::write(
        &page,
        html.replace("d.setAttribute('data-rendered','1');", "d.set(;"),
    )
    .unwrap();
    let (dom, console) = browser.dump_dom(&page, (1400, 1000));
    let health = page_health(&dom);
    assert!(!health.rendered, "{health:?}");
    assert!(console.join("\n").contains("SyntaxError"), "{console:#?}");
    assert!(health.errors.is_some_and(|e| e.contains("SyntaxError")));
}

/// `--html -` is the page on stdout (and the Markdown then is not);
/// two outputs on stdout or a directory as the page are usage errors.
#[test]
fn html_to_stdout_and_usage_errors() {
    let env = TestEnv::new();
    let report = env.dir.path().join("r.json");
    std::fs::write(
        &report,
        serde_json::to_vec(&RunReport::new(
            "a2a3sim",
            vec![CaseReport::new("s", "c")],
            1.0,
        ))
        .unwrap(),
    )
    .unwrap();
    let r = report.to_str().unwrap();
    let out = env.scene(&["report", "--html", "-", r]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("<!DOCTYPE html>"), "{stdout}");
    assert!(stdout.ends_with("</html>\n"), "{stdout}");
    assert!(!stdout.contains("## Scene tests"), "no Markdown: {stdout}");
    assert!(stdout.contains("<code>s::c</code>"), "{stdout}");

    let out = env
        .scene(&["report", "--html", "-", "--junit", "-", r])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--junit - and --html -: only one output can go to stdout"),
        "{stderr}"
    );

    let dir = env.dir.path().to_str().unwrap();
    let out = env.scene(&["report", "--html", dir, r]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--html") && stderr.contains("is a directory"),
        "{stderr}"
    );
}

/// Issue 31: a card job writes `out/report.json` and its failing cases'
/// dumps under `out/dumps`, uploads `out/`; the summary job, elsewhere
/// (another absolute path), downloads it to `reports/scene-report-1/` and
/// renders `scene report reports/*/report.json --html page.html`. The
/// page's dump link is relative and resolves inside that tree; the
/// Markdown names the dump there too. Once with absolute paths, once with
/// relative ones (report and dump directory relative to the run's
/// working directory).
#[test]
fn dump_links_of_a_moved_report_resolve_beside_the_page() {
    let env = TestEnv::new();
    for relative in [false, true] {
        let base = env
            .dir
            .path()
            .join(if relative { "relative" } else { "absolute" });
        let run = base.join("run");
        let out = run.join("out");
        std::fs::create_dir_all(&out).unwrap();
        let (report_arg, dumps_arg) = if relative {
            (PathBuf::from("out/report.json"), PathBuf::from("out/dumps"))
        } else {
            (out.join("report.json"), out.join("dumps"))
        };
        let mut cmd = env.scene(&["run", "scalar_data", "--report-json"]);
        cmd.arg(&report_arg)
            .current_dir(&run)
            .env("SCENE_FAILURE_DUMP_DIR", &dumps_arg)
            .env("SCENE_RUNTIME_OPTIONS", "fault=corrupt_on_run:1");
        let ran = cmd.output().unwrap();
        assert_eq!(ran.status.code(), Some(1), "{}", common::show(&ran));
        let report = read_report(&out.join("report.json"));
        let real_run = run.canonicalize().unwrap();
        assert_eq!(
            report["working_dir"].as_str(),
            real_run.to_str(),
            "{report}"
        );
        let recorded_out = if relative {
            real_run.join("out")
        } else {
            out.clone()
        };
        assert_eq!(
            report["report_dir"].as_str(),
            recorded_out.to_str(),
            "{report}"
        );
        let failed: Vec<&serde_json::Value> = report["cases"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["status"] == "failed")
            .collect();
        assert!(!failed.is_empty(), "a case failed: {report}");
        let mut cases = Vec::new();
        for c in &failed {
            let case = c["case"].as_str().unwrap().to_string();
            let want = recorded_out.join("dumps/scalar_data").join(&case);
            // The field: absolute; the message: as before, as configured.
            assert_eq!(c["dump"].as_str(), want.to_str(), "{c}");
            let said = dumps_arg.join("scalar_data").join(&case);
            assert!(
                c["message"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("dump written to {}", said.display())),
                "{c}"
            );
            assert!(want.join("meta.json").is_file(), "{c}");
            cases.push(case);
        }

        // The upload: `out/` is all that leaves the card runner.
        let elsewhere = base.join("elsewhere");
        let artifact = elsewhere.join("reports/scene-report-1");
        common::copy_dir(&out, &artifact);
        std::fs::remove_dir_all(&run).unwrap();
        let summary = elsewhere.join("summary.md");
        let rendered = env
            .scene(&[
                "report",
                "reports/scene-report-1/report.json",
                "--html",
                "page.html",
                "--markdown",
                "summary.md",
            ])
            .current_dir(&elsewhere)
            .output()
            .unwrap();
        assert_eq!(
            rendered.status.code(),
            Some(1),
            "{}",
            common::show(&rendered)
        );
        let html = std::fs::read_to_string(elsewhere.join("page.html")).unwrap();
        let md = std::fs::read_to_string(&summary).unwrap();
        let dump_hrefs: Vec<&str> = html
            .match_indices(">dump</a>")
            .map(|(i, _)| {
                let start = html[..i].rfind("<a href=\"").unwrap() + "<a href=\"".len();
                let end = start + html[start..].find('"').unwrap();
                &html[start..end]
            })
            .collect();
        assert_eq!(dump_hrefs.len(), cases.len(), "{html}");
        for (href, case) in dump_hrefs.iter().zip(&cases) {
            let want = format!("reports/scene-report-1/dumps/scalar_data/{case}");
            assert_eq!(*href, want, "relative, inside the uploaded tree");
            let dir = elsewhere.join(href);
            assert!(dir.join("meta.json").is_file(), "{}", dir.display());
            let npys = std::fs::read_dir(dir.join("outputs"))
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .path()
                        .extension()
                        .is_some_and(|x| x == "npy")
                })
                .count();
            assert!(npys > 0, "{}: no .npy outputs", dir.display());
            assert!(
                md.contains(&format!("(dump `{want}`)")),
                "the summary names the dump: {md}"
            );
        }
    }
}
