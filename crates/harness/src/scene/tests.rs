//! The scene model's unit tests: what a load builds (resolution per
//! case, tolerances, Python requirements, paths). What a load says about a
//! bad scene is tested as data: `test_data/scene/<case>/` and
//! `tests/scene_validation.rs`.

use std::path::PathBuf;

use scene_golden::{DType, ListItem, Tolerance};

use super::*;
use crate::scene::expr::{Num, Value};

const GOOD: &str = r#"
name = "demo"
platforms = ["a2a3sim"]
golden = "demo"

[orchestration]
source = "orch.c"
function = "demo_orch"
signature = ["in", "out", "scalar"]

[[incores]]
func_id = 0
name = "k"
core = "aiv"
source = "k.c"

[[tensors]]
name = "x"
dtype = "f32"
shape = ["N", 4]
init = { kind = "uniform", low = -1.0, high = 1.0 }

[[tensors]]
name = "y"
dtype = "f32"
shape = ["N*4"]

[[scalars]]
name = "n"
dtype = "i64"
value = "N"

[[cases]]
name = "small"
params = { N = 8 }
"#;

fn scene_dir() -> tempfile::TempDir {
    let tmp = tempfile::Builder::new().prefix("scene").tempdir().unwrap();
    let dir = tmp.path().join("demo");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("orch.c"), "").unwrap();
    std::fs::write(dir.join("k.c"), "").unwrap();
    tmp
}

fn load(text: &str) -> Result<Scene, SceneError> {
    let tmp = scene_dir();
    let dir = tmp.path().join("demo");
    std::fs::write(dir.join("scene.toml"), text).unwrap();
    Scene::load(&dir)
}

fn err_of(text: &str) -> String {
    load(text).unwrap_err().to_string()
}

#[test]
fn good_scene_loads() {
    let s = load(GOOD).unwrap();
    assert_eq!(s.name, "demo");
    assert_eq!(s.tensors.len(), 2);
    assert_eq!(s.tensors[1].direction, ArgDirection::Out);
    assert_eq!(s.scalars[0].value.param(), Some("N"));
    assert_eq!(s.cases[0].params["N"], Value::Int(8));
    assert_eq!(s.cases[0].tensors[1].shape, [32]);
    assert_eq!(s.cases[0].scalars, [Num::Int(8)]);
}

#[test]
fn python_requirements_from_the_key_or_requirements_txt() {
    let tmp = scene_dir();
    let dir = tmp.path().join("demo");
    std::fs::write(dir.join("golden.py"), "").unwrap();
    let py = GOOD.replace("golden = \"demo\"", "golden = { python = \"golden.py\" }");
    let load_with = |text: &str| {
        std::fs::write(dir.join("scene.toml"), text).unwrap();
        Scene::load(&dir)
    };
    // None declared: the default (empty here).
    assert!(load_with(&py).unwrap().python.requirements.is_empty());
    let declared = py.replace(
        "golden = {",
        "requirements = [\"numpy>=1.26\", \"ml_dtypes\", \"ml_dtypes\"]\ngolden = {",
    );
    assert_eq!(
        load_with(&declared).unwrap().python.requirements,
        ["numpy>=1.26", "ml_dtypes"]
    );
    // requirements.txt beside the golden file: comments and blanks skipped.
    std::fs::write(
        dir.join("requirements.txt"),
        "# for the golden\nnumpy==2.1.3  # pinned\n\nscipy\n",
    )
    .unwrap();
    assert_eq!(
        load_with(&py).unwrap().python.requirements,
        ["numpy==2.1.3", "scipy"]
    );
    // Both: ambiguous, an error naming the key.
    let e = load_with(&declared).unwrap_err().to_string();
    assert!(e.contains("requirements") && e.contains("both"), "{e}");
    // Pip options are not requirements.
    std::fs::write(dir.join("requirements.txt"), "-r other.txt\n").unwrap();
    let e = load_with(&py).unwrap_err().to_string();
    assert!(
        e.contains("-r other.txt") && e.contains("not a requirement"),
        "{e}"
    );
    std::fs::remove_file(dir.join("requirements.txt")).unwrap();
    // A scene without Python has nothing to require.
    let e = load_with(&GOOD.replace(
        "golden = \"demo\"",
        "golden = \"demo\"\nrequirements = [\"numpy\"]",
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("no Python golden"), "{e}");
}

#[test]
fn path_escape_rejected() {
    let tmp = scene_dir();
    let dir = tmp.path().join("demo");
    // Outside the scenes root (the scene dir's parent): refused even though it exists.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("k.c"), "").unwrap();
    let escape = format!(
        "../../{}/k.c",
        outside.path().file_name().unwrap().to_string_lossy()
    );
    let text = GOOD.replace("source = \"k.c\"", &format!("source = \"{escape}\""));
    std::fs::write(dir.join("scene.toml"), text).unwrap();
    let e = Scene::load(&dir).unwrap_err().to_string();
    assert!(
        e.contains("must be inside the scenes directory") || e.contains("not found"),
        "{e}"
    );
    let e = err_of(&GOOD.replace("source = \"k.c\"", "source = \"/etc/passwd\""));
    assert!(e.contains("relative to the scene directory"), "{e}");
}

#[test]
fn shared_sources_inside_the_scenes_root_are_allowed() {
    let tmp = scene_dir();
    let dir = tmp.path().join("demo");
    std::fs::create_dir(tmp.path().join("common")).unwrap();
    std::fs::write(tmp.path().join("common/add.c"), "").unwrap();
    std::fs::write(
        dir.join("scene.toml"),
        GOOD.replace("source = \"k.c\"", "source = \"../common/add.c\""),
    )
    .unwrap();
    let s = Scene::load(&dir).unwrap();
    assert_eq!(s.incores[0].source, PathBuf::from("../common/add.c"));
}

/// A link the user placed in the scenes root may point anywhere (scenes
/// naming a checkout of the original in place); `..` past the root may not,
/// even through that link.
#[cfg(unix)]
#[test]
fn links_inside_the_scenes_root_are_followed_but_dots_do_not_escape() {
    let tmp = scene_dir();
    let dir = tmp.path().join("demo");
    let checkout = tempfile::tempdir().unwrap();
    std::fs::create_dir(checkout.path().join("kernels")).unwrap();
    std::fs::write(checkout.path().join("kernels/k.cpp"), "").unwrap();
    std::os::unix::fs::symlink(checkout.path(), tmp.path().join("checkout")).unwrap();
    std::fs::write(
        dir.join("scene.toml"),
        GOOD.replace("source = \"k.c\"", "source = \"../checkout/kernels/k.cpp\""),
    )
    .unwrap();
    let s = Scene::load(&dir).unwrap();
    assert_eq!(
        s.relative_to(tmp.path(), &s.incores[0].source),
        PathBuf::from("checkout/kernels/k.cpp")
    );
    std::fs::write(
        dir.join("scene.toml"),
        GOOD.replace("source = \"k.c\"", "source = \"../checkout/../../k.c\""),
    )
    .unwrap();
    let e = Scene::load(&dir).unwrap_err().to_string();
    assert!(e.contains("must be inside the scenes directory"), "{e}");
}

#[test]
fn tolerance_precedence() {
    let s = load(&GOOD.replace("golden = \"demo\"", "golden = \"demo\"\nrtol = 0.5")).unwrap();
    let t = s.tolerance_for(&s.cases[0], 1);
    assert_eq!(t.rtol, 0.5);
    assert_eq!(t.atol, Tolerance::default_for(DType::F32).atol);
}

#[test]
fn per_tensor_tolerances_are_finite_and_non_negative() {
    for bad in ["nan", "inf", "-1e-3"] {
        let text = GOOD.replace(
            "shape = [\"N*4\"]",
            &format!("shape = [\"N*4\"]\natol = {bad}"),
        );
        let e = err_of(&text);
        assert!(e.contains("tensors[1].atol"), "{bad}: {e}");
        let text = GOOD.replace(
            "shape = [\"N*4\"]",
            &format!("shape = [\"N*4\"]\nrtol = {bad}"),
        );
        let e = err_of(&text);
        assert!(e.contains("tensors[1].rtol"), "{bad}: {e}");
    }
    let ok = GOOD.replace("shape = [\"N*4\"]", "shape = [\"N*4\"]\natol = 0.0");
    assert!(load(&ok).is_ok());
}

#[test]
fn init_parameters_are_finite_and_ordered() {
    let uniform = "init = { kind = \"uniform\", low = -1.0, high = 1.0 }";
    for (init, needle) in [
        (
            "{ kind = \"uniform\", low = -inf, high = 1.0 }",
            "uniform low must be finite",
        ),
        (
            "{ kind = \"uniform\", low = 0.0, high = nan }",
            "uniform high must be finite",
        ),
        (
            "{ kind = \"uniform\", low = 2.0, high = 1.0 }",
            "low < high",
        ),
        (
            "{ kind = \"const\", value = nan }",
            "const value must be finite",
        ),
        (
            "{ kind = \"normal\", mean = inf }",
            "normal mean must be finite",
        ),
        ("{ kind = \"normal\", std = -1.0 }", "finite std >= 0"),
        (
            "{ kind = \"arange\", step = inf }",
            "arange step must be finite",
        ),
        ("{ kind = \"randint\", low = 3, high = 3 }", "low < high"),
    ] {
        let e = err_of(&GOOD.replace(uniform, &format!("init = {init}")));
        assert!(e.contains("tensors[0].init"), "{init}: {e}");
        assert!(e.contains(needle), "{init}: {e}");
    }
    // randint must fit an integer tensor's dtype.
    let text = GOOD
        .replacen("dtype = \"f32\"", "dtype = \"u8\"", 1)
        .replace(
            uniform,
            "init = { kind = \"randint\", low = 0, high = 257 }",
        );
    let e = err_of(&text);
    assert!(
        e.contains("tensors[0].init") && e.contains("does not fit u8"),
        "{e}"
    );
    let text = GOOD
        .replacen("dtype = \"f32\"", "dtype = \"u8\"", 1)
        .replace(
            uniform,
            "init = { kind = \"randint\", low = 0, high = 256 }",
        );
    assert!(load(&text).is_ok());
}

#[test]
fn integer_inits_take_case_params() {
    let uniform = "init = { kind = \"uniform\", low = -1.0, high = 1.0 }";
    let int_x = |init: &str| {
        GOOD.replacen("dtype = \"f32\"", "dtype = \"i32\"", 1)
            .replace(uniform, &format!("init = {init}"))
    };
    // randint bounds from the case: 1..=N per element.
    let s = load(&int_x("{ kind = \"randint\", low = 1, high = \"N+1\" }")).unwrap();
    assert_eq!(
        s.cases[0].tensors[0].init,
        Init::Randint { low: 1, high: 9 }
    );
    // A permutation of 0..N*4 (the tensor is [N, 4]).
    let s = load(&int_x("{ kind = \"permutation\", n = \"N*4\" }")).unwrap();
    assert_eq!(s.cases[0].tensors[0].init, Init::Permutation { n: 32 });
    let s = load(&int_x("{ kind = \"permutation\", n = \"ceil_div(N, 3)\" }")).unwrap();
    assert_eq!(s.cases[0].tensors[0].init, Init::Permutation { n: 3 });
    let s = load(&int_x("{ kind = \"permutation\", n = 5 }")).unwrap();
    assert_eq!(
        s.tensors[0].init,
        InitSpec::Permutation { n: NumSpec::Int(5) }
    );
    assert_eq!(s.cases[0].tensors[0].init, Init::Permutation { n: 5 });
    // Checked per case, naming the case: a bound the case leaves
    // unbound, an empty range, a range that does not fit the dtype.
    let e = err_of(&int_x("{ kind = \"randint\", low = 0, high = \"M\" }"));
    assert!(
        e.contains("tensors[0].init") && e.contains("case `small`") && e.contains("`M`"),
        "{e}"
    );
    let e = err_of(&int_x("{ kind = \"randint\", low = 8, high = \"N\" }"));
    assert!(
        e.contains("tensors[0].init") && e.contains("case `small`") && e.contains("low < high"),
        "{e}"
    );
    let e = err_of(
        &int_x("{ kind = \"permutation\", n = \"N*100\" }").replacen(
            "dtype = \"i32\"",
            "dtype = \"i8\"",
            1,
        ),
    );
    assert!(
        e.contains("case `small`") && e.contains("permutation 0..800 does not fit i8"),
        "{e}"
    );
    let e = err_of(&int_x("{ kind = \"permutation\", n = 0 }"));
    assert!(e.contains("tensors[0].init") && e.contains("n >= 1"), "{e}");
    let e = err_of(&int_x("{ kind = \"permutation\", n = \"N-9\" }"));
    assert!(
        e.contains("tensors[0].init") && e.contains("n >= 1, got -1"),
        "{e}"
    );
    let e = err_of(&int_x("{ kind = \"permutation\", n = \"N / 3.0\" }"));
    assert!(
        e.contains("tensors[0].init") && e.contains("permutation n must be an integer"),
        "{e}"
    );
    let e = err_of(&int_x("{ kind = \"permutation\", n = 2.5 }"));
    assert!(e.contains("permutation n must be an integer"), "{e}");
    let e = err_of(&int_x("{ kind = \"permutation\" }"));
    assert!(e.contains("missing field `n`"), "{e}");
}

#[test]
fn scalar_literals_are_in_range_and_exact() {
    let with = |dtype: &str, value: &str| {
        GOOD.replace("dtype = \"i64\"", &format!("dtype = \"{dtype}\""))
            .replace("value = \"N\"", &format!("value = {value}"))
    };
    for (dtype, value, needle) in [
        ("i32", "2147483648", "out of range"),
        ("u8", "-1", "out of range"),
        ("i8", "128", "out of range"),
        ("i64", "1.5", "is not an integer"),
        ("i32", "2.0", "is not an integer"),
        ("f64", "9007199254740993", "not exactly representable"),
        ("f32", "16777217", "not exactly representable"),
        ("f32", "1e39", "not a finite f32"),
        ("f64", "nan", "not a finite f64"),
    ] {
        let e = err_of(&with(dtype, value));
        assert!(e.contains("scalars[0].value"), "{dtype} {value}: {e}");
        assert!(e.contains(needle), "{dtype} {value}: {e}");
    }
    // Exact beyond 2^53 for i64, as an integer all the way.
    let s = load(&with("i64", "9007199254740993")).unwrap();
    assert_eq!(s.scalars[0].value, NumSpec::Int(9_007_199_254_740_993));
    assert!(load(&with("f64", "0.25")).is_ok());
    assert!(load(&with("u8", "255")).is_ok());
}

/// A scene with typed params for the error matrix: `x` takes its dtype
/// from `DT`, its shape and init from expressions.
const TYPED: &str = r#"
name = "demo"
platforms = ["a2a3sim", "a5sim"]
golden = "demo"

[orchestration]
source = "orch.c"
function = "demo_orch"
signature = ["in", "in", "out", "scalar"]

[[incores]]
func_id = 0
name = "k"
core = "aiv"
source = "k.c"

[[tensors]]
name = "x"
dtype = "DT"
shape = ["N", "ceil_div(N, 4)"]
init = { kind = "uniform", low = "-X", high = "X * 2" }

[[tensors]]
name = "lens"
dtype = "i32"
shape = ["B"]
init = { kind = "list", param = "L" }

[[tensors]]
name = "y"
dtype = "DT"
shape = ["N * ceil_div(N, 4)"]
rtol = "X / 100"

[[scalars]]
name = "n"
dtype = "i64"
value = "N + 1"

[[cases]]
name = "small"
params = { N = 8, DT = "f16", X = 0.5, B = 3, L = [1, 2, 3], S = "text", F = true }
"#;

#[test]
fn typed_params_resolve_per_case() {
    let two = format!(
        "{TYPED}\n[[cases]]\nname = \"wide\"\nparams = {{ N = 13, DT = \"bf16\", X = 2, B = 1, L = [7] }}\nmanual = [\"a5sim\"]\n\n[[cases]]\nname = \"card\"\nparams = {{ N = 1, DT = \"f32\", X = 1, B = 1, L = [1] }}\nplatforms = [\"a2a3\"]\n"
    );
    let s = load(&two).unwrap();
    let (small, wide, card) = (&s.cases[0], &s.cases[1], &s.cases[2]);
    assert_eq!(small.tensors[0].dtype, DType::F16);
    assert_eq!(small.tensors[0].shape, [8, 2]);
    assert_eq!(
        small.tensors[0].init,
        Init::Uniform {
            low: -0.5,
            high: 1.0
        }
    );
    assert_eq!(
        small.tensors[1].init,
        Init::List {
            values: vec![ListItem::Int(1), ListItem::Int(2), ListItem::Int(3)]
        }
    );
    assert_eq!(small.tensors[2].tolerance.rtol, 0.005);
    assert_eq!(
        small.tensors[0].tolerance.rtol,
        Tolerance::default_for(DType::F16).rtol
    );
    assert_eq!(small.scalars, [Num::Int(9)]);
    assert_eq!(wide.tensors[2].dtype, DType::BF16);
    assert_eq!(wide.tensors[2].shape, [13 * 4]);
    assert!(!small.manual.on("a5sim"));
    assert!(wide.manual.on("a5sim") && !wide.manual.on("a2a3sim"));
    assert!(s.case_hardware_only(card) && !s.case_hardware_only(small));
    assert!(!s.case_enabled_on(card, "a2a3sim"));
    assert_eq!(small.int_params()["N"], 8);
    assert!(!small.int_params().contains_key("DT"));
}

/// A scene with `[derived]` params and an input whose fixture a case
/// overrides: the paged-attention pattern in small.
const DERIVED: &str = r#"
name = "demo"
platforms = ["a2a3sim"]
golden = "demo"

[orchestration]
source = "orch.c"
function = "demo_orch"
signature = ["in", "in", "out", "scalar"]

[[incores]]
func_id = 0
name = "k"
core = "aiv"
source = "k.c"

[derived]
max_blocks = "max_len / block"
total = "batch * ceil_div(ctx, block)"
half = "total / 2.0"

[[tensors]]
name = "table"
dtype = "int32"
shape = ["batch", "max_blocks"]
init = { kind = "randint", low = 0, high = "max(total, 1)" }

[[tensors]]
name = "lens"
dtype = "i32"
shape = ["batch"]
init = { kind = "const", value = "ctx" }

[[tensors]]
name = "out"
dtype = "dt"
shape = ["total", "block"]
atol = "half / 1000"

[[scalars]]
name = "n"
dtype = "i64"
value = "total"

[[cases]]
name = "small"
params = { batch = 2, block = 16, ctx = 40, max_len = 256, dt = "bfloat16" }

[[cases]]
name = "varied"
params = { batch = 4, block = 16, ctx = 64, max_len = 128, dt = "float" }
init = { lens = { kind = "randint", low = 1, high = "ctx+1" }, table = { kind = "permutation", n = "total" } }
"#;

#[test]
fn derived_params_are_computed_per_case_in_order() {
    let s = load(DERIVED).unwrap();
    assert_eq!(
        s.derived
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>(),
        ["max_blocks", "total", "half"]
    );
    let (small, varied) = (&s.cases[0], &s.cases[1]);
    // Written params stay as written; values add the derived ones.
    assert!(!small.params.contains_key("total"));
    assert_eq!(small.values["max_blocks"], Value::Int(16));
    assert_eq!(small.values["total"], Value::Int(6));
    assert_eq!(small.values["half"], Value::Float(3.0));
    assert_eq!(small.int_params()["total"], 6);
    assert_eq!(small.tensors[0].shape, [2, 16]);
    assert_eq!(small.tensors[0].dtype, DType::I32);
    assert_eq!(small.tensors[0].init, Init::Randint { low: 0, high: 6 });
    assert_eq!(small.tensors[1].init, Init::Const { value: 40.0 });
    assert_eq!(small.tensors[2].shape, [6, 16]);
    assert_eq!(small.tensors[2].dtype, DType::BF16);
    assert_eq!(small.tensors[2].tolerance.atol, 0.003);
    assert_eq!(small.scalars, [Num::Int(6)]);
    assert!(small.init.is_empty());
    // The override replaces the fixture in its case only.
    assert_eq!(varied.values["total"], Value::Int(16));
    assert_eq!(varied.tensors[2].dtype, DType::F32);
    assert_eq!(varied.tensors[0].init, Init::Permutation { n: 16 });
    assert_eq!(varied.tensors[1].init, Init::Randint { low: 1, high: 65 });
    assert_eq!(
        varied.init.keys().map(String::as_str).collect::<Vec<_>>(),
        ["lens", "table"]
    );
}

#[test]
fn torch_and_numpy_dtype_names_are_aliases() {
    for (alias, dtype) in [
        ("bfloat16", DType::BF16),
        ("float16", DType::F16),
        ("half", DType::F16),
        ("float32", DType::F32),
        ("float", DType::F32),
        ("float64", DType::F64),
        ("double", DType::F64),
        ("int8", DType::I8),
        ("int16", DType::I16),
        ("int32", DType::I32),
        ("int64", DType::I64),
        ("uint8", DType::U8),
        ("bool", DType::Bool),
        ("bf16", DType::BF16),
    ] {
        assert_eq!(dtype_from_name(alias), Some(dtype), "{alias}");
    }
    assert_eq!(dtype_from_name("Float32"), None);
    assert_eq!(dtype_from_name("uint16"), None);
    // A scalar's dtype reads aliases too.
    let s = load(&GOOD.replace("dtype = \"i64\"", "dtype = \"int64\"")).unwrap();
    assert_eq!(s.scalars[0].dtype, DType::I64);
}

/// Issue 30 item 4: a list param only some cases give, read through
/// `get` (with a default) and the list functions, everywhere numbers go.
const OPTIONAL_LIST: &str = r#"
name = "demo"
platforms = ["a2a3sim"]
golden = "demo"
atol = "get(tol, 0.001)"

[orchestration]
source = "orch.c"
function = "demo_orch"
signature = ["in", "out", "scalar"]

[[incores]]
func_id = 0
name = "k"
core = "aiv"
source = "k.c"

[derived]
n_req = "len(get(lens, [ctx]))"
longest = "max(get(lens, [ctx]))"
total = "n_req * ceil_div(longest, block)"

[[tensors]]
name = "x"
dtype = "f32"
shape = ["total", "block"]
init = { kind = "uniform", low = "-min(get(lens, [1]))", high = 1.0 }

[[tensors]]
name = "y"
dtype = "f32"
shape = ["sum(get(lens, [ctx]))"]

[[scalars]]
name = "n"
dtype = "i64"
value = "get(rows, total)"

[[cases]]
name = "one"
params = { block = 16, ctx = 40 }

[[cases]]
name = "varied"
params = { block = 16, lens = [33, 7, 64, 20], rows = 5, tol = 0.5 }
"#;

#[test]
fn optional_list_params_resolve_in_every_case() {
    let s = load(OPTIONAL_LIST).unwrap();
    let (one, varied) = (&s.cases[0], &s.cases[1]);
    assert_eq!(one.values["n_req"], Value::Int(1));
    assert_eq!(one.values["longest"], Value::Int(40));
    assert_eq!(one.values["total"], Value::Int(3));
    assert_eq!(one.tensors[0].shape, [3, 16]);
    assert_eq!(one.tensors[1].shape, [40]);
    assert_eq!(
        one.tensors[0].init,
        Init::Uniform {
            low: -1.0,
            high: 1.0
        }
    );
    assert_eq!(one.tensors[1].tolerance.atol, 0.001);
    assert_eq!(one.scalars, [Num::Int(3)]);
    assert_eq!(varied.values["n_req"], Value::Int(4));
    assert_eq!(varied.values["longest"], Value::Int(64));
    assert_eq!(varied.int_params()["total"], 16);
    assert_eq!(varied.tensors[0].shape, [16, 16]);
    assert_eq!(varied.tensors[1].shape, [124]);
    assert_eq!(
        varied.tensors[0].init,
        Init::Uniform {
            low: -7.0,
            high: 1.0
        }
    );
    assert_eq!(varied.tensors[1].tolerance.atol, 0.5);
    assert_eq!(varied.scalars, [Num::Int(5)]);
}

#[test]
fn a_plain_use_of_a_param_some_case_lacks_is_still_an_error() {
    let text = OPTIONAL_LIST.replace(
        r#"shape = ["sum(get(lens, [ctx]))"]"#,
        r#"shape = ["sum(lens)"]"#,
    );
    let e = load(&text).unwrap_err().to_string();
    assert!(e.contains("`tensors[1].shape[0]`"), "{e}");
    assert!(e.contains("case `one`"), "{e}");
    assert!(e.contains("unknown param `lens`"), "{e}");
    assert!(
        !e.contains("case `varied`"),
        "the case with it resolves: {e}"
    );
    // In `[derived]` too, naming the derived param.
    let text = OPTIONAL_LIST.replace(
        r#"n_req = "len(get(lens, [ctx]))""#,
        r#"n_req = "len(lens)""#,
    );
    let e = load(&text).unwrap_err().to_string();
    assert!(e.contains("`derived.n_req`: case `one`"), "{e}");
    // An empty list param is an error naming it, in the case that has it.
    let text = OPTIONAL_LIST.replace("lens = [33, 7, 64, 20]", "lens = []");
    let e = load(&text).unwrap_err().to_string();
    assert!(e.contains("case `varied`"), "{e}");
    assert!(e.contains("`max` of an empty list (param `lens`)"), "{e}");
    // `get` of a derived param written below it is a forward reference.
    let text = OPTIONAL_LIST.replace(
        r#"n_req = "len(get(lens, [ctx]))""#,
        r#"n_req = "get(total, 1)""#,
    );
    let e = load(&text).unwrap_err().to_string();
    assert!(
        e.contains("refers to `derived.total`, which comes later"),
        "{e}"
    );
}
