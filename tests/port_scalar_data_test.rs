//! The `scalar_data` port (orchestration ABI v2: the orchestration reads,
//! writes and fills tensor data between task submissions) with the real
//! `scene` binary: it passes, and mutated copies of its orchestration or of
//! `kernel_add` fail, each naming the tensor that shows it. Mutations are
//! made on copies in a temp scenes dir, never on the package's scene.

mod common;

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

/// One mutated copy of the scene: in `file`, `from` (present exactly once)
/// becomes `to`; the case must fail with a mismatch of each of `tensors`
/// whose message contains each of `details`.
struct Mutant {
    name: &'static str,
    file: &'static str,
    from: &'static str,
    to: &'static str,
    tensors: &'static [&'static str],
    details: &'static [&'static str],
}

const MUTANTS: &[Mutant] = &[
    // Step 11 writes 87 instead of 88: check[7] alone differs.
    Mutant {
        name: "sd_write_87",
        file: "orchestration.c",
        from: "const float c_new = 88.0f;",
        to: "const float c_new = 87.0f;",
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
        file: "orchestration.c",
        from: "TRY(4, scene_orch_fill(ctx, s_addr, 0, sizeof(float), &s_init, sizeof s_init));",
        to: "(void)s_init;",
        tensors: &["check"],
        details: &["tensor `check` mismatch: 3 / 9 elements", "expected 77"],
    },
    // Step 12 without restoring b[0]: result[0] = 2 + 55.
    Mutant {
        name: "sd_no_restore",
        file: "orchestration.c",
        from: "TRY(12, scene_orch_set(ctx, &b, idx, &b_orig));",
        to: "(void)b_orig;",
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
        file: "kernels/kernel_add.c",
        from: "x[i * sx] + y[i * sy]",
        to: "x[i * sx] - y[i * sy]",
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
        let dir = copy_scene(&env, SCENE, m.name);
        let path = dir.join(m.file);
        let src = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            src.matches(m.from).count(),
            1,
            "{}: `{}` not exactly once in {}",
            m.name,
            m.from,
            m.file
        );
        std::fs::write(&path, src.replace(m.from, m.to)).unwrap();
    }

    let r = run(&env, &["run", "--platform", "a2a3sim"]);
    assert_eq!(r.code, Some(1), "{}", r.text());
    assert!(
        r.block("scalar_data::default").starts_with("PASS "),
        "{}",
        r.text()
    );
    for m in MUTANTS {
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
    assert_eq!(
        r.stdout.lines().last(),
        Some(format!("1 passed, {} failed", MUTANTS.len()).as_str()),
        "{}",
        r.text()
    );
}
