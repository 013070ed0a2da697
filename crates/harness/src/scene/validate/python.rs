//! A scene's Python: the golden and fixture files and what they need
//! installed.

use std::path::PathBuf;

use super::{Checked, Validator};
use crate::scene::PythonFiles;
use crate::scene::raw::{RawGolden, RawPython};

impl Validator<'_> {
    /// The golden's name and the Python files (`golden = { python }`,
    /// `fixtures = { python }`), each a `.py` file inside the scenes root;
    /// `None` when either is bad (each reported).
    pub(super) fn python_files(
        &self,
        golden: RawGolden,
        fixtures: Option<RawPython>,
    ) -> Option<(String, PythonFiles)> {
        let file = |field: &str, raw: RawPython| -> Checked<PathBuf> {
            let field = format!("{field}.python");
            if raw.python.extension().is_none_or(|e| e != "py") {
                return Err(self.err(
                    &field,
                    format!("`{}` is not a `.py` file", raw.python.display()),
                ));
            }
            let resolved = self.resolve_inside(&field, &raw.python, "Python file")?;
            if !resolved.is_file() {
                return Err(self.err(
                    &field,
                    format!("Python file `{}` is not a file", raw.python.display()),
                ));
            }
            Ok(resolved)
        };
        let mut python = PythonFiles::default();
        let mut ok = true;
        let name = match golden {
            RawGolden::Registered(name) => name,
            RawGolden::Python(raw) => {
                let name = format!("python:{}", raw.python.display());
                python.golden = self.report(file("golden", raw));
                ok &= python.golden.is_some();
                name
            }
        };
        if let Some(raw) = fixtures {
            python.fixtures = self.report(file("fixtures", raw));
            ok &= python.fixtures.is_some();
        }
        ok.then_some((name, python))
    }

    /// `requirements = [...]`, else the lines of `requirements.txt` beside
    /// the golden (or fixtures) file, else none (the default). Only
    /// requirement specifiers: a pip option (`-r`, `--index-url`) would
    /// make the set, and so the environment's key, depend on more than
    /// the text.
    pub(super) fn requirements(
        &self,
        declared: Option<Vec<String>>,
        python: &PythonFiles,
    ) -> Checked<Vec<String>> {
        let beside = python
            .golden
            .as_ref()
            .or(python.fixtures.as_ref())
            .and_then(|f| f.parent())
            .map(|d| d.join("requirements.txt"));
        let (field, lines) = match declared {
            Some(list) => {
                if !python.any() {
                    return Err(self.err(
                        "requirements",
                        "the scene has no Python golden or fixtures to need them",
                    ));
                }
                if beside.as_ref().is_some_and(|b| b.is_file()) {
                    return Err(self.err(
                        "requirements",
                        "given both here and in requirements.txt beside the Python file; keep one",
                    ));
                }
                ("requirements".to_string(), list)
            }
            None => match beside.filter(|b| b.is_file()) {
                None => return Ok(Vec::new()),
                Some(file) => {
                    let text = std::fs::read_to_string(&file).map_err(|e| {
                        self.err("requirements", format!("{}: {e}", file.display()))
                    })?;
                    let lines = text
                        .lines()
                        .map(|l| match l.find(" #").or(l.starts_with('#').then_some(0)) {
                            Some(i) => l[..i].to_string(),
                            None => l.to_string(),
                        })
                        .filter(|l| !l.trim().is_empty())
                        .collect();
                    (file.display().to_string(), lines)
                }
            },
        };
        let mut out = Vec::new();
        for line in lines {
            let r = line.trim().to_string();
            if r.is_empty() || r.starts_with('-') || r.contains(['\n', '\r']) {
                return Err(self.err(
                    &field,
                    format!("`{line}` is not a requirement specifier (like `numpy>=1.26`); pip options are not supported"),
                ));
            }
            if !out.contains(&r) {
                out.push(r);
            }
        }
        Ok(out)
    }
}
