//! The scene model: `scene.toml` parsed, validated and resolved.
//!
//! A scene is a directory holding `scene.toml` and its C sources. Everything a
//! run needs is declared there; the only Rust a scene may need is its golden,
//! registered by name in the scenes package. Validation happens once, at load,
//! so later stages can trust the model: every error names the file and the
//! field.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use scene_golden::{DType, Init, ListItem, Tolerance};
use scene_kernels::CoreType;
use serde::Deserialize;

use crate::comparison::{self, CompareSpec, Comparison};
use crate::expr::{Expr, ExprError, Num, Params, Value};
use crate::ranks::{CaseGroup, GroupSpec, MAX_RANKS};
use crate::shape::{Dim, ShapeError};

/// Platforms that are real hardware: a case may name them (it is listed
/// for completeness) but the built-in simulators never run it.
pub const HARDWARE_PLATFORMS: [&str; 2] = ["a2a3", "a5"];

/// Problems with a scene directory or its `scene.toml`.
#[derive(Debug, thiserror::Error)]
pub enum SceneError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: `{field}`: {message}")]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
}

impl SceneError {
    /// The name of the scene directory the error is about (the directory
    /// of the `scene.toml` named in the error, or the directory itself).
    pub fn scene_name(&self) -> String {
        let path = match self {
            SceneError::Read { path, .. } => path,
            SceneError::Parse { path, .. } | SceneError::Invalid { path, .. } => path,
        };
        let dir = if path.file_name().is_some_and(|n| n == "scene.toml") {
            path.parent()
        } else {
            Some(path.as_path())
        };
        dir.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "scenes".to_string())
    }
}

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

/// A number, or an expression of the case params (see [`crate::expr`]),
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

/// A number or an expression, as TOML holds it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
enum RawNum {
    Int(i64),
    Float(f64),
    Expr(String),
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

/// `manual = true`, `false`, or the platforms on which the case is manual.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
enum RawManual {
    All(bool),
    On(Vec<String>),
}

/// When a case runs only if asked (`--include-manual`) or named.
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

// ---------------------------------------------------------------------------
// Raw TOML form. `deny_unknown_fields` everywhere: a typo is an error, not a
// silently ignored key.

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScene {
    name: String,
    #[serde(default = "default_level")]
    level: u32,
    platforms: Vec<String>,
    golden: RawGolden,
    /// `fixtures = { python = "golden.py" }`: inputs from `generate_inputs`.
    fixtures: Option<RawPython>,
    /// What the Python golden / fixtures need installed (pip requirement
    /// specifiers); default `numpy`, or a `requirements.txt` beside the file.
    requirements: Option<Vec<String>>,
    rtol: Option<RawNum>,
    atol: Option<RawNum>,
    #[serde(default)]
    equal_nan: bool,
    #[serde(default = "default_devices")]
    devices: usize,
    /// Level 3: ranks of the group (a number or an expression).
    ranks: Option<RawDim>,
    /// Level 3: the communication domain.
    comm: Option<RawComm>,
    orchestration: RawOrchestration,
    #[serde(default)]
    incores: Vec<RawIncore>,
    #[serde(default)]
    tensors: Vec<RawTensor>,
    #[serde(default)]
    scalars: Vec<RawScalar>,
    #[serde(default)]
    derived: RawDerived,
    #[serde(default)]
    cases: Vec<RawCase>,
}

/// `[derived]` as written: names bound to numbers or expressions, in file
/// order (the TOML map is read in document order).
#[derive(Debug, Default)]
struct RawDerived(Vec<(String, RawNum)>);

impl<'de> Deserialize<'de> for RawDerived {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = RawDerived;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of derived params (NAME = number or expression)")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawDerived, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, RawNum>()? {
                    out.push((k, v));
                }
                Ok(RawDerived(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// `golden = "name"` (a registered Rust golden) or
/// `golden = { python = "golden.py" }`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawGolden {
    Registered(String),
    Python(RawPython),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPython {
    python: PathBuf,
}

fn default_level() -> u32 {
    2
}
fn default_devices() -> usize {
    1
}

/// `[comm]` of a level-3 scene.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawComm {
    /// Bytes of every rank's window (a number or an expression).
    window: RawDim,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOrchestration {
    source: PathBuf,
    function: String,
    signature: Vec<ArgDirection>,
    #[serde(default)]
    include_dirs: Vec<PathBuf>,
    #[serde(default)]
    defines: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIncore {
    func_id: u32,
    name: String,
    core: String,
    source: PathBuf,
    #[serde(default)]
    include_dirs: Vec<PathBuf>,
    #[serde(default)]
    defines: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTensor {
    name: String,
    dtype: String,
    shape: Vec<RawDim>,
    #[serde(default)]
    init: Option<RawInit>,
    #[serde(default)]
    seed: u64,
    rtol: Option<RawNum>,
    atol: Option<RawNum>,
    /// `"allclose"`, `"exact"` or `{ custom = "NAME", ... }`
    /// ([`crate::comparison`]).
    compare: Option<toml::Value>,
    #[serde(default)]
    allow_nonfinite: bool,
    #[serde(default)]
    skip_golden: bool,
    /// Level 3: a leading rank dimension, slice r to rank r.
    #[serde(default)]
    per_rank: bool,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawDim {
    Fixed(i64),
    Expr(String),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum RawInit {
    Const {
        value: RawNum,
    },
    Uniform {
        low: RawNum,
        high: RawNum,
    },
    Normal {
        #[serde(default = "zero")]
        mean: RawNum,
        #[serde(default = "one")]
        std: RawNum,
    },
    Arange {
        #[serde(default = "zero")]
        start: RawNum,
        #[serde(default = "one")]
        step: RawNum,
    },
    Zeros,
    Randint {
        low: RawNum,
        high: RawNum,
    },
    Permutation {
        n: RawNum,
    },
    List {
        param: String,
    },
}

fn zero() -> RawNum {
    RawNum::Float(0.0)
}
fn one() -> RawNum {
    RawNum::Float(1.0)
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScalar {
    name: String,
    dtype: String,
    value: RawNum,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    name: String,
    #[serde(default)]
    params: BTreeMap<String, Value>,
    platforms: Option<Vec<String>>,
    #[serde(default)]
    manual: Option<RawManual>,
    #[serde(default)]
    seed: Option<u64>,
    /// `true`, or a list of output tensors ([`crate::comparison`]).
    skip_golden: Option<toml::Value>,
    /// Per-case fixture overrides: tensor name -> `init` (read as TOML
    /// values first, so a bad kind names the case and the tensor).
    #[serde(default)]
    init: BTreeMap<String, toml::Value>,
}

// ---------------------------------------------------------------------------
// Validated model.

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
    /// Level 3: the rank group (`ranks`, `[comm] window`).
    pub group: Option<GroupSpec>,
    pub orchestration: Orchestration,
    pub incores: Vec<Incore>,
    pub tensors: Vec<TensorSpec>,
    pub scalars: Vec<ScalarSpec>,
    /// `[derived]`: params computed per case from the case's params, in
    /// file order.
    pub derived: Vec<Derived>,
    pub cases: Vec<Case>,
}

impl TensorSpec {
    /// What the comparison rules see of this tensor.
    fn info(&self) -> comparison::TensorInfo<'_> {
        comparison::TensorInfo {
            name: &self.name,
            output: self.direction.is_output(),
            direction: self.direction.to_string(),
            compare: &self.compare,
            allow_nonfinite: self.allow_nonfinite,
            skip_golden: self.skip_golden,
        }
    }
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
    /// file); empty = the default, [`crate::python::provision::DEFAULT_REQUIREMENTS`].
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
    pub function: String,
    pub signature: Vec<ArgDirection>,
    pub include_dirs: Vec<PathBuf>,
    pub defines: Vec<(String, String)>,
}

#[derive(Clone, Debug)]
pub struct Incore {
    pub func_id: u32,
    pub name: String,
    pub core: CoreType,
    pub source: PathBuf,
    pub include_dirs: Vec<PathBuf>,
    pub defines: Vec<(String, String)>,
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
    /// How the output is judged ([`crate::comparison`]).
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
        let raw: RawScene = toml::from_str(text).map_err(|e| SceneError::Parse {
            path: manifest.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        Validator { dir, manifest }.validate(raw)
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
        let abs = normalize(&self.dir.join(path));
        abs.strip_prefix(root).map(Path::to_path_buf).unwrap_or(abs)
    }
}

struct Validator<'a> {
    dir: &'a Path,
    manifest: &'a Path,
}

impl Validator<'_> {
    fn err(&self, field: impl Into<String>, message: impl Into<String>) -> SceneError {
        SceneError::Invalid {
            path: self.manifest.to_path_buf(),
            field: field.into(),
            message: message.into(),
        }
    }

    fn platform_list(&self, field: &str, list: &[String]) -> Result<(), SceneError> {
        if list.is_empty() {
            return Err(self.err(field, "must name at least one platform"));
        }
        for p in list {
            if p.parse::<crate::platform::BuiltinPlatform>().is_err()
                && !HARDWARE_PLATFORMS.contains(&p.as_str())
            {
                return Err(self.err(
                    field,
                    format!(
                        "unknown platform `{p}` (known: {}; hardware: {})",
                        crate::platform::BuiltinPlatform::known(),
                        HARDWARE_PLATFORMS.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Resolves `path` (relative to the scene directory) and checks it stays
    /// inside the scenes root, the scene directory's parent: scenes may share
    /// kernels and headers (`../common/add.c`), never reach outside.
    fn resolve_inside(&self, field: &str, path: &Path, what: &str) -> Result<PathBuf, SceneError> {
        if path.is_absolute() {
            return Err(self.err(
                field,
                format!(
                    "{what} `{}` must be relative to the scene directory",
                    path.display()
                ),
            ));
        }
        let joined = self.dir.join(path);
        let resolved = joined.canonicalize().map_err(|_| {
            self.err(
                field,
                format!(
                    "{what} `{}` not found in {}",
                    path.display(),
                    self.dir.display()
                ),
            )
        })?;
        let root = self.dir.parent().unwrap_or(self.dir);
        if !resolved.starts_with(root) {
            return Err(self.err(
                field,
                format!(
                    "{what} `{}` must be inside the scenes directory {}",
                    path.display(),
                    root.display()
                ),
            ));
        }
        Ok(resolved)
    }

    fn existing_file(&self, field: &str, path: &Path) -> Result<(), SceneError> {
        if !self.resolve_inside(field, path, "source file")?.is_file() {
            return Err(self.err(
                field,
                format!("source file `{}` is not a file", path.display()),
            ));
        }
        Ok(())
    }

    fn existing_dirs(&self, field: &str, dirs: &[PathBuf]) -> Result<(), SceneError> {
        for d in dirs {
            if !self.resolve_inside(field, d, "include dir")?.is_dir() {
                return Err(self.err(
                    field,
                    format!("include dir `{}` is not a directory", d.display()),
                ));
            }
        }
        Ok(())
    }

    /// A tolerance, when given, is a finite number >= 0: `nan` or `inf`
    /// would let any output pass.
    fn tolerance(
        &self,
        field: &str,
        prefix: &str,
        v: Option<&NumSpec>,
        params: &Params,
    ) -> Result<Option<f64>, SceneError> {
        let Some(spec) = v else { return Ok(None) };
        let v = spec
            .eval(params)
            .map_err(|e| self.err(field, format!("{prefix}{e}")))?
            .as_f64();
        if !(v >= 0.0 && v.is_finite()) {
            return Err(self.err(
                field,
                format!("{prefix}must be a finite number >= 0, got {v}"),
            ));
        }
        Ok(Some(v))
    }

    /// A name that becomes a file name (dumps, bundles): one plain path
    /// component.
    fn file_name(&self, field: &str, what: &str, name: &str) -> Result<(), SceneError> {
        scene_util::check_file_name(name)
            .map(|_| ())
            .map_err(|e| self.err(field, format!("`{name}` is not a valid {what} name: {e}")))
    }

    /// A scalar's value (a literal, or its value in one case) as its
    /// dtype passes it: in range and exact, or an error naming `field`.
    fn scalar_value(
        &self,
        field: &str,
        prefix: &str,
        name: &str,
        dtype: DType,
        value: Num,
    ) -> Result<(), SceneError> {
        let bad =
            |m: String| Err(self.err(field, format!("{prefix}scalar `{name}` ({dtype}): {m}")));
        match (value, int_range(dtype)) {
            (Num::Int(i), Some((lo, hi))) if i < lo || i > hi => {
                bad(format!("{i} is out of range ({lo}..={hi})"))
            }
            (Num::Int(_), Some(_)) => Ok(()),
            (Num::Float(f), Some(_)) => bad(format!(
                "{f} is not an integer (write an integer literal for an integer scalar)"
            )),
            (Num::Int(i), None) => {
                if float_exact(dtype, i) {
                    Ok(())
                } else {
                    bad(format!("{i} is not exactly representable"))
                }
            }
            (Num::Float(f), None) => {
                let max = if dtype == DType::F32 {
                    f64::from(f32::MAX)
                } else {
                    f64::MAX
                };
                if f.is_finite() && f.abs() <= max {
                    Ok(())
                } else {
                    bad(format!("{f} is not a finite {dtype}"))
                }
            }
        }
    }

    /// A number or an expression; a malformed expression is an error
    /// naming `field`.
    fn num(&self, field: &str, raw: RawNum) -> Result<NumSpec, SceneError> {
        Ok(match raw {
            RawNum::Int(i) => NumSpec::Int(i),
            RawNum::Float(f) => NumSpec::Float(f),
            RawNum::Expr(text) => {
                let expr = Expr::parse(&text).map_err(|e| self.err(field, e.to_string()))?;
                NumSpec::Expr { text, expr }
            }
        })
    }

    fn opt_num(&self, field: &str, raw: Option<RawNum>) -> Result<Option<NumSpec>, SceneError> {
        raw.map(|r| self.num(field, r)).transpose()
    }

    fn dtype(&self, field: &str, name: &str) -> Result<DType, SceneError> {
        dtype_from_name(name).ok_or_else(|| self.err(field, format!("unknown dtype `{name}`")))
    }

    /// The raw scene, checked field by field, as a [`Scene`]; the first
    /// problem found is the error, naming its field.
    fn validate(&self, raw: RawScene) -> Result<Scene, SceneError> {
        self.check_header(&raw)?;
        let tolerance = ToleranceSpec {
            rtol: self.opt_num("rtol", raw.rtol)?,
            atol: self.opt_num("atol", raw.atol)?,
            equal_nan: raw.equal_nan,
        };
        for (field, v) in [("rtol", &tolerance.rtol), ("atol", &tolerance.atol)] {
            if let Some(NumSpec::Int(_) | NumSpec::Float(_)) = v {
                self.tolerance(field, "", v.as_ref(), &Params::new())?;
            }
        }
        let o = raw.orchestration;
        self.check_orchestration(&o)?;
        let incores = self.incores(raw.incores)?;
        self.check_argument_count(&o.signature, raw.tensors.len(), raw.scalars.len())?;
        let mut arg_names = BTreeSet::new();
        let tensors = self.tensors(raw.tensors, &o.signature, &mut arg_names)?;
        let scalars = self.scalars(raw.scalars, &o.signature, tensors.len(), &mut arg_names)?;
        let derived = self.derived(raw.derived)?;
        let group = self.group(raw.level, raw.ranks, raw.comm, &tensors)?;
        let mut cases = self.cases(raw.cases, &tensors, &scalars, &tolerance, &derived)?;
        if let Some(g) = &group {
            for (i, c) in cases.iter_mut().enumerate() {
                c.group = Some(self.case_group(i, g, c, &tensors)?);
            }
        }
        let (golden, mut python) = self.python_files(raw.golden, raw.fixtures)?;
        python.requirements = self.requirements(raw.requirements, &python)?;
        Ok(Scene {
            name: raw.name,
            dir: self.dir.to_path_buf(),
            manifest: self.manifest.to_path_buf(),
            level: raw.level,
            platforms: raw.platforms,
            golden,
            python,
            tolerance,
            devices: raw.devices,
            group,
            orchestration: Orchestration {
                source: o.source,
                function: o.function,
                signature: o.signature,
                include_dirs: o.include_dirs,
                defines: o.defines.into_iter().collect(),
            },
            incores,
            tensors,
            scalars,
            derived,
            cases,
        })
    }

    /// `[derived]`: plain names, well-formed expressions, and every param
    /// an expression reads is a case param or a derived param above it.
    fn derived(&self, raw: RawDerived) -> Result<Vec<Derived>, SceneError> {
        let mut out: Vec<Derived> = Vec::with_capacity(raw.0.len());
        let names: Vec<&str> = raw.0.iter().map(|(n, _)| n.as_str()).collect();
        for (i, (name, value)) in raw.0.iter().enumerate() {
            let field = format!("derived.{name}");
            if !is_c_identifier(name) {
                return Err(self.err(
                    field,
                    format!("`{name}` is not a param name (letters, digits, `_`)"),
                ));
            }
            let value = self.num(&field, value.clone())?;
            if let NumSpec::Expr { expr, .. } = &value {
                for p in expr.params() {
                    if let Some(j) = names.iter().position(|n| *n == p)
                        && j >= i
                    {
                        let what = if j == i {
                            "itself".to_string()
                        } else {
                            format!("`derived.{p}`, which comes later")
                        };
                        return Err(self.err(
                            field,
                            format!(
                                "`{value}` refers to {what}: derived params are computed in \
                                 order, each from the case's params and the derived params \
                                 above it (a cycle or a forward reference)"
                            ),
                        ));
                    }
                }
            }
            out.push(Derived {
                name: name.clone(),
                value,
            });
        }
        Ok(out)
    }

    /// A case's params plus the `[derived]` values, computed in order;
    /// a case param that a derived one would shadow is an error.
    fn case_values(
        &self,
        i: usize,
        prefix: &str,
        params: &Params,
        derived: &[Derived],
    ) -> Result<Params, SceneError> {
        let mut values = params.clone();
        for d in derived {
            if params.contains_key(&d.name) {
                return Err(self.err(
                    format!("cases[{i}].params.{}", d.name),
                    format!(
                        "{prefix}param `{0}` clashes with `derived.{0}` (`{1}`): a derived \
                         param is computed, not given; drop one of them",
                        d.name, d.value
                    ),
                ));
            }
            let v = d
                .value
                .eval(&values)
                .map_err(|e| self.err(format!("derived.{}", d.name), format!("{prefix}{e}")))?;
            let v = match v {
                Num::Int(i) => Value::Int(i),
                Num::Float(f) if f.is_finite() => Value::Float(f),
                Num::Float(f) => {
                    return Err(self.err(
                        format!("derived.{}", d.name),
                        format!(
                            "{prefix}`{}` evaluates to {f}, not a finite number",
                            d.value
                        ),
                    ));
                }
            };
            values.insert(d.name.clone(), v);
        }
        Ok(values)
    }

    /// Per-case `init` overrides: each names an input tensor of the scene
    /// and is a valid `init` table.
    fn case_inits(
        &self,
        i: usize,
        prefix: &str,
        raw: BTreeMap<String, toml::Value>,
        tensors: &[TensorSpec],
    ) -> Result<BTreeMap<String, InitSpec>, SceneError> {
        let mut out = BTreeMap::new();
        for (name, value) in raw {
            let field = format!("cases[{i}].init.{name}");
            let Some(t) = tensors.iter().find(|t| t.name == name) else {
                let known: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
                return Err(self.err(
                    field,
                    format!(
                        "{prefix}no tensor `{name}` in the scene (tensors: {})",
                        known.join(", ")
                    ),
                ));
            };
            if t.direction == ArgDirection::Out {
                return Err(self.err(
                    field,
                    format!(
                        "{prefix}tensor `{name}` is an output (`out`): the device writes it, \
                         an init override is for inputs (`in`, `inout`)"
                    ),
                ));
            }
            if !value.is_table() {
                return Err(self.err(
                    field,
                    format!(
                        "{prefix}an init override is a table such as \
                         {{ kind = \"randint\", low = 0, high = 8 }}, got {} `{value}`",
                        value.type_str()
                    ),
                ));
            }
            let raw: RawInit = value.try_into().map_err(|e: toml::de::Error| {
                self.err(
                    &field,
                    format!("{prefix}{}", e.to_string().trim_end().replace('\n', " ")),
                )
            })?;
            out.insert(name, self.init_spec(&field, raw)?);
        }
        Ok(out)
    }

    /// The golden's name and the Python files (`golden = { python }`,
    /// `fixtures = { python }`), each a `.py` file inside the scenes root.
    fn python_files(
        &self,
        golden: RawGolden,
        fixtures: Option<RawPython>,
    ) -> Result<(String, PythonFiles), SceneError> {
        let file = |field: &str, raw: RawPython| -> Result<PathBuf, SceneError> {
            let field = format!("{field}.python");
            if raw.python.extension().is_none_or(|e| e != "py") {
                return Err(self.err(
                    &field,
                    format!("`{}` is not a `.py` file", raw.python.display()),
                ));
            }
            let resolved = self.resolve_inside(&field, &raw.python, "Python file")?;
            if !resolved.is_file() {
                return Err(self.err(
                    &field,
                    format!("Python file `{}` is not a file", raw.python.display()),
                ));
            }
            Ok(resolved)
        };
        let mut python = PythonFiles::default();
        let name = match golden {
            RawGolden::Registered(name) => name,
            RawGolden::Python(raw) => {
                let name = format!("python:{}", raw.python.display());
                python.golden = Some(file("golden", raw)?);
                name
            }
        };
        if let Some(raw) = fixtures {
            python.fixtures = Some(file("fixtures", raw)?);
        }
        Ok((name, python))
    }

    /// `requirements = [...]`, else the lines of `requirements.txt` beside
    /// the golden (or fixtures) file, else none (the default). Only
    /// requirement specifiers: a pip option (`-r`, `--index-url`) would
    /// make the set, and so the environment's key, depend on more than
    /// the text.
    fn requirements(
        &self,
        declared: Option<Vec<String>>,
        python: &PythonFiles,
    ) -> Result<Vec<String>, SceneError> {
        let beside = python
            .golden
            .as_ref()
            .or(python.fixtures.as_ref())
            .and_then(|f| f.parent())
            .map(|d| d.join("requirements.txt"));
        let (field, lines) = match declared {
            Some(list) => {
                if !python.any() {
                    return Err(self.err(
                        "requirements",
                        "the scene has no Python golden or fixtures to need them",
                    ));
                }
                if beside.as_ref().is_some_and(|b| b.is_file()) {
                    return Err(self.err(
                        "requirements",
                        "given both here and in requirements.txt beside the Python file; keep one",
                    ));
                }
                ("requirements".to_string(), list)
            }
            None => match beside.filter(|b| b.is_file()) {
                None => return Ok(Vec::new()),
                Some(file) => {
                    let text = std::fs::read_to_string(&file).map_err(|e| {
                        self.err("requirements", format!("{}: {e}", file.display()))
                    })?;
                    let lines = text
                        .lines()
                        .map(|l| match l.find(" #").or(l.starts_with('#').then_some(0)) {
                            Some(i) => l[..i].to_string(),
                            None => l.to_string(),
                        })
                        .filter(|l| !l.trim().is_empty())
                        .collect();
                    (file.display().to_string(), lines)
                }
            },
        };
        let mut out = Vec::new();
        for line in lines {
            let r = line.trim().to_string();
            if r.is_empty() || r.starts_with('-') || r.contains(['\n', '\r']) {
                return Err(self.err(
                    &field,
                    format!("`{line}` is not a requirement specifier (like `numpy>=1.26`); pip options are not supported"),
                ));
            }
            if !out.contains(&r) {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Name, level, devices, platforms and scene-wide tolerances.
    fn check_header(&self, raw: &RawScene) -> Result<(), SceneError> {
        let dir_name = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if raw.name != dir_name {
            return Err(self.err(
                "name",
                format!(
                    "`{}` must equal the scene directory name `{dir_name}`",
                    raw.name
                ),
            ));
        }
        if raw.level != 2 && raw.level != 3 {
            return Err(self.err(
                "level",
                format!(
                    "level {} is not supported (2 = one chip, 3 = a rank group of chips)",
                    raw.level
                ),
            ));
        }
        if raw.devices == 0 {
            return Err(self.err("devices", "must be at least 1"));
        }
        self.platform_list("platforms", &raw.platforms)?;

        Ok(())
    }

    fn check_orchestration(&self, o: &RawOrchestration) -> Result<(), SceneError> {
        self.existing_file("orchestration.source", &o.source)?;
        self.existing_dirs("orchestration.include_dirs", &o.include_dirs)?;
        if !is_c_identifier(&o.function) {
            return Err(self.err(
                "orchestration.function",
                format!("`{}` is not a C identifier", o.function),
            ));
        }

        Ok(())
    }

    /// Unique func_ids and names, known core types, existing sources.
    fn incores(&self, raw: Vec<RawIncore>) -> Result<Vec<Incore>, SceneError> {
        let mut func_ids = BTreeMap::new();
        let mut names = BTreeSet::new();
        let mut incores = Vec::with_capacity(raw.len());
        for (i, k) in raw.into_iter().enumerate() {
            let field = |f: &str| format!("incores[{i}].{f}");
            if k.func_id >= scene_device::abi::SCENE_MAX_FUNC_IDS {
                return Err(self.err(
                    field("func_id"),
                    format!(
                        "{} is out of range (0..{})",
                        k.func_id,
                        scene_device::abi::SCENE_MAX_FUNC_IDS
                    ),
                ));
            }
            if let Some(prev) = func_ids.insert(k.func_id, k.name.clone()) {
                return Err(self.err(
                    field("func_id"),
                    format!(
                        "duplicate func_id {} (kernels `{prev}` and `{}`)",
                        k.func_id, k.name
                    ),
                ));
            }
            if !names.insert(k.name.clone()) {
                return Err(self.err(field("name"), format!("duplicate kernel name `{}`", k.name)));
            }
            let core = k.core.parse::<CoreType>().map_err(|_| {
                self.err(
                    field("core"),
                    format!("`{}` is not a core type (aic | aiv)", k.core),
                )
            })?;
            self.existing_file(&field("source"), &k.source)?;
            self.existing_dirs(&field("include_dirs"), &k.include_dirs)?;
            incores.push(Incore {
                func_id: k.func_id,
                name: k.name,
                core,
                source: k.source,
                include_dirs: k.include_dirs,
                defines: k.defines.into_iter().collect(),
            });
        }
        if incores.is_empty() {
            return Err(self.err("incores", "a scene needs at least one incore kernel"));
        }

        Ok(incores)
    }

    /// Tensors then scalars map positionally onto the signature.
    fn check_argument_count(
        &self,
        signature: &[ArgDirection],
        n_tensors: usize,
        n_scalars: usize,
    ) -> Result<(), SceneError> {
        let n_args = n_tensors + n_scalars;
        if n_args != signature.len() {
            return Err(self.err(
                "orchestration.signature",
                format!(
                    "has {} entries but the scene declares {} tensors and {} scalars",
                    signature.len(),
                    n_tensors,
                    n_scalars
                ),
            ));
        }
        Ok(())
    }

    fn tensors(
        &self,
        raw: Vec<RawTensor>,
        signature: &[ArgDirection],
        arg_names: &mut BTreeSet<String>,
    ) -> Result<Vec<TensorSpec>, SceneError> {
        let mut tensors = Vec::with_capacity(raw.len());
        for (i, t) in raw.into_iter().enumerate() {
            let field = |f: &str| format!("tensors[{i}].{f}");
            let direction = signature[i];
            if direction == ArgDirection::Scalar {
                return Err(self.err(
                    "orchestration.signature",
                    format!(
                        "entry {i} is `scalar` but argument {i} is tensor `{}`",
                        t.name
                    ),
                ));
            }
            self.file_name(&field("name"), "tensor", &t.name)?;
            if !arg_names.insert(t.name.clone()) {
                return Err(self.err(
                    field("name"),
                    format!("duplicate argument name `{}`", t.name),
                ));
            }
            let dtype = match dtype_from_name(&t.dtype) {
                Some(d) => DTypeSpec::Fixed(d),
                // A name: a string param of each case names the dtype.
                None if is_c_identifier(&t.dtype) => DTypeSpec::Param(t.dtype.clone()),
                None => {
                    return Err(self.err(field("dtype"), format!("unknown dtype `{}`", t.dtype)));
                }
            };
            let rtol = self.opt_num(&field("rtol"), t.rtol)?;
            let atol = self.opt_num(&field("atol"), t.atol)?;
            for (f, v) in [("rtol", &rtol), ("atol", &atol)] {
                if let Some(NumSpec::Int(_) | NumSpec::Float(_)) = v {
                    self.tolerance(&field(f), "", v.as_ref(), &Params::new())?;
                }
            }
            if t.shape.is_empty() {
                return Err(self.err(field("shape"), "must have at least one dimension"));
            }
            let shape = t
                .shape
                .iter()
                .map(|d| match d {
                    RawDim::Fixed(n) if *n > 0 => Ok(Dim::Fixed(*n as usize)),
                    RawDim::Fixed(n) => Err(ShapeError::NotPositive(*n)),
                    RawDim::Expr(e) => Dim::parse(e),
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.err(field("shape"), e.to_string()))?;
            let init = match t.init {
                None => InitSpec::Zeros,
                Some(init) => self.init_spec(&field("init"), init)?,
            };
            let compare_given = t.compare.is_some();
            let own_tolerance = rtol.is_some() || atol.is_some();
            let compare = comparison::compare_spec(
                i,
                (&t.name, direction.is_output(), &direction.to_string()),
                t.compare,
                own_tolerance,
            )
            .map_err(|e| self.err(e.field, e.message))?;
            let spec = TensorSpec {
                name: t.name,
                dtype,
                shape,
                init,
                seed: t.seed,
                direction,
                rtol,
                atol,
                compare,
                allow_nonfinite: t.allow_nonfinite,
                skip_golden: t.skip_golden,
                per_rank: t.per_rank,
            };
            comparison::check_tensor_flags(i, &spec.info(), compare_given)
                .map_err(|e| self.err(e.field, e.message))?;
            tensors.push(spec);
        }
        Ok(tensors)
    }

    /// Level 3's `ranks` and `[comm]`: required there, refused elsewhere,
    /// and every output tensor is per-rank.
    fn group(
        &self,
        level: u32,
        ranks: Option<RawDim>,
        comm: Option<RawComm>,
        tensors: &[TensorSpec],
    ) -> Result<Option<GroupSpec>, SceneError> {
        let dim = |field: &str, d: RawDim| match d {
            RawDim::Fixed(n) if n > 0 => Ok(Dim::Fixed(n as usize)),
            RawDim::Fixed(n) => Err(self.err(field, format!("must be positive, got {n}"))),
            RawDim::Expr(e) => Dim::parse(&e).map_err(|e| self.err(field, e.to_string())),
        };
        if level != 3 {
            if ranks.is_some() {
                return Err(self.err("ranks", "only a level-3 scene has ranks (level = 3)"));
            }
            if comm.is_some() {
                return Err(self.err("comm", "only a level-3 scene has [comm] (level = 3)"));
            }
            if let Some(t) = tensors.iter().find(|t| t.per_rank) {
                return Err(self.err(
                    "tensors.per_rank",
                    format!(
                        "tensor `{}` is per_rank but the scene is not level 3",
                        t.name
                    ),
                ));
            }
            return Ok(None);
        }
        let ranks = ranks.ok_or_else(|| {
            self.err("ranks", "a level-3 scene says how many ranks (ranks = 2, or an expression of the case params)")
        })?;
        let comm = comm.ok_or_else(|| {
            self.err(
                "comm",
                "a level-3 scene needs [comm] window = \"<bytes expression>\"",
            )
        })?;
        if let Some(t) = tensors
            .iter()
            .find(|t| t.direction.is_output() && !t.per_rank)
        {
            return Err(self.err(
                "tensors.per_rank",
                format!(
                    "output tensor `{}` of a level-3 scene must be per_rank = true (each rank writes its slice)",
                    t.name
                ),
            ));
        }
        Ok(Some(GroupSpec {
            ranks: dim("ranks", ranks)?,
            window: dim("comm.window", comm.window)?,
        }))
    }

    /// Case `i`'s ranks and window; per-rank tensors lead with `ranks`.
    fn case_group(
        &self,
        i: usize,
        g: &GroupSpec,
        case: &Case,
        tensors: &[TensorSpec],
    ) -> Result<CaseGroup, SceneError> {
        let prefix = format!("case `{}`: ", case.name);
        let ranks = g
            .ranks
            .eval(&case.params)
            .map_err(|e| self.err("ranks", format!("{prefix}`{}`: {e}", g.ranks)))?;
        if !(1..=MAX_RANKS).contains(&ranks) {
            return Err(self.err(
                format!("cases[{i}].ranks"),
                format!("{prefix}{ranks} ranks; a group has 1 to {MAX_RANKS}"),
            ));
        }
        let window = g
            .window
            .eval(&case.params)
            .map_err(|e| self.err("comm.window", format!("{prefix}`{}`: {e}", g.window)))?;
        for (t, r) in tensors.iter().zip(&case.tensors) {
            if t.per_rank && r.shape.first() != Some(&ranks) {
                return Err(self.err(
                    "tensors.shape",
                    format!(
                        "{prefix}per-rank tensor `{}` has shape {:?}; its first dimension must be the {ranks} ranks",
                        t.name, r.shape
                    ),
                ));
            }
        }
        Ok(CaseGroup {
            ranks,
            window: window as u64,
        })
    }

    fn scalars(
        &self,
        raw: Vec<RawScalar>,
        signature: &[ArgDirection],
        first: usize,
        arg_names: &mut BTreeSet<String>,
    ) -> Result<Vec<ScalarSpec>, SceneError> {
        let mut scalars = Vec::with_capacity(raw.len());
        for (j, s) in raw.into_iter().enumerate() {
            let i = first + j;
            let field = |f: &str| format!("scalars[{j}].{f}");
            if signature[i] != ArgDirection::Scalar {
                return Err(self.err(
                    "orchestration.signature",
                    format!(
                        "entry {i} is `{}` but argument {i} is scalar `{}`",
                        signature[i], s.name
                    ),
                ));
            }
            if !arg_names.insert(s.name.clone()) {
                return Err(self.err(
                    field("name"),
                    format!("duplicate argument name `{}`", s.name),
                ));
            }
            let dtype = self.dtype(&field("dtype"), &s.dtype)?;
            if matches!(dtype, DType::F16 | DType::BF16 | DType::Bool) {
                return Err(self.err(
                    field("dtype"),
                    format!(
                        "{dtype} is not supported for scalars (use an integer type, f32 or f64)"
                    ),
                ));
            }
            let value = self.num(&field("value"), s.value)?;
            // A literal is checked once; an expression in every case.
            if let NumSpec::Int(_) | NumSpec::Float(_) = value
                && let Ok(v) = value.eval(&Params::new())
            {
                self.scalar_value(&field("value"), "", &s.name, dtype, v)?;
            }
            scalars.push(ScalarSpec {
                name: s.name,
                dtype,
                value,
            });
        }

        Ok(scalars)
    }

    /// Unique case names; every dtype, dim, init, tolerance and scalar
    /// resolved in every case.
    fn cases(
        &self,
        raw: Vec<RawCase>,
        tensors: &[TensorSpec],
        scalars: &[ScalarSpec],
        tolerance: &ToleranceSpec,
        derived: &[Derived],
    ) -> Result<Vec<Case>, SceneError> {
        if raw.is_empty() {
            return Err(self.err("cases", "a scene needs at least one case"));
        }
        let mut case_names = BTreeSet::new();
        let mut cases = Vec::with_capacity(raw.len());
        let mut skipped_somewhere = vec![false; tensors.len()];
        let infos: Vec<_> = tensors.iter().map(TensorSpec::info).collect();
        for (i, c) in raw.into_iter().enumerate() {
            let field = |f: &str| format!("cases[{i}].{f}");
            if c.name.is_empty() || c.name.contains("::") || c.name.contains(char::is_whitespace) {
                return Err(self.err(
                    field("name"),
                    format!("`{}` is not a valid case name", c.name),
                ));
            }
            self.file_name(&field("name"), "case", &c.name)?;
            if !case_names.insert(c.name.clone()) {
                return Err(self.err(field("name"), format!("duplicate case name `{}`", c.name)));
            }
            if let Some(p) = &c.platforms {
                self.platform_list(&field("platforms"), p)?;
            }
            let manual = match c.manual {
                None | Some(RawManual::All(false)) => Manual::Never,
                Some(RawManual::All(true)) => Manual::Always,
                Some(RawManual::On(list)) => {
                    self.platform_list(&field("manual"), &list)?;
                    Manual::On(list)
                }
            };
            let prefix = format!("case `{}`: ", c.name);
            for (name, v) in &c.params {
                if let Value::List(items) = v
                    && let Some(bad) = items
                        .iter()
                        .find(|x| !matches!(x, Value::Int(_) | Value::Float(_)))
                {
                    return Err(self.err(
                        format!("cases[{i}].params.{name}"),
                        format!(
                            "{prefix}a list param holds numbers only, got {} ({bad})",
                            bad.kind()
                        ),
                    ));
                }
            }
            let env = self.case_values(i, &prefix, &c.params, derived)?;
            let init = self.case_inits(i, &prefix, c.init, tensors)?;
            let mut resolved = tensors
                .iter()
                .enumerate()
                .map(|(j, t)| {
                    let over = init
                        .get(&t.name)
                        .map(|spec| (format!("cases[{i}].init.{}", t.name), spec));
                    self.case_tensor(j, t, &prefix, &env, tolerance, over)
                })
                .collect::<Result<Vec<_>, _>>()?;
            let skip = comparison::case_skip(i, &c.name, c.skip_golden, &infos)
                .map_err(|e| self.err(e.field, e.message))?;
            for (j, (t, r)) in infos.iter().zip(resolved.iter_mut()).enumerate() {
                if t.output {
                    let cmp = comparison::resolve(j, t, &skip, &prefix, &env)
                        .map_err(|e| self.err(e.field, e.message))?;
                    skipped_somewhere[j] |= cmp == Comparison::Skipped;
                    r.comparison = Some(cmp);
                }
            }
            let mut values = Vec::with_capacity(scalars.len());
            for (j, s) in scalars.iter().enumerate() {
                let at = match s.value.param() {
                    Some(p) if derived.iter().any(|d| d.name == p) => format!("derived.{p}"),
                    Some(p) => format!("cases[{i}].params.{p}"),
                    None => format!("scalars[{j}].value"),
                };
                let v = s.value.eval(&env).map_err(|e| {
                    self.err(
                        format!("scalars[{j}].value"),
                        format!("{prefix}scalar `{}`: {e}", s.name),
                    )
                })?;
                self.scalar_value(&at, &prefix, &s.name, s.dtype, v)?;
                values.push(v);
            }
            cases.push(Case {
                name: c.name,
                params: c.params,
                values: env,
                init,
                platforms: c.platforms,
                manual,
                seed: c.seed.unwrap_or(0),
                tensors: resolved,
                scalars: values,
                group: None,
            });
        }
        comparison::check_allow_nonfinite(&infos, &skipped_somewhere)
            .map_err(|e| self.err(e.field, e.message))?;

        Ok(cases)
    }

    /// Tensor `j` as one case resolves it.
    fn case_tensor(
        &self,
        j: usize,
        t: &TensorSpec,
        prefix: &str,
        params: &Params,
        scene_tol: &ToleranceSpec,
        init_override: Option<(String, &InitSpec)>,
    ) -> Result<CaseTensor, SceneError> {
        let field = |f: &str| format!("tensors[{j}].{f}");
        let dtype = match &t.dtype {
            DTypeSpec::Fixed(d) => *d,
            DTypeSpec::Param(p) => match params.get(p) {
                Some(Value::Str(name)) => dtype_from_name(name).ok_or_else(|| {
                    self.err(
                        field("dtype"),
                        format!("{prefix}param `{p}` = \"{name}\" is not a dtype (f32 f64 f16 bf16 i8 u8 i16 i32 i64 bool, or a torch/numpy name such as bfloat16)"),
                    )
                })?,
                Some(v) => {
                    return Err(self.err(
                        field("dtype"),
                        format!(
                            "{prefix}param `{p}` is {} ({v}), not a dtype name (a string such as \"f16\")",
                            v.kind()
                        ),
                    ));
                }
                None => {
                    return Err(self.err(
                        field("dtype"),
                        format!("{prefix}unknown dtype `{p}` (neither a dtype nor a param of the case)"),
                    ));
                }
            },
        };
        let mut shape = Vec::with_capacity(t.shape.len());
        for (k, d) in t.shape.iter().enumerate() {
            shape.push(d.eval(params).map_err(|e| {
                self.err(
                    format!("tensors[{j}].shape[{k}]"),
                    format!("{prefix}tensor `{}` dimension `{d}`: {e}", t.name),
                )
            })?);
        }
        let (init_field, init_spec) = init_override.unwrap_or_else(|| (field("init"), &t.init));
        let init = self.resolve_init(&init_field, prefix, init_spec, dtype, &shape, params)?;
        let default = Tolerance::default_for(dtype);
        let rtol = match self.tolerance(&field("rtol"), prefix, t.rtol.as_ref(), params)? {
            Some(v) => v,
            None => self
                .tolerance("rtol", prefix, scene_tol.rtol.as_ref(), params)?
                .unwrap_or(default.rtol),
        };
        let atol = match self.tolerance(&field("atol"), prefix, t.atol.as_ref(), params)? {
            Some(v) => v,
            None => self
                .tolerance("atol", prefix, scene_tol.atol.as_ref(), params)?
                .unwrap_or(default.atol),
        };
        Ok(CaseTensor {
            dtype,
            shape,
            init,
            tolerance: Tolerance {
                rtol,
                atol,
                equal_nan: scene_tol.equal_nan,
            },
            comparison: None,
        })
    }

    /// The raw `init` with its expressions parsed.
    fn init_spec(&self, field: &str, raw: RawInit) -> Result<InitSpec, SceneError> {
        Ok(match raw {
            RawInit::Const { value } => InitSpec::Const {
                value: self.num(field, value)?,
            },
            RawInit::Uniform { low, high } => InitSpec::Uniform {
                low: self.num(field, low)?,
                high: self.num(field, high)?,
            },
            RawInit::Normal { mean, std } => InitSpec::Normal {
                mean: self.num(field, mean)?,
                std: self.num(field, std)?,
            },
            RawInit::Arange { start, step } => InitSpec::Arange {
                start: self.num(field, start)?,
                step: self.num(field, step)?,
            },
            RawInit::Zeros => InitSpec::Zeros,
            RawInit::Randint { low, high } => InitSpec::Randint {
                low: self.num(field, low)?,
                high: self.num(field, high)?,
            },
            RawInit::Permutation { n } => InitSpec::Permutation {
                n: self.num(field, n)?,
            },
            RawInit::List { param } => InitSpec::List { param },
        })
    }

    /// The fixture of one tensor in one case, checked: finite parameters,
    /// ordered ranges, randint values of the dtype, one list value per
    /// element.
    fn resolve_init(
        &self,
        field: &str,
        prefix: &str,
        spec: &InitSpec,
        dtype: DType,
        shape: &[usize],
        params: &Params,
    ) -> Result<Init, SceneError> {
        let num = |what: &str, n: &NumSpec| {
            n.eval(params)
                .map_err(|e| self.err(field, format!("{prefix}{what}: {e}")))
        };
        let float = |what: &str, n: &NumSpec| -> Result<f64, SceneError> {
            let v = num(what, n)?.as_f64();
            if v.is_finite() {
                Ok(v)
            } else {
                Err(self.err(field, format!("{prefix}{what} must be finite, got {v}")))
            }
        };
        let int = |what: &str, n: &NumSpec| -> Result<i64, SceneError> {
            match num(what, n)? {
                Num::Int(i) => Ok(i),
                Num::Float(f) => {
                    Err(self.err(field, format!("{prefix}{what} must be an integer, got {f}")))
                }
            }
        };
        Ok(match spec {
            InitSpec::Const { value } => Init::Const {
                value: float("const value", value)?,
            },
            InitSpec::Uniform { low, high } => {
                let low = float("uniform low", low)?;
                let high = float("uniform high", high)?;
                if low.partial_cmp(&high) != Some(std::cmp::Ordering::Less) {
                    return Err(self.err(
                        field,
                        format!("{prefix}uniform needs low < high, got {low} >= {high}"),
                    ));
                }
                Init::Uniform { low, high }
            }
            InitSpec::Normal { mean, std } => {
                let mean = float("normal mean", mean)?;
                let std = num("normal std", std)?.as_f64();
                if !(std >= 0.0 && std.is_finite()) {
                    return Err(self.err(
                        field,
                        format!("{prefix}normal needs a finite std >= 0, got {std}"),
                    ));
                }
                Init::Normal { mean, std }
            }
            InitSpec::Arange { start, step } => Init::Arange {
                start: float("arange start", start)?,
                step: float("arange step", step)?,
            },
            InitSpec::Zeros => Init::Zeros,
            InitSpec::Randint { low, high } => {
                let low = int("randint low", low)?;
                let high = int("randint high", high)?;
                if low >= high {
                    return Err(self.err(
                        field,
                        format!("{prefix}randint needs low < high, got {low} >= {high}"),
                    ));
                }
                self.fits(field, prefix, "randint", low, high, dtype)?;
                Init::Randint { low, high }
            }
            InitSpec::Permutation { n } => {
                let n = int("permutation n", n)?;
                if n < 1 {
                    return Err(
                        self.err(field, format!("{prefix}permutation needs n >= 1, got {n}"))
                    );
                }
                // Values are 0..n.
                self.fits(field, prefix, "permutation", 0, n, dtype)?;
                Init::Permutation { n: n as u64 }
            }
            InitSpec::List { param } => {
                let items = match params.get(param) {
                    Some(Value::List(items)) => items,
                    Some(v) => {
                        return Err(self.err(
                            field,
                            format!(
                                "{prefix}list param `{param}` is {} ({v}), not a list",
                                v.kind()
                            ),
                        ));
                    }
                    None => {
                        return Err(self.err(
                            field,
                            format!("{prefix}unknown param `{param}` (the case binds: {})", {
                                let names: Vec<&str> = params.keys().map(String::as_str).collect();
                                if names.is_empty() {
                                    "nothing".to_string()
                                } else {
                                    names.join(", ")
                                }
                            }),
                        ));
                    }
                };
                let numel = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
                if numel != Some(items.len()) {
                    return Err(self.err(
                        field,
                        format!(
                            "{prefix}list param `{param}` has {} values, the tensor's shape {shape:?} has {} elements",
                            items.len(),
                            numel.map_or_else(|| "too many".to_string(), |n| n.to_string())
                        ),
                    ));
                }
                let values = items
                    .iter()
                    .map(|v| match v {
                        Value::Int(i) => Ok(ListItem::Int(*i)),
                        Value::Float(f) if f.is_finite() => Ok(ListItem::Float(*f)),
                        other => Err(self.err(
                            field,
                            format!(
                                "{prefix}list param `{param}` holds {other}, not a finite number"
                            ),
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Init::List { values }
            }
        })
    }

    /// Values drawn from `low..high` (`low < high`) on an integer tensor
    /// must each be one of its values (bool: 0 or 1).
    fn fits(
        &self,
        field: &str,
        prefix: &str,
        what: &str,
        low: i64,
        high: i64,
        dtype: DType,
    ) -> Result<(), SceneError> {
        let range = if dtype == DType::Bool {
            Some((0, 1))
        } else {
            int_range(dtype)
        };
        if let Some((lo, hi)) = range
            && (low < lo || high - 1 > hi)
        {
            return Err(self.err(
                field,
                format!("{prefix}{what} {low}..{high} does not fit {dtype} ({lo}..={hi})"),
            ));
        }
        Ok(())
    }
}

/// Removes `.` and resolves `..` components without touching the disk.
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// A dtype by name: ours (`f32`, `bf16`, ...) or the torch / numpy
/// spelling of one (`float32`, `float`, `bfloat16`, `float16`, `half`,
/// `float64`, `double`, `int8` .. `int64`, `uint8`, `bool`), so a port can
/// keep the original's `dtype = "bfloat16"` params unchanged.
pub fn dtype_from_name(name: &str) -> Option<DType> {
    let ours = match name {
        "bfloat16" => "bf16",
        "float16" | "half" => "f16",
        "float32" | "float" => "f32",
        "float64" | "double" => "f64",
        "int8" => "i8",
        "int16" => "i16",
        "int32" => "i32",
        "int64" => "i64",
        "uint8" => "u8",
        other => other,
    };
    ours.parse::<DType>().ok()
}

/// The values of an integer dtype, `None` for floats (and bool, which is
/// no scalar dtype).
pub fn int_range(dtype: DType) -> Option<(i64, i64)> {
    match dtype {
        DType::I8 => Some((i8::MIN.into(), i8::MAX.into())),
        DType::U8 => Some((0, u8::MAX.into())),
        DType::I16 => Some((i16::MIN.into(), i16::MAX.into())),
        DType::I32 => Some((i32::MIN.into(), i32::MAX.into())),
        DType::I64 => Some((i64::MIN, i64::MAX)),
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::Bool => None,
    }
}

/// Whether the integer `i` is exactly a value of the float dtype.
fn float_exact(dtype: DType, i: i64) -> bool {
    // Through i128: `i64::MAX as f64` is 2^63, which saturates back to
    // i64::MAX in i64 and would look exact.
    let back = match dtype {
        DType::F32 => (i as f32) as i128,
        _ => (i as f64) as i128,
    };
    back == i128::from(i)
}

fn is_c_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn unknown_key_names_file_and_key() {
        let e = err_of(&GOOD.replace("golden = \"demo\"", "golden = \"demo\"\ncolour = 1"));
        assert!(e.contains("scene.toml"), "{e}");
        assert!(e.contains("colour"), "{e}");
    }

    #[test]
    fn duplicate_func_id() {
        let extra = "\n[[incores]]\nfunc_id = 0\nname = \"k2\"\ncore = \"aiv\"\nsource = \"k.c\"\n";
        let text = GOOD.replace(
            "[[tensors]]\nname = \"x\"",
            &format!("{extra}\n[[tensors]]\nname = \"x\""),
        );
        let e = err_of(&text);
        assert!(e.contains("incores[1].func_id"), "{e}");
        assert!(e.contains("duplicate func_id 0"), "{e}");
    }

    #[test]
    fn duplicate_case_name() {
        let e = err_of(&format!(
            "{GOOD}\n[[cases]]\nname = \"small\"\nparams = {{ N = 2 }}\n"
        ));
        assert!(e.contains("cases[1].name"), "{e}");
        assert!(e.contains("duplicate case name"), "{e}");
    }

    #[test]
    fn missing_source_file() {
        let e = err_of(&GOOD.replace("source = \"k.c\"", "source = \"missing.c\""));
        assert!(e.contains("incores[0].source"), "{e}");
        assert!(e.contains("missing.c"), "{e}");
    }

    #[test]
    fn unbound_shape() {
        let e = err_of(&GOOD.replace("params = { N = 8 }", "params = { M = 8 }"));
        assert!(e.contains("tensors[0].shape[0]"), "{e}");
        assert!(e.contains("case `small`"), "{e}");
        assert!(e.contains("unknown param `N`"), "{e}");
    }

    #[test]
    fn signature_count_mismatch() {
        let e = err_of(&GOOD.replace("[\"in\", \"out\", \"scalar\"]", "[\"in\", \"out\"]"));
        assert!(e.contains("orchestration.signature"), "{e}");
        assert!(e.contains("2 entries"), "{e}");
    }

    #[test]
    fn scalar_where_tensor_expected() {
        let e = err_of(&GOOD.replace(
            "[\"in\", \"out\", \"scalar\"]",
            "[\"scalar\", \"out\", \"in\"]",
        ));
        assert!(e.contains("orchestration.signature"), "{e}");
    }

    #[test]
    fn bad_core_and_dtype_and_platform() {
        assert!(
            err_of(&GOOD.replace("core = \"aiv\"", "core = \"gpu\"")).contains("incores[0].core")
        );
        assert!(
            err_of(&GOOD.replace("dtype = \"f32\"", "dtype = \"f99\""))
                .contains("tensors[0].dtype")
        );
        assert!(err_of(&GOOD.replace("[\"a2a3sim\"]", "[\"a9\"]")).contains("unknown platform"));
    }

    #[test]
    fn scalar_dtype_must_be_passable() {
        let e = err_of(&GOOD.replace("dtype = \"i64\"", "dtype = \"bf16\""));
        assert!(e.contains("scalars[0].dtype"), "{e}");
    }

    #[test]
    fn name_must_match_directory() {
        let e = err_of(&GOOD.replace("name = \"demo\"", "name = \"other\""));
        assert!(e.contains("`name`"), "{e}");
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

    #[test]
    fn scalar_params_are_in_range() {
        let text = GOOD
            .replace("dtype = \"i64\"", "dtype = \"i8\"")
            .replace("params = { N = 8 }", "params = { N = 300 }");
        let e = err_of(&text);
        assert!(e.contains("cases[0].params.N"), "{e}");
        assert!(e.contains("300 is out of range"), "{e}");
    }

    #[test]
    fn case_and_tensor_names_are_plain_file_names() {
        let e = err_of(&GOOD.replace("name = \"small\"", "name = \"..\""));
        assert!(e.contains("cases[0].name"), "{e}");
        let e = err_of(&GOOD.replace("name = \"small\"", "name = \"a/b\""));
        assert!(
            e.contains("cases[0].name") && e.contains("path separator"),
            "{e}"
        );
        let e = err_of(&GOOD.replace("name = \"x\"", "name = \"../x\""));
        assert!(
            e.contains("tensors[0].name") && e.contains("not a valid tensor name"),
            "{e}"
        );
        let e = err_of(&GOOD.replace("name = \"y\"", "name = \"\""));
        assert!(e.contains("tensors[1].name"), "{e}");
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

    /// Malformed expressions and new fields: each error names the file,
    /// the field and the case, and says what was wrong.
    #[test]
    fn error_matrix_names_file_field_and_case() {
        let shape_x = "shape = [\"N\", \"ceil_div(N, 4)\"]";
        let init_x = "init = { kind = \"uniform\", low = \"-X\", high = \"X * 2\" }";
        let init_l = "init = { kind = \"list\", param = \"L\" }";
        let params = "params = { N = 8, DT = \"f16\", X = 0.5, B = 3, L = [1, 2, 3], S = \"text\", F = true }";
        let x_shape = |new: &str| (shape_x, format!("shape = [\"N\", \"{new}\"]"));
        let x_init = |new: &str| (init_x, format!("init = {new}"));
        let matrix: Vec<((&str, String), &str, &str)> = vec![
            (x_shape("M * 2"), "tensors[0].shape[1]", "unknown param `M`"),
            (
                x_shape("N / (N - 8)"),
                "tensors[0].shape[1]",
                "division by zero",
            ),
            (
                x_shape("N % (N - 8)"),
                "tensors[0].shape[1]",
                "division by zero",
            ),
            (
                x_shape("ceil_div(N, N - 8)"),
                "tensors[0].shape[1]",
                "division by zero",
            ),
            (
                x_shape("N - 100"),
                "tensors[0].shape[1]",
                "-92, not a positive size",
            ),
            (
                x_shape("N / 3.0"),
                "tensors[0].shape[1]",
                "not an integer size",
            ),
            (
                x_shape("DT * 2"),
                "tensors[0].shape[1]",
                "param `DT` is a string",
            ),
            (
                x_shape("F + 1"),
                "tensors[0].shape[1]",
                "param `F` is a boolean",
            ),
            (
                x_shape("L + 1"),
                "tensors[0].shape[1]",
                "param `L` is a list",
            ),
            (
                x_shape("L[3]"),
                "tensors[0].shape[1]",
                "index 3 is out of range",
            ),
            (
                x_shape("N * 9223372036854775807"),
                "tensors[0].shape[1]",
                "overflow",
            ),
            (
                x_shape("min(N, S)"),
                "tensors[0].shape[1]",
                "param `S` is a string",
            ),
            (
                ("dtype = \"DT\"", "dtype = \"WHAT\"".into()),
                "tensors[0].dtype",
                "neither a dtype nor a param",
            ),
            (
                ("DT = \"f16\"", "DT = \"f17\"".into()),
                "tensors[0].dtype",
                "\"f17\" is not a dtype",
            ),
            (
                ("DT = \"f16\"", "DT = 16".into()),
                "tensors[0].dtype",
                "is an integer (16), not a dtype name",
            ),
            (
                x_init("{ kind = \"const\", value = \"S\" }"),
                "tensors[0].init",
                "const value: param `S` is a string",
            ),
            (
                x_init("{ kind = \"uniform\", low = \"X\", high = \"X / 2\" }"),
                "tensors[0].init",
                "uniform needs low < high",
            ),
            (
                x_init("{ kind = \"normal\", std = \"0 - X\" }"),
                "tensors[0].init",
                "finite std >= 0",
            ),
            (
                x_init("{ kind = \"randint\", low = 0, high = \"N / 3.0\" }"),
                "tensors[0].init",
                "randint high must be an integer",
            ),
            (
                x_init("{ kind = \"arange\", step = \"1 / 0\" }"),
                "tensors[0].init",
                "division by zero",
            ),
            (
                (init_l, "init = { kind = \"list\", param = \"Q\" }".into()),
                "tensors[1].init",
                "unknown param `Q`",
            ),
            (
                (init_l, "init = { kind = \"list\", param = \"N\" }".into()),
                "tensors[1].init",
                "is an integer (8), not a list",
            ),
            (
                ("L = [1, 2, 3]", "L = [1, 2]".into()),
                "tensors[1].init",
                "has 2 values, the tensor's shape [3] has 3 elements",
            ),
            (
                ("rtol = \"X / 100\"", "rtol = \"0 - X\"".into()),
                "tensors[2].rtol",
                "must be a finite number >= 0, got -0.5",
            ),
            (
                ("rtol = \"X / 100\"", "rtol = \"Y\"".into()),
                "tensors[2].rtol",
                "unknown param `Y`",
            ),
            (
                (
                    "golden = \"demo\"",
                    "golden = \"demo\"\natol = \"X - 1\"".into(),
                ),
                "atol",
                "must be a finite number >= 0",
            ),
            (
                ("value = \"N + 1\"", "value = \"N / 2.5\"".into()),
                "scalars[0].value",
                "3.2 is not an integer",
            ),
            (
                ("value = \"N + 1\"", "value = \"DT\"".into()),
                "scalars[0].value",
                "param `DT` is a string",
            ),
            (
                (
                    "value = \"N + 1\"",
                    "value = \"N * 2000000000000000000\"".into(),
                ),
                "scalars[0].value",
                "overflow",
            ),
            (
                (
                    "dtype = \"i64\"\nvalue = \"N + 1\"",
                    "dtype = \"u8\"\nvalue = \"N * 40\"".into(),
                ),
                "scalars[0].value",
                "scalar `n` (u8): 320 is out of range",
            ),
            (
                (params, params.replace("N = 8", "N = 300")).clone(),
                "cases[0].params.N",
                "placeholder",
            ),
            (
                ("L = [1, 2, 3]", "L = [1, \"two\", 3]".into()),
                "cases[0].params.L",
                "a list param holds numbers only",
            ),
            (
                (
                    "name = \"small\"",
                    "name = \"small\"\nmanual = [\"a9sim\"]".into(),
                ),
                "cases[0].manual",
                "unknown platform `a9sim`",
            ),
            (
                (
                    "name = \"small\"",
                    "name = \"small\"\nplatforms = [\"a3\"]".into(),
                ),
                "cases[0].platforms",
                "unknown platform `a3`",
            ),
        ];
        assert!(matrix.len() >= 20);
        for ((old, new), field, needle) in matrix {
            assert!(TYPED.contains(old), "matrix entry does not apply: {old}");
            let mut text = TYPED.replacen(old, &new, 1);
            let mut needle = needle;
            if field == "cases[0].params.N" {
                // An i8 scalar bound to a param out of its range.
                text = text
                    .replace("value = \"N + 1\"", "value = \"N\"")
                    .replace("dtype = \"i64\"", "dtype = \"i8\"")
                    .replace("shape = [\"N\", \"ceil_div(N, 4)\"]", "shape = [4]")
                    .replace("shape = [\"N * ceil_div(N, 4)\"]", "shape = [4]");
                needle = "300 is out of range";
            }
            let e = err_of(&text);
            assert!(e.contains("scene.toml"), "{new}: file missing: {e}");
            assert!(
                e.contains(&format!("`{field}`")),
                "{new}: field `{field}` missing: {e}"
            );
            assert!(
                e.contains("case `small`") || field.starts_with("cases[0]"),
                "{new}: case missing: {e}"
            );
            assert!(e.contains(needle), "{new}: `{needle}` missing: {e}");
        }
    }

    /// Expressions that do not parse fail at load, naming the file, the
    /// field and what is wrong (no case is involved).
    #[test]
    fn malformed_expressions_fail_at_load() {
        for (old, new, field, needle) in [
            (
                "\"ceil_div(N, 4)\"",
                "\"N +\"",
                "tensors[0].shape",
                "expression ends early",
            ),
            (
                "\"ceil_div(N, 4)\"",
                "\"N ** 2\"",
                "tensors[0].shape",
                "not an expression",
            ),
            (
                "\"ceil_div(N, 4)\"",
                "\"sqrt(N)\"",
                "tensors[0].shape",
                "unknown function `sqrt`",
            ),
            (
                "\"ceil_div(N, 4)\"",
                "\"min(N)\"",
                "tensors[0].shape",
                "takes 2 or more arguments",
            ),
            (
                "\"ceil_div(N, 4)\"",
                "\"ceil_div(N)\"",
                "tensors[0].shape",
                "takes 2 arguments",
            ),
            (
                "\"X * 2\"",
                "\"X *\"",
                "tensors[0].init",
                "not an expression",
            ),
            ("\"X / 100\"", "\"(X\"", "tensors[2].rtol", "missing `)`"),
            (
                "\"N + 1\"",
                "\"N $ 1\"",
                "scalars[0].value",
                "unexpected character",
            ),
            (
                "dtype = \"DT\"",
                "dtype = \"f-16\"",
                "tensors[0].dtype",
                "unknown dtype",
            ),
        ] {
            let e = err_of(&TYPED.replacen(old, new, 1));
            assert!(e.contains("scene.toml"), "{new}: {e}");
            assert!(e.contains(&format!("`{field}`")), "{new}: {e}");
            assert!(e.contains(needle), "{new}: {e}");
        }
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

    /// `[derived]` and per-case `init`: each malformed input fails the
    /// load naming the file, the field and (when a case is involved) the
    /// case.
    #[test]
    fn derived_and_case_init_error_matrix() {
        let derived = "half = \"total / 2.0\"";
        let lens_init = "lens = { kind = \"randint\", low = 1, high = \"ctx+1\" }";
        let matrix: Vec<(&str, String, &str, Option<&str>, &str)> = vec![
            (
                derived,
                "half = \"total / nope\"".into(),
                "derived.half",
                Some("small"),
                "unknown param `nope`",
            ),
            (
                derived,
                "half = \"total / (batch - 2)\"".into(),
                "derived.half",
                Some("small"),
                "division by zero",
            ),
            (
                "max_blocks = \"max_len / block\"",
                "max_blocks = \"max_len / total\"".into(),
                "derived.max_blocks",
                None,
                "refers to `derived.total`, which comes later",
            ),
            (
                derived,
                "half = \"half + 1\"".into(),
                "derived.half",
                None,
                "refers to itself",
            ),
            (
                derived,
                "half = \"total +\"".into(),
                "derived.half",
                None,
                "expression ends early",
            ),
            (
                derived,
                "half = \"dt * 2\"".into(),
                "derived.half",
                Some("small"),
                "param `dt` is a string",
            ),
            (
                derived,
                "half = \"total * 9223372036854775807\"".into(),
                "derived.half",
                Some("small"),
                "overflow",
            ),
            (
                derived,
                "\"bad-name\" = 1".into(),
                "derived.bad-name",
                None,
                "is not a param name",
            ),
            (
                "max_len = 256, dt",
                "max_len = 256, total = 6, dt".into(),
                "cases[0].params.total",
                Some("small"),
                "param `total` clashes with `derived.total`",
            ),
            (
                "value = \"total\"",
                "value = \"half\"".into(),
                "derived.half",
                Some("small"),
                "3 is not an integer",
            ),
            (
                lens_init,
                "lengths = { kind = \"const\", value = 1 }".into(),
                "cases[1].init.lengths",
                Some("varied"),
                "no tensor `lengths` in the scene (tensors: table, lens, out)",
            ),
            (
                lens_init,
                "out = { kind = \"const\", value = 1 }".into(),
                "cases[1].init.out",
                Some("varied"),
                "tensor `out` is an output (`out`)",
            ),
            (
                lens_init,
                "lens = { kind = \"binomial\", n = 3 }".into(),
                "cases[1].init.lens",
                Some("varied"),
                "unknown variant `binomial`",
            ),
            (
                lens_init,
                "lens = { kind = \"randint\", low = 1 }".into(),
                "cases[1].init.lens",
                Some("varied"),
                "missing field `high`",
            ),
            (
                lens_init,
                "lens = { kind = \"randint\", low = 1, high = \"ctx +\" }".into(),
                "cases[1].init.lens",
                None,
                "expression ends early",
            ),
            (
                lens_init,
                "lens = { kind = \"randint\", low = 1, high = \"width\" }".into(),
                "cases[1].init.lens",
                Some("varied"),
                "unknown param `width`",
            ),
            (
                lens_init,
                "lens = { kind = \"randint\", low = 0, high = \"ctx * 100000000\" }".into(),
                "cases[1].init.lens",
                Some("varied"),
                "does not fit i32",
            ),
            (
                lens_init,
                "lens = 7".into(),
                "cases[1].init.lens",
                Some("varied"),
                "an init override is a table such as { kind = \"randint\", low = 0, high = 8 }, got integer `7`",
            ),
            (
                "dt = \"float\"",
                "dt = \"float8\"".into(),
                "tensors[2].dtype",
                Some("varied"),
                "\"float8\" is not a dtype",
            ),
        ];
        assert!(matrix.len() >= 15);
        for (old, new, field, case, needle) in matrix {
            assert!(DERIVED.contains(old), "matrix entry does not apply: {old}");
            let e = err_of(&DERIVED.replacen(old, &new, 1));
            assert!(e.contains("scene.toml"), "{new}: file missing: {e}");
            assert!(
                e.contains(&format!("`{field}`")),
                "{new}: `{field}` missing: {e}"
            );
            if let Some(case) = case {
                assert!(
                    e.contains(&format!("case `{case}`")),
                    "{new}: case missing: {e}"
                );
            }
            assert!(e.contains(needle), "{new}: `{needle}` missing: {e}");
        }
    }
}
