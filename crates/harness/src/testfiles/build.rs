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
use crate::scene::steps::{Step, StepKind};
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

/// Why a described class is no scene.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unbuilt {
    /// It does not fit what scenes runs (a level-3 orchestration outside
    /// the steps' model): listed as not run, with this reason.
    #[error("{0}")]
    NotRun(String),
    /// It is wrong: a load failure.
    #[error("{0}")]
    Problem(ClassProblem),
}

impl From<ClassProblem> for Unbuilt {
    fn from(p: ClassProblem) -> Self {
        Unbuilt::Problem(p)
    }
}

impl From<String> for Unbuilt {
    fn from(s: String) -> Self {
        Unbuilt::Problem(ClassProblem(s))
    }
}

impl From<&str> for Unbuilt {
    fn from(s: &str) -> Self {
        Unbuilt::Problem(s.into())
    }
}

/// A level-3 class whose tasks do not map onto steps.
fn misfit(why: ClassProblem) -> Unbuilt {
    Unbuilt::NotRun(format!("level 3: {why}"))
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
    /// Level 3: its own `test_run(self, st_worker)` is recorded (its
    /// cases' tensors and tasks) and replayed to judge.
    #[serde(default)]
    replay: bool,
    #[serde(default)]
    overrides: Vec<String>,
    #[serde(default)]
    own_tests: Vec<String>,
    orchestration: Option<OrchDesc>,
    #[serde(default)]
    incores: Vec<IncoreDesc>,
    /// Level 3: the class's callables.
    l3: Option<L3Desc>,
    cases: Vec<CaseDesc>,
}

/// A level-3 class's `CALLABLE`: whether its orchestration is a Python
/// function (which the driver records), its chip callables and the names
/// of its sub callables.
#[derive(Debug, Deserialize)]
struct L3Desc {
    orchestration: bool,
    chips: Vec<ChipDesc>,
    subs: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct ChipDesc {
    name: Option<String>,
    orchestration: OrchDesc,
    #[serde(default)]
    incores: Vec<IncoreDesc>,
}

/// One task a level-3 orchestration submitted, as the driver recorded it.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum TaskDesc {
    /// `submit_next_level` (one worker) or `submit_next_level_group`:
    /// `args[j]` goes to `workers[j]`.
    Chip {
        callable: String,
        workers: Vec<usize>,
        args: Vec<TaskArgsDesc>,
    },
    /// `submit_sub`.
    Sub {
        callable: String,
        args: TaskArgsDesc,
    },
}

#[derive(Debug, Deserialize, PartialEq)]
struct TaskArgsDesc {
    tensors: Vec<TaskTensor>,
    scalars: Vec<u64>,
}

/// A task's tensor: the case's TensorArg it names and its tag (`input`,
/// `output`, `inout`, `output_existing`, `no_dep`).
#[derive(Debug, Deserialize, PartialEq)]
struct TaskTensor {
    name: String,
    tag: String,
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
    /// Level 3: the tasks its orchestration submitted, in order.
    plan: Option<Vec<TaskDesc>>,
    /// Level 3: why its orchestration does not map onto steps.
    not_run: Option<String>,
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
    if desc.level != 2 && desc.level != 3 {
        return Some(format!(
            "level {}: scenes runs level-2 and level-3 classes",
            desc.level
        ));
    }
    if desc.level == 3 {
        if !desc.replay && desc.overrides.iter().any(|m| m == "test_run") {
            return Some(
                "level 3: its own test_run takes more than st_worker (pytest fixtures \
                 scenes does not provide)"
                    .into(),
            );
        }
        if !desc.replay && !desc.l3.as_ref().is_some_and(|l| l.orchestration) {
            return Some(
                "level 3: CALLABLE has no orchestration function to map onto steps".into(),
            );
        }
        if let Some((c, why)) = desc
            .cases
            .iter()
            .find_map(|c| c.not_run.as_ref().map(|w| (c, w)))
        {
            return Some(format!("level 3: case {}: {why}", c.name));
        }
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

/// Who judges the class's cases.
fn judge(desc: &ClassDesc) -> crate::scene::OriginJudge {
    use crate::scene::OriginJudge;
    if desc.replay {
        OriginJudge::TestRun
    } else if desc.compare_override {
        OriginJudge::CompareOutputs
    } else {
        OriginJudge::Golden
    }
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
pub(crate) fn scene(ctx: &FileContext, desc: &ClassDesc, name: &str) -> Result<Scene, Unbuilt> {
    let dir = ctx.file.parent().map(PathBuf::from).unwrap_or_default();
    let runtime = match desc.runtime.as_deref() {
        Some(r) => SimplerRuntime::from_str(r).map_err(|e| ClassProblem(e.to_string()))?,
        None => return Err("@scene_test names no runtime".into()),
    };
    // The first case that made its arguments (and, at level 3, its plan)
    // fixes the names, directions and kinds; every other one must agree.
    // A class none of whose cases the run may select (other platforms,
    // manual ones) has no arguments: it is listed, never run.
    let no_args = Vec::new();
    let first = desc
        .cases
        .iter()
        .find_map(|c| c.args.as_ref())
        .unwrap_or(&no_args);
    let plan = l3_plan(desc).map_err(misfit)?;
    let (orch, incore_descs) = match desc.level {
        3 => {
            let chip = l3_chip(desc, plan).map_err(misfit)?;
            (&chip.orchestration, &chip.incores[..])
        }
        _ => (
            desc.orchestration
                .as_ref()
                .ok_or("CALLABLE has no orchestration")?,
            &desc.incores[..],
        ),
    };
    let source = orch
        .source
        .as_deref()
        .ok_or("CALLABLE[\"orchestration\"] has no source")?;
    let entry = entry_defines(orch)?;
    let signature = signature(orch)?;
    let incores = incore_descs
        .iter()
        .enumerate()
        .map(|(i, k)| incore(i, k))
        .collect::<Result<Vec<_>, _>>()?;
    for file in std::iter::once(source).chain(incores.iter().filter_map(|k| k.source.to_str())) {
        if !std::path::Path::new(file).is_file() {
            return Err(format!("source {file} does not exist").into());
        }
    }

    let (tensors, scalars, steps, ranks) = match plan {
        // Level 3: directions come from the tasks' tags.
        Some(plan) => {
            let all_in = vec![ArgDirection::In; first.len()];
            let (mut tensors, scalars) = arg_specs(first, &all_in)?;
            let (steps, ranks) = l3_steps(plan, &mut tensors, &signature, desc).map_err(misfit)?;
            (tensors, scalars, steps, ranks)
        }
        None => {
            let (tensors, scalars) = arg_specs(first, &signature)?;
            (tensors, scalars, Vec::new(), 1)
        }
    };
    let tol = Tolerance {
        rtol: desc.rtol,
        atol: desc.atol,
        equal_nan: false,
    };
    let mut cases = Vec::with_capacity(desc.cases.len());
    for c in &desc.cases {
        let args = c.args.as_deref().unwrap_or(first);
        let mut case = case(c, args, &tensors, &scalars, tol)?;
        if desc.level == 3 {
            case.group = Some(crate::scene::ranks::CaseGroup {
                ranks,
                window: 0,
                window_tensor: None,
            });
        }
        cases.push(case);
    }
    let mut platforms: Vec<String> = Vec::new();
    for p in desc.cases.iter().flat_map(|c| &c.platforms) {
        if !platforms.contains(p) {
            platforms.push(p.clone());
        }
    }
    // Level 2: the scene's tensors are the orchestration's arguments; level
    // 3: each chip step passes the tensors it binds in the signature's
    // order.
    let mut full_signature: Vec<ArgDirection> = match desc.level {
        3 => signature,
        _ => tensors.iter().map(|t| t.direction).collect(),
    };
    full_signature.extend(scalars.iter().map(|_| ArgDirection::Scalar));
    let memory = cases.iter().filter_map(|c| c.device_memory).max();
    Ok(Scene {
        name: name.to_owned(),
        dir,
        manifest: ctx.file.clone(),
        level: desc.level,
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
        group: (desc.level == 3).then_some(crate::scene::ranks::GroupSpec {
            ranks: Dim::Fixed(ranks),
            window: crate::scene::ranks::WindowSpec::Bytes(Dim::Fixed(0)),
        }),
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
        steps,
        origin: Some(ctx.origin(&desc.name, judge(desc))),
    })
}

/// The orchestration's signature.
fn signature(orch: &OrchDesc) -> Result<Vec<ArgDirection>, ClassProblem> {
    orch.signature
        .iter()
        .map(|d| match d.as_str() {
            "in" => Ok(ArgDirection::In),
            "out" => Ok(ArgDirection::Out),
            "inout" => Ok(ArgDirection::Inout),
            other => Err(format!(
                "CALLABLE[\"orchestration\"][\"signature\"] holds {other}; expected D.IN, D.OUT or D.INOUT"
            )
            .into()),
        })
        .collect()
}

/// The tasks a level-3 class's orchestration submits: the first planned
/// case's, which every other planned case must repeat (the steps are the
/// class's); `None` at level 2 or when the run plans no case of it.
fn l3_plan(desc: &ClassDesc) -> Result<Option<&[TaskDesc]>, ClassProblem> {
    if desc.level != 3 {
        return Ok(None);
    }
    let mut plans = desc
        .cases
        .iter()
        .filter_map(|c| c.plan.as_deref().map(|p| (c, p)));
    let Some((_, first)) = plans.next() else {
        return Ok(None);
    };
    for (c, p) in plans {
        if p != first {
            return Err(format!(
                "case {}: its orchestration submits other tasks than the first case's; \
                 scenes runs one sequence of steps per class",
                c.name
            )
            .into());
        }
    }
    Ok(Some(first))
}

/// The chip callable a level-3 class runs: the one its tasks submit (one
/// per class), else (no case planned) its first.
fn l3_chip<'d>(
    desc: &'d ClassDesc,
    plan: Option<&[TaskDesc]>,
) -> Result<&'d ChipDesc, ClassProblem> {
    let l3 = desc.l3.as_ref().ok_or("CALLABLE has no callables")?;
    let mut used: Vec<&str> = Vec::new();
    for task in plan.unwrap_or_default() {
        if let TaskDesc::Chip { callable, .. } = task
            && !used.contains(&callable.as_str())
        {
            used.push(callable);
        }
    }
    match used.as_slice() {
        [] if plan.is_some() => {
            Err("its orchestration submits no chip task (submit_next_level)".into())
        }
        [] => l3.chips.first().ok_or_else(|| {
            "CALLABLE[\"callables\"] has no chip callable (one with an orchestration)".into()
        }),
        [one] => l3
            .chips
            .iter()
            .find(|c| c.name.as_deref() == Some(*one))
            .ok_or_else(|| format!("chip callable `{one}` is not in CALLABLE[\"callables\"]").into()),
        many => Err(format!(
            "its orchestration submits {} chip callables ({}); scenes runs one chip callable per class",
            many.len(),
            many.join(", ")
        )
        .into()),
    }
}

/// A level-3 plan as the scene's steps and its ranks: a chip task is a
/// chip step on the whole group (rank r gets worker r's arguments), a
/// sub task a Python host step calling the sub callable. Each task's tags
/// make the step's reads (`input`, `inout`, `no_dep`) and writes
/// (`output`, `output_existing`, `inout`); a tensor some task writes
/// becomes `inout`: its value before the first write is what
/// generate_args made, as the original's shared tensor holds it.
fn l3_steps(
    plan: &[TaskDesc],
    tensors: &mut [TensorSpec],
    signature: &[ArgDirection],
    desc: &ClassDesc,
) -> Result<(Vec<Step>, usize), ClassProblem> {
    let subs: &[String] = desc.l3.as_ref().map_or(&[], |l| &l.subs);
    let mut ranks: Option<usize> = None;
    let mut written: Vec<usize> = Vec::new();
    let mut steps = Vec::with_capacity(plan.len());
    for (k, task) in plan.iter().enumerate() {
        let what = format!("task {k} of the orchestration");
        let mut step = Step {
            kind: StepKind::Chip {
                function: SIMPLER_ENTRY.to_owned(),
            },
            reads: Vec::new(),
            writes: Vec::new(),
            bind: Vec::new(),
            scalars: Vec::new(),
        };
        let mut tag = |step: &mut Step, t: usize, tag: &str| -> Result<bool, ClassProblem> {
            let (reads, writes) = match tag {
                "input" | "no_dep" => (true, false),
                "output" | "output_existing" => (false, true),
                "inout" => (true, true),
                other => return Err(format!("{what}: tensor tag {other} is not known").into()),
            };
            if reads && !step.reads.contains(&t) {
                step.reads.push(t);
            }
            if writes && !step.writes.contains(&t) {
                step.writes.push(t);
            }
            if writes && !written.contains(&t) {
                written.push(t);
            }
            Ok(writes)
        };
        let index = |name: &str| {
            tensors.iter().position(|t| t.name == name).ok_or_else(|| {
                ClassProblem(format!(
                    "{what} names tensor `{name}`, which generate_args does not make"
                ))
            })
        };
        match task {
            TaskDesc::Chip { workers, args, .. } => {
                let mut order: Vec<usize> = (0..workers.len()).collect();
                order.sort_by_key(|&j| workers[j]);
                if order.iter().enumerate().any(|(r, &j)| workers[j] != r)
                    || args.len() != workers.len()
                {
                    return Err(format!(
                        "{what} runs on workers {workers:?}; scenes runs each chip task on every \
                         worker of the group (0..n), as one step"
                    )
                    .into());
                }
                match ranks {
                    Some(r) if r != workers.len() => {
                        return Err(format!(
                            "{what} runs on {} workers, an earlier one on {r}; scenes runs every \
                             chip task on the whole group",
                            workers.len()
                        )
                        .into());
                    }
                    _ => ranks = Some(workers.len()),
                }
                let mut outs: Vec<usize> = Vec::new();
                for &j in &order {
                    let a = &args[j];
                    if a.tensors.len() != signature.len() {
                        return Err(format!(
                            "{what}: worker {} gets {} tensors; the orchestration's signature has {}",
                            workers[j],
                            a.tensors.len(),
                            signature.len()
                        )
                        .into());
                    }
                    let mut bound = Vec::with_capacity(a.tensors.len());
                    for (i, arg) in a.tensors.iter().enumerate() {
                        let t = index(&arg.name)?;
                        if tag(&mut step, t, &arg.tag)? && signature[i].is_output() {
                            if outs.contains(&t) {
                                return Err(format!(
                                    "{what}: two of its arguments write `{}`",
                                    arg.name
                                )
                                .into());
                            }
                            outs.push(t);
                        }
                        bound.push(t);
                    }
                    step.bind.push(bound);
                }
                // The ranks' arguments are stacked per position: each
                // position holds one dtype and shape across the ranks.
                for i in 0..signature.len() {
                    let a = &tensors[step.bind[0][i]];
                    if let Some(b) = step
                        .bind
                        .iter()
                        .map(|b| &tensors[b[i]])
                        .find(|b| b.dtype != a.dtype || b.shape != a.shape)
                    {
                        return Err(format!(
                            "{what}: argument {i} is `{}` on worker 0 and `{}` of another dtype \
                             or shape on another worker; scenes needs them alike",
                            a.name, b.name
                        )
                        .into());
                    }
                }
            }
            TaskDesc::Sub { callable, args } => {
                if !subs.contains(callable) {
                    return Err(format!(
                        "{what} submits `{callable}`, which is no sub callable of CALLABLE"
                    )
                    .into());
                }
                let mut bound = Vec::with_capacity(args.tensors.len());
                for arg in &args.tensors {
                    let t = index(&arg.name)?;
                    tag(&mut step, t, &arg.tag)?;
                    if !bound.contains(&t) {
                        bound.push(t);
                    }
                }
                step.bind.push(bound);
                step.scalars.clone_from(&args.scalars);
                step.kind = StepKind::HostPython {
                    function: callable.clone(),
                };
            }
        }
        steps.push(step);
    }
    for t in written {
        tensors[t].direction = ArgDirection::Inout;
    }
    Ok((steps, ranks.unwrap_or(1)))
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
