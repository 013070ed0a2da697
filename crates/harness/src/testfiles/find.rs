//! Which files a run's paths name: a `.py` file as given, and every
//! `test_*.py` under a directory (as the original's pytest collects
//! them), skipping hidden directories, `__pycache__`, `build` and
//! `outputs`.

use std::path::{Path, PathBuf};

/// A path that names no test file.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: not a Python file or a directory of test files")]
    NotATestPath(PathBuf),
}

/// Whether a command-line argument is a path of test files rather than a
/// case filter: an existing `.py` file, or an existing directory written
/// as a path (with a `/`, or `.`).
pub fn is_test_path(arg: &str) -> bool {
    let p = Path::new(arg);
    if arg.ends_with(".py") {
        return p.is_file();
    }
    (arg.contains('/') || arg == ".") && p.is_dir()
}

/// The test files `paths` name, absolute, sorted and without duplicates
/// (a directory's files in path order).
pub fn find_test_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, FindError> {
    let mut out = Vec::new();
    for p in paths {
        let abs = p.canonicalize().map_err(|source| FindError::Read {
            path: p.clone(),
            source,
        })?;
        if abs.is_file() {
            if abs.extension().is_none_or(|e| e != "py") {
                return Err(FindError::NotATestPath(p.clone()));
            }
            out.push(abs);
        } else if abs.is_dir() {
            let mut found = Vec::new();
            walk(&abs, &mut found)?;
            found.sort();
            out.extend(found);
        } else {
            return Err(FindError::NotATestPath(p.clone()));
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|f| seen.insert(f.clone()));
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), FindError> {
    let entries = std::fs::read_dir(dir).map_err(|source| FindError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| FindError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if name.starts_with('.') || matches!(&*name, "__pycache__" | "build" | "outputs") {
                continue;
            }
            walk(&path, out)?;
        } else if kind.is_file() && name.starts_with("test_") && name.ends_with(".py") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_give_their_test_files_in_order_once() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for f in [
            "b/test_b.py",
            "a/test_a.py",
            "a/helper.py",
            "a/__pycache__/test_c.py",
            ".hidden/test_h.py",
            "a/kernels/orch.cpp",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "").unwrap();
        }
        let files = find_test_files(&[root.to_path_buf(), root.join("a/test_a.py")]).unwrap();
        let rel: Vec<_> = files
            .iter()
            .map(|f| {
                f.strip_prefix(root.canonicalize().unwrap())
                    .unwrap()
                    .to_path_buf()
            })
            .collect();
        assert_eq!(
            rel,
            [PathBuf::from("a/test_a.py"), PathBuf::from("b/test_b.py")]
        );
        assert!(matches!(
            find_test_files(&[root.join("a/kernels/orch.cpp")]),
            Err(FindError::NotATestPath(_))
        ));
        assert!(matches!(
            find_test_files(&[root.join("missing")]),
            Err(FindError::Read { .. })
        ));
        let a = root.join("a/test_a.py");
        assert!(is_test_path(a.to_str().unwrap()));
        assert!(is_test_path(root.to_str().unwrap()));
        assert!(!is_test_path("vector_add"));
    }
}
