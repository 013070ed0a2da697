//! The compare stage: the device's outputs against the golden, after the
//! card is released. Each output is judged by its comparison
//! ([`crate::compare`]): allclose, exact, a registered custom one, a
//! function of the scene's Python file (run in the scene's Python worker,
//! still after the card is released), or none (`skip_golden`, then only
//! checked for NaN / inf).

use scene_golden::closeness::fmt_num;
use scene_golden::measure::first_nonfinite;
use scene_golden::{Tensor, Tolerance, assert_close, assert_exact};

use crate::compare::{Comparison, ComparisonCtx, OutputReport, Verdict};
use crate::golden::python::{PyError, PyVerdict, PythonRunner};
use crate::golden::{GoldenOutputs, GoldenRegistry};
use crate::prepare::{missing_golden_message, missing_golden_output};
use crate::scene::{Case, OriginJudge, Scene};

/// What the compare stage found: one record per output (which comparison
/// judged it, the verdict) and one message per failing output.
#[derive(Debug, Default)]
pub struct CompareOutcome {
    pub outputs: Vec<OutputReport>,
    /// Empty means the case passed.
    pub problems: Vec<String>,
}

/// Every output of `scene` (`outputs` in declaration order) judged against
/// `golden` by its comparison in `case`, on `pool`; Python comparisons in
/// `python`'s worker for the scene.
#[allow(clippy::too_many_arguments)]
pub fn compare_outputs(
    pool: &rayon::ThreadPool,
    registry: &GoldenRegistry,
    python: &PythonRunner,
    scene: &Scene,
    case: &Case,
    outputs: &[Tensor],
    golden: &GoldenOutputs,
) -> CompareOutcome {
    // Prepared cases and bundle slots both guarantee this; checked once
    // more so a broken invariant is a failed case, not a silent pass.
    if let Some(name) = missing_golden_output(scene, case, golden) {
        return CompareOutcome {
            outputs: Vec::new(),
            problems: vec![missing_golden_message(scene, name)],
        };
    }
    if let Some(origin) = &scene.origin {
        match origin.judge {
            OriginJudge::Golden => {}
            OriginJudge::CompareOutputs => {
                return compare_case_in_python(python, scene, case, outputs, golden, &origin.class);
            }
            OriginJudge::TestRun => {
                return replay_in_python(python, scene, case, outputs, &origin.class);
            }
        }
    }
    let mut outcome = CompareOutcome::default();
    for ((index, spec), actual) in scene
        .tensors
        .iter()
        .enumerate()
        .filter(|(_, t)| t.direction.is_output())
        .zip(outputs)
    {
        let comparison = scene
            .comparison_for(case, index)
            .unwrap_or(&Comparison::AllClose);
        let judged = Judged {
            scene: &scene.name,
            case: &case.name,
            tensor: &spec.name,
            comparison,
            tolerance: scene.tolerance_for(case, index),
            allow_nonfinite: spec.allow_nonfinite,
            actual,
            expected: golden.get(&spec.name),
        };
        let py = PyCompare {
            runner: python,
            scene,
            case,
        };
        let report = pool.install(|| judged.judge_with_python(registry, Some(py)));
        if report.verdict == Verdict::Fail {
            outcome
                .problems
                .push(report.detail.clone().unwrap_or_default());
        }
        outcome.outputs.push(report);
    }
    outcome
}

/// A case of a test file whose class overrides `compare_outputs`: that
/// method judges every output at once, as the original calls it; each
/// output's record carries its verdict.
fn compare_case_in_python(
    python: &PythonRunner,
    scene: &Scene,
    case: &Case,
    outputs: &[Tensor],
    golden: &GoldenOutputs,
    class: &str,
) -> CompareOutcome {
    let named: Vec<(&str, &Tensor, &Tensor)> = scene
        .tensors
        .iter()
        .filter(|t| t.direction.is_output())
        .zip(outputs)
        .filter_map(|(t, actual)| Some((t.name.as_str(), actual, golden.get(&t.name)?)))
        .collect();
    let comparison = format!("{class}.compare_outputs");
    let verdict = python.compare_case(scene, case, &[], &named).map(|mut v| {
        if !v.passed {
            v.detail = format!("{comparison}: {}", v.detail);
        }
        v
    });
    let names: Vec<&str> = named.iter().map(|(name, _, _)| *name).collect();
    whole_case(&names, &comparison, verdict)
}

/// One Python verdict on a whole case as every output's record: a failed
/// or unreachable one is also the case's problem.
fn whole_case(
    names: &[&str],
    comparison: &str,
    verdict: Result<PyVerdict, PyError>,
) -> CompareOutcome {
    let (verdict, detail) = match verdict {
        Ok(v) if v.passed => (Verdict::Pass, v.detail),
        Ok(v) => (Verdict::Fail, v.detail),
        Err(e) => (
            Verdict::Fail,
            format!("{comparison} could not judge the outputs: {e}"),
        ),
    };
    let mut outcome = CompareOutcome::default();
    if verdict == Verdict::Fail {
        outcome.problems.push(detail.clone());
    }
    for name in names {
        outcome.outputs.push(OutputReport {
            name: (*name).to_owned(),
            comparison: comparison.to_owned(),
            verdict,
            detail: Some(detail.clone()),
        });
    }
    outcome
}

/// A case of a level-3 class judged by its own `test_run(self,
/// st_worker)`: run again with the device's outputs in its buffers, its
/// asserts are the verdict of every output.
fn replay_in_python(
    python: &PythonRunner,
    scene: &Scene,
    case: &Case,
    outputs: &[Tensor],
    class: &str,
) -> CompareOutcome {
    let named: Vec<(&str, &Tensor)> = scene
        .tensors
        .iter()
        .filter(|t| t.direction.is_output())
        .zip(outputs)
        .map(|(t, actual)| (t.name.as_str(), actual))
        .collect();
    let verdict = python.replay_case(scene, case, &named);
    let names: Vec<&str> = named.iter().map(|(name, _)| *name).collect();
    whole_case(&names, &format!("{class}.test_run"), verdict)
}

/// One output to judge.
#[derive(Debug)]
pub struct Judged<'a> {
    pub scene: &'a str,
    pub case: &'a str,
    pub tensor: &'a str,
    pub comparison: &'a Comparison,
    pub tolerance: Tolerance,
    pub allow_nonfinite: bool,
    pub actual: &'a Tensor,
    /// `None` only for a skipped output the golden did not give.
    pub expected: Option<&'a Tensor>,
}

/// Where a Python comparison runs: the run's Python workers, for this
/// scene and case.
#[derive(Clone, Copy, Debug)]
pub struct PyCompare<'a> {
    pub runner: &'a PythonRunner,
    pub scene: &'a Scene,
    pub case: &'a Case,
}

impl Judged<'_> {
    /// The verdict; a failing one's `detail` is the whole failure text
    /// (naming the tensor and the comparison). A Python comparison fails
    /// here: it needs [`Judged::judge_with_python`].
    pub fn judge(&self, registry: &GoldenRegistry) -> OutputReport {
        self.judge_with_python(registry, None)
    }

    /// [`Judged::judge`], with Python comparisons run through `python`.
    pub fn judge_with_python(
        &self,
        registry: &GoldenRegistry,
        python: Option<PyCompare<'_>>,
    ) -> OutputReport {
        let comparison = self.comparison.describe(&self.tolerance);
        let report = |verdict, detail| OutputReport {
            name: self.tensor.to_string(),
            comparison: comparison.clone(),
            verdict,
            detail,
        };
        let fail = |text: String| {
            report(
                Verdict::Fail,
                Some(format!("{text}\n  comparison: {comparison}")),
            )
        };
        if *self.comparison == Comparison::Skipped {
            return match first_nonfinite(self.actual) {
                Some(nf) if !self.allow_nonfinite => fail(format!(
                    "tensor `{}`: not compared (skip_golden), but holds a non-finite value: {} at index {:?} ({} non-finite of {} elements); set `allow_nonfinite = true` on the tensor to allow it",
                    self.tensor,
                    fmt_num(nf.value, false),
                    nf.index,
                    nf.count,
                    self.actual.numel()
                )),
                Some(nf) => report(
                    Verdict::Skipped,
                    Some(format!(
                        "{} non-finite element(s), allowed (allow_nonfinite)",
                        nf.count
                    )),
                ),
                None => report(Verdict::Skipped, None),
            };
        }
        let Some(expected) = self.expected else {
            return fail(format!(
                "tensor `{}`: the golden gave no value to compare with",
                self.tensor
            ));
        };
        match self.comparison {
            Comparison::AllClose | Comparison::Exact => {
                let r = if *self.comparison == Comparison::Exact {
                    assert_exact(self.tensor, self.actual, expected)
                } else {
                    assert_close(self.tensor, self.actual, expected, self.tolerance)
                };
                match r {
                    Ok(()) => report(Verdict::Pass, None),
                    Err(m) => fail(m.to_string()),
                }
            }
            Comparison::Custom { name, args } => {
                let Some(custom) = registry.comparison(name) else {
                    return fail(format!(
                        "tensor `{}`: comparison `{name}` is not registered (registered: {})",
                        self.tensor,
                        registry.comparison_names().collect::<Vec<_>>().join(", ")
                    ));
                };
                let ctx = ComparisonCtx {
                    scene: self.scene,
                    case: self.case,
                    tensor: self.tensor,
                    actual: self.actual,
                    expected,
                    tolerance: self.tolerance,
                    args,
                };
                match (custom.f)(&ctx) {
                    Ok(detail) => report(Verdict::Pass, Some(detail)),
                    Err(detail) => fail(format!(
                        "tensor `{}` failed comparison {comparison}: {detail}",
                        self.tensor
                    )),
                }
            }
            Comparison::Python { function, args } => {
                let Some(py) = python else {
                    return fail(format!(
                        "tensor `{}`: Python comparison `{function}` has no Python worker to run in",
                        self.tensor
                    ));
                };
                let Some(file) = py.scene.python.golden.as_ref().or(py
                    .scene
                    .python
                    .fixtures
                    .as_ref())
                else {
                    return fail(format!(
                        "tensor `{}`: Python comparison `{function}`, but the scene names no Python file",
                        self.tensor
                    ));
                };
                match py.runner.compare(
                    py.scene,
                    py.case,
                    file,
                    function,
                    self.tensor,
                    (self.actual, expected),
                    args,
                ) {
                    Ok(v) if v.passed => report(Verdict::Pass, Some(v.detail)),
                    Ok(v) => fail(format!(
                        "tensor `{}` failed comparison {comparison}: {}",
                        self.tensor, v.detail
                    )),
                    Err(e) => fail(format!(
                        "tensor `{}`: comparison {comparison} could not judge it: {e}",
                        self.tensor
                    )),
                }
            }
            Comparison::Skipped => unreachable!("handled above"),
        }
    }
}
