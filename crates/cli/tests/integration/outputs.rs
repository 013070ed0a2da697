//! Where reports go (issue 27): every writer (`run --report-json`,
//! `run --junit`, `scene report --markdown/--html/--junit`) leaves device
//! nodes devices and FIFOs FIFOs, refuses a directory or socket before the
//! run, never overwrites its own input, and writes JUnit that a strict XML
//! 1.0 parser accepts whatever characters the messages hold.

use crate::common;

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{TestEnv, copy_scene, in_ci, show};

/// `mknod <path> c 1 3` (the numbers of `/dev/null`); `false` (after a
/// message) where device nodes cannot be made (not root, a nodev mount).
fn make_null_device(path: &Path) -> bool {
    let made = Command::new("mknod")
        .arg(path)
        .args(["c", "1", "3"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !made {
        assert!(!in_ci(), "CI runs as root: mknod must work");
        eprintln!("SKIPPED: cannot mknod here (needs root)");
    }
    made
}

fn is_char_device(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

fn is_fifo(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

fn s(path: &Path) -> &str {
    path.to_str().expect("UTF-8 temp path")
}

/// A report of one passing case to feed `scene report`.
fn one_report(env: &TestEnv) -> PathBuf {
    let report = env.dir.path().join("input.json");
    let out = env
        .scene(&["run", "vector_example::small", "--report-json", s(&report)])
        .output()
        .expect("run scene");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    report
}

/// Issue 27, cause 12: every writer renamed a temp file over its target,
/// so `--report-json /dev/null` as root replaced `/dev/null` with a
/// regular file. A device node must still be one after every writer.
#[test]
fn report_writers_leave_a_device_node_a_device() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "vector_example", "vector_example");
    let dev = env.dir.path().join("null");
    if !make_null_device(&dev) {
        return;
    }
    for flag in ["--report-json", "--junit"] {
        let out = env
            .scene(&["run", "vector_example::small", flag, s(&dev)])
            .output()
            .expect("run scene");
        assert_eq!(out.status.code(), Some(0), "{flag}: {}", show(&out));
        assert!(is_char_device(&dev), "{flag} replaced the device node");
    }
    let input = one_report(&env);
    for flag in ["--markdown", "--html", "--junit"] {
        let out = env
            .scene(&["report", s(&input), flag, s(&dev)])
            .output()
            .expect("run scene");
        assert_eq!(out.status.code(), Some(0), "report {flag}: {}", show(&out));
        assert!(
            is_char_device(&dev),
            "report {flag} replaced the device node"
        );
    }
}

/// Issue 27, cause 12: a FIFO given as an output was replaced by a regular
/// file, so the reader on it never got the report.
#[test]
fn report_writers_write_into_a_fifo_and_keep_it() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "vector_example", "vector_example");
    let fifo = env.dir.path().join("report.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    // Reads the FIFO to its end in a thread: opening it waits for the
    // writer, the read ends when the writer closes it.
    let read_fifo = |fifo: PathBuf| {
        std::thread::spawn(move || {
            let mut text = String::new();
            std::fs::File::open(&fifo)
                .expect("open the FIFO")
                .read_to_string(&mut text)
                .expect("read the FIFO");
            text
        })
    };
    let reader = read_fifo(fifo.clone());
    let out = env
        .scene(&["run", "vector_example::small", "--report-json", s(&fifo)])
        .output()
        .expect("run scene");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    // Checked before joining: a FIFO replaced by a file leaves the reader
    // waiting for ever.
    assert!(is_fifo(&fifo), "--report-json replaced the FIFO");
    let text = reader.join().expect("reader");
    let json: serde_json::Value = serde_json::from_str(&text).expect("the report came through");
    assert_eq!(json["totals"]["passed"], 1, "{json}");

    let input = env.dir.path().join("input.json");
    std::fs::write(&input, &text).expect("write");
    let reader = read_fifo(fifo.clone());
    let out = env
        .scene(&["report", s(&input), "--junit", s(&fifo)])
        .output()
        .expect("run scene");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(is_fifo(&fifo), "scene report --junit replaced the FIFO");
    let xml = reader.join().expect("reader");
    roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
}

/// Issue 27, cause 12: a socket (or directory) as an output is refused
/// with a usage error before any case runs, not replaced after the run.
#[test]
fn report_to_a_socket_or_directory_is_refused_before_the_run() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "vector_example", "vector_example");
    let sock = env.dir.path().join("report.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
    let dir = env.dir.path().join("a-dir");
    std::fs::create_dir(&dir).expect("mkdir");
    for (flag, target, words) in [
        ("--report-json", &sock, "is a socket"),
        ("--junit", &sock, "is a socket"),
        ("--junit", &dir, "is a directory"),
    ] {
        let out = env
            .scene(&["run", "vector_example::small", flag, s(target)])
            .output()
            .expect("run scene");
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", show(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(flag) && stderr.contains(words),
            "{}",
            show(&out)
        );
        assert!(
            !env.cache_dir.exists(),
            "a case was compiled: {}",
            show(&out)
        );
    }
    assert!(
        std::fs::symlink_metadata(&sock)
            .expect("lstat")
            .file_type()
            .is_socket()
    );
    let input = env.dir.path().join("input.json");
    std::fs::write(&input, "{}").expect("write");
    let out = env
        .scene(&["report", s(&input), "--markdown", s(&sock)])
        .output()
        .expect("run scene");
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is a socket"),
        "{}",
        show(&out)
    );
}

/// Issue 27 (weak item): `scene report a.json --html a.json` replaced its
/// own input with the page; also through another spelling, a symlink and
/// a hard link.
#[test]
fn scene_report_refuses_to_overwrite_its_input() {
    let env = TestEnv::with_scenes(&[]);
    copy_scene(&env, "vector_example", "vector_example");
    let input = one_report(&env);
    let before = std::fs::read(&input).expect("read");
    let dir = env.dir.path();
    std::fs::create_dir(dir.join("sub")).expect("mkdir");
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&input, &link).expect("symlink");
    let hard = dir.join("hard.json");
    std::fs::hard_link(&input, &hard).expect("hard link");
    let respelled = dir.join("sub/../input.json");
    for flag in ["--html", "--markdown", "--junit"] {
        for output in [&input, &respelled, &link, &hard] {
            let out = env
                .scene(&["report", s(&input), flag, s(output)])
                .output()
                .expect("run scene");
            assert_eq!(
                out.status.code(),
                Some(2),
                "{flag} {}: {}",
                output.display(),
                show(&out)
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains("is also an input"), "{}", show(&out));
            assert_eq!(
                std::fs::read(&input).expect("read"),
                before,
                "{flag} {}",
                output.display()
            );
        }
    }
    // The step summary is appended to: not to an input either.
    let out = env
        .scene(&["report", s(&input), "--github-summary"])
        .env("GITHUB_STEP_SUMMARY", &link)
        .output()
        .expect("run scene");
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert_eq!(std::fs::read(&input).expect("read"), before);
    // Another file is fine.
    let page = dir.join("page.html");
    let out = env
        .scene(&["report", s(&input), "--html", s(&page)])
        .output()
        .expect("run scene");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(page.is_file());
}

/// Issue 27, cause 10: U+FFFE / U+FFFF (and C0 controls) in a failure
/// message or a case name made `--junit` and `scene report --junit` write
/// XML no parser accepts.
#[test]
fn junit_with_fffe_and_ffff_in_messages_still_parses() {
    let env = TestEnv::with_scenes(&[]);
    let scene = copy_scene(&env, "vector_example", "vector_example");
    // A wrong kernel fails the case, whose name holds the characters.
    let add = scene.join("kernels/add.c");
    let src = std::fs::read_to_string(&add).expect("read");
    std::fs::write(&add, src.replace("a[i] + b[i]", "a[i] - b[i]")).expect("write");
    let toml = scene.join("scene.toml");
    let t = std::fs::read_to_string(&toml).expect("read");
    std::fs::write(
        &toml,
        t.replace("name = \"small\"", "name = \"sm\\uFFFEa\\uFFFFll\""),
    )
    .expect("write");
    let (report, junit) = (env.dir.path().join("r.json"), env.dir.path().join("r.xml"));
    let out = env
        .scene(&[
            "run",
            "vector_example",
            "--report-json",
            s(&report),
            "--junit",
            s(&junit),
        ])
        .output()
        .expect("run scene");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let xml = std::fs::read_to_string(&junit).expect("read");
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
    assert!(
        doc.descendants()
            .any(|n| n.attribute("name") == Some("sm?a?ll")),
        "{xml}"
    );

    // The same report with the characters in every failure message.
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("read")).expect("JSON");
    let mut planted = 0;
    for case in json["cases"].as_array_mut().expect("cases") {
        if let Some(m) = case["message"].as_str() {
            case["message"] = format!("bad\u{FFFE}\u{FFFF}\u{1}\u{0} {m}").into();
            planted += 1;
        }
    }
    assert!(planted > 0, "{json}");
    std::fs::write(&report, serde_json::to_vec(&json).expect("JSON")).expect("write");
    let merged = env.dir.path().join("merged.xml");
    let out = env
        .scene(&["report", s(&report), "--junit", s(&merged)])
        .output()
        .expect("run scene");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let xml = std::fs::read_to_string(&merged).expect("read");
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
    let messages: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .filter_map(|n| n.attribute("message"))
        .collect();
    assert!(!messages.is_empty(), "{xml}");
    assert!(
        messages.iter().all(|m| m.starts_with("bad???? ")),
        "{messages:?}"
    );
}
