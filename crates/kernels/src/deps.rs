//! The compiler's own account of what a compile read, recorded with each
//! cache entry and re-checked on every hit.
//!
//! The key's include closure comes from our scanner (`key.rs`), which sees
//! only literal `#include "x"` / `<x>` lines. The preprocessor follows more:
//! `#include MACRO` (the macro possibly a `-D` from `scene.toml`),
//! `__has_include` guards, `#include_next`, computed names. So after a
//! compile the compiler's dependency file (`-MD -MF`, make syntax) is parsed
//! and every file it names is recorded with its blake3 digest ([`Deps`], in
//! the manifest). A lookup is a hit only if every recorded file still has
//! its recorded digest: an entry is never served for sources the compiler
//! did not actually read.
//!
//! Paths: files under the root are recorded root-relative (what the
//! compiler is given), so checkouts at different places share entries.
//! Files outside the root (the compiler's and the C library's system
//! headers, an absolute `-I`) are recorded by absolute path and content,
//! the way the key records the compiler itself: same path and bytes or a
//! miss.
//!
//! Known limit: the list names the files that were read, not the lookups
//! that failed, so a header created later where the compiler would now find
//! it (a new `__has_include` target, a shadowing header earlier in the `-I`
//! list) is noticed only when the scanner in the key sees it.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use crate::key::KeyContext;

/// Every file a compile read (path as described above) and its blake3 hex.
pub type Deps = BTreeMap<String, String>;

/// A recorded dependency whose content is no longer the recorded one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepChange {
    pub path: String,
    pub recorded: String,
    /// `None`: the file is gone or unreadable.
    pub now: Option<String>,
}

impl DepChange {
    /// The field name it is reported under in `--explain`.
    pub fn field(&self) -> String {
        format!("dep:{}", self.path)
    }
}

/// The prerequisites of every rule in a make-style dependency file, in
/// order, duplicates removed. Handles what gcc and clang write: backslash
/// line continuations, several targets per rule, `\ ` (space), `\#`, `\:`
/// and `$$` escapes, and more than one rule.
pub fn parse_make_deps(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in logical_lines(text) {
        let words = words(&line);
        let Some(colon) = words.iter().position(|w| matches!(w, Word::Colon)) else {
            continue;
        };
        for w in &words[colon + 1..] {
            if let Word::Name(name) = w
                && !out.contains(name)
            {
                out.push(name.clone());
            }
        }
    }
    out
}

/// Joins backslash-newline continuations (a continuation is whitespace).
fn logical_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if matches!(chars.peek(), Some('\n' | '\r')) => {
                if chars.next() == Some('\r') && chars.peek() == Some(&'\n') {
                    chars.next();
                }
                line.push(' ');
            }
            '\n' => lines.push(std::mem::take(&mut line)),
            _ => line.push(c),
        }
    }
    lines.push(line);
    lines
}

#[derive(Debug, PartialEq)]
enum Word {
    Name(String),
    /// The unescaped `:` ending a rule's targets.
    Colon,
}

fn words(line: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut seen_colon = false;
    let mut chars = line.chars().peekable();
    let flush = |current: &mut String, words: &mut Vec<Word>| {
        if !current.is_empty() {
            words.push(Word::Name(std::mem::take(current)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.peek() {
                Some(&next @ (' ' | '\t' | '#' | ':' | '\\')) => {
                    current.push(next);
                    chars.next();
                }
                _ => current.push('\\'),
            },
            '$' if chars.peek() == Some(&'$') => {
                current.push('$');
                chars.next();
            }
            '#' => break,
            ' ' | '\t' | '\r' => flush(&mut current, &mut words),
            // Only the first `:` followed by a blank or the end separates
            // targets from prerequisites (`C:/x` is a name).
            ':' if !seen_colon && chars.peek().is_none_or(|n| n.is_whitespace()) => {
                flush(&mut current, &mut words);
                words.push(Word::Colon);
                seen_colon = true;
            }
            _ => current.push(c),
        }
    }
    flush(&mut current, &mut words);
    words
}

/// How a path the compiler named is recorded: root-relative under `root`
/// (`./` dropped), else as given (absolute, or relative with `..`).
pub(crate) fn recorded_path(root: &Path, raw: &str) -> String {
    let path = Path::new(raw);
    let rel: PathBuf = if path.is_absolute() {
        match path.strip_prefix(root) {
            Ok(rel) => rel.to_path_buf(),
            Err(_) => return raw.to_owned(),
        }
    } else {
        path.to_path_buf()
    };
    let cleaned: PathBuf = rel
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    cleaned.to_string_lossy().into_owned()
}

/// Why no dependency list could be recorded for a compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoDeps {
    #[error("the toolchain does not write dependency files")]
    Unsupported,
    #[error("the compiler wrote no dependency file ({0})")]
    Missing(String),
    #[error("the compiler's dependency file names no file")]
    Empty,
    #[error("`{0}` changed while it was being compiled")]
    ChangedDuringCompile(String),
    #[error("`{path}` is unreadable: {error}")]
    Unreadable { path: String, error: String },
}

/// The recorded dependencies of one compile, from the dependency file at
/// `dep_file`, plus the files named in `also` (read by the compile under
/// another name). Files under `own` (the builder's: a source's copy,
/// preamble headers) are not recorded: they are not the scene's inputs,
/// and may be gone when the entry is next checked. A file modified after `started` may not be what the
/// compiler read, so nothing is recorded (and the entry is not published).
pub(crate) fn record(
    ctx: &KeyContext,
    root: &Path,
    dep_file: &Path,
    started: SystemTime,
    own: &[PathBuf],
    also: &[&Path],
) -> Result<Deps, NoDeps> {
    let text = std::fs::read(dep_file).map_err(|e| NoDeps::Missing(e.to_string()))?;
    let mut names = parse_make_deps(&String::from_utf8_lossy(&text));
    names.retain(|raw| !own.iter().any(|dir| root.join(raw).starts_with(dir)));
    names.extend(also.iter().map(|p| p.to_string_lossy().into_owned()));
    if names.is_empty() {
        return Err(NoDeps::Empty);
    }
    let mut deps = Deps::new();
    for raw in names {
        let path = recorded_path(root, &raw);
        let abs = root.join(&path);
        let modified = std::fs::metadata(&abs)
            .and_then(|m| m.modified())
            .map_err(|e| NoDeps::Unreadable {
                path: path.clone(),
                error: e.to_string(),
            })?;
        if modified > started {
            return Err(NoDeps::ChangedDuringCompile(path));
        }
        let digest = ctx.digest(&abs).map_err(|e| NoDeps::Unreadable {
            path: path.clone(),
            error: e.to_string(),
        })?;
        deps.insert(path, digest);
    }
    Ok(deps)
}

/// The first recorded dependency whose content is no longer the recorded
/// one (changed, or gone).
pub(crate) fn first_change(ctx: &KeyContext, root: &Path, deps: &Deps) -> Option<DepChange> {
    deps.iter().find_map(|(path, digest)| {
        let now = ctx.digest(&root.join(path)).ok();
        (now.as_deref() != Some(digest.as_str())).then(|| DepChange {
            path: path.clone(),
            recorded: digest.clone(),
            now,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn make_syntax_continuations_escapes_and_several_targets() {
        let text = "out.o other.o: k.c inc/h.h \\\n  dir\\ with\\ space/x.h \\\r\n  \
                    cost$$.h a\\#b.h\nsecond.o: k.c z.h\n\n# comment: q.h\n";
        assert_eq!(
            parse_make_deps(text),
            [
                "k.c",
                "inc/h.h",
                "dir with space/x.h",
                "cost$.h",
                "a#b.h",
                "z.h"
            ]
        );
        assert_eq!(
            parse_make_deps("C:/obj.o: C:/src/k.c\n"),
            ["C:/src/k.c"],
            "a colon inside a name does not end the targets"
        );
        assert!(parse_make_deps("no rule here\n").is_empty());
        assert_eq!(parse_make_deps("x.o :\tk.c"), ["k.c"]);
    }

    #[test]
    fn recorded_paths_are_root_relative_under_the_root() {
        let root = Path::new("/r/oot");
        assert_eq!(recorded_path(root, "./inc/h.h"), "inc/h.h");
        assert_eq!(recorded_path(root, "/r/oot/inc/h.h"), "inc/h.h");
        assert_eq!(
            recorded_path(root, "/usr/include/stdint.h"),
            "/usr/include/stdint.h"
        );
        assert_eq!(recorded_path(root, "../shared/x.h"), "../shared/x.h");
    }
}
