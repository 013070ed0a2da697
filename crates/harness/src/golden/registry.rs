//! Goldens: CPU reference functions registered by name.
//!
//! A scene names its golden in `scene.toml`; the scenes package registers a
//! Rust function under that name. The function sees the case's input
//! tensors and params and returns the expected value of every `out`/`inout`
//! tensor. Goldens never touch a device.

use std::collections::BTreeMap;
use std::fmt;

use scene_golden::Tensor;

use crate::compare::{BUILTIN_COMPARISONS, ComparisonFn, CustomComparison};

/// What a golden function can see of one case.
#[derive(Debug)]
pub struct GoldenCtx<'a> {
    pub scene: &'a str,
    pub case: &'a str,
    pub params: &'a BTreeMap<String, i64>,
    /// Every param of the case, typed (strings, floats, lists too).
    pub(crate) values: Option<&'a crate::scene::expr::Params>,
    pub(crate) tensors: &'a [(String, Tensor)],
    pub(crate) scalars: &'a [(String, f64)],
    /// The integer scalars again, exactly (an `i64` beyond 2^53 is not an
    /// `f64`).
    pub(crate) int_scalars: &'a [(String, i64)],
    /// Upper bound on threads the golden may use (rayon pool size).
    pub threads: usize,
}

impl<'a> GoldenCtx<'a> {
    pub fn new(
        scene: &'a str,
        case: &'a str,
        params: &'a BTreeMap<String, i64>,
        tensors: &'a [(String, Tensor)],
        threads: usize,
    ) -> Self {
        Self {
            scene,
            case,
            params,
            values: None,
            tensors,
            scalars: &[],
            int_scalars: &[],
            threads,
        }
    }

    /// Every param of the case, typed.
    pub fn with_values(mut self, values: &'a crate::scene::expr::Params) -> Self {
        self.values = Some(values);
        self
    }

    /// A case param of any type (`dtype = "bf16"`, `scale = 0.5`,
    /// `lens = [3, 7]`).
    pub fn value(&self, name: &str) -> Result<&'a crate::scene::expr::Value, GoldenError> {
        self.values
            .and_then(|v| v.get(name))
            .ok_or_else(|| GoldenError::MissingParam(name.to_string()))
    }

    /// A string case param.
    pub fn param_str(&self, name: &str) -> Result<&'a str, GoldenError> {
        match self.value(name)? {
            crate::scene::expr::Value::Str(s) => Ok(s),
            v => Err(GoldenError::Failed(format!(
                "param `{name}` is {}, not a string",
                v.kind()
            ))),
        }
    }

    /// A numeric case param as `f64` (integer or float).
    pub fn param_f64(&self, name: &str) -> Result<f64, GoldenError> {
        match self.value(name)? {
            crate::scene::expr::Value::Int(i) => Ok(*i as f64),
            crate::scene::expr::Value::Float(f) => Ok(*f),
            v => Err(GoldenError::Failed(format!(
                "param `{name}` is {}, not a number",
                v.kind()
            ))),
        }
    }

    /// The values of the scene's `[[scalars]]` (literals or bound params).
    pub fn with_scalars(mut self, scalars: &'a [(String, f64)]) -> Self {
        self.scalars = scalars;
        self
    }

    /// The exact values of the scene's integer `[[scalars]]`.
    pub fn with_int_scalars(mut self, scalars: &'a [(String, i64)]) -> Self {
        self.int_scalars = scalars;
        self
    }

    /// An integer scalar argument's exact value (what the device receives,
    /// also beyond 2^53, where [`GoldenCtx::scalar`] rounds).
    pub fn scalar_i64(&self, name: &str) -> Result<i64, GoldenError> {
        if let Some((_, v)) = self.int_scalars.iter().find(|(n, _)| n == name) {
            return Ok(*v);
        }
        self.scalar(name)?;
        Err(GoldenError::Failed(format!(
            "scalar `{name}` is not an integer scalar"
        )))
    }

    /// A scalar argument's value, as declared in `[[scalars]]`.
    pub fn scalar(&self, name: &str) -> Result<f64, GoldenError> {
        self.scalars
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .ok_or_else(|| GoldenError::MissingScalar(name.to_string()))
    }

    /// The input value of a tensor argument (outputs hold their initial value).
    pub fn tensor(&self, name: &str) -> Result<&'a Tensor, GoldenError> {
        self.tensors
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
            .ok_or_else(|| GoldenError::MissingTensor(name.to_string()))
    }

    /// A case parameter.
    pub fn param(&self, name: &str) -> Result<i64, GoldenError> {
        self.params
            .get(name)
            .copied()
            .ok_or_else(|| GoldenError::MissingParam(name.to_string()))
    }

    /// A case parameter as a size.
    pub fn size(&self, name: &str) -> Result<usize, GoldenError> {
        let v = self.param(name)?;
        usize::try_from(v)
            .map_err(|_| GoldenError::Failed(format!("param `{name}` = {v} is not a size")))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    #[error("golden asked for tensor `{0}`, which the scene does not declare")]
    MissingTensor(String),
    #[error("golden asked for param `{0}`, which the case does not bind")]
    MissingParam(String),
    #[error("golden asked for scalar `{0}`, which the scene does not declare")]
    MissingScalar(String),
    #[error("{0}")]
    Failed(String),
}

impl From<scene_golden::TensorError> for GoldenError {
    fn from(e: scene_golden::TensorError) -> Self {
        GoldenError::Failed(e.to_string())
    }
}

/// Expected outputs by tensor name.
#[derive(Debug, Default)]
pub struct GoldenOutputs(pub Vec<(String, Tensor)>);

impl GoldenOutputs {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the expected value of an output tensor.
    pub fn with(mut self, name: &str, tensor: Tensor) -> Self {
        self.0.push((name.to_string(), tensor));
        self
    }

    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
}

pub type GoldenFn = fn(&GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError>;

/// Golden functions by the name scenes use for them, and the custom
/// comparisons scenes name in `compare = { custom = "NAME", ... }`.
#[derive(Clone)]
pub struct GoldenRegistry {
    map: BTreeMap<String, GoldenFn>,
    comparisons: BTreeMap<String, CustomComparison>,
    /// A digest of the code behind the registered functions (their sources
    /// and everything they call), for the golden cache; `None` = the
    /// registry's goldens are never cached.
    code_identity: Option<String>,
}

impl Default for GoldenRegistry {
    /// No goldens; the built-in comparisons
    /// ([`crate::compare::BUILTIN_COMPARISONS`]); no code identity.
    fn default() -> Self {
        Self {
            map: BTreeMap::new(),
            comparisons: BUILTIN_COMPARISONS
                .iter()
                .map(|(name, c)| (name.to_string(), *c))
                .collect(),
            code_identity: None,
        }
    }
}

impl fmt::Debug for GoldenRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GoldenRegistry")
            .field("goldens", &self.map.keys().collect::<Vec<_>>())
            .field("comparisons", &self.comparisons.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl GoldenRegistry {
    /// No goldens, the built-in comparisons.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(mut self, name: &str, f: GoldenFn) -> Self {
        self.map.insert(name.to_string(), f);
        self
    }

    /// Declares the digest of the registered goldens' code (the scenes
    /// package hashes its golden sources at build time): with it, their
    /// results may be kept in the golden cache.
    pub fn with_code_identity(mut self, digest: impl Into<String>) -> Self {
        self.code_identity = Some(digest.into());
        self
    }

    pub fn code_identity(&self) -> Option<&str> {
        self.code_identity.as_deref()
    }

    pub fn get(&self, name: &str) -> Option<GoldenFn> {
        self.map.get(name).copied()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    /// Registers a custom comparison under `name` (replacing a built-in of
    /// that name), taking the arguments `args` (each required; a scene
    /// giving another is refused before the device stage).
    pub fn register_comparison(
        mut self,
        name: &str,
        args: &'static [&'static str],
        f: ComparisonFn,
    ) -> Self {
        self.comparisons
            .insert(name.to_string(), CustomComparison { args, f });
        self
    }

    pub fn comparison(&self, name: &str) -> Option<CustomComparison> {
        self.comparisons.get(name).copied()
    }

    pub fn comparison_names(&self) -> impl Iterator<Item = &str> {
        self.comparisons.keys().map(String::as_str)
    }
}
