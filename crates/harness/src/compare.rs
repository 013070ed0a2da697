//! The compare stage: the device's outputs against the golden, after the
//! card is released. Each output is judged by its comparison
//! ([`crate::comparison`]): allclose, exact, a registered custom one, or
//! none (`skip_golden`, then only checked for NaN / inf).

use scene_golden::Tensor;

use crate::comparison::{Comparison, Judged, OutputReport, Verdict};
use crate::golden::{GoldenOutputs, GoldenRegistry};
use crate::prepare::{missing_golden_message, missing_golden_output};
use crate::scene::{Case, Scene};

/// What the compare stage found: one record per output (which comparison
/// judged it, the verdict) and one message per failing output.
#[derive(Debug, Default)]
pub struct CompareOutcome {
    pub outputs: Vec<OutputReport>,
    /// Empty means the case passed.
    pub problems: Vec<String>,
}

/// Every output of `scene` (`outputs` in declaration order) judged against
/// `golden` by its comparison in `case`, on `pool`.
pub fn compare_outputs(
    pool: &rayon::ThreadPool,
    registry: &GoldenRegistry,
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
        let report = pool.install(|| judged.judge(registry));
        if report.verdict == Verdict::Fail {
            outcome
                .problems
                .push(report.detail.clone().unwrap_or_default());
        }
        outcome.outputs.push(report);
    }
    outcome
}
