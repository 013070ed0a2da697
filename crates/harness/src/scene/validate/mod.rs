//! Raw `scene.toml` -> [`Scene`]: every field checked, every case resolved.
//!
//! Validation collects: each check that fails adds a [`Problem`] and the
//! checks that do not depend on it still run, so one load reports every
//! independent mistake in the file. A part that failed is left out of the
//! model being built, and the checks that need it (resolving the cases
//! needs valid tensors, scalars and `[derived]`; a level-3 group needs
//! resolved cases) are skipped rather than reporting follow-on noise.
//!
//! One file per part of the scene: [`header`] (name, level, platforms,
//! tolerances, orchestration, incores), [`tensors`] (tensor and scalar
//! arguments), [`cases`] (case names, params, `[derived]`, per-case
//! resolution), [`init`] (fixtures), [`group`] (level 3), [`compare`]
//! (`compare`, `skip_golden`), [`python`] (Python golden, fixtures and
//! their requirements), [`memory`] (`device_memory`), [`steps`] (level
//! 3's `[[steps]]`).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use scene_golden::DType;

use super::raw::{RawNum, RawScene};
use super::{CompareSpec, Problem, PythonFiles, TensorSpec, ToleranceSpec};
use super::{HARDWARE_PLATFORMS, NumSpec, Orchestration, Scene, SceneError, dtype_from_name};
use crate::scene::expr::{Expr, Params};

mod cases;
mod compare;
mod group;
mod header;
mod init;
mod memory;
mod python;
mod steps;
mod tensors;

/// A check's outcome: the value, or the problem that stops it.
type Checked<T> = Result<T, Problem>;

pub(super) struct Validator<'a> {
    dir: &'a Path,
    manifest: &'a Path,
    problems: RefCell<Vec<Problem>>,
}

impl<'a> Validator<'a> {
    pub(super) fn new(dir: &'a Path, manifest: &'a Path) -> Self {
        Validator {
            dir,
            manifest,
            problems: RefCell::new(Vec::new()),
        }
    }

    /// The raw scene as a [`Scene`], or every problem found in it.
    pub(super) fn validate(self, raw: RawScene) -> Result<Scene, SceneError> {
        let scene = self.scene(raw);
        let problems = self.problems.into_inner();
        match scene {
            Some(scene) if problems.is_empty() => Ok(scene),
            _ => Err(SceneError::Invalid {
                path: self.manifest.to_path_buf(),
                problems: if problems.is_empty() {
                    // Every part that is left out reports why; reaching
                    // here would be a validator bug, still not a silent pass.
                    vec![Problem::new("", "invalid scene (no problem recorded)")]
                } else {
                    problems
                },
            }),
        }
    }

    /// Every part checked, each on its own; `None` when any failed.
    fn scene(&self, raw: RawScene) -> Option<Scene> {
        self.check_header(&raw);
        let tolerance = self.scene_tolerance(raw.rtol, raw.atol, raw.equal_nan);
        let o = raw.orchestration;
        let entry = self.check_orchestration(&o);
        let kinds = self.incore_kinds(raw.build.as_deref(), raw.args.as_deref());
        let args = kinds.map(|(_, a)| a).unwrap_or_default();
        let runtime = self.runtime(raw.runtime.as_deref());
        let incores = self.incores(raw.incores, kinds);
        self.check_argument_count(&o.signature, raw.tensors.len(), raw.scalars.len());
        let n_tensors = raw.tensors.len();
        let mut arg_names = BTreeSet::new();
        let tensors = self.tensors(raw.tensors, &o.signature, &mut arg_names);
        let scalars = self.scalars(raw.scalars, &o.signature, n_tensors, &mut arg_names);
        let derived = self.derived(raw.derived);
        let group = self.group(
            raw.level,
            raw.ranks,
            raw.comm,
            tensors.as_deref().unwrap_or(&[]),
            scalars.as_deref().unwrap_or(&[]),
        );
        let declared = match (&tensors, &scalars, &tolerance, &derived) {
            (Some(tensors), Some(scalars), Some(tolerance), Some(derived)) => {
                Some(cases::Declared {
                    tensors,
                    scalars,
                    tolerance,
                    derived,
                })
            }
            _ => None,
        };
        let device_memory = self.device_memory(raw.device_memory);
        let mut cases = self.cases(raw.cases, declared.as_ref());
        if let (Some(Some(g)), Some(cases), Some(tensors)) = (&group, &mut cases, &tensors) {
            for (i, c) in cases.iter_mut().enumerate() {
                c.group = self.report(self.case_group(i, g, c, tensors));
            }
        }
        if let (Some(Some(spec)), Some(cases)) = (&device_memory, &mut cases) {
            for c in cases.iter_mut() {
                c.device_memory = self.report(self.case_device_memory(spec, c));
            }
        }
        let python = self
            .python_files(raw.golden, raw.fixtures)
            .map(|(golden, mut python)| {
                python.requirements = self
                    .report(self.requirements(raw.requirements, &python))
                    .unwrap_or_default();
                (golden, python)
            });
        let steps = self.steps(
            raw.level,
            raw.steps,
            tensors.as_deref(),
            python.as_ref().map(|(_, p)| p),
        );
        let (golden, python) = python?;
        let (api, function) = entry?;
        if let Some(tensors) = &tensors {
            self.check_python_comparisons(tensors, &python);
        }
        Some(Scene {
            name: raw.name,
            dir: self.dir.to_path_buf(),
            manifest: self.manifest.to_path_buf(),
            level: raw.level,
            platforms: raw.platforms,
            golden,
            python,
            tolerance: tolerance?,
            devices: raw.devices,
            device_memory: device_memory?,
            group: group?,
            orchestration: Orchestration {
                source: o.source,
                function,
                api,
                signature: o.signature,
                include_dirs: o.include_dirs,
                defines: o.defines.into_iter().collect(),
            },
            incores: incores?,
            args,
            runtime: runtime?,
            tensors: tensors?,
            scalars: scalars?,
            derived: derived?,
            cases: cases?,
            steps: steps?,
            origin: None,
        })
    }

    /// A `compare = { python = ... }` needs a Python file to find its
    /// function in: the golden's, else the fixtures'.
    /// When the file can be read, the function's name must be bound in
    /// it somewhere (a cheap scan, see [`python_may_define`]): a typo is
    /// then a load error, not a failed case.
    fn check_python_comparisons(&self, tensors: &[TensorSpec], python: &PythonFiles) {
        let file = python.golden.as_ref().or(python.fixtures.as_ref());
        // Unreadable: the Python worker says why when the case runs.
        let source = file.and_then(|f| std::fs::read_to_string(f).ok());
        for (i, t) in tensors.iter().enumerate() {
            let CompareSpec::Python { function, .. } = &t.compare else {
                continue;
            };
            if let (Some(file), Some(source)) = (file, &source) {
                if !python_may_define(source, function) {
                    self.problem(
                        format!("tensors[{i}].compare.python"),
                        format!(
                            "tensor `{}`: {} defines no function `{function}` (no `def {function}`, assignment or import of that name)",
                            t.name,
                            file.display()
                        ),
                    );
                }
                continue;
            }
            if !python.any() {
                self.problem(
                    format!("tensors[{i}].compare.python"),
                    format!(
                        "tensor `{}`: comparison `{function}` is a Python function, but the scene names no Python file: \
                         add `golden = {{ python = \"golden.py\" }}` (or `fixtures = {{ python = ... }}`) defining it",
                        t.name
                    ),
                );
            }
        }
    }

    fn err(&self, field: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem::new(field, message)
    }

    /// Records a problem found outside a [`Checked`] check.
    fn problem(&self, field: impl Into<String>, message: impl Into<String>) {
        self.push(Problem::new(field, message));
    }

    /// Records a failed check; `Some` when it passed.
    fn report<T>(&self, checked: Checked<T>) -> Option<T> {
        match checked {
            Ok(v) => Some(v),
            Err(p) => {
                self.push(p);
                None
            }
        }
    }

    /// A scene-wide value checked in a case fails once per tensor that
    /// reads it: one line says it.
    fn push(&self, p: Problem) {
        let mut problems = self.problems.borrow_mut();
        if !problems.contains(&p) {
            problems.push(p);
        }
    }

    /// Records every failure of `checks`; whether all passed.
    fn all(&self, checks: impl IntoIterator<Item = Checked<()>>) -> bool {
        // Not `Iterator::all`: that stops at the first failure.
        let mut ok = true;
        for c in checks {
            ok &= self.report(c).is_some();
        }
        ok
    }

    fn platform_list(&self, field: &str, list: &[String]) -> Checked<()> {
        if list.is_empty() {
            return Err(self.err(field, "must name at least one platform"));
        }
        for p in list {
            if p.parse::<crate::platform::BuiltinPlatform>().is_err()
                && !HARDWARE_PLATFORMS.contains(&p.as_str())
            {
                return Err(self.err(
                    field,
                    format!(
                        "unknown platform `{p}` (known: {}; hardware: {})",
                        crate::platform::BuiltinPlatform::known(),
                        HARDWARE_PLATFORMS.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Resolves `path` (relative to the scene directory) and checks it stays
    /// inside the scenes root, the scene directory's parent: scenes may share
    /// kernels and headers (`../common/add.c`), never reach outside.
    ///
    /// The check is lexical (`..` folded, links not followed): a symbolic
    /// link the user placed in the scenes root is theirs to follow, which is
    /// how scenes name the files of a checkout of the original project in
    /// place (`tests/simpler-compat/original`); a `..` past the root is not.
    fn resolve_inside(&self, field: &str, path: &Path, what: &str) -> Checked<PathBuf> {
        if path.is_absolute() {
            return Err(self.err(
                field,
                format!(
                    "{what} `{}` must be relative to the scene directory",
                    path.display()
                ),
            ));
        }
        let joined = crate::config::lexical(&self.dir.join(path));
        let root = self.dir.parent().unwrap_or(self.dir);
        if !joined.starts_with(root) {
            return Err(self.err(
                field,
                format!(
                    "{what} `{}` must be inside the scenes directory {}",
                    path.display(),
                    root.display()
                ),
            ));
        }
        let resolved = joined.canonicalize().map_err(|_| {
            self.err(
                field,
                format!(
                    "{what} `{}` not found in {}",
                    path.display(),
                    self.dir.display()
                ),
            )
        })?;
        Ok(resolved)
    }

    fn existing_file(&self, field: &str, path: &Path) -> Checked<()> {
        if !self.resolve_inside(field, path, "source file")?.is_file() {
            return Err(self.err(
                field,
                format!("source file `{}` is not a file", path.display()),
            ));
        }
        Ok(())
    }

    /// Each include dir exists inside the scenes root; every bad one is
    /// reported.
    fn existing_dirs(&self, field: &str, dirs: &[PathBuf]) -> bool {
        self.all(dirs.iter().map(|d| {
            if !self.resolve_inside(field, d, "include dir")?.is_dir() {
                return Err(self.err(
                    field,
                    format!("include dir `{}` is not a directory", d.display()),
                ));
            }
            Ok(())
        }))
    }

    /// A tolerance, when given, is a finite number >= 0: `nan` or `inf`
    /// would let any output pass.
    fn tolerance(
        &self,
        field: &str,
        prefix: &str,
        v: Option<&NumSpec>,
        params: &Params,
    ) -> Checked<Option<f64>> {
        let Some(spec) = v else { return Ok(None) };
        let v = spec
            .eval(params)
            .map_err(|e| self.err(field, format!("{prefix}{e}")))?
            .as_f64();
        if !(v >= 0.0 && v.is_finite()) {
            return Err(self.err(
                field,
                format!("{prefix}must be a finite number >= 0, got {v}"),
            ));
        }
        Ok(Some(v))
    }

    /// A literal `rtol` / `atol` checked now (an expression in every case).
    fn literal_tolerance(&self, field: &str, v: &Option<NumSpec>) -> Checked<()> {
        if let Some(NumSpec::Int(_) | NumSpec::Float(_)) = v {
            self.tolerance(field, "", v.as_ref(), &Params::new())?;
        }
        Ok(())
    }

    /// Scene-wide `rtol`, `atol`, `equal_nan`.
    fn scene_tolerance(
        &self,
        rtol: Option<RawNum>,
        atol: Option<RawNum>,
        equal_nan: bool,
    ) -> Option<ToleranceSpec> {
        let rtol = self.report(self.opt_num("rtol", rtol).and_then(|v| {
            self.literal_tolerance("rtol", &v)?;
            Ok(v)
        }));
        let atol = self.report(self.opt_num("atol", atol).and_then(|v| {
            self.literal_tolerance("atol", &v)?;
            Ok(v)
        }));
        Some(ToleranceSpec {
            rtol: rtol?,
            atol: atol?,
            equal_nan,
        })
    }

    /// A name that becomes a file name (dumps, bundles): one plain path
    /// component.
    fn file_name(&self, field: &str, what: &str, name: &str) -> Checked<()> {
        scene_util::check_file_name(name)
            .map(|_| ())
            .map_err(|e| self.err(field, format!("`{name}` is not a valid {what} name: {e}")))
    }

    /// A number or an expression; a malformed expression is an error
    /// naming `field`.
    fn num(&self, field: &str, raw: RawNum) -> Checked<NumSpec> {
        Ok(match raw {
            RawNum::Int(i) => NumSpec::Int(i),
            RawNum::Float(f) => NumSpec::Float(f),
            RawNum::Expr(text) => {
                let expr = Expr::parse(&text).map_err(|e| self.err(field, e.to_string()))?;
                NumSpec::Expr { text, expr }
            }
        })
    }

    fn opt_num(&self, field: &str, raw: Option<RawNum>) -> Checked<Option<NumSpec>> {
        raw.map(|r| self.num(field, r)).transpose()
    }

    fn dtype(&self, field: &str, name: &str) -> Checked<DType> {
        dtype_from_name(name).ok_or_else(|| self.err(field, format!("unknown dtype `{name}`")))
    }
}

fn is_c_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Whether Python `source` may bind `name` at module level: a `def` or
/// `class` of it, an assignment to it, an import naming it (or `import *`,
/// `globals()`, `setattr`, which a scan cannot see through). Conservative:
/// `false` only when the name is bound nowhere, so a typo is caught and
/// working code is never refused.
pub(crate) fn python_may_define(source: &str, name: &str) -> bool {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let word_at = |line: &str, at: usize| {
        let before_ok = line[..at].chars().next_back().is_none_or(|c| !is_ident(c));
        let after_ok = line[at + name.len()..]
            .chars()
            .next()
            .is_none_or(|c| !is_ident(c));
        before_ok && after_ok
    };
    let has_word = |line: &str| line.match_indices(name).any(|(at, _)| word_at(line, at));
    source.lines().any(|line| {
        let t = line.trim_start();
        if t.contains("globals()") || t.contains("setattr(") {
            return true;
        }
        if t.starts_with("import ") || t.starts_with("from ") {
            return t.contains('*') || has_word(t);
        }
        for kw in ["def ", "async def ", "class "] {
            if let Some(rest) = t.strip_prefix(kw) {
                return rest.trim_start().starts_with(name) && word_at(rest.trim_start(), 0);
            }
        }
        // `name = ...`, `name: T = ...`, `name, other = ...`, a name in a
        // parenthesised import list.
        t.starts_with(name)
            && t[name.len()..]
                .chars()
                .next()
                .is_none_or(|c| c.is_whitespace() || matches!(c, '=' | ':' | ',' | ')'))
    })
}

#[cfg(test)]
mod tests {
    use super::python_may_define as may;

    #[test]
    fn a_python_name_is_found_where_python_can_bind_it() {
        assert!(may("def compare(name, a, e, p):\n", "compare"));
        assert!(may(
            "if X:\n    async def compare(n, a, e, p): ...\n",
            "compare"
        ));
        assert!(may("compare = make()\n", "compare"));
        assert!(may("compare: object = make()\n", "compare"));
        assert!(may("from helpers import first, compare\n", "compare"));
        assert!(may(
            "from helpers import (\n    first,\n    compare\n)\n",
            "compare"
        ));
        assert!(may("from helpers import *\n", "compare"));
        assert!(may("globals()['comp' + 'are'] = f\n", "compare"));
        assert!(!may("def compare_rows(n, a, e, p):\n", "compare"));
        assert!(!may("def frist(n, a, e, p):\n    compare(1)\n", "compare"));
        assert!(!may("x = compare\n", "compare"));
        assert!(!may("import comparexyz\n", "compare"));
    }
}
