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
    for (p, code) in library_sources(src) {
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
        out.push((top, code));
    }
    out
}

/// The `.rs` files under `src`, sorted.
fn source_files(src: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("src is readable") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `text` as code only: comments removed, and the insides of string and
/// character literals blanked (so a `{` or `crate::` in a string, or a
/// doc link, is not code). Line breaks are kept, for line numbers.
fn code_only(text: &str) -> String {
    fn blank(out: &mut String, s: &str) {
        out.extend(s.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
    }
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let next = rest.chars().next().expect("non-empty");
        let skip = if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            end
        } else if rest.starts_with("/*") {
            // Block comments nest.
            let (mut depth, mut j) = (0usize, 0usize);
            while j < rest.len() {
                if rest[j..].starts_with("/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with("*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += rest[j..].chars().next().map_or(1, char::len_utf8);
                }
            }
            blank(&mut out, &rest[..j]);
            j
        } else if let Some((open, hashes)) = raw_string_start(rest, &out) {
            // r"...", r#"..."#, br"...": no escapes inside.
            let close = format!("\"{}", "#".repeat(hashes));
            let end = rest[open..]
                .find(&close)
                .map_or(rest.len(), |k| open + k + close.len());
            out.push_str(&rest[..open]);
            blank(&mut out, &rest[open..end]);
            end
        } else if next == '"' {
            let bytes = rest.as_bytes();
            let mut j = 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(rest.len());
            out.push('"');
            blank(&mut out, &rest[1..end]);
            end
        } else if next == '\'' && char_literal_may_start(&out) {
            // A character literal ('x', '\n', '{'), not a lifetime ('a).
            let len = if rest[1..].starts_with('\\') {
                rest[2..].find('\'').map(|k| k + 3)
            } else {
                let c = rest[1..].chars().next().map_or(0, char::len_utf8);
                rest[1 + c..].starts_with('\'').then_some(c + 2)
            };
            match len {
                Some(n) => {
                    out.push('\'');
                    blank(&mut out, &rest[1..n]);
                    n
                }
                None => {
                    out.push('\'');
                    1
                }
            }
        } else {
            out.push(next);
            next.len_utf8()
        };
        i += skip;
    }
    out
}

/// Whether a `'` here may start a character literal: not right after an
/// identifier character (except `b'x'`, a byte literal).
fn char_literal_may_start(before: &str) -> bool {
    let mut rev = before.chars().rev();
    match rev.next() {
        Some('b') => !rev.next().is_some_and(|c| c.is_alphanumeric() || c == '_'),
        Some(c) => !(c.is_alphanumeric() || c == '_'),
        None => true,
    }
}

/// Where the text of a raw string literal starting `rest` begins, and its
/// number of `#`s; `None` when `rest` starts no raw string (or `r` ends an
/// identifier, as in `for"`... never valid Rust, but `br` must follow no
/// identifier character either).
fn raw_string_start(rest: &str, before: &str) -> Option<(usize, usize)> {
    if before
        .chars()
        .last()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
    {
        return None;
    }
    let prefix = if rest.starts_with("br") {
        2
    } else if rest.starts_with('r') {
        1
    } else {
        return None;
    };
    let r = &rest[prefix..];
    let hashes = r.len() - r.trim_start_matches('#').len();
    r[hashes..]
        .starts_with('"')
        .then_some((prefix + hashes + 1, hashes))
}

/// Code (see [`code_only`]) without test code: every item under a
/// `#[cfg(test)]` attribute, whether a whole `mod tests { ... }`, one
/// function, one `use` or a `mod name;`, whose names are returned too.
fn without_tests(text: &str) -> (String, Vec<String>) {
    let code = code_only(text);
    let mut out = String::with_capacity(code.len());
    let mut test_mods = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let end = item_end(item);
        let body = &item["#[cfg(test)]".len()..end];
        let words: Vec<&str> = body
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        if body.trim_end().ends_with(';')
            && let Some(i) = words.iter().position(|w| *w == "mod")
            && let Some(name) = words.get(i + 1)
        {
            test_mods.push((*name).to_owned());
        }
        // The line breaks stay, so line numbers stay right.
        out.extend(item[..end].chars().filter(|c| *c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    (out, test_mods)
}

/// The length of the item starting at `item` (its attributes first): up
/// to its first `;` outside brackets, or the `}` closing its first `{`.
fn item_end(item: &str) -> usize {
    let mut depth = 0i32;
    let mut attr = 0i32;
    for (i, c) in item.char_indices() {
        match c {
            '[' if attr > 0 || item[..i].ends_with('#') => attr += 1,
            ']' if attr > 0 => attr -= 1,
            _ if attr > 0 => {}
            '{' | '(' | '[' => depth += 1,
            '}' | ')' | ']' => {
                depth -= 1;
                if depth == 0 && c == '}' {
                    return i + 1;
                }
            }
            ';' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    item.len()
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
    for (module, code) in modules(src) {
        let edges = graph.entry(module.clone()).or_default();
        for target in crate_paths(&code) {
            if target != module {
                edges.insert(target);
            }
        }
    }
    graph
}

/// The first segment of every `crate::` path in `code`; a group
/// (`use crate::{a::X, b};`) gives each of its members.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    let mut pieces = code.split("crate::");
    let mut before = pieces.next().unwrap_or("");
    for piece in pieces {
        // `$crate::` is a macro's path, not an import of this file's.
        if before.ends_with('$') {
        } else if let Some(group) = piece.trim_start().strip_prefix('{') {
            let (mut depth, mut start) = (0, 0);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.insert(ident(&group[start..i]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(ident(&group[start..i]));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(piece));
        }
        before = piece;
    }
    out.remove("");
    out
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
    // Not settings but state: the device worker compares the whole
    // environment before and after a case's user code (worker/residue.rs,
    // issue 38), reading no variable for what it does.
    const OBSERVED: &[(&str, &str)] = &[("device", "env: std::env::vars_os().collect(),")];
    let mut reads = Vec::new();
    for (name, src) in src_dirs() {
        if name == "cli" {
            continue; // the entry points: env.rs reads the environment once
        }
        for (module, code) in modules(&src) {
            for (i, line) in code.lines().enumerate() {
                if OBSERVED.contains(&(name.as_str(), line.trim())) {
                    continue;
                }
                if line.contains("env::var") || line.contains("var_os(") {
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

/// A crate in `dir` whose files are `files` (path under `src/`, text).
fn scratch_crate(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    let src = dir.join("src");
    for (path, text) in files {
        let p = src.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    src
}

/// The cycle `args.rs` <-> `env.rs` that the first-`#[cfg(test)]` cut
/// missed: `env.rs` had one `#[cfg(test)]` function, and its import of
/// `crate::args` came after it. Items under `#[cfg(test)]` do not count;
/// what follows them does.
#[test]
fn cycles_behind_a_test_only_item_are_found() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let env = "use crate::lib_only::X;\n\
        pub struct Environment;\n\
        impl Environment {\n    \
            /// Tests only.\n    \
            #[cfg(test)]\n    \
            pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Self {\n        \
                let _ = (pairs, \"{\", '{');\n        \
                Environment\n    \
            }\n\
        }\n\
        pub fn cache_remote() -> u32 {\n    \
            crate::args::parse_seconds(\"1\")\n\
        }\n\
        #[cfg(test)]\n\
        mod tests {\n    \
            use crate::run_cmd;\n\
        }\n";
    let src = scratch_crate(
        tmp.path(),
        &[
            ("lib.rs", "mod args;\nmod env;\nmod run_cmd;\n"),
            ("args.rs", "use crate::{env::Environment, parse};\n"),
            ("env.rs", env),
            ("run_cmd.rs", "use crate::env;\n"),
        ],
    );
    let graph = module_graph(&src);
    assert_eq!(
        graph["env"],
        ["args", "lib_only"].map(String::from).into(),
        "a test module's imports do not count"
    );
    assert_eq!(graph["args"], ["env", "parse"].map(String::from).into());
    let cycle = find_cycle(&graph).expect("the args <-> env cycle");
    assert!(cycle.contains(&"args".to_owned()) && cycle.contains(&"env".to_owned()));

    // Test-only imports, on one item or in a test module, make no cycle.
    std::fs::write(
        src.join("env.rs"),
        "#[cfg(test)]\nuse crate::args;\n#[cfg(test)]\nfn t() { crate::args::f() }\nfn g() {}\n",
    )
    .expect("write");
    assert_eq!(find_cycle(&module_graph(&src)), None);

    // Nor does a test-only file (`#[cfg(test)] mod tests;`) importing a
    // module that imports its parent.
    std::fs::write(src.join("env.rs"), "#[cfg(test)]\nmod tests;\nfn g() {}\n").expect("write");
    std::fs::create_dir_all(src.join("env")).expect("mkdir");
    std::fs::write(src.join("env/tests.rs"), "use crate::args::f;\n").expect("write");
    assert_eq!(find_cycle(&module_graph(&src)), None);
}

#[test]
fn code_only_blanks_strings_and_comments_but_keeps_lines() {
    let text = "let a = \"crate::x {\"; // crate::y\nlet b = r#\"crate::z\"#; let c = '{';\n\
        /* crate::w /* nested */ */ fn f<'a>(x: &'a str) { crate::v::g(b'}') }\n";
    let code = code_only(text);
    assert_eq!(code.lines().count(), text.lines().count());
    assert_eq!(crate_paths(&code), ["v".to_owned()].into());
    assert!(code.contains("fn f<'a>(x: &'a str) {"), "{code}");
    let (rest, mods) = without_tests("#[cfg(test)]\nmod tests;\nfn keep() {}\n");
    assert_eq!(mods, ["tests"]);
    assert!(
        rest.contains("fn keep()") && !rest.contains("mod"),
        "{rest}"
    );
}

/// Each `Result<_, String>` (any spacing, over lines) and `type Err =
/// String` in `code`, as `line: text`.
fn string_results(code: &str) -> Vec<String> {
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let squeeze = |s: &str| s.split_whitespace().collect::<String>();
    let spaced = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let is_string = |t: &str| {
        matches!(
            t,
            "String" | "std::string::String" | "alloc::string::String" | "::std::string::String"
        )
    };
    let mut hits = Vec::new();
    for (at, _) in code.match_indices("Result") {
        let ident_before = code[..at]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        let after = &code[at + "Result".len()..];
        let Some(generics) = after.trim_start().strip_prefix('<') else {
            continue;
        };
        if ident_before {
            continue;
        }
        // The arguments up to the matching `>` (a `->` inside is an arrow).
        let (mut depth, mut args, mut start, mut prev) = (0i32, Vec::new(), 0, ' ');
        for (i, c) in generics.char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '>' if prev == '-' => {}
                '>' if depth == 0 => {
                    args.push(&generics[start..i]);
                    break;
                }
                '>' => depth -= 1,
                ',' if depth == 0 => {
                    args.push(&generics[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
            prev = c;
        }
        // A trailing comma leaves an empty last argument.
        if args.last().is_some_and(|a| a.trim().is_empty()) {
            args.pop();
        }
        if args.len() == 2 && is_string(&squeeze(args[1])) {
            hits.push(format!(
                "line {}: Result<{}, {}>",
                line_of(at),
                spaced(args[0]),
                spaced(args[1])
            ));
        }
    }
    for (at, _) in code.match_indices("type") {
        let item = &code[at..];
        let end = item.find(';').unwrap_or(item.len());
        if let Some(ty) = squeeze(&item[..end]).strip_prefix("typeErr=")
            && is_string(ty)
        {
            hits.push(format!("line {}: type Err = {ty}", line_of(at)));
        }
    }
    hits
}

#[test]
fn string_results_are_found_in_any_spelling() {
    let code = code_only(
        "fn a() -> Result<(), String> {}\n\
         fn b() -> Result<\n    Vec<u8>,\n    std::string::String,\n> {}\n\
         fn c() -> Result<Box<dyn Fn() -> u8>, String> {}\n\
         impl FromStr for X { type Err = String; }\n\
         fn ok1() -> io::Result<String> {}\n\
         fn ok2() -> Result<String, MyError> {}\n\
         fn ok3() -> MyResult<(), String> {}\n\
         // fn commented() -> Result<(), String>\n\
         const S: &str = \"Result<(), String>\";\n",
    );
    let hits = string_results(&code);
    assert_eq!(
        hits,
        [
            "line 1: Result<(), String>",
            "line 2: Result<Vec<u8>, std::string::String>",
            "line 6: Result<Box<dyn Fn() -> u8>, String>",
            "line 7: type Err = String",
        ]
    );
}

/// Library files of the crate in `src` with their `Result<_, String>`s:
/// test modules, test-only items and files, and a binary's `main.rs` and
/// `src/bin/` excluded.
fn library_string_results(src: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (f, code) in library_sources(src) {
        let rel = f.strip_prefix(src).expect("under src");
        let binary = rel == Path::new("main.rs") || rel.starts_with("bin");
        if binary {
            continue;
        }
        for hit in string_results(&code) {
            found.push(format!("{}: {hit}", f.display()));
        }
    }
    found
}

/// Every source file under `src` that is not test code, with its code
/// (see [`without_tests`]): files that a `#[cfg(test)] mod name;` brings
/// in (`name.rs`, `name/`) are left out whole.
fn library_sources(src: &Path) -> Vec<(PathBuf, String)> {
    let files = source_files(src);
    let mut test_files: Vec<PathBuf> = Vec::new();
    let mut checked = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable source");
        let (code, test_mods) = without_tests(&text);
        // Where `mod name;` of this file looks for `name`.
        let stem = f.file_stem().expect("stem").to_string_lossy();
        let children = match stem.as_ref() {
            "lib" | "main" | "mod" => f.parent().expect("parent").to_path_buf(),
            _ => f.with_extension(""),
        };
        for m in test_mods {
            test_files.push(children.join(format!("{m}.rs")));
            test_files.push(children.join(m));
        }
        checked.push((f.clone(), code));
    }
    checked
        .into_iter()
        .filter(|(f, _)| !test_files.iter().any(|t| f.starts_with(t)))
        .collect()
}

/// The CLI's part of "typed errors to the edge": no `Result<_, String>`
/// in `crates/cli/src` outside tests.
#[test]
fn the_cli_has_no_string_errors() {
    let found = library_string_results(&workspace().join("crates/cli/src"));
    assert!(
        found.is_empty(),
        "Result<_, String> in the CLI:\n{}",
        found.join("\n")
    );
}

/// Library crates return typed errors (thiserror enums): no
/// `Result<_, String>` or `type Err = String` in `crates/*/src` outside
/// tests and the binary's `main.rs`.
#[test]
fn no_string_errors_in_library_code() {
    let mut found = Vec::new();
    for (_, src) in src_dirs() {
        found.extend(library_string_results(&src));
    }
    assert!(
        found.is_empty(),
        "{} Result<_, String> in library code (use a thiserror enum):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn test_only_files_are_not_library_code() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = scratch_crate(
        tmp.path(),
        &[
            ("lib.rs", "mod a;\n#[cfg(test)]\nmod helpers;\n"),
            (
                "a.rs",
                "#[cfg(test)]\nmod tests;\npub fn f() -> Result<(), String> { Ok(()) }\n",
            ),
            ("a/tests.rs", "fn t() -> Result<(), String> { Ok(()) }\n"),
            ("helpers.rs", "fn h() -> Result<(), String> { Ok(()) }\n"),
            ("main.rs", "fn main() -> Result<(), String> { Ok(()) }\n"),
        ],
    );
    let found = library_string_results(&src);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].ends_with("a.rs: line 3: Result<(), String>"),
        "{found:?}"
    );
}

// ---- the code map (ARCHITECTURE.md) ---------------------------------------

/// The most lines a source file may have, its tests left out, unless
/// ARCHITECTURE.md's "Files over 1,200 lines" says why it is one job.
const MAX_FILE_LINES: usize = 1200;

/// Lines of `text` outside items under `#[cfg(test)]`.
fn non_test_lines(text: &str) -> usize {
    let code = code_only(text);
    let mut test_lines = 0;
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        let item = &rest[at..];
        let end = item_end(item);
        test_lines += item[..end].matches('\n').count();
        rest = &item[end..];
    }
    text.lines().count().saturating_sub(test_lines)
}

/// The text of the section of `doc` under `heading` (up to the next
/// heading of the same or a higher level).
fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let Some(start) = doc.find(&format!("\n{heading}")) else {
        return "";
    };
    let body = &doc[start + 1 + heading.len()..];
    let end = body
        .match_indices("\n#")
        .find(|(i, _)| {
            let hashes = body[i + 1..].chars().take_while(|c| *c == '#').count();
            hashes <= level && body[i + 1 + hashes..].starts_with(' ')
        })
        .map_or(body.len(), |(i, _)| i);
    &body[..end]
}

fn architecture_md() -> String {
    std::fs::read_to_string(workspace().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md")
}

#[test]
fn no_source_file_is_over_the_limit_unexplained() {
    let doc = architecture_md();
    let explained = section(&doc, "## Files over 1,200 lines");
    let mut long = Vec::new();
    for (name, src) in src_dirs() {
        for (f, _) in library_sources(&src) {
            let text = std::fs::read_to_string(&f).expect("readable source");
            let lines = non_test_lines(&text);
            let rel = format!(
                "crates/{name}/src/{}",
                f.strip_prefix(&src).expect("under src").display()
            );
            if lines > MAX_FILE_LINES && !explained.contains(&format!("`{rel}`")) {
                long.push(format!("{rel}: {lines} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "over {MAX_FILE_LINES} lines (tests excluded), with no word in ARCHITECTURE.md's \
         \"Files over 1,200 lines\" on why each is one job:\n{}",
        long.join("\n")
    );
}

#[test]
fn test_items_do_not_count_against_the_limit() {
    let text = "fn a() {}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\nfn b() {}\n";
    assert_eq!(non_test_lines(text), 3);
    assert_eq!(non_test_lines("fn a() {}\nfn b() {}\n"), 2);
}

/// Whether a source file is named in its crate's section of the code
/// map: by its path under `src/` (`cache/prune.rs`, `hiargs.rs`), a
/// `mod.rs` by its folder (`scene/`), a file in a folder also by its
/// folder and its name or stem in backticks.
fn named_in_code_map(section: &str, rel: &Path) -> bool {
    let rel_text = rel.to_string_lossy().replace('\\', "/");
    let name = rel.file_name().expect("file name").to_string_lossy();
    let named = |needle: &str| {
        section.match_indices(needle).any(|(i, _)| {
            let before = section[..i].chars().next_back();
            let after = section[i + needle.len()..].chars().next();
            // Not the tail of a longer path or name (`x/prune.rs`
            // does not name `prune.rs`; `scene.rs` names no `scene/`).
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '/')
                && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    };
    if name == "mod.rs" {
        let dir = format!("{}/", rel.parent().expect("parent").to_string_lossy());
        return named(&dir);
    }
    if rel.components().count() == 1 {
        return named(&rel_text);
    }
    // A file in a folder: its path, or its folder named and the file
    // listed in backticks by name or stem (`scene/validate/` ... (`header`,
    // `tensors`)).
    let dir = format!("{}/", rel.parent().expect("parent").to_string_lossy());
    let stem = rel.file_stem().expect("stem").to_string_lossy();
    named(&rel_text)
        || (named(&dir)
            && (section.contains(&format!("`{name}`")) || section.contains(&format!("`{stem}`"))))
}

#[test]
fn the_code_map_names_every_source_file() {
    let doc = architecture_md();
    let mut missing = Vec::new();
    for (name, src) in src_dirs() {
        let section = section(&doc, &format!("### `crates/{name}`"));
        assert!(
            !section.is_empty(),
            "ARCHITECTURE.md has no section for crates/{name}"
        );
        for (f, _) in library_sources(&src) {
            let rel = f.strip_prefix(&src).expect("under src");
            let stem = rel.file_name().expect("name").to_string_lossy();
            if stem == "lib.rs" || stem == "main.rs" {
                continue;
            }
            if !named_in_code_map(section, rel) {
                missing.push(format!("crates/{name}/src/{}", rel.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map does not name (by its path under src/, in its crate's section):\n{}",
        missing.join("\n")
    );
}

#[test]
fn code_map_names_are_whole_paths() {
    let s = "`cache/prune.rs` and `hiargs.rs`; the `scene/` folder; x/lock.rs; \
             `validate/` (`header`, `tensors.rs`)";
    assert!(named_in_code_map(s, Path::new("cache/prune.rs")));
    assert!(named_in_code_map(s, Path::new("hiargs.rs")));
    assert!(named_in_code_map(s, Path::new("scene/mod.rs")));
    assert!(!named_in_code_map(s, Path::new("prune.rs")));
    assert!(!named_in_code_map(s, Path::new("lock.rs")));
    assert!(!named_in_code_map(s, Path::new("cache/mod.rs")));
    assert!(!named_in_code_map(s, Path::new("args.rs")));
    assert!(named_in_code_map(s, Path::new("validate/header.rs")));
    assert!(named_in_code_map(s, Path::new("validate/tensors.rs")));
    assert!(!named_in_code_map(s, Path::new("validate/cases.rs")));
    assert!(!named_in_code_map(s, Path::new("other/header.rs")));
}
