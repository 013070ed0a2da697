//! Level 3: the host level's steps (`[[steps]]`), as a scene declares them.
//!
//! A level-3 scene without steps runs its orchestration once over the rank
//! group. With steps, the harness is the host level of simpler's L3
//! orchestrations: it runs, in the order written, chip steps (the rank
//! group runs one orchestration function of the scene's `[orchestration]
//! source`: `submit_next_level` on every rank) and host steps (a C function
//! built with the host toolchain, or a Python function of the scene's
//! Python file, run once on the host: `submit_sub`). Each step names the
//! tensors it reads and writes, as simpler's tasks tag their arguments
//! INPUT / OUTPUT for its TensorMap: a step sees only those (a chip step
//! gets zeros for the others; a host function finds no other), and only
//! its writes come back. The order is checked at load: a step that reads
//! an output no earlier step wrote but a later one does is an error. How
//! the steps run: [`crate::steps`].

use std::fmt;
use std::path::PathBuf;

/// One step of a level-3 scene.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub kind: StepKind,
    /// Indices (in signature order) of the tensors the step reads.
    pub reads: Vec<usize>,
    /// Indices of the tensors it writes.
    pub writes: Vec<usize>,
}

/// What a step runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// The rank group runs `function` (an orchestration function of the
    /// scene's `[orchestration] source`, with its signature).
    Chip { function: String },
    /// A C function of `source` (relative to the scene directory, as
    /// written), built with the host toolchain and run once on the host.
    HostC { source: PathBuf, function: String },
    /// A function of the scene's Python file (the golden's, else the
    /// fixtures'), run in the scene's Python worker.
    HostPython { function: String },
}

impl Step {
    pub fn is_chip(&self) -> bool {
        matches!(self.kind, StepKind::Chip { .. })
    }

    /// Whether the step reads or writes tensor `i`.
    pub fn touches(&self, i: usize) -> bool {
        self.reads.contains(&i) || self.writes.contains(&i)
    }
}

impl fmt::Display for StepKind {
    /// `chip step `f``, `host step `f` (host.c)`, `host step `f` (Python)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepKind::Chip { function } => write!(f, "chip step `{function}`"),
            StepKind::HostC { source, function } => {
                write!(f, "host step `{function}` ({})", source.display())
            }
            StepKind::HostPython { function } => write!(f, "host step `{function}` (Python)"),
        }
    }
}

/// The steps that must run before step `at` because of the tensors it
/// touches: for each tensor it reads, the latest earlier step writing it
/// (read after write); for each tensor it writes, the latest earlier step
/// reading or writing it (write after read / write). simpler's TensorMap
/// infers the same edges from INPUT / OUTPUT tags. Sorted, deduplicated.
pub fn dependencies(steps: &[Step], at: usize) -> Vec<usize> {
    let mut deps = Vec::new();
    let Some(step) = steps.get(at) else {
        return deps;
    };
    let latest = |pred: &dyn Fn(&Step) -> bool| (0..at).rev().find(|&j| pred(&steps[j]));
    for &t in &step.reads {
        deps.extend(latest(&|s: &Step| s.writes.contains(&t)));
    }
    for &t in &step.writes {
        deps.extend(latest(&|s: &Step| s.touches(t)));
    }
    deps.sort_unstable();
    deps.dedup();
    deps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(kind: StepKind, reads: &[usize], writes: &[usize]) -> Step {
        Step {
            kind,
            reads: reads.to_vec(),
            writes: writes.to_vec(),
        }
    }

    #[test]
    fn dependencies_follow_the_tensors_as_a_tensor_map_would() {
        let chip = |f: &str| StepKind::Chip { function: f.into() };
        let host = StepKind::HostPython {
            function: "h".into(),
        };
        // 0: chip writes f(2); 1: host reads f writes g(3); 2: host reads
        // a(0) only; 3: chip reads g writes y(4); 4: host writes f again.
        let steps = vec![
            step(chip("p"), &[0, 1], &[2]),
            step(host.clone(), &[2], &[3]),
            step(host.clone(), &[0], &[]),
            step(chip("c"), &[3, 0], &[4]),
            step(host, &[], &[2]),
        ];
        assert_eq!(dependencies(&steps, 0), Vec::<usize>::new());
        assert_eq!(dependencies(&steps, 1), vec![0]);
        assert_eq!(dependencies(&steps, 2), Vec::<usize>::new());
        assert_eq!(dependencies(&steps, 3), vec![1]);
        // Writes f: after the last reader of f (step 1).
        assert_eq!(dependencies(&steps, 4), vec![1]);
        assert_eq!(dependencies(&steps, 9), Vec::<usize>::new());
    }
}
