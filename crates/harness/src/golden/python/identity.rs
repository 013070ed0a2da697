//! The code identity of a Python golden: its file and the local modules it
//! imports, transitively.
//!
//! Imports are found by scanning lines (`import a.b, c as d`,
//! `from a.b import c, d`), not by running Python, so the identity needs
//! no interpreter. A module is local when it resolves to a file next to the
//! importing file or under the scenes root (`a/b.py`, `a/b/__init__.py`;
//! for `from a import c`, also `a/c.py`); anything else (numpy, torch, the
//! standard library) is not part of the identity; the interpreter's numpy
//! and torch versions are added by the golden cache.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// Blake3 (hex) over every local file the golden depends on: each one's
/// path relative to `scenes_root` and its bytes, in path order.
pub fn code_identity(file: &Path, scenes_root: &Path) -> io::Result<String> {
    let files = local_files(file, scenes_root)?;
    let mut h = scene_util::FieldHasher::new("scene-python-golden-code v1");
    for (path, bytes) in &files {
        let rel = path.strip_prefix(scenes_root).unwrap_or(path);
        h.field("path", rel.to_string_lossy().as_bytes());
        h.field("bytes", bytes);
    }
    Ok(h.finalize().to_hex().to_string())
}

/// `file` and the local files it imports, transitively, by path.
pub fn local_files(file: &Path, scenes_root: &Path) -> io::Result<BTreeMap<PathBuf, Vec<u8>>> {
    let mut seen = BTreeMap::new();
    let mut todo = vec![file.to_path_buf()];
    while let Some(path) = todo.pop() {
        if seen.contains_key(&path) {
            continue;
        }
        let bytes = std::fs::read(&path)?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let dir = path.parent().unwrap_or(scenes_root).to_path_buf();
        seen.insert(path, bytes);
        for module in imported_modules(&text) {
            for base in [&dir, &scenes_root.to_path_buf()] {
                for candidate in candidates(base, &module) {
                    if candidate.is_file()
                        && let Ok(c) = candidate.canonicalize()
                        && c.starts_with(scenes_root)
                        && !seen.contains_key(&c)
                    {
                        todo.push(c);
                    }
                }
            }
        }
    }
    Ok(seen)
}

/// Module paths a source imports: `a.b` for `import a.b`; for
/// `from a.b import c, d`: `a.b`, `a.b.c`, `a.b.d` (c may be a submodule).
pub fn imported_modules(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in source.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(rest) = line.strip_prefix("import ") {
            for part in rest.split(',') {
                if let Some(name) = part.split_whitespace().next() {
                    out.push(name.to_string());
                }
            }
        } else if let Some(rest) = line.strip_prefix("from ") {
            let mut words = rest.splitn(2, " import ");
            let (Some(module), Some(names)) = (words.next(), words.next()) else {
                continue;
            };
            let module = module.trim().trim_start_matches('.');
            if module.is_empty() {
                continue;
            }
            out.push(module.to_string());
            let names = names.trim().trim_start_matches('(').trim_end_matches(')');
            for part in names.split(',') {
                if let Some(name) = part.split_whitespace().next()
                    && name != "*"
                {
                    out.push(format!("{module}.{name}"));
                }
            }
        }
    }
    out.retain(|m| {
        m.split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'))
    });
    out
}

/// Where module `a.b` may live under `base`: `a/b.py`, `a/b/__init__.py`,
/// and the `__init__.py` of each package on the way.
fn candidates(base: &Path, module: &str) -> Vec<PathBuf> {
    let parts: Vec<&str> = module.split('.').collect();
    let mut out = Vec::new();
    let mut dir = base.to_path_buf();
    for (i, p) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            out.push(dir.join(format!("{p}.py")));
        }
        dir.push(p);
        out.push(dir.join("__init__.py"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_import_forms() {
        let src = "import numpy as np\nimport a.b, c\n    from common_pa.pa import golden, x as y  # why\nfrom . import z\nfrom .rel import q\n# import nothing\nfrom m import *\n";
        let m = imported_modules(src);
        for want in [
            "numpy",
            "a.b",
            "c",
            "common_pa.pa",
            "common_pa.pa.golden",
            "common_pa.pa.x",
            "rel",
            "rel.q",
            "m",
        ] {
            assert!(m.iter().any(|x| x == want), "{want} in {m:?}");
        }
        assert!(
            !m.iter().any(|x| x.contains('*') || x == "nothing"),
            "{m:?}"
        );
    }

    #[test]
    fn identity_follows_local_imports_only() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let scene = root.join("s");
        std::fs::create_dir_all(scene.join("helpers")).unwrap();
        std::fs::create_dir_all(root.join("shared")).unwrap();
        let golden = scene.join("golden.py");
        std::fs::write(
            &golden,
            "import numpy as np\nfrom helpers import util\nimport shared.pa\n",
        )
        .unwrap();
        std::fs::write(scene.join("helpers/util.py"), "X = 1\n").unwrap();
        std::fs::write(root.join("shared/pa.py"), "from shared import deep\n").unwrap();
        std::fs::write(root.join("shared/deep.py"), "Y = 2\n").unwrap();
        std::fs::write(root.join("unrelated.py"), "Z = 3\n").unwrap();
        let files = local_files(&golden, &root).unwrap();
        let names: Vec<String> = files
            .keys()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "s/golden.py",
                "s/helpers/util.py",
                "shared/deep.py",
                "shared/pa.py"
            ]
        );
        let before = code_identity(&golden, &root).unwrap();
        std::fs::write(root.join("unrelated.py"), "Z = 4\n").unwrap();
        assert_eq!(code_identity(&golden, &root).unwrap(), before);
        std::fs::write(root.join("shared/deep.py"), "Y = 3\n").unwrap();
        assert_ne!(code_identity(&golden, &root).unwrap(), before);
    }
}
