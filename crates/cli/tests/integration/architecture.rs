//! The architecture's rules, checked on the sources themselves
//! (ARCHITECTURE.md lists them):
//!
//! - each crate depends only on the crates below it (no compiler knowledge
//!   in the device crate, no device knowledge in the kernels crate, no
//!   command line in the engine);
//! - no module import cycle inside any crate;
//! - no environment variable read below the entry points (`scene-cli`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Read at run time first (a nextest archive run with `--workspace-remap`
/// sets it to the checkout it runs in).
fn workspace() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest
        .ancestors()
        .nth(2)
        .expect("crates/cli lies two levels below the workspace root")
        .to_path_buf()
}

/// `package -> its normal (non-dev) dependencies`, from `cargo metadata`.
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into()))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let mut deps = BTreeMap::new();
    for p in meta["packages"].as_array().expect("packages") {
        let names = p["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|d| d["kind"].is_null())
            .filter_map(|d| d["name"].as_str().map(str::to_owned))
            .collect();
        deps.insert(p["name"].as_str().expect("name").to_owned(), names);
    }
    deps
}

#[test]
fn crates_depend_only_downwards() {
    let deps = dependencies();
    let forbidden: &[(&str, &[&str])] = &[
        (
            "scene-util",
            &[
                "scene-kernels",
                "scene-device",
                "scene-golden",
                "scene-harness",
            ],
        ),
        (
            "scene-abi",
            &[
                "scene-device",
                "scene-kernels",
                "scene-sim-runtime",
                "scene-harness",
            ],
        ),
        (
            "scene-kernels",
            &[
                "scene-device",
                "scene-abi",
                "scene-sim-runtime",
                "scene-golden",
                "scene-harness",
                "scene-cli",
            ],
        ),
        (
            "scene-golden",
            &[
                "scene-kernels",
                "scene-device",
                "scene-sim-runtime",
                "scene-harness",
                "scene-cli",
            ],
        ),
        (
            "scene-device",
            &[
                "scene-kernels",
                "scene-golden",
                "scene-sim-runtime",
                "scene-harness",
                "scene-cli",
            ],
        ),
        (
            "scene-sim-runtime",
            &[
                "scene-device",
                "scene-kernels",
                "scene-golden",
                "scene-harness",
                "scene-cli",
            ],
        ),
        // The scenes package is data for the binary (scenes, goldens): it
        // links no command line; `scene-cli` links it, not the reverse.
        ("scenes", &["scene-cli", "clap", "indicatif"]),
        // The engine has no command line, no terminal and no test runner.
        (
            "scene-harness",
            &["scene-cli", "clap", "indicatif", "libtest-mimic", "anyhow"],
        ),
    ];
    for (krate, banned) in forbidden {
        let have = deps
            .get(*krate)
            .unwrap_or_else(|| panic!("{krate} is in the workspace"));
        for b in *banned {
            assert!(
                !have.contains(*b),
                "{krate} must not depend on {b} (has {have:?})"
            );
        }
    }
}

/// Source files of a crate with their top-level module names.
fn modules(src: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("src is readable") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).expect("under src");
            let first = rel.components().next().expect("non-empty");
            let top = Path::new(first.as_os_str())
                .file_stem()
                .expect("stem")
                .to_string_lossy()
                .into_owned();
            if top == "lib" || top == "main" {
                continue;
            }
            let text = std::fs::read_to_string(&p).expect("readable source");
            out.push((top, text));
        }
    }
    out
}

/// Code before the file's test module: tests may import anything.
fn non_test(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or(text)
}

fn src_dirs() -> Vec<(String, PathBuf)> {
    let crates = workspace().join("crates");
    let mut dirs: Vec<_> = std::fs::read_dir(&crates)
        .expect("crates/ is readable")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                p.join("src"),
            )
        })
        .collect();
    dirs.sort();
    dirs
}

/// `module -> modules it imports through crate::`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in modules(src) {
        let edges = graph.entry(module.clone()).or_default();
        // Code only: a doc link to another module is not an import.
        let code: String = non_test(&text)
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        for piece in code.split("crate::").skip(1) {
            let target: String = piece
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !target.is_empty() && target != module {
                edges.insert(target);
            }
        }
    }
    graph
}

fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|n| n == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn cycle_finder_finds_cycles() {
    let g = |edges: &[(&str, &str)]| {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            m.entry((*a).into()).or_default().insert((*b).into());
            m.entry((*b).into()).or_default();
        }
        m
    };
    assert_eq!(find_cycle(&g(&[("a", "b"), ("b", "c")])), None);
    let c = find_cycle(&g(&[("a", "b"), ("b", "c"), ("c", "a")])).expect("cycle");
    assert_eq!(c.first(), c.last());
    assert_eq!(c.len(), 4);
}

#[test]
fn no_module_import_cycles() {
    let mut cycles = Vec::new();
    for (name, src) in src_dirs() {
        if let Some(c) = find_cycle(&module_graph(&src)) {
            cycles.push(format!("{name}: {}", c.join(" -> ")));
        }
    }
    assert!(
        cycles.is_empty(),
        "module import cycles:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn no_environment_reads_below_the_entry_points() {
    let mut reads = Vec::new();
    for (name, src) in src_dirs() {
        if name == "cli" {
            continue; // the entry points: env.rs reads the environment once
        }
        for (module, text) in modules(&src) {
            for (i, line) in non_test(&text).lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if code.contains("env::var") || code.contains("var_os(") {
                    reads.push(format!(
                        "crates/{name} ({module}) line {}: {}",
                        i + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        reads.is_empty(),
        "environment reads below the entry points:\n{}",
        reads.join("\n")
    );
}

/// Rust files under `dir`, recursively.
fn rust_files_in(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.expect("entry").path();
        if p.is_dir() {
            if p.file_name()
                .is_some_and(|n| n != "scenes" && n != "target")
            {
                rust_files_in(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A test reading the checkout through a compile-time path breaks as soon
/// as its binary runs elsewhere: a `cargo nextest archive` extracted with
/// `--workspace-remap` on another runner (crates/cli/tests/integration/archive.rs). So every
/// compile-time `CARGO_MANIFEST_DIR` / `CARGO_BIN_EXE_*` in test code is
/// only a fallback after the run-time variable (`var_os(` in the same
/// statement, a few lines up).
#[test]
fn tests_find_the_checkout_at_run_time() {
    let root = workspace();
    let mut files = Vec::new();
    rust_files_in(&root.join("tests"), &mut files);
    for krate in std::fs::read_dir(root.join("crates")).expect("crates/") {
        rust_files_in(&krate.expect("entry").path().join("tests"), &mut files);
    }
    assert!(files.len() > 20, "found only {} test files", files.len());
    let mut baked = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable");
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            // The device crate's header path is the build machine's.
            let build_path_call = code.contains(concat!("scene_device", "::include_dir"));
            if !(build_path_call
                || code.contains("env!(\"CARGO_MANIFEST_DIR\")")
                || code.contains("env!(\"CARGO_BIN_EXE_"))
            {
                continue;
            }
            let window = &lines[i.saturating_sub(3)..=i];
            if build_path_call || !window.iter().any(|l| l.contains("var_os(")) {
                baked.push(format!(
                    "{}:{}: {}",
                    f.strip_prefix(&root).unwrap_or(f).display(),
                    i + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        baked.is_empty(),
        "compile-time checkout paths in tests (use tests/common's manifest_dir() / scene_exe()):\n{}",
        baked.join("\n")
    );
}
