//! The raw TOML form of `scene.toml`, as serde reads it. `deny_unknown_fields`
//! everywhere: a typo is an error, not a silently ignored key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;

use super::ArgDirection;
use crate::scene::expr::Value;

/// A number or an expression, as TOML holds it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub(super) enum RawNum {
    Int(i64),
    Float(f64),
    Expr(String),
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub(super) enum RawManual {
    All(bool),
    On(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScene {
    pub(super) name: String,
    #[serde(default = "default_level")]
    pub(super) level: u32,
    pub(super) platforms: Vec<String>,
    pub(super) golden: RawGolden,
    /// `fixtures = { python = "golden.py" }`: inputs from `generate_inputs`.
    pub(super) fixtures: Option<RawPython>,
    /// What the Python golden / fixtures need installed (pip requirement
    /// specifiers); default `numpy`, or a `requirements.txt` beside the file.
    pub(super) requirements: Option<Vec<String>>,
    pub(super) rtol: Option<RawNum>,
    pub(super) atol: Option<RawNum>,
    #[serde(default)]
    pub(super) equal_nan: bool,
    #[serde(default = "default_devices")]
    pub(super) devices: usize,
    /// Device memory each case needs: a size (`"1 GiB"`), a number of
    /// bytes, or an expression of the case params (bytes).
    pub(super) device_memory: Option<RawNum>,
    /// Level 3: ranks of the group (a number or an expression).
    pub(super) ranks: Option<RawDim>,
    /// Level 3: the communication domain.
    pub(super) comm: Option<RawComm>,
    pub(super) orchestration: RawOrchestration,
    /// How the incores are built unless one says otherwise: `"image"`
    /// (the default) or `"hosted"` (issue 29).
    pub(super) build: Option<String>,
    /// How hosted kernels take their arguments: `"scene"` (the default) or
    /// `"chip_tensor"`.
    pub(super) args: Option<String>,
    /// The original's runtime variant (`"tensormap_and_ringbuffer"`, the
    /// default, or `"host_build_graph"`).
    pub(super) runtime: Option<String>,
    #[serde(default)]
    pub(super) incores: Vec<RawIncore>,
    #[serde(default)]
    pub(super) tensors: Vec<RawTensor>,
    #[serde(default)]
    pub(super) scalars: Vec<RawScalar>,
    #[serde(default)]
    pub(super) derived: RawDerived,
    #[serde(default)]
    pub(super) cases: Vec<RawCase>,
    /// Level 3: the host level's steps, in order (chip runs and host
    /// functions); empty: one chip run, as before.
    #[serde(default)]
    pub(super) steps: Vec<RawStep>,
}

/// One `[[steps]]` entry: a chip run of the rank group (`chip = "FUNCTION"`,
/// an orchestration function of `[orchestration] source`) or a host
/// function (`host = { c = "host.c", function = "F" }` or
/// `host = { python = "F" }`), and the tensors it reads and writes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStep {
    pub(super) chip: Option<String>,
    pub(super) host: Option<RawHost>,
    #[serde(default)]
    pub(super) reads: Vec<String>,
    #[serde(default)]
    pub(super) writes: Vec<String>,
}

/// `host = { c = "host.c", function = "F" }` or `host = { python = "F" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHost {
    pub(super) c: Option<PathBuf>,
    pub(super) function: Option<String>,
    pub(super) python: Option<String>,
}

/// `[derived]` as written: names bound to numbers or expressions, in file
/// order (the TOML map is read in document order).
#[derive(Debug, Default)]
pub(super) struct RawDerived(pub(super) Vec<(String, RawNum)>);

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
pub(super) enum RawGolden {
    Registered(String),
    Python(RawPython),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPython {
    pub(super) python: PathBuf,
}

pub(super) fn default_level() -> u32 {
    2
}
pub(super) fn default_devices() -> usize {
    1
}

/// `[comm]` of a level-3 scene.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawComm {
    /// Bytes of every rank's window (a number or an expression).
    #[serde(default)]
    pub(super) window: Option<RawDim>,
    /// The window as a tensor: a per-rank `inout` tensor whose slice r is
    /// rank r's window (its bytes are the window's size).
    #[serde(default)]
    pub(super) window_tensor: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOrchestration {
    pub(super) source: PathBuf,
    /// Required for `api = "scene"`; the original's API has one entry.
    pub(super) function: Option<String>,
    /// `"scene"` (the default: scene_orch.h) or `"simpler"` (the
    /// original's `pto_orchestration_api.h`, issue 39).
    pub(super) api: Option<String>,
    pub(super) signature: Vec<ArgDirection>,
    #[serde(default)]
    pub(super) include_dirs: Vec<PathBuf>,
    #[serde(default)]
    pub(super) defines: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIncore {
    pub(super) func_id: u32,
    pub(super) name: String,
    pub(super) core: String,
    pub(super) source: PathBuf,
    #[serde(default)]
    pub(super) include_dirs: Vec<PathBuf>,
    #[serde(default)]
    pub(super) defines: BTreeMap<String, String>,
    /// `"image"` or `"hosted"`: overrides the scene's `build`.
    pub(super) build: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTensor {
    pub(super) name: String,
    pub(super) dtype: String,
    pub(super) shape: Vec<RawDim>,
    #[serde(default)]
    pub(super) init: Option<RawInit>,
    #[serde(default)]
    pub(super) seed: u64,
    pub(super) rtol: Option<RawNum>,
    pub(super) atol: Option<RawNum>,
    /// `"allclose"`, `"exact"` or `{ custom = "NAME", ... }`
    /// ([`crate::compare`]).
    pub(super) compare: Option<toml::Value>,
    #[serde(default)]
    pub(super) allow_nonfinite: bool,
    #[serde(default)]
    pub(super) skip_golden: bool,
    /// Level 3: a leading rank dimension, slice r to rank r.
    #[serde(default)]
    pub(super) per_rank: bool,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawDim {
    Fixed(i64),
    Expr(String),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub(super) enum RawInit {
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

pub(super) fn zero() -> RawNum {
    RawNum::Float(0.0)
}
pub(super) fn one() -> RawNum {
    RawNum::Float(1.0)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScalar {
    pub(super) name: String,
    pub(super) dtype: String,
    pub(super) value: RawNum,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCase {
    pub(super) name: String,
    #[serde(default)]
    pub(super) params: BTreeMap<String, Value>,
    pub(super) platforms: Option<Vec<String>>,
    #[serde(default)]
    pub(super) manual: Option<RawManual>,
    #[serde(default)]
    pub(super) seed: Option<u64>,
    /// `true`, or a list of output tensors ([`crate::compare`]).
    pub(super) skip_golden: Option<toml::Value>,
    /// Per-case fixture overrides: tensor name -> `init` (read as TOML
    /// values first, so a bad kind names the case and the tensor).
    #[serde(default)]
    pub(super) init: BTreeMap<String, toml::Value>,
}

// ---------------------------------------------------------------------------
// Validated model.
