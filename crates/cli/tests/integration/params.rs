//! Typed params, expressions, fixtures from params and case selection
//! through the real `scene` binary: one scene definition whose cases differ
//! by a `dtype` param runs its f32 and f16 cases on a2a3sim, a fixture
//! filled from a list param reaches the device and the dump, a manual-only
//! selection says which case is manual, and a hardware-only case is listed
//! marked and never run. `optional_list_params` (optional and list params)
//! fails as it should when its `[derived]` expressions are mutated.

use crate::common;

use std::path::Path;

use common::TestEnv;

const ORCH: &str = r#"#include "scene_orch.h"

SCENE_ORCH_ENTRY(dtype_copy_orch, ctx, args, nargs) {
    if (nargs != 4) {
        ctx->ops->fail(ctx, "dtype_copy_orch expects 4 arguments (x, lens, y, lens_out)");
        return -1;
    }
    int32_t rc;
    SceneTaskArg t0[2] = {SCENE_IN(args[0]), SCENE_OUT(args[2])};
    if ((rc = scene_orch_submit(ctx, 0, 4, t0, 2)) != 0) return rc;
    SceneTaskArg t1[2] = {SCENE_IN(args[1]), SCENE_OUT(args[3])};
    return scene_orch_submit(ctx, 0, 1, t1, 2);
}
"#;

const KERNEL: &str = r#"/* out = in, byte for byte: any dtype. */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) {
    const uint8_t *in = SCENE_ARG_PTR(ka, 0, const uint8_t);
    uint8_t *out = SCENE_ARG_PTR(ka, 1, uint8_t);
    uint64_t n = SCENE_ARG_LEN(ka, 1, uint8_t);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { out[i] = in[i]; }
}
"#;

const SCENE: &str = r#"name = "dtype_copy"
level = 2
platforms = ["a2a3sim", "a5sim"]
golden = "dtype_copy"
rtol = "RTOL"
atol = 0

[orchestration]
source = "orchestration.c"
function = "dtype_copy_orch"
signature = ["in", "in", "out", "out"]

[[incores]]
func_id = 0
name = "copy"
core = "aiv"
source = "copy.c"

[[tensors]]
name = "x"
dtype = "DT"
shape = ["ceil_div(N, 8) * 8", "min(H, 4)"]
init = { kind = "uniform", low = "-LIM", high = "LIM * 2" }

[[tensors]]
name = "lens"
dtype = "i32"
shape = ["B"]
init = { kind = "list", param = "context_lens" }

[[tensors]]
name = "y"
dtype = "DT"
shape = ["ceil_div(N, 8) * 8", "min(H, 4)"]

[[tensors]]
name = "lens_out"
dtype = "i32"
shape = ["B"]

[[cases]]
name = "f32"
params = { DT = "f32", N = 13, H = 3, LIM = 1.5, B = 4, context_lens = [3, 7, 1, 5], RTOL = 0 }

[[cases]]
name = "f16"
params = { DT = "f16", N = 20, H = 9, LIM = 0.25, B = 2, context_lens = [33, 2], RTOL = 0 }

[[cases]]
name = "big_manual"
params = { DT = "bf16", N = 8, H = 1, LIM = 1, B = 1, context_lens = [1], RTOL = 0 }
manual = ["a2a3sim"]

[[cases]]
name = "on_card"
params = { DT = "f16", N = 8, H = 1, LIM = 1, B = 1, context_lens = [1], RTOL = 0 }
platforms = ["a2a3"]
"#;

fn write_scene(env: &TestEnv) {
    let dir = env.scenes_dir.as_ref().unwrap().join("dtype_copy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("scene.toml"), SCENE).unwrap();
    std::fs::write(dir.join("orchestration.c"), ORCH).unwrap();
    std::fs::write(dir.join("copy.c"), KERNEL).unwrap();
}

fn meta(dump: &Path, case: &str) -> serde_json::Value {
    common::read_report(&dump.join("dtype_copy").join(case).join("meta.json"))
}

fn tensor<'a>(meta: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    meta["tensors"]
        .as_array()
        .unwrap_or_else(|| panic!("no tensors in {meta}"))
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tensor {name} in {meta}"))
}

#[test]
fn one_definition_runs_its_f32_and_f16_cases() {
    let env = TestEnv::with_scenes(&[]);
    write_scene(&env);
    let dump = env.dir.path().join("dump");
    let out = env
        .scene(&["run", "dtype_copy", "--platform", "a2a3sim", "--dump"])
        .arg(&dump)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("PASS dtype_copy::f32"), "{stdout}");
    assert!(stdout.contains("PASS dtype_copy::f16"), "{stdout}");
    assert!(stdout.contains("2 passed, 0 failed"), "{stdout}");
    // Manual on a2a3sim and hardware-only: neither ran.
    assert!(!stdout.contains("big_manual"), "{stdout}");
    assert!(!stdout.contains("on_card"), "{stdout}");

    // The dtype, the shape expressions and the list fixture reached the
    // device: f32 case 16x3 f32, f16 case 24x4 f16.
    let m = meta(&dump, "f32");
    assert_eq!(tensor(&m, "x")["dtype"], "f32", "{m}");
    assert_eq!(tensor(&m, "y")["shape"], serde_json::json!([16, 3]), "{m}");
    assert_eq!(m["params"]["DT"], "f32", "{m}");
    assert_eq!(
        m["params"]["context_lens"],
        serde_json::json!([3, 7, 1, 5]),
        "{m}"
    );
    let m = meta(&dump, "f16");
    assert_eq!(tensor(&m, "y")["dtype"], "f16", "{m}");
    assert_eq!(tensor(&m, "y")["shape"], serde_json::json!([24, 4]), "{m}");
    let lens = std::fs::read(dump.join("dtype_copy/f32/outputs/lens_out.npy")).unwrap();
    let data: Vec<i32> = lens[lens.len() - 16..]
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(data, [3, 7, 1, 5], "the device copied the list fixture");
    // Uniform in [-LIM, 2*LIM): the f16 case's values are within 0.5.
    let x = std::fs::read(dump.join("dtype_copy/f16/inputs/x.npy")).unwrap();
    let vals: Vec<f32> = x[x.len() - 24 * 4 * 2..]
        .chunks(2)
        .map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]])))
        .collect();
    assert!(vals.iter().all(|v| (-0.25..=0.5).contains(v)), "{vals:?}");
    assert!(vals.iter().any(|v| *v != vals[0]), "values vary");

    // The manual case runs when asked, on a2a3sim too.
    let out = env
        .scene(&["run", "dtype_copy::big", "--include-manual"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("PASS dtype_copy::big_manual"), "{stdout}");
}

/// f16 bits to f32 without a dependency (normal numbers and zero suffice
/// here).
fn f16_to_f32(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1f);
    let frac = f32::from(bits & 0x3ff);
    if exp == 0 {
        return sign * frac * 2f32.powi(-24);
    }
    sign * (1.0 + frac / 1024.0) * 2f32.powi(exp - 15)
}

#[test]
fn manual_only_selection_says_so_and_hardware_cases_are_listed_marked() {
    let env = TestEnv::with_scenes(&[]);
    write_scene(&env);
    let out = env.scene(&["run", "big_manual"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("case dtype_copy::big_manual is manual: add --include-manual"),
        "{stderr}"
    );
    // Manual on a2a3sim only: on a5sim it is an ordinary case.
    let out = env
        .scene(&["list", "dtype_copy", "--platform", "a5sim"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("dtype_copy::big_manual\n"), "{stdout}");

    let out = env.scene(&["list", "dtype_copy"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "dtype_copy::f32",
            "dtype_copy::f16",
            "dtype_copy::on_card  [hardware only: a2a3]"
        ],
        "{stdout}"
    );
    let out = env.scene(&["run", "on_card"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("case dtype_copy::on_card runs on hardware only (a2a3)"),
        "{stderr}"
    );
}

/// Two passes: the bundle's slots carry each case's own dtype and shapes,
/// and `run --from` checks them against the same definition.
#[test]
fn a_bundle_runs_both_dtype_cases() {
    let env = TestEnv::with_scenes(&[]);
    write_scene(&env);
    let bundle = env.dir.path().join("bundle");
    let out = env
        .scene(&["precompile", "dtype_copy", "--out"])
        .arg(&bundle)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = env
        .scene(&["run", "--from"])
        .arg(&bundle)
        .arg("dtype_copy")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("PASS dtype_copy::f16"), "{stdout}");
    assert!(stdout.contains("2 passed, 0 failed"), "{stdout}");
    assert!(!stderr.contains("rebuil"), "no slot was stale: {stderr}");
}

/// `optional_list_params` (issue 30 item 4) with its `[derived]` text
/// replaced (`from` -> `to`), in a private scenes dir; its kernel is
/// vector_example's, so that scene comes along.
fn mutated_optional_list_params(from: &str, to: &str) -> TestEnv {
    let env = TestEnv::with_scenes(&[]);
    common::copy_scene(&env, "vector_example", "vector_example");
    let dir = common::copy_scene(&env, "optional_list_params", "optional_list_params");
    let toml = dir.join("scene.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    assert!(text.contains(from), "the scene still says `{from}`");
    std::fs::write(&toml, text.replacen(from, to, 1)).unwrap();
    env
}

fn run_optional_list_params(env: &TestEnv) -> (String, String, Option<i32>) {
    let out = env
        .scene(&["run", "optional_list_params", "--platform", "a2a3sim"])
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

/// `max` -> `min` over the optional list: the cases that give
/// `context_lens` get too few blocks, and the golden, which recomputes the
/// sizes from the case's own params, says so; the case with one
/// `context_len` (a list of one) still passes.
#[test]
fn optional_list_params_with_min_for_max_fails_on_the_shape() {
    let env = mutated_optional_list_params(
        r#"max_len = "max(get(context_lens, [context_len]))""#,
        r#"max_len = "min(get(context_lens, [context_len]))""#,
    );
    let (stdout, stderr, code) = run_optional_list_params(&env);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("PASS optional_list_params::one_request"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAIL optional_list_params::four_requests"),
        "{stdout}"
    );
    assert!(
        stdout.contains("tensor `x` has shape [4, 16]; the case's lengths [33, 7, 64, 20] in blocks of 16 make [16, 16]"),
        "{stdout}"
    );
}

/// `sum` -> `max` for the scalar: the shapes are right, the device adds
/// the wrong offset, and the comparison of `y` fails.
#[test]
fn optional_list_params_with_max_for_sum_fails_the_comparison() {
    let env = mutated_optional_list_params(
        r#"tokens = "sum(get(context_lens, [context_len]))""#,
        r#"tokens = "max(get(context_lens, [context_len]))""#,
    );
    let (stdout, stderr, code) = run_optional_list_params(&env);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("PASS optional_list_params::one_request"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAIL optional_list_params::four_requests"),
        "{stdout}"
    );
    assert!(stdout.contains("tensor `y` mismatch"), "{stdout}");
}

/// Without `get`'s default the list param is required: the scene does not
/// load, and the message names the derived param and the case lacking it.
#[test]
fn optional_list_params_without_the_default_is_a_load_error() {
    let env = mutated_optional_list_params(
        r#"num_requests = "len(get(context_lens, [context_len]))""#,
        r#"num_requests = "len(context_lens)""#,
    );
    let (stdout, stderr, code) = run_optional_list_params(&env);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("`derived.num_requests`: case `one_request`: unknown param `context_lens`"),
        "{stderr}"
    );
    assert!(!stdout.contains("PASS"), "{stdout}");
}
