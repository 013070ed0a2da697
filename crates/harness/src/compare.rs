//! The compare stage: the device's outputs against the golden, after the
//! card is released.

use scene_golden::{Tensor, assert_close};

use crate::golden::GoldenOutputs;
use crate::prepare::{missing_golden_message, missing_golden_output};
use crate::scene::{Case, Scene};

/// Every output of `scene` (`outputs` in declaration order) checked against
/// `golden` with the scene's tolerances, on `pool`. Returns one message per
/// mismatching tensor; empty means the case passed.
pub fn compare_outputs(
    pool: &rayon::ThreadPool,
    scene: &Scene,
    case: &Case,
    outputs: &[Tensor],
    golden: &GoldenOutputs,
) -> Vec<String> {
    // Prepared cases and bundle slots both guarantee this; checked once
    // more so a broken invariant is a failed case, not a silent pass.
    if let Some(name) = missing_golden_output(scene, golden) {
        return vec![missing_golden_message(scene, name)];
    }
    let mut problems = Vec::new();
    for ((index, spec), actual) in scene
        .tensors
        .iter()
        .enumerate()
        .filter(|(_, t)| t.direction.is_output())
        .zip(outputs)
    {
        let Some(expected) = golden.get(&spec.name) else {
            continue;
        };
        if let Err(m) = pool.install(|| {
            assert_close(
                &spec.name,
                actual,
                expected,
                scene.tolerance_for(case, index),
            )
        }) {
            problems.push(m.to_string());
        }
    }
    problems
}
