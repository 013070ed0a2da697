//! The `scalar_data` port (orchestration ABI v2: the orchestration reads,
//! writes and fills tensor data between task submissions) with the real
//! `scene` binary: it passes, and mutated copies of its orchestration or of
//! `kernel_add` fail, each naming the tensor that shows it. Mutations are
//! made on copies in a temp scenes dir, never on the package's scene.

use crate::common;

use common::{TestEnv, copy_scene};

const SCENE: &str = "scalar_data";

/// A run's exit code and output.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn text(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr)
    }

    /// The case line of `id` and the lines under it (its failure message).
    fn block(&self, id: &str) -> String {
        let mut out = String::new();
        let mut inside = false;
        for line in self.stdout.lines() {
            if line.starts_with("PASS ") || line.starts_with("FAIL ") {
                inside = line[5..].split_whitespace().next() == Some(id);
            } else if common::summary_line(line).is_some() {
                // The summary and the `failures:` list under it.
                inside = false;
            }
            if inside {
                out.push_str(line);
                out.push('\n');
            }
        }
        assert!(!out.is_empty(), "no line for {id}:\n{}", self.text());
        out
    }
}

fn run(env: &TestEnv, args: &[&str]) -> Run {
    let out = env.scene(args).output().expect("spawning scene");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn scalar_data_passes_on_both_sim_platforms() {
    let env = TestEnv::new();
    for platform in ["a2a3sim", "a5sim"] {
        let r = run(&env, &["run", SCENE, "--platform", platform]);
        assert_eq!(r.code, Some(0), "{platform}: {}", r.text());
        assert!(
            r.stdout.contains("PASS scalar_data::default"),
            "{platform}: {}",
            r.text()
        );
        assert_eq!(
            r.stdout.lines().last(),
            Some("1 passed, 0 failed"),
            "{platform}: {}",
            r.text()
        );
    }
}

/// `(file, from, to)`: in the scene's `file`, `from` (present exactly once)
/// becomes `to`.
type Edit = (&'static str, &'static str, &'static str);

/// One changed copy of the scene, named `name`: its case must fail with a
/// mismatch of each of `tensors` (and no other), whose messages contain
/// each of `details`.
struct Mutant {
    name: &'static str,
    edits: &'static [Edit],
    tensors: &'static [&'static str],
    details: &'static [&'static str],
}

/// Copies the package scene as `m.name` into `env`'s scenes dir and applies
/// `m.edits`.
fn make_copy(env: &TestEnv, m: &Mutant) {
    let dir = copy_scene(env, SCENE, m.name);
    for (file, from, to) in m.edits {
        let path = dir.join(file);
        let src = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            src.matches(from).count(),
            1,
            "{}: `{from}` not exactly once in {file}",
            m.name
        );
        std::fs::write(&path, src.replace(from, to)).unwrap();
    }
}

/// Asserts that `m`'s case failed as `m` says, in `r`.
fn assert_fails_as_expected(r: &Run, m: &Mutant) {
    let block = r.block(&format!("{}::default", m.name));
    assert!(block.starts_with("FAIL "), "{}: {}", m.name, r.text());
    for t in m.tensors {
        assert!(
            block.contains(&format!("tensor `{t}` mismatch: ")),
            "{}: no mismatch of `{t}` in\n{block}",
            m.name
        );
    }
    assert_eq!(
        block.matches(" mismatch: ").count(),
        m.tensors.len(),
        "{}: other tensors differ too:\n{block}",
        m.name
    );
    for d in m.details {
        assert!(block.contains(d), "{}: `{d}` missing in\n{block}", m.name);
    }
}

const MUTANTS: &[Mutant] = &[
    // Step 11 writes 87 instead of 88: check[7] alone differs.
    Mutant {
        name: "sd_write_87",
        edits: &[(
            "orchestration.c",
            "const float c_new = 88.0f;",
            "const float c_new = 87.0f;",
        )],
        tensors: &["check"],
        details: &[
            "tensor `check` mismatch: 1 / 9 elements",
            "[7]: actual 87, expected 88",
        ],
    },
    // Step 4 without the fill: the scalar tensor never holds 77, so
    // check[2], check[3] and check[4] (= c[0] + s[0]) are wrong.
    Mutant {
        name: "sd_no_fill",
        edits: &[(
            "orchestration.c",
            "TRY(4, scene_orch_fill(ctx, s_addr, 0, sizeof(float), &s_init, sizeof s_init));",
            "(void)s_init;",
        )],
        tensors: &["check"],
        details: &["tensor `check` mismatch: 3 / 9 elements", "expected 77"],
    },
    // Step 12 without restoring b[0]: result[0] = 2 + 55.
    Mutant {
        name: "sd_no_restore",
        edits: &[(
            "orchestration.c",
            "TRY(12, scene_orch_set(ctx, &b, idx, &b_orig));",
            "(void)b_orig;",
        )],
        tensors: &["result"],
        details: &[
            "tensor `result` mismatch: 1 / 16384 elements",
            "[0]: actual 57, expected 2",
        ],
    },
    // kernel_add subtracts: result is wrong everywhere but where b is 0,
    // and so is every check slot read from a kernel's output but c[0] and
    // the slots step 11 and 12 overwrite.
    Mutant {
        name: "sd_kernel_sub",
        edits: &[(
            "kernels/kernel_add.c",
            "x[i * sx] + y[i * sy]",
            "x[i * sx] - y[i * sy]",
        )],
        tensors: &["result", "check"],
        details: &[
            "tensor `result` mismatch: 16383 / 16384 elements",
            "tensor `check` mismatch: 2 / 9 elements",
            "[1]: actual -98, expected 102",
            "[6]: actual 8, expected 12",
        ],
    },
];

#[test]
fn mutated_orchestration_and_kernel_add_fail_naming_the_tensor() {
    let env = TestEnv::with_scenes(&[]);
    // The unmutated copy passes in the same run: the failures below are
    // the mutations', not the temp dir's.
    copy_scene(&env, SCENE, SCENE);
    for m in MUTANTS {
        make_copy(&env, m);
    }

    let r = run(&env, &["run", "--platform", "a2a3sim"]);
    assert_eq!(r.code, Some(1), "{}", r.text());
    assert!(
        r.block("scalar_data::default").starts_with("PASS "),
        "{}",
        r.text()
    );
    for m in MUTANTS {
        assert_fails_as_expected(&r, m);
    }
    assert_eq!(
        common::summary_line(&r.stdout),
        Some(format!("1 passed, {} failed", MUTANTS.len()).as_str()),
        "{}",
        r.text()
    );
}

/// Step 11's write of c[0] must wait for the kernel reading c, but nothing
/// in `check` shows whether it did (as in the original). A probe copy makes
/// it visible: kernel_add spins before it adds, the reader writes `result`
/// (step 13 overwrites it later), and check[7] gets that reader's
/// result[0] instead of c[0]. It is 2 (= old c[0] + b[0]) only if the write
/// waited; 88 + 0 if it overtook the reader. So the probe's case fails with
/// check[7] = 2 against the golden's 88, and with nothing else.
#[test]
fn step_11_write_waits_for_the_kernel_reading_c() {
    const PROBE: Mutant = Mutant {
        name: "sd_probe_war",
        edits: &[
            (
                "kernels/kernel_add.c",
                "    SCENE_FOR_BLOCK_RANGE(ka, n, i) {",
                "    for (volatile uint64_t spin = 0; spin < 20000000; spin++) {}\n    \
                 SCENE_FOR_BLOCK_RANGE(ka, n, i) {",
            ),
            (
                "orchestration.c",
                "scene_task_dir(c, SCENE_DIR_IN), b, g)",
                "scene_task_dir(c, SCENE_DIR_IN), b, \
                 scene_task_arg(ctx, args, ARG_RESULT, SCENE_DIR_OUT))",
            ),
            (
                "orchestration.c",
                "TRY(11, scene_orch_get(ctx, &c, idx, &c_back));",
                "SceneTaskArgV2 probe = scene_task_arg(ctx, args, ARG_RESULT, SCENE_DIR_IN);\n    \
                 TRY(11, scene_orch_get(ctx, &probe, idx, &c_back));",
            ),
        ],
        tensors: &["check"],
        details: &[
            "tensor `check` mismatch: 1 / 9 elements",
            "[7]: actual 2, expected 88",
        ],
    };
    let env = TestEnv::with_scenes(&[]);
    make_copy(&env, &PROBE);
    let r = run(&env, &["run", "--platform", "a2a3sim"]);
    assert_eq!(r.code, Some(1), "{}", r.text());
    assert_fails_as_expected(&r, &PROBE);
}
