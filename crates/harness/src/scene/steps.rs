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
    /// The tensors a step of a test file's level-3 class passes, in its
    /// task's argument order: per rank for a chip step (rank r's
    /// orchestration gets `bind[r]` as its tensor arguments, whole), one
    /// list for a sub task. Empty for a `scene.toml`'s steps: a chip step
    /// passes every tensor of the scene (per-rank ones sliced), a host
    /// function finds its declared tensors by name.
    pub bind: Vec<Vec<usize>>,
    /// A test file's sub task: the scalars its arguments carry (their 64
    /// bits), which its callable reads as `args.scalar(i)`. Empty
    /// otherwise.
    pub scalars: Vec<u64>,
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
/// writing it and every step reading it since (write after write / read).
/// simpler's TensorMap infers the same edges from INPUT / OUTPUT tags.
/// Sorted, deduplicated.
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
        // The last writer, and every reader since (each must be done
        // before the bytes change).
        let last = latest(&|s: &Step| s.writes.contains(&t));
        deps.extend(last);
        let from = last.map_or(0, |w| w + 1);
        deps.extend((from..at).filter(|&j| steps[j].reads.contains(&t)));
    }
    deps.sort_unstable();
    deps.dedup();
    deps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::Scene;

    /// A level-3 scene (`level`, then `head` lines) with tensors a (in),
    /// f (out), g (inout), y (out) and the `steps` text; `host.c`,
    /// `golden.py` (defining `center`) exist beside it.
    fn load(level: u32, head: &str, steps: &str) -> Result<Scene, String> {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("demo");
        std::fs::create_dir(&dir).unwrap();
        for f in ["orch.c", "k.c", "host.c"] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        std::fs::write(
            dir.join("golden.py"),
            "def compute_golden(t, p):\n    pass\n\ndef center(t, p):\n    pass\n",
        )
        .unwrap();
        let group = if level == 3 {
            "ranks = 2\n[comm]\nwindow = 0\n"
        } else {
            ""
        };
        let per_rank = if level == 3 { "per_rank = true" } else { "" };
        let text = format!(
            r#"name = "demo"
platforms = ["a2a3sim"]
{head}
level = {level}
{group}
[orchestration]
source = "orch.c"
function = "p"
signature = ["in", "out", "inout", "out"]

[[incores]]
func_id = 0
name = "k"
core = "aiv"
source = "k.c"

[[tensors]]
name = "a"
dtype = "f32"
shape = [2, 4]
{per_rank}

[[tensors]]
name = "f"
dtype = "f32"
shape = [2, 4]
{per_rank}

[[tensors]]
name = "g"
dtype = "f32"
shape = [2, 4]
{per_rank}

[[tensors]]
name = "y"
dtype = "f32"
shape = [2, 4]
{per_rank}

[[cases]]
name = "c"

{steps}
"#
        );
        std::fs::write(dir.join("scene.toml"), text).unwrap();
        Scene::load(&dir).map_err(|e| e.to_string())
    }

    const GOLDEN: &str = "golden = \"g\"";
    const PY_GOLDEN: &str = "golden = { python = \"golden.py\" }";

    const GOOD: &str = r#"
[[steps]]
chip = "p"
reads = ["a"]
writes = ["f"]

[[steps]]
host = { c = "host.c", function = "center" }
reads = ["f"]
writes = ["g"]

[[steps]]
chip = "q"
reads = ["g", "a"]
writes = ["y"]
"#;

    #[test]
    fn steps_load_in_order_with_their_tensors() {
        let s = load(3, GOLDEN, GOOD).unwrap();
        assert_eq!(s.steps.len(), 3);
        assert_eq!(
            s.steps[1],
            Step {
                kind: StepKind::HostC {
                    source: "host.c".into(),
                    function: "center".into()
                },
                reads: vec![1],
                writes: vec![2],
                bind: Vec::new(),
                scalars: Vec::new(),
            }
        );
        assert_eq!(dependencies(&s.steps, 1), vec![0]);
        assert_eq!(dependencies(&s.steps, 2), vec![1]);
        let py = GOOD.replace(
            r#"host = { c = "host.c", function = "center" }"#,
            r#"host = { python = "center" }"#,
        );
        let s = load(3, PY_GOLDEN, &py).unwrap();
        assert_eq!(
            s.steps[1].kind,
            StepKind::HostPython {
                function: "center".into()
            }
        );
        // No steps: as before.
        assert!(load(3, GOLDEN, "").unwrap().steps.is_empty());
    }

    #[test]
    fn a_level_2_scene_has_no_steps() {
        let e = load(2, GOLDEN, GOOD).unwrap_err();
        assert!(
            e.contains("`steps`: only a level-3 scene has [[steps]]"),
            "{e}"
        );
    }

    #[test]
    fn unknown_tensors_and_bad_functions_name_the_step() {
        let e = load(
            3,
            GOLDEN,
            &GOOD.replace(r#"reads = ["f"]"#, r#"reads = ["ff"]"#),
        )
        .unwrap_err();
        assert!(
            e.contains("`steps[1].reads`: unknown tensor `ff` (tensors: a, f, g, y)"),
            "{e}"
        );
        let e = load(3, GOLDEN, &GOOD.replace(r#"chip = "q""#, r#"chip = "q-1""#)).unwrap_err();
        assert!(
            e.contains("`steps[2].chip`: `q-1` is not a C function name"),
            "{e}"
        );
        let e = load(3, GOLDEN, &GOOD.replace("host.c", "nothere.c")).unwrap_err();
        assert!(
            e.contains("`steps[1].host.c`: source file `nothere.c` not found"),
            "{e}"
        );
        let e = load(3, GOLDEN, &GOOD.replace(r#", function = "center""#, "")).unwrap_err();
        assert!(
            e.contains("`steps[1].host`: a C host step names its function"),
            "{e}"
        );
        let e = load(
            3,
            GOLDEN,
            &GOOD.replace(
                r#"chip = "q""#,
                "chip = \"q\"\nhost = { python = \"center\" }",
            ),
        )
        .unwrap_err();
        assert!(e.contains("`steps[2]`: a step is a chip step"), "{e}");
    }

    #[test]
    fn a_python_host_step_needs_a_python_file_defining_it() {
        let py = GOOD.replace(
            r#"host = { c = "host.c", function = "center" }"#,
            r#"host = { python = "center" }"#,
        );
        let e = load(3, GOLDEN, &py).unwrap_err();
        assert!(
            e.contains("`steps[1].host.python`: host function `center` is Python, but the scene names no Python file"),
            "{e}"
        );
        let e = load(3, PY_GOLDEN, &py.replace("\"center\"", "\"centre\"")).unwrap_err();
        assert!(
            e.contains("`steps[1].host.python`:") && e.contains("defines no function `centre`"),
            "{e}"
        );
    }

    #[test]
    fn order_and_coverage_are_checked() {
        // A chip step cannot give back an `in` argument.
        let e = load(
            3,
            GOLDEN,
            &GOOD.replace(r#"writes = ["f"]"#, r#"writes = ["f", "a"]"#),
        )
        .unwrap_err();
        assert!(
            e.contains("`steps[0].writes`: chip step `p` writes `a`, an `in` argument"),
            "{e}"
        );
        // An output nobody writes would be judged on its init.
        let e = load(3, GOLDEN, &GOOD.replace(r#"writes = ["y"]"#, "writes = []")).unwrap_err();
        assert!(e.contains("output `y` is written by no step"), "{e}");
        // The host step before the chip step that produces its input.
        let swapped = r#"
[[steps]]
host = { c = "host.c", function = "center" }
reads = ["f"]
writes = ["g"]

[[steps]]
chip = "p"
reads = ["a", "g"]
writes = ["f", "y"]
"#;
        let e = load(3, GOLDEN, swapped).unwrap_err();
        assert!(
            e.contains("`steps[0].reads`: host step `center` (host.c) reads `f` before any step writes it (steps[1], chip step `p`, writes it"),
            "{e}"
        );
        let host_only = "[[steps]]\nhost = { c = \"host.c\", function = \"center\" }\nwrites = [\"f\", \"g\", \"y\"]\n";
        let e = load(3, GOLDEN, host_only).unwrap_err();
        assert!(e.contains("`steps`: no chip step"), "{e}");
    }

    fn step(kind: StepKind, reads: &[usize], writes: &[usize]) -> Step {
        Step {
            kind,
            reads: reads.to_vec(),
            writes: writes.to_vec(),
            bind: Vec::new(),
            scalars: Vec::new(),
        }
    }

    #[test]
    fn dependencies_follow_the_tensors_as_a_tensor_map_would() {
        let chip = |f: &str| StepKind::Chip { function: f.into() };
        let host = StepKind::HostPython {
            function: "h".into(),
        };
        // 0: chip writes f(2); 1: host reads f writes g(3); 2: host reads
        // a(0) only; 3: chip reads g and f, writes y(4); 4: host writes f
        // again.
        let steps = vec![
            step(chip("p"), &[0, 1], &[2]),
            step(host.clone(), &[2], &[3]),
            step(host.clone(), &[0], &[]),
            step(chip("c"), &[3, 0, 2], &[4]),
            step(host, &[], &[2]),
        ];
        assert_eq!(dependencies(&steps, 0), Vec::<usize>::new());
        assert_eq!(dependencies(&steps, 1), vec![0]);
        assert_eq!(dependencies(&steps, 2), Vec::<usize>::new());
        assert_eq!(dependencies(&steps, 3), vec![0, 1]);
        // Writes f: after its last writer (0) and every reader since (1, 3).
        assert_eq!(dependencies(&steps, 4), vec![0, 1, 3]);
        assert_eq!(dependencies(&steps, 9), Vec::<usize>::new());
    }
}
