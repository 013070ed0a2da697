//! Comparisons through the real `scene` binary on a2a3sim: a scene whose
//! kernels copy `x` into outputs `y` and `z` (golden `compare_demo`: both
//! equal `x`), each kernel perturbing its copy as its `defines` say (one
//! ulp, an added value, a scale, flipped signs, NaN rows). Each test
//! writes the scene into a temp scenes dir with the comparison under test
//! and checks the verdict, the failure text and the report's `outputs`.

use crate::common;

use std::path::PathBuf;
use std::process::Output;

use common::{TestEnv, assert_success, show};
use serde_json::Value;

const ORCH: &str = r#"#include "scene_orch.h"

SCENE_ORCH_ENTRY(cmp_orch, ctx, args, nargs) {
    int32_t rc;
    SceneTaskArg t0[2] = {SCENE_IN(args[0]), SCENE_OUT(args[1])};
    if ((rc = scene_orch_submit(ctx, 0, 4, t0, 2)) != 0) return rc;
    if (nargs < 3) return 0;
    SceneTaskArg t1[2] = {SCENE_IN(args[0]), SCENE_OUT(args[2])};
    return scene_orch_submit(ctx, 1, 4, t1, 2);
}
"#;

/// `out = in`, perturbed by the defines.
const KERNEL: &str = r#"#include "scene_kernel.h"

#ifndef SCALE
#define SCALE 1.0f
#endif
#ifndef BUMP_AT
#define BUMP_AT -1
#endif
#ifndef BUMP_ULPS
#define BUMP_ULPS 0
#endif
#ifndef BUMP_ADD
#define BUMP_ADD 0.0f
#endif
#ifndef GARBAGE_FROM
#define GARBAGE_FROM -1
#endif
#ifndef FLIP_ODD
#define FLIP_ODD 0
#endif

SCENE_KERNEL_ENTRY(ka) {
    const float *in = SCENE_ARG_PTR(ka, 0, const float);
    float *out = SCENE_ARG_PTR(ka, 1, float);
    uint64_t n = SCENE_ARG_LEN(ka, 1, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) {
        union { float f; uint32_t u; } v;
        v.f = in[i] * SCALE;
        if ((int64_t)i == BUMP_AT) {
            v.u += BUMP_ULPS;
            v.f += BUMP_ADD;
        }
        if (FLIP_ODD && (i & 1)) v.f = -v.f;
        if (GARBAGE_FROM >= 0 && (int64_t)i >= GARBAGE_FROM) v.u = 0x7fc00000u;
        out[i] = v.f;
    }
}
"#;

/// The scene, with the parts a test varies.
struct Cmp<'a> {
    golden: &'a str,
    y_defines: &'a str,
    z_defines: &'a str,
    x_extra: &'a str,
    y_extra: &'a str,
    z_extra: &'a str,
    case_extra: &'a str,
}

impl Default for Cmp<'_> {
    fn default() -> Self {
        Self {
            golden: "compare_demo",
            y_defines: "{}",
            z_defines: "{}",
            x_extra: "",
            y_extra: "",
            z_extra: "",
            case_extra: "",
        }
    }
}

impl Cmp<'_> {
    fn toml(&self) -> String {
        format!(
            r#"name = "cmp"
level = 2
platforms = ["a2a3sim"]
golden = "{golden}"

[orchestration]
source = "orch.c"
function = "cmp_orch"
signature = ["in", "out", "out"]

[[incores]]
func_id = 0
name = "ky"
core = "aiv"
source = "k.c"
defines = {y_defines}

[[incores]]
func_id = 1
name = "kz"
core = "aiv"
source = "k.c"
defines = {z_defines}

[[tensors]]
name = "x"
dtype = "f32"
shape = ["R", 8]
init = {{ kind = "uniform", low = 0.5, high = 2.0 }}
{x_extra}

[[tensors]]
name = "y"
dtype = "f32"
shape = ["R", 8]
{y_extra}

[[tensors]]
name = "z"
dtype = "f32"
shape = ["R", 8]
{z_extra}

[[cases]]
name = "c"
params = {{ R = 6, valid = 4 }}
{case_extra}
"#,
            golden = self.golden,
            y_defines = self.y_defines,
            z_defines = self.z_defines,
            x_extra = self.x_extra,
            y_extra = self.y_extra,
            z_extra = self.z_extra,
            case_extra = self.case_extra,
        )
    }

    /// Writes the scene into `env`'s scenes dir (replacing the last one).
    fn write(&self, env: &TestEnv) -> PathBuf {
        let dir = env.scenes_dir.as_ref().unwrap().join("cmp");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("scene.toml"), self.toml()).unwrap();
        std::fs::write(dir.join("orch.c"), ORCH).unwrap();
        std::fs::write(dir.join("k.c"), KERNEL).unwrap();
        dir.join("scene.toml")
    }
}

/// `scene run cmp` plus `extra` args, with a JSON report; returns the
/// process output and the report's entry for `cmp::c` (or `cmp::load`).
fn run(env: &TestEnv, extra: &[&str]) -> (Output, Value) {
    let mut args = vec!["run", "cmp"];
    args.extend(extra);
    let (out, json) = env.run_with_report(&args);
    let case = json["cases"]
        .as_array()
        .and_then(|cases| cases.first())
        .cloned()
        .unwrap_or_else(|| panic!("no case in {json:#}\n{}", show(&out)));
    (out, case)
}

fn passes(env: &TestEnv, extra: &[&str]) -> Value {
    let (out, case) = run(env, extra);
    assert!(out.status.success(), "{}\n{case:#}", show(&out));
    assert_eq!(case["status"], "passed", "{case:#}");
    case
}

/// Runs, expects a failure at `stage`; returns the case and its message.
fn fails(env: &TestEnv, extra: &[&str], stage: &str) -> (Value, String) {
    let (out, case) = run(env, extra);
    assert_eq!(out.status.code(), Some(1), "{}\n{case:#}", show(&out));
    assert_eq!(case["status"], "failed", "{case:#}");
    assert_eq!(case["failure_stage"], stage, "{case:#}");
    let message = case["message"].as_str().unwrap().to_string();
    (case, message)
}

/// The report record of output `name`: (comparison, verdict, detail).
fn output(case: &Value, name: &str) -> (String, String, String) {
    let o = case["outputs"]
        .as_array()
        .unwrap_or_else(|| panic!("no outputs in {case:#}"))
        .iter()
        .find(|o| o["name"] == name)
        .unwrap_or_else(|| panic!("no output {name} in {case:#}"));
    let s = |k: &str| o[k].as_str().unwrap_or("").to_string();
    (s("comparison"), s("verdict"), s("detail"))
}

const F32_DEFAULT: &str = "allclose(rtol=1.3e-06, atol=1e-05)";

/// One ulp off in one element: the f32 default tolerance accepts it,
/// `compare = "exact"` does not, and says so naming the element and the
/// comparison; the report records which comparison judged each output.
#[test]
fn exact_catches_one_ulp_that_allclose_accepts() {
    let env = TestEnv::with_scenes(&[]);
    let one_ulp = r#"{ BUMP_AT = "13", BUMP_ULPS = "1" }"#;
    Cmp {
        y_defines: one_ulp,
        ..Cmp::default()
    }
    .write(&env);
    let case = passes(&env, &[]);
    assert_eq!(
        output(&case, "y"),
        (F32_DEFAULT.into(), "pass".into(), String::new())
    );
    assert_eq!(output(&case, "z").1, "pass");

    Cmp {
        y_defines: one_ulp,
        y_extra: r#"compare = "exact""#,
        z_extra: r#"compare = "exact""#,
        ..Cmp::default()
    }
    .write(&env);
    let (case, message) = fails(&env, &[], "compare");
    assert!(
        message.contains("tensor `y` mismatch: 1 / 48 elements")
            && message.contains("bit for bit")
            && message.contains("[1, 5]")
            && message.contains("comparison: exact"),
        "{message}"
    );
    assert!(!message.contains("tensor `z`"), "{message}");
    let (cmp, verdict, detail) = output(&case, "y");
    assert_eq!((cmp.as_str(), verdict.as_str()), ("exact", "fail"));
    assert!(detail.contains("tensor `y` mismatch"), "{detail}");
    assert_eq!(
        output(&case, "z"),
        ("exact".into(), "pass".into(), String::new())
    );
}

/// Per-output tolerances: `y` loose (atol 0.1) passes an error of 0.05,
/// `z` tight (atol 1e-3) fails the same error, and only `z` is named.
#[test]
fn per_output_tolerances_are_judged_separately() {
    let env = TestEnv::with_scenes(&[]);
    let off = r#"{ BUMP_AT = "7", BUMP_ADD = "0.05f" }"#;
    Cmp {
        y_defines: off,
        z_defines: off,
        y_extra: "rtol = 0\natol = 0.1",
        z_extra: "rtol = 0\natol = 1e-3",
        ..Cmp::default()
    }
    .write(&env);
    let (case, message) = fails(&env, &[], "compare");
    assert!(
        message.contains("tensor `z` mismatch: 1 / 48 elements")
            && message.contains("comparison: allclose(rtol=0, atol=0.001)"),
        "{message}"
    );
    assert!(!message.contains("tensor `y`"), "{message}");
    assert_eq!(
        output(&case, "y"),
        (
            "allclose(rtol=0, atol=0.1)".into(),
            "pass".into(),
            String::new()
        )
    );
    let (cmp, verdict, _) = output(&case, "z");
    assert_eq!(
        (cmp.as_str(), verdict.as_str()),
        ("allclose(rtol=0, atol=0.001)", "fail")
    );
}

/// `skip_golden` on an output and on a case: the output is not compared
/// (a wrong one passes), it is still dumped, and a NaN in it fails naming
/// the tensor, the index and the value, unless `allow_nonfinite`.
#[test]
fn skip_golden_on_an_output_and_a_case() {
    let env = TestEnv::with_scenes(&[]);
    // Output-level: `y` is twice `x` and still passes; `z` is compared.
    Cmp {
        y_defines: r#"{ SCALE = "2.0f" }"#,
        y_extra: "skip_golden = true",
        ..Cmp::default()
    }
    .write(&env);
    let dump = env.dir.path().join("dump");
    let case = passes(&env, &["--dump", dump.to_str().unwrap()]);
    assert_eq!(
        output(&case, "y"),
        ("skip_golden".into(), "skipped".into(), String::new())
    );
    assert_eq!(output(&case, "z").1, "pass");
    assert!(
        dump.join("cmp/c/outputs/y.npy").is_file(),
        "skipped output is dumped"
    );

    // Case-level list: `z` holds NaN from row 2 on and is skipped: the NaN
    // fails the case...
    let nan_z = r#"{ GARBAGE_FROM = "19" }"#;
    Cmp {
        z_defines: nan_z,
        case_extra: r#"skip_golden = ["z"]"#,
        ..Cmp::default()
    }
    .write(&env);
    let (case, message) = fails(&env, &[], "compare");
    assert!(
        message.contains(
            "tensor `z`: not compared (skip_golden), but holds a non-finite value: nan at index [2, 3] (29 non-finite of 48 elements)"
        ) && message.contains("allow_nonfinite = true"),
        "{message}"
    );
    assert_eq!(output(&case, "z").1, "fail");
    assert_eq!(output(&case, "y").1, "pass");
    // ... unless the tensor allows it.
    Cmp {
        z_defines: nan_z,
        z_extra: "allow_nonfinite = true",
        case_extra: r#"skip_golden = ["z"]"#,
        ..Cmp::default()
    }
    .write(&env);
    let case = passes(&env, &["--dump", dump.to_str().unwrap()]);
    let (cmp, verdict, detail) = output(&case, "z");
    assert_eq!((cmp.as_str(), verdict.as_str()), ("skip_golden", "skipped"));
    assert!(
        detail.contains("29 non-finite element(s), allowed"),
        "{detail}"
    );
    assert!(dump.join("cmp/c/outputs/z.npy").is_file());

    // `skip_golden = true` on the case: nothing is compared, so the golden
    // is not called at all (here it is not even registered).
    Cmp {
        golden: "not_registered_anywhere",
        y_defines: r#"{ SCALE = "3.0f" }"#,
        case_extra: "skip_golden = true",
        ..Cmp::default()
    }
    .write(&env);
    let case = passes(&env, &[]);
    assert_eq!(output(&case, "y").1, "skipped");
    assert_eq!(output(&case, "z").1, "skipped");
}

/// `cosine`: a scaled output keeps cosine similarity 1 (allclose would
/// fail it); flipping every other sign drops it below `min`.
#[test]
fn cosine_passes_and_fails() {
    let env = TestEnv::with_scenes(&[]);
    let cosine = r#"compare = { custom = "cosine", min = "0.999" }"#;
    Cmp {
        y_defines: r#"{ SCALE = "1.5f" }"#,
        y_extra: cosine,
        ..Cmp::default()
    }
    .write(&env);
    let case = passes(&env, &[]);
    let (cmp, verdict, detail) = output(&case, "y");
    assert_eq!(
        (cmp.as_str(), verdict.as_str()),
        ("cosine(min=0.999)", "pass")
    );
    assert!(
        detail.starts_with("cosine similarity 0.99999") && detail.contains(">= min 0.999"),
        "{detail}"
    );

    Cmp {
        y_defines: r#"{ FLIP_ODD = "1" }"#,
        y_extra: cosine,
        ..Cmp::default()
    }
    .write(&env);
    let (case, message) = fails(&env, &[], "compare");
    assert!(
        message.contains("tensor `y` failed comparison cosine(min=0.999): cosine similarity")
            && message.contains("< min 0.999"),
        "{message}"
    );
    assert_eq!(output(&case, "y").1, "fail");
}

/// `first_rows` with `rows = "valid"` (a case param): NaN in the rows
/// after `valid` is ignored, a wrong value in a valid row fails.
#[test]
fn first_rows_ignores_the_rest_but_not_a_bad_valid_row() {
    let env = TestEnv::with_scenes(&[]);
    let first = r#"compare = { custom = "first_rows", rows = "valid" }"#;
    Cmp {
        y_defines: r#"{ GARBAGE_FROM = "32" }"#,
        y_extra: first,
        ..Cmp::default()
    }
    .write(&env);
    let case = passes(&env, &[]);
    let (cmp, verdict, detail) = output(&case, "y");
    assert_eq!(
        (cmp.as_str(), verdict.as_str()),
        ("first_rows(rows=4)", "pass")
    );
    assert!(
        detail.contains("rows 0..4 of 6 within allclose") && detail.contains("rows 4..6 ignored"),
        "{detail}"
    );

    Cmp {
        y_defines: r#"{ GARBAGE_FROM = "32", BUMP_AT = "9", BUMP_ADD = "1.0f" }"#,
        y_extra: first,
        ..Cmp::default()
    }
    .write(&env);
    let (_, message) = fails(&env, &[], "compare");
    assert!(
        message.contains("tensor `y` failed comparison first_rows(rows=4): in rows 0..4 of 6: tensor `y` mismatch: 1 / 32 elements")
            && message.contains("[1, 1]"),
        "{message}"
    );
}

/// A comparison the scenes package registered itself (`rel_l2`, in
/// `tests/src/comparisons.rs`) judges like a built-in.
#[test]
fn a_package_registered_comparison_judges() {
    let env = TestEnv::with_scenes(&[]);
    let rel = r#"compare = { custom = "rel_l2", max = 1e-3 }"#;
    Cmp {
        y_defines: r#"{ SCALE = "1.0001f" }"#,
        y_extra: rel,
        ..Cmp::default()
    }
    .write(&env);
    let case = passes(&env, &[]);
    assert_eq!(output(&case, "y").0, "rel_l2(max=0.001)");
    Cmp {
        y_defines: r#"{ SCALE = "1.1f" }"#,
        y_extra: rel,
        ..Cmp::default()
    }
    .write(&env);
    let (_, message) = fails(&env, &[], "compare");
    assert!(
        message.contains("failed comparison rel_l2(max=0.001): relative L2 error 0.1"),
        "{message}"
    );
}

/// An unknown custom comparison (or an argument it does not take) is
/// caught when the scene is loaded: `scene list` and `scene run` both say
/// so, naming the file, the field, the case, the tensor and the registered
/// comparisons, and the scene is a `<scene>::load` failure (nothing built
/// or run).
#[test]
fn an_unknown_custom_comparison_fails_when_the_scene_loads() {
    let env = TestEnv::with_scenes(&[]);
    let toml = Cmp {
        y_extra: r#"compare = { custom = "cosin", min = 0.9 }"#,
        ..Cmp::default()
    }
    .write(&env);
    let expected = format!(
        "{}: `tensors[1].compare.custom`: case `c`: tensor `y`: comparison `cosin` is not registered (registered: cosine, first_rows, max_abs, mean_abs, rel_l2)",
        toml.canonicalize().unwrap().display()
    );

    let list = env.scene(&["list"]).output().unwrap();
    assert_eq!(list.status.code(), Some(1), "{}", show(&list));
    let stderr = String::from_utf8_lossy(&list.stderr);
    assert!(
        stderr.contains(&format!("error: {expected}")),
        "{}",
        show(&list)
    );
    assert!(
        !String::from_utf8_lossy(&list.stdout).contains("cmp::c"),
        "{}",
        show(&list)
    );

    let (case, message) = fails(&env, &[], "load");
    assert_eq!(case["name"], "cmp::load", "{case:#}");
    assert!(message.contains(&expected), "{message}");
    assert_eq!(case["devices"], serde_json::json!([]), "{case:#}");
    assert_eq!(case["phases"]["device_s"], 0.0, "{case:#}");
    assert_eq!(case["outputs"], serde_json::json!([]), "{case:#}");

    Cmp {
        y_extra: r#"compare = { custom = "cosine", mn = 0.9 }"#,
        ..Cmp::default()
    }
    .write(&env);
    let (_, message) = fails(&env, &[], "load");
    assert!(
        message.contains("`tensors[1].compare.mn`: case `c`: tensor `y`: comparison `cosine` takes no argument `mn` (it takes: min)"),
        "{message}"
    );
    let list = env.scene(&["list"]).output().unwrap();
    assert_eq!(list.status.code(), Some(1), "{}", show(&list));
    assert!(
        String::from_utf8_lossy(&list.stderr).contains("takes no argument `mn`"),
        "{}",
        show(&list)
    );
}

/// Two passes: `scene precompile` then `scene run --from` judges with the
/// scene's comparison (exact catches the ulp in pass 2, from the slot);
/// changing the comparison after pass 1 makes the slot stale, so pass 2
/// never judges with a definition the slot was not built for.
#[test]
fn two_pass_runs_honour_the_comparison() {
    let env = TestEnv::with_scenes(&[]);
    let exact = Cmp {
        y_defines: r#"{ BUMP_AT = "0", BUMP_ULPS = "1" }"#,
        y_extra: r#"compare = "exact""#,
        ..Cmp::default()
    };
    exact.write(&env);
    let bundle = env.dir.path().join("bundle");
    let out = env
        .scene(&["precompile", "cmp", "--out", bundle.to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&out);

    let from = ["--from", bundle.to_str().unwrap()];
    // Pass 2 with no compiler available: the slot serves the case.
    let (out, json) = env.run_with_report_using(&["run", "cmp", from[0], from[1]], |cmd| {
        cmd.env("SCENE_CC", "false")
            .env("SCENE_LD", "false")
            .env("SCENE_CACHE_DIR", env.dir.path().join("pass2-cache"));
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("rebuilding"), "{}", show(&out));
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let case = json["cases"][0].clone();
    assert_eq!(case["failure_stage"], "compare", "{case:#}");
    assert_eq!(
        case["phases"]["compile_s"], 0.0,
        "served from the bundle: {case:#}"
    );
    assert_eq!(output(&case, "y").0, "exact");
    assert_eq!(output(&case, "y").1, "fail");
    assert!(
        case["message"]
            .as_str()
            .unwrap()
            .contains("comparison: exact"),
        "{case:#}"
    );

    // The same slot under `allclose`: stale (the key covers the
    // comparison), so the case is rebuilt and then judged by allclose.
    Cmp {
        y_extra: "",
        ..exact
    }
    .write(&env);
    let (out, case) = run(&env, &from);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bundle slot was built from a different definition of this case"),
        "{}",
        show(&out)
    );
    assert_success(&out);
    assert_eq!(output(&case, "y").0, F32_DEFAULT);
}

/// Malformed comparison fields fail the scene's load, each naming the
/// file, the field and (where per case) the case.
#[test]
fn malformed_comparison_fields_name_file_field_and_case() {
    let env = TestEnv::with_scenes(&[]);
    let cases: Vec<(Cmp<'_>, &str, &str)> = vec![
        (
            Cmp {
                y_extra: r#"compare = "close""#,
                ..Cmp::default()
            },
            "`tensors[1].compare`: unknown comparison `close`",
            "",
        ),
        (
            Cmp {
                y_extra: "compare = \"exact\"\natol = 0.1",
                ..Cmp::default()
            },
            "`tensors[1].compare`: tensor `y`: `compare = \"exact\"` takes no tolerance",
            "",
        ),
        (
            Cmp {
                y_extra: "compare = { min = 0.9 }",
                ..Cmp::default()
            },
            "`tensors[1].compare`: a table names a custom comparison",
            "",
        ),
        (
            Cmp {
                y_extra: r#"compare = { custom = "cosine", min = true }"#,
                ..Cmp::default()
            },
            "`tensors[1].compare.min`: comparison argument `min` must be a number or an expression",
            "",
        ),
        (
            Cmp {
                y_extra: r#"compare = { custom = "cosine", min = inf }"#,
                ..Cmp::default()
            },
            "`tensors[1].compare.min`: comparison argument `min` must be finite, got inf",
            "",
        ),
        (
            Cmp {
                y_extra: r#"compare = { custom = "first_rows", rows = "valid / (R - 6)" }"#,
                ..Cmp::default()
            },
            "`tensors[1].compare.rows`: case `c`: ",
            "division by zero",
        ),
        (
            Cmp {
                y_extra: r#"compare = { custom = "first_rows", rows = "VALID" }"#,
                ..Cmp::default()
            },
            "`tensors[1].compare.rows`: case `c`: ",
            "VALID",
        ),
        (
            Cmp {
                y_extra: r#"compare = { custom = 7 }"#,
                ..Cmp::default()
            },
            "`tensors[1].compare.custom`: must be the name of a registered comparison",
            "",
        ),
        (
            Cmp {
                x_extra: r#"compare = "exact""#,
                ..Cmp::default()
            },
            "`tensors[0].compare`: tensor `x` is an input (in)",
            "",
        ),
        (
            Cmp {
                x_extra: "allow_nonfinite = true",
                ..Cmp::default()
            },
            "`tensors[0].allow_nonfinite`: tensor `x` is an input (in)",
            "",
        ),
        (
            Cmp {
                x_extra: "skip_golden = true",
                ..Cmp::default()
            },
            "`tensors[0].skip_golden`: tensor `x` is an input (in)",
            "",
        ),
        (
            Cmp {
                y_extra: "allow_nonfinite = true",
                ..Cmp::default()
            },
            "`tensors[1].allow_nonfinite`: tensor `y` is compared in every case",
            "",
        ),
        (
            Cmp {
                y_extra: "skip_golden = true\ncompare = \"exact\"",
                ..Cmp::default()
            },
            "`tensors[1].compare`: tensor `y` has `skip_golden = true`",
            "",
        ),
        (
            Cmp {
                case_extra: r#"skip_golden = ["x"]"#,
                ..Cmp::default()
            },
            "`cases[0].skip_golden`: case `c`: tensor `x` is an input (in), not an output",
            "",
        ),
        (
            Cmp {
                case_extra: r#"skip_golden = ["w"]"#,
                ..Cmp::default()
            },
            "`cases[0].skip_golden`: case `c`: no tensor `w` in the scene (outputs: y, z)",
            "",
        ),
        (
            Cmp {
                case_extra: "skip_golden = 3",
                ..Cmp::default()
            },
            "`cases[0].skip_golden`: case `c`: expected true, false or a list of output tensor names, got an integer",
            "",
        ),
        (
            Cmp {
                case_extra: r#"skip_golden = ["y", "y"]"#,
                ..Cmp::default()
            },
            "`cases[0].skip_golden`: case `c`: `y` is listed twice",
            "",
        ),
    ];
    let n = cases.len();
    for (cmp, needle, also) in cases {
        let toml = cmp.write(&env);
        let file = toml.canonicalize().unwrap();
        let (out, case) = run(&env, &[]);
        assert_eq!(out.status.code(), Some(1), "{needle}\n{}", show(&out));
        assert_eq!(case["name"], "cmp::load", "{needle}: {case:#}");
        assert_eq!(case["failure_stage"], "load", "{case:#}");
        let message = case["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("{}: {needle}", file.display())),
            "expected `{needle}` after the file name in:\n{message}"
        );
        assert!(message.contains(also), "expected `{also}` in:\n{message}");
    }
    assert!(n >= 6);
}
