//! What a managed environment was made of: `scene-env.files`, written by
//! its builder, so that a damaged environment (a package file removed, an
//! emptied `bin/python`) is noticed and rebuilt instead of failing every
//! run.
//!
//! The list holds every regular file under the environment with its size
//! and blake3, and every symbolic link with its target, by path relative to
//! the environment (`__pycache__` directories left out: bytecode is a cache
//! the interpreter rewrites, and environments run with
//! `PYTHONDONTWRITEBYTECODE`; `requirements.lock` and the marker too, they
//! are read on every use anyway). Checked two ways:
//!
//! - [`check`], on every use (the warm path): an `lstat` per entry (type,
//!   size, link target) and the interpreter `bin/python` leads to (a
//!   non-empty executable file). No file is read.
//! - [`verify`], only when the environment's interpreter failed to start
//!   although [`check`] passed: every file's blake3 too, so a file changed
//!   in place to the same size is found, and a failure that is not the
//!   environment's (its files are as built) is not taken for damage.
//!
//! Format: a first line `scene-env-files 1`, then one entry a line,
//! fields separated by tabs: `f <size> <blake3 hex> <path>` or `l <target>
//! <path>`. A path or target holding a tab or a newline, or not UTF-8, is
//! left out of the list (never written by pip or uv).

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The list's file name, in the environment's directory.
pub const FILES: &str = "scene-env.files";

const HEADER: &str = "scene-env-files 1";

/// Largest list read (a numpy environment's is about 0.3 MB).
const MAX_LIST: u64 = 64 << 20;

/// Why an environment is not the one its builder made.
#[derive(Debug, thiserror::Error)]
pub enum EnvDamage {
    #[error("its marker cannot be used: {0}")]
    Marker(#[source] super::EnvReadError),
    #[error("it has no {FILES} (made by an older scene, or removed)")]
    NoList,
    #[error("{FILES} cannot be read: {0}")]
    List(String),
    #[error("`{0}` is missing")]
    Missing(String),
    #[error("`{path}` is no longer a regular file of {size} bytes")]
    Changed { path: String, size: u64 },
    #[error("`{path}` no longer links to `{target}`")]
    Link { path: String, target: String },
    #[error("`{path}` has other contents than when it was installed")]
    Content { path: String },
    #[error("`{}` does not lead to an executable file: {why}", path.display())]
    Interpreter { path: PathBuf, why: String },
}

/// One entry of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    File {
        path: String,
        size: u64,
        digest: String,
    },
    Link {
        path: String,
        target: String,
    },
}

/// Whether `name` is one of the files the list leaves out at the top.
fn skipped_at_top(name: &str) -> bool {
    name == FILES || name == super::MARKER || name == super::LOCK_FILE
}

/// Writes the list of `dir` (a complete environment, before its marker).
pub fn write(dir: &Path) -> io::Result<()> {
    let mut lines = vec![HEADER.to_owned()];
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let mut names: Vec<_> = std::fs::read_dir(dir.join(&rel))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<io::Result<_>>()?;
        names.sort();
        for name in names {
            let path = rel.join(&name);
            let Some(text) = path.to_str().filter(|t| plain(t)) else {
                continue;
            };
            if rel.as_os_str().is_empty() && skipped_at_top(text) {
                continue;
            }
            let full = dir.join(&path);
            let meta = std::fs::symlink_metadata(&full)?;
            if meta.is_dir() {
                if name != "__pycache__" {
                    todo.push(path);
                }
            } else if meta.is_symlink() {
                let target = std::fs::read_link(&full)?;
                if let Some(target) = target.to_str().filter(|t| plain(t)) {
                    lines.push(format!("l\t{target}\t{text}"));
                }
            } else if meta.is_file() {
                let digest = digest(&full)?;
                lines.push(format!("f\t{}\t{digest}\t{text}", meta.len()));
            }
        }
    }
    lines.push(String::new());
    scene_util::write_atomically(&dir.join(FILES), lines.join("\n").as_bytes())
}

/// Neither a tab nor a newline: fits a field of the list.
fn plain(text: &str) -> bool {
    !text.contains(['\t', '\n'])
}

fn digest(path: &Path) -> io::Result<String> {
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(std::fs::File::open(path)?)?;
    Ok(hasher.finalize().to_hex().to_string())
}

fn read(dir: &Path) -> Result<Vec<Entry>, EnvDamage> {
    let bytes = match scene_util::read_regular_file(&dir.join(FILES), None, MAX_LIST) {
        Ok(b) => b,
        Err(scene_util::ReadError::Io { source, .. })
            if source.kind() == io::ErrorKind::NotFound =>
        {
            return Err(EnvDamage::NoList);
        }
        Err(e) => return Err(EnvDamage::List(e.to_string())),
    };
    let text = String::from_utf8(bytes).map_err(|e| EnvDamage::List(e.to_string()))?;
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(EnvDamage::List(format!("its first line is not `{HEADER}`")));
    }
    lines
        .enumerate()
        .map(|(n, line)| {
            let bad = || EnvDamage::List(format!("line {}: `{line}`", n + 2));
            let fields: Vec<&str> = line.split('\t').collect();
            match fields.as_slice() {
                ["f", size, digest, path] => Ok(Entry::File {
                    path: (*path).to_owned(),
                    size: size.parse().map_err(|_| bad())?,
                    digest: (*digest).to_owned(),
                }),
                ["l", target, path] => Ok(Entry::Link {
                    path: (*path).to_owned(),
                    target: (*target).to_owned(),
                }),
                _ => Err(bad()),
            }
        })
        .collect()
}

/// The cheap check of every use: each listed file there with its type and
/// size, each link with its target, and `bin/python` leading to an
/// executable file. Reads the list and no other file.
pub fn check(dir: &Path) -> Result<(), EnvDamage> {
    for entry in read(dir)? {
        check_entry(dir, &entry)?;
    }
    interpreter(dir)
}

/// [`check`], plus every file's contents against its recorded blake3.
pub fn verify(dir: &Path) -> Result<(), EnvDamage> {
    let entries = read(dir)?;
    for entry in &entries {
        check_entry(dir, entry)?;
    }
    interpreter(dir)?;
    for entry in &entries {
        if let Entry::File { path, digest, .. } = entry
            && self::digest(&dir.join(path)).ok().as_deref() != Some(digest.as_str())
        {
            return Err(EnvDamage::Content { path: path.clone() });
        }
    }
    Ok(())
}

fn check_entry(dir: &Path, entry: &Entry) -> Result<(), EnvDamage> {
    let path = match entry {
        Entry::File { path, .. } | Entry::Link { path, .. } => path,
    };
    let meta = match std::fs::symlink_metadata(dir.join(path)) {
        Ok(m) => m,
        Err(_) => return Err(EnvDamage::Missing(path.clone())),
    };
    match entry {
        Entry::File { size, .. } if !meta.is_file() || meta.len() != *size => {
            Err(EnvDamage::Changed {
                path: path.clone(),
                size: *size,
            })
        }
        Entry::Link { target, .. }
            if !meta.is_symlink()
                || std::fs::read_link(dir.join(path)).ok().as_deref()
                    != Some(Path::new(target)) =>
        {
            Err(EnvDamage::Link {
                path: path.clone(),
                target: target.clone(),
            })
        }
        _ => Ok(()),
    }
}

/// `bin/python`, links followed, is a non-empty executable file (a venv's
/// links to the interpreter it was made from, which can go away).
fn interpreter(dir: &Path) -> Result<(), EnvDamage> {
    let path = dir.join("bin").join("python");
    let bad = |why: String| EnvDamage::Interpreter {
        path: path.clone(),
        why,
    };
    let meta = std::fs::metadata(&path).map_err(|e| bad(e.to_string()))?;
    if !meta.is_file() {
        return Err(bad("not a regular file".into()));
    }
    if meta.len() == 0 {
        return Err(bad("it is empty".into()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(bad("it is not executable".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small stand-in environment: a package file, a link to the
    /// interpreter, bytecode, the files the list leaves out.
    fn fake_env(dir: &Path) {
        let pkg = dir.join("lib/site-packages/numpy");
        std::fs::create_dir_all(pkg.join("__pycache__")).unwrap();
        std::fs::write(pkg.join("__init__.py"), "x = 1\n").unwrap();
        std::fs::write(pkg.join("__pycache__/__init__.pyc"), "bytecode").unwrap();
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::os::unix::fs::symlink("/bin/sh", dir.join("bin/python")).unwrap();
        std::fs::write(dir.join(super::super::LOCK_FILE), "numpy==2\n").unwrap();
    }

    #[test]
    fn the_list_notices_removed_resized_relinked_and_rewritten_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        fake_env(dir);
        assert!(matches!(check(dir), Err(EnvDamage::NoList)));
        write(dir).unwrap();
        let list = std::fs::read_to_string(dir.join(FILES)).unwrap();
        assert!(list.starts_with("scene-env-files 1\n"), "{list}");
        assert!(list.contains("l\t/bin/sh\tbin/python\n"), "{list}");
        assert!(
            list.contains("f\t6\t") && list.contains("\tlib/site-packages/numpy/__init__.py\n"),
            "{list}"
        );
        assert!(!list.contains("__pycache__"), "{list}");
        assert!(!list.contains("requirements.lock"), "{list}");
        check(dir).unwrap();
        verify(dir).unwrap();

        // Bytecode and the lock file change freely.
        std::fs::remove_dir_all(dir.join("lib/site-packages/numpy/__pycache__")).unwrap();
        std::fs::write(dir.join(super::super::LOCK_FILE), "numpy==2\nextra==1\n").unwrap();
        check(dir).unwrap();

        // Same size, other bytes: only `verify` sees it.
        let init = dir.join("lib/site-packages/numpy/__init__.py");
        std::fs::write(&init, "y = 2\n").unwrap();
        check(dir).unwrap();
        let e = verify(dir).unwrap_err();
        assert!(matches!(e, EnvDamage::Content { .. }), "{e}");
        std::fs::write(&init, "x = 10\n").unwrap();
        let e = check(dir).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`lib/site-packages/numpy/__init__.py` is no longer a regular file of 6 bytes"
        );
        std::fs::remove_file(&init).unwrap();
        let e = check(dir).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`lib/site-packages/numpy/__init__.py` is missing"
        );
        std::fs::write(&init, "x = 1\n").unwrap();
        check(dir).unwrap();

        // bin/python replaced by an empty file: no longer the link.
        std::fs::remove_file(dir.join("bin/python")).unwrap();
        std::fs::write(dir.join("bin/python"), "").unwrap();
        let e = check(dir).unwrap_err();
        assert_eq!(e.to_string(), "`bin/python` no longer links to `/bin/sh`");
    }

    #[test]
    fn an_interpreter_that_is_empty_or_not_executable_is_damage() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let python = dir.join("bin/python");
        std::fs::write(&python, "").unwrap();
        write(dir).unwrap();
        let e = check(dir).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("does not lead to an executable file: it is empty"),
            "{e}"
        );
        std::fs::write(&python, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o644)).unwrap();
        write(dir).unwrap();
        let e = check(dir).unwrap_err();
        assert!(e.to_string().ends_with("it is not executable"), "{e}");
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
        check(dir).unwrap();
    }
}
