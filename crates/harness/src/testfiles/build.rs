//! A described `SceneTestCase` class as a [`Scene`]: the model the
//! compile, fixture, golden, device and compare stages already take.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;

use scene_golden::{DType, Init, Tolerance};
use scene_kernels::{ArgsConvention, CoreType};
use serde::Deserialize;
use serde_json::Value as Json;

use super::FileContext;
use crate::compare::Comparison;
use crate::scene::expr::{Num, Params, Value};
use crate::scene::shape::Dim;
use crate::scene::{
    ArgDirection, Case, CaseTensor, CompareSpec, DTypeSpec, DeviceMemorySpec, Incore, InitSpec,
    Manual, NumSpec, Orchestration, OrchestrationApi, PythonFiles, SIMPLER_ENTRY, ScalarSpec,
    Scene, TensorSpec, ToleranceSpec,
};
use crate::simpler::SimplerRuntime;

/// Why a described class is not a scene: one line naming the part of
/// the class (`CALLABLE[...]`, a case) that is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ClassProblem(pub(crate) String);

impl From<String> for ClassProblem {
    fn from(s: String) -> Self {
        ClassProblem(s)
    }
}

impl From<&str> for ClassProblem {
    fn from(s: &str) -> Self {
        ClassProblem(s.to_owned())
    }
}

/// What the driver's `describe` says of one class.
#[derive(Debug, Deserialize)]
pub(crate) struct ClassDesc {
    pub(crate) name: String,
    level: u32,
    runtime: Option<String>,
    rtol: f64,
    atol: f64,
    compare_override: bool,
    #[serde(default)]
    overrides: Vec<String>,
    #[serde(default)]
    own_tests: Vec<String>,
    orchestration: Option<OrchDesc>,
    #[serde(default)]
    incores: Vec<IncoreDesc>,
    cases: Vec<CaseDesc>,
}

#[derive(Debug, Deserialize)]
struct OrchDesc {
    source: Option<String>,
    function_name: Option<String>,
    config_name: Option<String>,
    signature: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct IncoreDesc {
    func_id: Option<Json>,
    name: Option<String>,
    source: Option<String>,
    core_type: Option<String>,
    #[serde(default)]
    extra_include_dirs: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct CaseDesc {
    name: String,
    platforms: Vec<String>,
    manual: Json,
    params: Json,
    skip_golden: bool,
    /// What `generate_args` made, for the cases the run may select.
    args: Option<Vec<ArgDesc>>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum ArgDesc {
    Tensor {
        name: String,
        dtype: String,
        shape: Vec<usize>,
    },
    Scalar {
        name: String,
        dtype: String,
        value: Json,
    },
}

/// Why a class is not run here, if it is not.
pub(crate) fn not_run_because(desc: &ClassDesc) -> Option<String> {
    if desc.level != 2 {
        return Some(format!(
            "level {}: its orchestration is a Python function on the original's Worker API, \
             which scenes does not run",
            desc.level
        ));
    }
    if let Some(m) = desc
        .overrides
        .iter()
        .find(|m| m.starts_with("_run_and_validate"))
    {
        return Some(format!(
            "white-box: it overrides {m}, the original's run of a case"
        ));
    }
    None
}

/// A class's own `test_*` methods besides `test_run`, which are not run
/// (its cases are): each drives the original's private machinery.
pub(crate) fn white_box_methods(desc: &ClassDesc) -> &[String] {
    &desc.own_tests
}

/// The defines that make our `pto_orchestration_api.h` call the entry and
/// config functions the class's `CALLABLE` names, when they are not the
/// defaults; `Err` for a name that is no C identifier.
fn entry_defines(o: &OrchDesc) -> Result<Vec<(String, String)>, ClassProblem> {
    let mut defines = Vec::new();
    for (define, name, default) in [
        ("SCENE_SIMPLER_ENTRY", &o.function_name, SIMPLER_ENTRY),
        (
            "SCENE_SIMPLER_CONFIG",
            &o.config_name,
            "aicpu_orchestration_config",
        ),
    ] {
        let Some(name) = name.as_deref().filter(|n| *n != default) else {
            continue;
        };
        let ident = name
            .chars()
            .next()
            .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
            && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric());
        if !ident {
            return Err(format!(
                "CALLABLE's orchestration names `{name}`, which is not a C function name"
            )
            .into());
        }
        defines.push((define.to_owned(), name.to_owned()));
    }
    Ok(defines)
}

/// The scene of a class that runs here.
pub(crate) fn scene(
    ctx: &FileContext,
    desc: &ClassDesc,
    name: &str,
) -> Result<Scene, ClassProblem> {
    let dir = ctx.file.parent().map(PathBuf::from).unwrap_or_default();
    let runtime = match desc.runtime.as_deref() {
        Some(r) => SimplerRuntime::from_str(r).map_err(|e| ClassProblem(e.to_string()))?,
        None => return Err("@scene_test names no runtime".into()),
    };
    let orch = desc
        .orchestration
        .as_ref()
        .ok_or("CALLABLE has no orchestration")?;
    let source = orch
        .source
        .as_deref()
        .ok_or("CALLABLE[\"orchestration\"] has no source")?;
    let entry = entry_defines(orch)?;
    let signature: Vec<ArgDirection> = orch
        .signature
        .iter()
        .map(|d| match d.as_str() {
            "in" => Ok(ArgDirection::In),
            "out" => Ok(ArgDirection::Out),
            "inout" => Ok(ArgDirection::Inout),
            other => Err(format!(
                "CALLABLE[\"orchestration\"][\"signature\"] holds {other}; expected D.IN, D.OUT or D.INOUT"
            ).into()),
        })
        .collect::<Result<_, ClassProblem>>()?;
    let incores = desc
        .incores
        .iter()
        .enumerate()
        .map(|(i, k)| incore(i, k))
        .collect::<Result<Vec<_>, _>>()?;
    for file in std::iter::once(source).chain(incores.iter().filter_map(|k| k.source.to_str())) {
        if !std::path::Path::new(file).is_file() {
            return Err(format!("source {file} does not exist").into());
        }
    }

    // The arguments: the first case that made them fixes the names,
    // directions and kinds; every other one must agree.
    // A class none of whose cases the run may select (other platforms,
    // manual ones) has no arguments: it is listed, never run.
    let no_args = Vec::new();
    let first = desc
        .cases
        .iter()
        .find_map(|c| c.args.as_ref())
        .unwrap_or(&no_args);
    let (tensors, scalars) = arg_specs(first, &signature)?;
    let tol = Tolerance {
        rtol: desc.rtol,
        atol: desc.atol,
        equal_nan: false,
    };
    let mut cases = Vec::with_capacity(desc.cases.len());
    for c in &desc.cases {
        let args = c.args.as_deref().unwrap_or(first);
        cases.push(case(c, args, &tensors, &scalars, tol)?);
    }
    let mut platforms: Vec<String> = Vec::new();
    for p in desc.cases.iter().flat_map(|c| &c.platforms) {
        if !platforms.contains(p) {
            platforms.push(p.clone());
        }
    }
    let mut full_signature: Vec<ArgDirection> = tensors.iter().map(|t| t.direction).collect();
    full_signature.extend(scalars.iter().map(|_| ArgDirection::Scalar));
    let memory = cases.iter().filter_map(|c| c.device_memory).max();
    Ok(Scene {
        name: name.to_owned(),
        dir,
        manifest: ctx.file.clone(),
        level: 2,
        platforms,
        golden: format!("python:{}", ctx.file.display()),
        python: PythonFiles {
            golden: Some(ctx.file.clone()),
            fixtures: Some(ctx.file.clone()),
            requirements: ctx.requirements.clone(),
        },
        tolerance: ToleranceSpec {
            rtol: Some(NumSpec::Float(desc.rtol)),
            atol: Some(NumSpec::Float(desc.atol)),
            equal_nan: false,
        },
        devices: 1,
        device_memory: memory.map(|bytes| DeviceMemorySpec::Size {
            text: "twice the case's arguments + 256 MiB (a test file's case)".into(),
            bytes,
        }),
        group: None,
        orchestration: Orchestration {
            source: PathBuf::from(source),
            function: SIMPLER_ENTRY.to_owned(),
            api: OrchestrationApi::Simpler,
            signature: full_signature,
            include_dirs: Vec::new(),
            defines: entry,
        },
        incores,
        args: ArgsConvention::ChipTensor,
        runtime,
        tensors,
        scalars,
        derived: Vec::new(),
        cases,
        steps: Vec::new(),
        origin: Some(ctx.origin(&desc.name, desc.compare_override)),
    })
}

fn incore(i: usize, k: &IncoreDesc) -> Result<Incore, ClassProblem> {
    let at = format!("CALLABLE[\"incores\"][{i}]");
    let func_id = k
        .func_id
        .as_ref()
        .and_then(Json::as_u64)
        .and_then(|f| u32::try_from(f).ok())
        .ok_or_else(|| ClassProblem(format!("{at} has no func_id (a non-negative integer)")))?;
    let core = match k.core_type.as_deref() {
        Some(c) => CoreType::from_str(c)
            .map_err(|_| format!("{at}: core_type {c:?} is neither \"aic\" nor \"aiv\""))?,
        None => return Err(format!("{at} has no core_type").into()),
    };
    let source = k
        .source
        .as_deref()
        .ok_or_else(|| ClassProblem(format!("{at} has no source")))?;
    Ok(Incore {
        func_id,
        name: k.name.clone().unwrap_or_else(|| format!("func{func_id}")),
        core,
        // The original's kernels: hosted, taking their arguments as tensor
        // records (what `args = "chip_tensor"` gives a scene.toml's).
        kind: Some(scene_kernels::IncoreKind::Hosted(
            ArgsConvention::ChipTensor,
        )),
        source: PathBuf::from(source),
        include_dirs: k.extra_include_dirs.iter().map(PathBuf::from).collect(),
        defines: Vec::new(),
    })
}

/// The scene's tensors (directions from the orchestration's signature, in
/// tensor order, as the original gives them) and scalars.
fn arg_specs(
    args: &[ArgDesc],
    signature: &[ArgDirection],
) -> Result<(Vec<TensorSpec>, Vec<ScalarSpec>), ClassProblem> {
    let mut tensors = Vec::new();
    let mut scalars = Vec::new();
    for a in args {
        match a {
            ArgDesc::Tensor { name, dtype, shape } => {
                let i = tensors.len();
                let Some(&direction) = signature.get(i) else {
                    return Err(format!(
                        "TensorArg '{name}' at index {i} has no matching entry in orchestration \
                         signature (length {}). Update CALLABLE['orchestration']['signature'] to \
                         match generate_args().",
                        signature.len()
                    )
                    .into());
                };
                let dtype = DType::from_str(dtype).map_err(|e| ClassProblem(e.to_string()))?;
                tensors.push(TensorSpec {
                    name: name.clone(),
                    dtype: DTypeSpec::Fixed(dtype),
                    shape: shape.iter().map(|&d| Dim::Fixed(d)).collect(),
                    init: InitSpec::Zeros,
                    seed: 0,
                    direction,
                    rtol: None,
                    atol: None,
                    compare: CompareSpec::AllClose,
                    allow_nonfinite: false,
                    skip_golden: false,
                    per_rank: false,
                });
            }
            ArgDesc::Scalar { name, dtype, value } => {
                let dtype = DType::from_str(dtype).map_err(|e| ClassProblem(e.to_string()))?;
                scalars.push(ScalarSpec {
                    name: name.clone(),
                    dtype,
                    value: match scalar_num(value)? {
                        Num::Int(i) => NumSpec::Int(i),
                        Num::Float(f) => NumSpec::Float(f),
                    },
                });
            }
        }
    }
    Ok((tensors, scalars))
}

fn scalar_num(v: &Json) -> Result<Num, ClassProblem> {
    if let Some(i) = v.as_i64() {
        return Ok(Num::Int(i));
    }
    v.as_f64()
        .map(Num::Float)
        .ok_or_else(|| ClassProblem(format!("scalar value {v} is not a number")))
}

/// One case, its tensors resolved from what `generate_args` made.
fn case(
    c: &CaseDesc,
    args: &[ArgDesc],
    tensors: &[TensorSpec],
    scalars: &[ScalarSpec],
    tol: Tolerance,
) -> Result<Case, ClassProblem> {
    let mut resolved = Vec::new();
    let mut values = Vec::new();
    let mut bytes: u64 = 0;
    let (mut ti, mut si) = (0, 0);
    for a in args {
        match a {
            ArgDesc::Tensor { name, dtype, shape } => {
                let Some(spec) = tensors.get(ti) else {
                    return Err(format!(
                        "case {}: generate_args makes tensor `{name}`, which other cases do not",
                        c.name
                    )
                    .into());
                };
                if &spec.name != name {
                    return Err(format!(
                        "case {}: tensor {ti} is `{name}`, `{}` in other cases",
                        c.name, spec.name
                    )
                    .into());
                }
                let dtype = DType::from_str(dtype).map_err(|e| ClassProblem(e.to_string()))?;
                let n: usize = shape.iter().product();
                bytes = bytes.saturating_add((n * dtype.size_of()) as u64);
                resolved.push(CaseTensor {
                    dtype,
                    shape: shape.clone(),
                    init: Init::Zeros,
                    tolerance: tol,
                    comparison: spec.direction.is_output().then_some(if c.skip_golden {
                        Comparison::Skipped
                    } else {
                        Comparison::AllClose
                    }),
                });
                ti += 1;
            }
            ArgDesc::Scalar { name, value, .. } => {
                if scalars.get(si).is_none_or(|s| &s.name != name) {
                    return Err(format!(
                        "case {}: scalar {si} is `{name}`, not what other cases make",
                        c.name
                    )
                    .into());
                }
                values.push(scalar_num(value)?);
                si += 1;
            }
        }
    }
    if ti != tensors.len() || si != scalars.len() {
        return Err(format!(
            "case {}: generate_args makes {ti} tensors and {si} scalars, other cases {} and {}",
            c.name,
            tensors.len(),
            scalars.len()
        )
        .into());
    }
    let params = params(&c.params);
    Ok(Case {
        name: c.name.clone(),
        values: params.clone(),
        params,
        init: BTreeMap::new(),
        platforms: Some(c.platforms.clone()),
        manual: manual(&c.manual),
        seed: 0,
        tensors: resolved,
        scalars: values,
        group: None,
        device_memory: (!args.is_empty())
            .then(|| bytes.saturating_mul(2).saturating_add(256 << 20)),
    })
}

fn manual(v: &Json) -> Manual {
    match v {
        Json::String(s) if s == "always" => Manual::Always,
        Json::Array(list) => Manual::On(
            list.iter()
                .filter_map(|p| p.as_str().map(str::to_owned))
                .collect(),
        ),
        _ => Manual::Never,
    }
}

/// A case's params as the model holds them (reports, keys): what is not a
/// number, bool, string or list of them is its text.
fn params(v: &Json) -> Params {
    let Json::Object(map) = v else {
        return Params::new();
    };
    map.iter().map(|(k, v)| (k.clone(), value(v))).collect()
}

fn value(v: &Json) -> Value {
    match v {
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::Str(s.clone()),
        Json::Array(a) => Value::List(a.iter().map(value).collect()),
        other => Value::Str(other.to_string()),
    }
}
