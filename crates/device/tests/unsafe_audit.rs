//! `unsafe` stays where ARCHITECTURE.md says it is, and each use says why.
//!
//! The two crates allowed `unsafe` are this one (the runtime loader module
//! only) and the simulator runtime. Every `unsafe { ... }` block, `unsafe
//! impl` and `#[unsafe(...)]` attribute of theirs needs a `// SAFETY:`
//! comment on one of the lines just above it (or on its own line).

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Lines (1-based) of `text` that use `unsafe` (blocks, impls, attributes),
/// ignoring comments and `unsafe extern "C" fn` pointer types.
fn unsafe_uses(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let code = l.split("//").next().unwrap_or("");
            code.contains("unsafe {") || code.contains("unsafe impl") || code.contains("unsafe(")
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// The uses of `unsafe` in `text` whose `// SAFETY:` comment is missing:
/// it must be in the comments and attributes right above the use, or above
/// the statement the use continues (`let x =` on the line before).
fn missing_safety(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    unsafe_uses(text)
        .into_iter()
        .filter(|&n| {
            for l in lines[..n - 1].iter().rev().map(|l| l.trim()) {
                if l.starts_with("// SAFETY:") {
                    return false;
                }
                let continues = l.starts_with("//")
                    || l.starts_with("#[")
                    || !(l.is_empty() || l.ends_with([';', '{', '}', ',']));
                if !continues {
                    return true;
                }
            }
            true
        })
        .collect()
}

#[test]
fn the_checker_finds_uses_and_comments() {
    let text = "\
fn a() {
    // SAFETY: fine.
    unsafe { f() };
    unsafe { g() };
    // SAFETY: a comment
    // of two lines.
    #[allow(unsafe_code)]
    let x =
        unsafe { h() };
}
// x: unsafe { not code }
type F = unsafe extern \"C\" fn();
";
    assert_eq!(unsafe_uses(text), [3, 4, 9]);
    assert_eq!(missing_safety(text), [4]);
}

#[test]
fn every_unsafe_use_has_a_safety_comment() {
    let manifest = manifest_dir();
    let crates = manifest.parent().unwrap();
    let mut missing = Vec::new();
    let mut seen = 0;
    for krate in ["device", "sim-runtime"] {
        for f in rust_files(&crates.join(krate).join("src")) {
            let text = std::fs::read_to_string(&f).unwrap();
            seen += unsafe_uses(&text).len();
            missing.extend(
                missing_safety(&text)
                    .into_iter()
                    .map(|n| format!("{}:{n}", f.display())),
            );
        }
    }
    assert!(
        seen > 30,
        "found only {seen} uses of unsafe: is the scan broken?"
    );
    assert!(
        missing.is_empty(),
        "unsafe without `// SAFETY:`: {missing:#?}"
    );
}

#[test]
fn device_keeps_unsafe_in_the_runtime_loader() {
    let src = manifest_dir().join("src");
    for f in rust_files(&src) {
        let text = std::fs::read_to_string(&f).unwrap();
        let is_loader = f.ends_with("runtime.rs");
        assert_eq!(
            text.contains("allow(unsafe_code)"),
            is_loader,
            "{}: only the runtime loader module allows unsafe code",
            f.display()
        );
        if !is_loader {
            assert!(unsafe_uses(&text).is_empty(), "{}", f.display());
        }
    }
}

/// Read at run time first: a nextest archive run with `--workspace-remap`
/// points it at the checkout it runs in.
fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}
