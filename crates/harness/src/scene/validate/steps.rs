//! Level 3: `[[steps]]`, the host level's chip runs and host functions
//! ([`crate::scene::steps`]), checked at load: each step is a chip step or
//! a host step, names functions that can exist and tensors that do, a
//! chip step writes only what the device gives back, every output is
//! written by some step, and no step reads an output before the step that
//! writes it.

use super::{Validator, is_c_identifier, python_may_define};
use crate::scene::raw::{RawHost, RawStep};
use crate::scene::steps::{Step, StepKind};
use crate::scene::{PythonFiles, TensorSpec};

impl Validator<'_> {
    /// The steps; `None` on a problem (each one recorded). No steps is
    /// `Some(vec![])`, whatever the level.
    pub(super) fn steps(
        &self,
        level: u32,
        raw: Vec<RawStep>,
        tensors: Option<&[TensorSpec]>,
        python: Option<&PythonFiles>,
    ) -> Option<Vec<Step>> {
        if raw.is_empty() {
            return Some(Vec::new());
        }
        if level != 3 {
            self.problem(
                "steps",
                "only a level-3 scene has [[steps]] (host functions between the rank group's chip runs); \
                 a level-2 scene runs its orchestration once",
            );
            return None;
        }
        let mut ok = true;
        let mut steps = Vec::new();
        for (i, s) in raw.into_iter().enumerate() {
            match self.step(i, s, tensors, python) {
                Some(step) => steps.push(step),
                None => ok = false,
            }
        }
        if !ok {
            return None;
        }
        if !steps.iter().any(Step::is_chip) {
            self.problem(
                "steps",
                "no chip step: a level-3 scene's steps run the rank group at least once (`chip = \"FUNCTION\"`)",
            );
            ok = false;
        }
        let tensors = tensors?;
        ok &= self.steps_cover_outputs(&steps, tensors);
        ok &= self.steps_read_after_write(&steps, tensors);
        ok.then_some(steps)
    }

    fn step(
        &self,
        i: usize,
        s: RawStep,
        tensors: Option<&[TensorSpec]>,
        python: Option<&PythonFiles>,
    ) -> Option<Step> {
        let field = format!("steps[{i}]");
        let kind = match (s.chip, s.host) {
            (Some(_), Some(_)) => {
                self.problem(
                    &field,
                    "a step is a chip step (`chip = \"FUNCTION\"`) or a host step (`host = { ... }`), not both",
                );
                None
            }
            (None, None) => {
                self.problem(
                    &field,
                    "says neither `chip = \"FUNCTION\"` (a run of the rank group) nor `host = { c = \"host.c\", function = \"F\" }` / `host = { python = \"F\" }`",
                );
                None
            }
            (Some(function), None) => {
                if is_c_identifier(&function) {
                    Some(StepKind::Chip { function })
                } else {
                    self.problem(
                        format!("{field}.chip"),
                        format!("`{function}` is not a C function name (an orchestration function of [orchestration] source)"),
                    );
                    None
                }
            }
            (None, Some(host)) => self.host_step(&field, host, python),
        };
        let names = |list: &str, names: Vec<String>| -> Option<Vec<usize>> {
            let tensors = tensors?;
            let mut out = Vec::new();
            let mut ok = true;
            for n in names {
                match tensors.iter().position(|t| t.name == n) {
                    Some(at) if !out.contains(&at) => out.push(at),
                    Some(_) => {}
                    None => {
                        self.problem(
                            format!("{field}.{list}"),
                            format!(
                                "unknown tensor `{n}` (tensors: {})",
                                tensors
                                    .iter()
                                    .map(|t| t.name.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        );
                        ok = false;
                    }
                }
            }
            ok.then_some(out)
        };
        let reads = names("reads", s.reads);
        let writes = names("writes", s.writes);
        if let (Some(StepKind::Chip { function }), Some(writes), Some(tensors)) =
            (&kind, &writes, tensors)
        {
            // The device gives back only the signature's outputs.
            let bad: Vec<&str> = writes
                .iter()
                .filter(|&&w| !tensors[w].direction.is_output())
                .map(|&w| tensors[w].name.as_str())
                .collect();
            if !bad.is_empty() {
                self.problem(
                    format!("{field}.writes"),
                    format!(
                        "chip step `{function}` writes {}, an `in` argument of the orchestration signature: \
                         the device gives back only `out` / `inout` tensors",
                        quoted(&bad)
                    ),
                );
                return None;
            }
        }
        let (kind, reads, writes) = (kind?, reads?, writes?);
        Some(Step {
            kind,
            reads,
            writes,
            bind: Vec::new(),
            scalars: Vec::new(),
        })
    }

    fn host_step(
        &self,
        field: &str,
        host: RawHost,
        python: Option<&PythonFiles>,
    ) -> Option<StepKind> {
        let field = format!("{field}.host");
        match (host.c, host.python, host.function) {
            (Some(source), None, Some(function)) => {
                let file_ok = self
                    .report(self.existing_file(&format!("{field}.c"), &source))
                    .is_some();
                if !is_c_identifier(&function) {
                    self.problem(
                        format!("{field}.function"),
                        format!("`{function}` is not a C function name"),
                    );
                    return None;
                }
                file_ok.then_some(StepKind::HostC { source, function })
            }
            (Some(_), None, None) => {
                self.problem(
                    &field,
                    "a C host step names its function: `host = { c = \"host.c\", function = \"F\" }`",
                );
                None
            }
            (None, Some(function), None) => {
                let python = python?;
                let Some(file) = python.golden.as_ref().or(python.fixtures.as_ref()) else {
                    self.problem(
                        format!("{field}.python"),
                        format!(
                            "host function `{function}` is Python, but the scene names no Python file: \
                             add `golden = {{ python = \"golden.py\" }}` (or `fixtures = {{ python = ... }}`) defining it"
                        ),
                    );
                    return None;
                };
                // Unreadable: the Python worker says why when the case runs.
                if let Ok(source) = std::fs::read_to_string(file)
                    && !python_may_define(&source, &function)
                {
                    self.problem(
                        format!("{field}.python"),
                        format!(
                            "{} defines no function `{function}` (no `def {function}`, assignment or import of that name)",
                            file.display()
                        ),
                    );
                    return None;
                }
                Some(StepKind::HostPython { function })
            }
            (None, Some(_), Some(_)) => {
                self.problem(
                    &field,
                    "a Python host step is `host = { python = \"F\" }` (the function is the value of `python`)",
                );
                None
            }
            _ => {
                self.problem(
                    &field,
                    "is `{ c = \"host.c\", function = \"F\" }` or `{ python = \"F\" }`",
                );
                None
            }
        }
    }

    /// Every output of the signature is written by some step: the
    /// comparison would otherwise judge its `init`.
    fn steps_cover_outputs(&self, steps: &[Step], tensors: &[TensorSpec]) -> bool {
        let unwritten: Vec<&str> = tensors
            .iter()
            .enumerate()
            .filter(|(i, t)| t.direction.is_output() && !steps.iter().any(|s| s.writes.contains(i)))
            .map(|(_, t)| t.name.as_str())
            .collect();
        if unwritten.is_empty() {
            return true;
        }
        self.problem(
            "steps",
            format!(
                "output {} is written by no step (name it in a step's `writes`)",
                quoted(&unwritten)
            ),
        );
        false
    }

    /// Steps run in the order written: one that reads an output no
    /// earlier step wrote, while a later step writes it, has its order
    /// (or a dependency) wrong.
    fn steps_read_after_write(&self, steps: &[Step], tensors: &[TensorSpec]) -> bool {
        let mut ok = true;
        for (i, s) in steps.iter().enumerate() {
            for &t in &s.reads {
                if !tensors[t].direction.is_output()
                    || steps[..i].iter().any(|e| e.writes.contains(&t))
                {
                    continue;
                }
                if let Some(later) = (i + 1..steps.len()).find(|&j| steps[j].writes.contains(&t)) {
                    self.problem(
                        format!("steps[{i}].reads"),
                        format!(
                            "{} reads `{}` before any step writes it (steps[{later}], {}, writes it; steps run in the order written)",
                            s.kind, tensors[t].name, steps[later].kind
                        ),
                    );
                    ok = false;
                }
            }
        }
        ok
    }
}

/// `` `a` `` or `` `a`, `b` ``.
fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
