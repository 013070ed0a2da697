//! The scene model: `scene.toml` parsed, validated and resolved.
//!
//! A scene is a directory holding `scene.toml` and its C sources. Everything a
//! run needs is declared there; the only Rust a scene may need is its golden,
//! registered by name in the scenes package. Validation happens once, at load,
//! so later stages can trust the model: every problem names the file and the
//! field, and a load reports all of them at once ([`SceneError::Invalid`]).
//!
//! The rooms: `raw` (what serde reads), `validate` (raw -> model, one
//! file per part of the scene), [`error`], [`dtype`] (dtype names and
//! ranges, also used by the fixture stage) and [`compare_spec`] (a
//! tensor's `compare` as written; judging is [`crate::compare`]'s).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use scene_golden::{DType, Init, Tolerance};
use scene_kernels::CoreType;
use serde::Deserialize;

use crate::compare::Comparison;
use crate::scene::expr::{Expr, ExprError, Num, Params, Value};
use crate::scene::ranks::{CaseGroup, GroupSpec};
use crate::scene::shape::Dim;

pub mod compare_spec;
pub mod dtype;
pub mod error;
pub mod expr;
pub mod ranks;
mod raw;
pub mod shape;
pub mod steps;
mod validate;

#[cfg(test)]
mod tests;

pub use compare_spec::{ArgSpec, CompareSpec};
pub use dtype::{dtype_from_name, int_range};
pub use error::{Problem, SceneError};

/// Platforms that are real hardware: a case may name them (it is listed
/// for completeness) but the built-in simulators never run it.
pub const HARDWARE_PLATFORMS: [&str; 2] = ["a2a3", "a5"];

/// Direction of one orchestration argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgDirection {
    In,
    Out,
    Inout,
    Scalar,
}

impl ArgDirection {
    /// Whether the device writes this argument (so it is compared).
    pub fn is_output(self) -> bool {
        matches!(self, Self::Out | Self::Inout)
    }
}

impl fmt::Display for ArgDirection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::In => "in",
            Self::Out => "out",
            Self::Inout => "inout",
            Self::Scalar => "scalar",
        })
    }
}

/// A number, or an expression of the case params (see [`crate::scene::expr`]),
/// as `scene.toml` wrote it.
#[derive(Clone, Debug, PartialEq)]
pub enum NumSpec {
    Int(i64),
    Float(f64),
    Expr { text: String, expr: Expr },
}

impl NumSpec {
    /// The value in one case.
    pub fn eval(&self, params: &Params) -> Result<Num, ExprError> {
        match self {
            NumSpec::Int(i) => Ok(Num::Int(*i)),
            NumSpec::Float(f) => Ok(Num::Float(*f)),
            NumSpec::Expr { expr, .. } => expr.eval(params),
        }
    }

    /// The param a bare `"N"` names, if that is all it is.
    pub fn param(&self) -> Option<&str> {
        match self {
            NumSpec::Expr {
                expr: Expr::Param(p),
                ..
            } => Some(p),
            _ => None,
        }
    }

    /// Canonical form for a field that used to be an `f64`: a literal is
    /// the same JSON number as before (bundle slot keys), an expression
    /// its text.
    pub fn identity_f64(&self) -> serde_json::Value {
        match self {
            NumSpec::Int(i) => serde_json::json!(*i as f64),
            NumSpec::Float(f) => serde_json::json!(f),
            NumSpec::Expr { text, .. } => serde_json::json!(text),
        }
    }

    /// Canonical form for a field that used to be an `i64`.
    pub fn identity_i64(&self) -> serde_json::Value {
        match self {
            NumSpec::Int(i) => serde_json::json!(i),
            NumSpec::Float(f) => serde_json::json!(f),
            NumSpec::Expr { text, .. } => serde_json::json!(text),
        }
    }
}

impl fmt::Display for NumSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NumSpec::Int(i) => write!(f, "{i}"),
            NumSpec::Float(x) => write!(f, "{x}"),
            NumSpec::Expr { text, .. } => f.write_str(text),
        }
    }
}

/// A scene's `device_memory` as written: a size, or an expression of the
/// case params giving bytes.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceMemorySpec {
    /// `"1 GiB"`, `"786 MB"` (the text kept for messages), or an integer.
    Size { text: String, bytes: u64 },
    /// `"BIG + 64 * 1024 * 1024"`.
    Expr(NumSpec),
}

impl fmt::Display for DeviceMemorySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceMemorySpec::Size { text, .. } => f.write_str(text),
            DeviceMemorySpec::Expr(e) => e.fmt(f),
        }
    }
}

/// A tensor's dtype: fixed, or named by a string param of each case.
#[derive(Clone, Debug, PartialEq)]
pub enum DTypeSpec {
    Fixed(DType),
    Param(String),
}

impl fmt::Display for DTypeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DTypeSpec::Fixed(d) => write!(f, "{d}"),
            DTypeSpec::Param(p) => f.write_str(p),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Manual {
    #[default]
    Never,
    Always,
    /// Manual on these platforms only.
    On(Vec<String>),
}

impl Manual {
    /// Whether the case is manual on `platform`.
    pub fn on(&self, platform: &str) -> bool {
        match self {
            Manual::Never => false,
            Manual::Always => true,
            Manual::On(list) => list.iter().any(|p| p == platform),
        }
    }
}

/// A tensor's `init`, as written: every number may be an expression of
/// the case params; each case resolves it to a [`scene_golden::Init`].
#[derive(Clone, Debug, PartialEq)]
pub enum InitSpec {
    Const {
        value: NumSpec,
    },
    Uniform {
        low: NumSpec,
        high: NumSpec,
    },
    Normal {
        mean: NumSpec,
        std: NumSpec,
    },
    Arange {
        start: NumSpec,
        step: NumSpec,
    },
    Zeros,
    Randint {
        low: NumSpec,
        high: NumSpec,
    },
    /// Seeded shuffles of `0..n` dealt column by column (an integer
    /// expression, `n >= 1`).
    Permutation {
        n: NumSpec,
    },
    /// One value per element from the case's list param `param`.
    List {
        param: String,
    },
}

/// One validated scene.
#[derive(Clone, Debug)]
pub struct Scene {
    pub name: String,
    /// The scene directory (absolute).
    pub dir: PathBuf,
    /// `scene.toml` (absolute), for error messages.
    pub manifest: PathBuf,
    pub level: u32,
    pub platforms: Vec<String>,
    /// The registered golden's name; for a Python golden `python:<file>`
    /// (the file as written in `scene.toml`).
    pub golden: String,
    /// Python goldens and fixtures (absolute paths), when the scene names
    /// them.
    pub python: PythonFiles,
    pub tolerance: ToleranceSpec,
    pub devices: usize,
    /// `device_memory` as written (each case's value is
    /// [`Case::device_memory`]); `None`: the platform's, else the default.
    pub device_memory: Option<DeviceMemorySpec>,
    /// Level 3: the rank group (`ranks`, `[comm] window`).
    pub group: Option<GroupSpec>,
    pub orchestration: Orchestration,
    pub incores: Vec<Incore>,
    /// How the scene's hosted kernels take their arguments (`args`).
    pub args: scene_kernels::ArgsConvention,
    /// The original project's runtime variant the scene is written for
    /// (`runtime`; default `tensormap_and_ringbuffer`): with a checkout of
    /// the original named, whose headers its `chip_tensor` kernels get.
    pub runtime: crate::simpler::SimplerRuntime,
    pub tensors: Vec<TensorSpec>,
    pub scalars: Vec<ScalarSpec>,
    /// `[derived]`: params computed per case from the case's params, in
    /// file order.
    pub derived: Vec<Derived>,
    pub cases: Vec<Case>,
    /// Level 3: `[[steps]]`, the host level's chip runs and host
    /// functions in order ([`steps`]); empty: one chip run of the
    /// orchestration, as a scene without steps has always been run.
    pub steps: Vec<steps::Step>,
    /// A class of the original project's test file rather than a
    /// `scene.toml` (issue 40, [`crate::testfiles`]): its fixtures,
    /// golden and comparison are the class's own methods.
    pub origin: Option<std::sync::Arc<TestOrigin>>,
}

/// The `SceneTestCase` class of a `test_*.py` file a scene was made from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestOrigin {
    /// The test file (absolute).
    pub file: PathBuf,
    pub class: String,
    /// Its module name from the checkout root (`tests.st.a2a3.x.test_x`,
    /// as the original's pytest names it), when it is under one.
    pub module: Option<String>,
    /// What goes first on the worker's `sys.path`: our compatibility
    /// packages, the checkout root, the file's directory.
    pub sys_path: Vec<PathBuf>,
    /// The checkout (`--simpler-root`), for `simpler_setup.goldens`.
    pub simpler_root: Option<PathBuf>,
    /// Who judges a case's outputs.
    pub judge: OriginJudge,
}

/// Who judges the outputs of a case made from a test file of the original.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OriginJudge {
    /// Each output against the golden `compute_golden` wrote, by the
    /// class's `RTOL` / `ATOL`.
    #[default]
    Golden,
    /// The class overrides `compare_outputs`: it judges every output at
    /// once.
    CompareOutputs,
    /// A level-3 class's own `test_run(self, st_worker)`, replayed with
    /// the device's outputs: its asserts are the verdict (it has no
    /// golden).
    TestRun,
}

/// One `[derived]` param: a name and the expression that computes it in
/// every case (after the case's params and the derived params above it).
#[derive(Clone, Debug, PartialEq)]
pub struct Derived {
    pub name: String,
    pub value: NumSpec,
}

/// The Python files a scene takes its golden and / or fixtures from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PythonFiles {
    /// `golden = { python = "..." }`: defines `compute_golden(tensors, params)`.
    pub golden: Option<PathBuf>,
    /// `fixtures = { python = "..." }`: defines `generate_inputs(params)`.
    pub fixtures: Option<PathBuf>,
    /// What they need installed, as pip requirement specifiers
    /// (`requirements = [...]`, else `requirements.txt` beside the golden
    /// file); empty = the default, [`crate::golden::python::provision::DEFAULT_REQUIREMENTS`].
    pub requirements: Vec<String>,
}

impl PythonFiles {
    pub fn any(&self) -> bool {
        self.golden.is_some() || self.fixtures.is_some()
    }
}

/// Scene-level tolerance overrides; unset fields take the dtype default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToleranceSpec {
    pub rtol: Option<NumSpec>,
    pub atol: Option<NumSpec>,
    pub equal_nan: bool,
}

#[derive(Clone, Debug)]
pub struct Orchestration {
    /// Source path relative to the scene directory.
    pub source: PathBuf,
    /// The source's entry function: `function` of scene.toml, or
    /// `aicpu_orchestration_entry` for the original's API.
    pub function: String,
    /// The API the source is written against.
    pub api: OrchestrationApi,
    pub signature: Vec<ArgDirection>,
    pub include_dirs: Vec<PathBuf>,
    pub defines: Vec<(String, String)>,
}

/// What an orchestration source is written against (`[orchestration]
/// api`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OrchestrationApi {
    /// `scene_orch.h`: the entry named by `function` gets the context and
    /// the run's arguments.
    #[default]
    Scene,
    /// The original's `pto_orchestration_api.h` (ours, in
    /// `include/simpler/`): `aicpu_orchestration_entry(const ChipTaskArgs&)`
    /// and `aicpu_orchestration_config`, called through the header's
    /// adapter entry.
    Simpler,
}

impl OrchestrationApi {
    pub const NAMES: [&'static str; 2] = ["scene", "simpler"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "scene" => Some(Self::Scene),
            "simpler" => Some(Self::Simpler),
            _ => None,
        }
    }
}

/// The entry every original-API orchestration has.
pub const SIMPLER_ENTRY: &str = "aicpu_orchestration_entry";
/// The symbol the runtime calls for it: the adapter
/// `include/simpler/pto_orchestration_api.h` defines.
pub const SIMPLER_ADAPTER_SYMBOL: &str = "scene_simpler_orchestration";
/// The original's orchestration language standard (its toolchain builds
/// orchestrations with `-std=c++17`).
pub const SIMPLER_ORCH_FLAGS: [&str; 1] = ["-std=c++17"];
/// Where our `pto_orchestration_api.h` is, under the ABI include dir.
pub const SIMPLER_INCLUDE_SUBDIR: &str = "simpler";

impl Orchestration {
    /// The symbol the runtime calls in the built shared object.
    pub fn entry_symbol(&self) -> &str {
        self.symbol_of(&self.function)
    }

    /// The symbol the runtime calls to run `function` of this
    /// orchestration (a level-3 chip step's): the function itself, or,
    /// for the original's API, the adapter, which calls the function the
    /// test file's class names.
    pub fn symbol_of<'a>(&'a self, function: &'a str) -> &'a str {
        match self.api {
            OrchestrationApi::Scene => function,
            OrchestrationApi::Simpler => SIMPLER_ADAPTER_SYMBOL,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Incore {
    pub func_id: u32,
    pub name: String,
    pub core: CoreType,
    /// An image kernel, or a hosted one and its argument convention
    /// (`build`, `args`; issue 29); `None` when neither the incore nor the
    /// scene says: the platform's `incore_build` decides ([`Incore::kind_on`]).
    pub kind: Option<scene_kernels::IncoreKind>,
    pub source: PathBuf,
    pub include_dirs: Vec<PathBuf>,
    pub defines: Vec<(String, String)>,
}

pub use crate::platform::IncoreBuild;

impl Incore {
    /// This incore's kind on a platform whose default build is `default`
    /// (hosted kernels take the scene's argument convention `args`).
    pub fn kind_on(
        &self,
        default: IncoreBuild,
        args: scene_kernels::ArgsConvention,
    ) -> scene_kernels::IncoreKind {
        self.kind.unwrap_or(match default {
            IncoreBuild::Image => scene_kernels::IncoreKind::Image,
            IncoreBuild::Hosted => scene_kernels::IncoreKind::Hosted(args),
        })
    }
}

#[derive(Clone, Debug)]
pub struct TensorSpec {
    pub name: String,
    pub dtype: DTypeSpec,
    pub shape: Vec<Dim>,
    pub init: InitSpec,
    pub seed: u64,
    pub direction: ArgDirection,
    pub rtol: Option<NumSpec>,
    pub atol: Option<NumSpec>,
    /// How the output is judged ([`crate::compare`]).
    pub compare: CompareSpec,
    /// A skipped output may hold NaN / inf.
    pub allow_nonfinite: bool,
    /// Never compared (in any case).
    pub skip_golden: bool,
    /// Level 3: leading rank dimension, slice r to rank r.
    pub per_rank: bool,
}

#[derive(Clone, Debug)]
pub struct ScalarSpec {
    pub name: String,
    pub dtype: DType,
    pub value: NumSpec,
}

#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    /// The case's params as written (serialised as before: an integer
    /// param is a JSON number).
    pub params: Params,
    /// The params plus the scene's `[derived]` values in this case: what
    /// shapes, fixtures, scalars, tolerances and goldens see. Equal to
    /// `params` in a scene without `[derived]`.
    pub values: Params,
    /// Per-case `init` overrides by tensor name (as written; the resolved
    /// fixtures are in `tensors`).
    pub init: BTreeMap<String, InitSpec>,
    pub platforms: Option<Vec<String>>,
    pub manual: Manual,
    pub seed: u64,
    /// Every tensor of the scene as this case resolves it, in signature
    /// order (validated at load).
    pub tensors: Vec<CaseTensor>,
    /// Every scalar's value in this case, in signature order (checked at
    /// load against its dtype).
    pub scalars: Vec<Num>,
    /// Level 3: ranks and window size in this case.
    pub group: Option<CaseGroup>,
    /// The scene's `device_memory` in this case, in bytes (per rank at
    /// level 3: each rank's device has that much).
    pub device_memory: Option<u64>,
}

impl Case {
    /// The integer params, derived ones included (what goldens read with
    /// `param` / `size`).
    pub fn int_params(&self) -> BTreeMap<String, i64> {
        self.values
            .iter()
            .filter_map(|(k, v)| match v {
                Value::Int(i) => Some((k.clone(), *i)),
                _ => None,
            })
            .collect()
    }
}

/// One tensor as a case resolves it: dtype, shape, fixture and tolerance.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseTensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub init: Init,
    /// Per-tensor, then scene, then dtype default.
    pub tolerance: Tolerance,
    /// How this output is judged in this case (`None` for inputs).
    pub comparison: Option<Comparison>,
}

impl Scene {
    /// Loads and validates `<dir>/scene.toml`.
    pub fn load(dir: &Path) -> Result<Scene, SceneError> {
        let dir = dir.canonicalize().map_err(|source| SceneError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let manifest = dir.join("scene.toml");
        let text = std::fs::read_to_string(&manifest).map_err(|source| SceneError::Read {
            path: manifest.clone(),
            source,
        })?;
        Self::from_toml(&dir, &manifest, &text)
    }

    /// Parses and validates scene text; `dir` resolves relative sources.
    pub fn from_toml(dir: &Path, manifest: &Path, text: &str) -> Result<Scene, SceneError> {
        let raw: raw::RawScene = toml::from_str(text).map_err(|e| SceneError::Parse {
            path: manifest.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        validate::Validator::new(dir, manifest).validate(raw)
    }

    /// The tolerance of tensor `index` (in signature order) in `case`:
    /// per-tensor override, then scene level, then the dtype default.
    pub fn tolerance_for(&self, case: &Case, index: usize) -> Tolerance {
        case.tensors
            .get(index)
            .map(|t| t.tolerance)
            .unwrap_or_else(|| Tolerance::default_for(DType::F32))
    }

    /// How output `index` (in signature order) is judged in `case`
    /// (`None` for an input).
    pub fn comparison_for<'c>(&self, case: &'c Case, index: usize) -> Option<&'c Comparison> {
        case.tensors.get(index).and_then(|t| t.comparison.as_ref())
    }

    /// Whether `case` compares no output at all (every one is skipped):
    /// then its golden is not called.
    pub fn case_skips_every_output(&self, case: &Case) -> bool {
        case.tensors
            .iter()
            .all(|t| matches!(t.comparison, None | Some(Comparison::Skipped)))
    }

    /// Whether `case` runs on `platform`.
    pub fn case_enabled_on(&self, case: &Case, platform: &str) -> bool {
        self.case_platforms(case).iter().any(|p| p == platform)
    }

    /// The platforms `case` is for: its own list, else the scene's.
    pub fn case_platforms<'a>(&'a self, case: &'a Case) -> &'a [String] {
        case.platforms.as_deref().unwrap_or(&self.platforms)
    }

    /// Whether `case` is for hardware only (no simulator runs it): listed
    /// for completeness, never run here.
    pub fn case_hardware_only(&self, case: &Case) -> bool {
        self.case_platforms(case)
            .iter()
            .all(|p| HARDWARE_PLATFORMS.contains(&p.as_str()))
    }

    /// Source and include paths of this scene relative to `root`, falling
    /// back to absolute paths when the scene lives outside it.
    ///
    /// `..` is resolved lexically, so a kernel shared by two scenes
    /// (`../common/add.c`) has one path, and therefore one cache key.
    pub fn relative_to(&self, root: &Path, path: &Path) -> PathBuf {
        let abs = crate::config::lexical(&self.dir.join(path));
        abs.strip_prefix(root).map(Path::to_path_buf).unwrap_or(abs)
    }
}

/// Loads every scene directory under `scenes_dir` (each holding a
/// `scene.toml`), sorted by name. Errors are collected per scene so one
/// malformed scene does not hide the others.
pub fn discover(scenes_dir: &Path) -> Result<Vec<Result<Scene, SceneError>>, SceneError> {
    let entries = std::fs::read_dir(scenes_dir).map_err(|source| SceneError::Read {
        path: scenes_dir.to_path_buf(),
        source,
    })?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("scene.toml").is_file())
        .collect();
    dirs.sort();
    Ok(dirs.iter().map(|d| Scene::load(d)).collect())
}
