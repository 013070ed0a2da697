//! A tensor's `compare` and the `skip_golden` / `allow_nonfinite` flags:
//! parsed, checked against the tensor's direction and tolerance, and
//! resolved per case into the [`Comparison`] the compare stage runs.

use std::collections::{BTreeMap, BTreeSet};

use crate::compare::Comparison;
use crate::scene::expr::{Expr, Params};
use crate::scene::{ArgSpec, CompareSpec, Problem, TensorSpec};

impl TensorSpec {
    /// What the comparison rules see of this tensor.
    pub(super) fn info(&self) -> TensorInfo<'_> {
        TensorInfo {
            name: &self.name,
            output: self.direction.is_output(),
            direction: self.direction.to_string(),
            compare: &self.compare,
            allow_nonfinite: self.allow_nonfinite,
            skip_golden: self.skip_golden,
        }
    }
}

/// What the comparison rules need to know of a tensor argument.
#[derive(Clone, Debug)]
pub(super) struct TensorInfo<'a> {
    pub name: &'a str,
    /// `out` or `inout`.
    pub output: bool,
    /// `in`, `out`, `inout`, as written in the signature.
    pub direction: String,
    pub compare: &'a CompareSpec,
    pub allow_nonfinite: bool,
    pub skip_golden: bool,
}

/// A case's `skip_golden`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) enum CaseSkip {
    #[default]
    None,
    /// `skip_golden = true`: every output.
    All,
    /// `skip_golden = ["out2"]`.
    Some(BTreeSet<String>),
}

impl CaseSkip {
    pub fn skips(&self, tensor: &str) -> bool {
        match self {
            CaseSkip::None => false,
            CaseSkip::All => true,
            CaseSkip::Some(s) => s.contains(tensor),
        }
    }
}

const KINDS: &str =
    "\"allclose\", \"exact\", { custom = \"NAME\", ... } or { python = \"FUNCTION\", ... }";

/// A tensor's `compare` (absent: allclose), checked against its direction
/// and its own `rtol` / `atol`.
pub(super) fn compare_spec(
    i: usize,
    (name, output, direction): (&str, bool, &str),
    raw: Option<toml::Value>,
    has_own_tolerance: bool,
) -> Result<CompareSpec, Problem> {
    let field = format!("tensors[{i}].compare");
    let Some(raw) = raw else {
        return Ok(CompareSpec::AllClose);
    };
    if !output {
        return Err(Problem::new(
            field,
            format!(
                "tensor `{name}` is an input ({direction}): only `out` / `inout` tensors are compared"
            ),
        ));
    }
    let spec = match raw {
        toml::Value::String(s) => match s.as_str() {
            "allclose" => CompareSpec::AllClose,
            "exact" => CompareSpec::Exact,
            other => {
                return Err(Problem::new(
                    field,
                    format!("unknown comparison `{other}` (expected {KINDS})"),
                ));
            }
        },
        toml::Value::Table(table) => {
            let mut custom = None;
            let mut python = None;
            let mut args = Vec::new();
            for (k, v) in table {
                let at = format!("{field}.{k}");
                if k == "custom" || k == "python" {
                    let what = if k == "custom" {
                        "the name of a registered comparison (a non-empty string)"
                    } else {
                        "the name of a function of the scene's Python file (an identifier)"
                    };
                    match v {
                        toml::Value::String(s) if k == "custom" && !s.trim().is_empty() => {
                            custom = Some(s)
                        }
                        toml::Value::String(s) if k == "python" && is_identifier(&s) => {
                            python = Some(s)
                        }
                        toml::Value::String(s) => {
                            return Err(Problem::new(at, format!("must be {what}, got `{s}`")));
                        }
                        other => {
                            return Err(Problem::new(
                                at,
                                format!("must be {what}, got {}", toml_kind(&other)),
                            ));
                        }
                    }
                    continue;
                }
                let num = match v {
                    toml::Value::Integer(n) => ArgSpec::Int(n),
                    toml::Value::Float(f) => {
                        if !f.is_finite() {
                            return Err(Problem::new(
                                at,
                                format!("comparison argument `{k}` must be finite, got {f}"),
                            ));
                        }
                        ArgSpec::Float(f)
                    }
                    toml::Value::String(text) => {
                        let expr =
                            Expr::parse(&text).map_err(|e| Problem::new(&at, e.to_string()))?;
                        ArgSpec::Expr { text, expr }
                    }
                    other => {
                        return Err(Problem::new(
                            at,
                            format!(
                                "comparison argument `{k}` must be a number or an expression of the case params, got {}",
                                toml_kind(&other)
                            ),
                        ));
                    }
                };
                args.push((k, num));
            }
            args.sort_by(|a, b| a.0.cmp(&b.0));
            match (custom, python) {
                (Some(name), None) => CompareSpec::Custom { name, args },
                (None, Some(function)) => CompareSpec::Python { function, args },
                (Some(_), Some(_)) => {
                    return Err(Problem::new(
                        field,
                        "a table names one comparison: `custom` (a registered Rust comparison) or `python` (a function of the scene's Python file), not both",
                    ));
                }
                (None, None) => {
                    return Err(Problem::new(
                        field,
                        format!(
                            "a table names a custom comparison: {{ custom = \"NAME\", ... }} or {{ python = \"FUNCTION\", ... }} (missing `custom` / `python`; expected {KINDS})"
                        ),
                    ));
                }
            }
        }
        other => {
            return Err(Problem::new(
                field,
                format!("expected {KINDS}, got {}", toml_kind(&other)),
            ));
        }
    };
    if spec == CompareSpec::Exact && has_own_tolerance {
        return Err(Problem::new(
            field,
            format!(
                "tensor `{name}`: `compare = \"exact\"` takes no tolerance; remove its `rtol` / `atol` (or use \"allclose\")"
            ),
        ));
    }
    Ok(spec)
}

/// `allow_nonfinite` and `skip_golden` on a tensor: outputs only, and a
/// tensor that is never compared takes no `compare`.
pub(super) fn check_tensor_flags(
    i: usize,
    t: &TensorInfo<'_>,
    compare_given: bool,
) -> Result<(), Problem> {
    let input = !t.output;
    for (flag, on) in [
        ("allow_nonfinite", t.allow_nonfinite),
        ("skip_golden", t.skip_golden),
    ] {
        if on && input {
            return Err(Problem::new(
                format!("tensors[{i}].{flag}"),
                format!(
                    "tensor `{}` is an input ({}): `{flag}` applies to `out` / `inout` tensors only",
                    t.name, t.direction
                ),
            ));
        }
    }
    if t.skip_golden && compare_given {
        return Err(Problem::new(
            format!("tensors[{i}].compare"),
            format!(
                "tensor `{}` has `skip_golden = true`, so it is never compared: remove `compare`",
                t.name
            ),
        ));
    }
    Ok(())
}

/// A case's `skip_golden`: `true`, `false`, or a list of output tensors.
pub(super) fn case_skip(
    i: usize,
    case: &str,
    raw: Option<toml::Value>,
    tensors: &[TensorInfo<'_>],
) -> Result<CaseSkip, Problem> {
    let field = format!("cases[{i}].skip_golden");
    let prefix = format!("case `{case}`: ");
    Ok(match raw {
        None | Some(toml::Value::Boolean(false)) => CaseSkip::None,
        Some(toml::Value::Boolean(true)) => CaseSkip::All,
        Some(toml::Value::Array(items)) => {
            let mut names = BTreeSet::new();
            for item in items {
                let toml::Value::String(name) = item else {
                    return Err(Problem::new(
                        field,
                        format!(
                            "{prefix}a list names output tensors (strings), got {}",
                            toml_kind(&item)
                        ),
                    ));
                };
                match tensors.iter().find(|t| t.name == name) {
                    None => {
                        let outputs: Vec<&str> = tensors
                            .iter()
                            .filter(|t| t.output)
                            .map(|t| t.name)
                            .collect();
                        return Err(Problem::new(
                            field,
                            format!(
                                "{prefix}no tensor `{name}` in the scene (outputs: {})",
                                outputs.join(", ")
                            ),
                        ));
                    }
                    Some(t) if !t.output => {
                        return Err(Problem::new(
                            field,
                            format!(
                                "{prefix}tensor `{name}` is an input ({}), not an output: only outputs have goldens",
                                t.direction
                            ),
                        ));
                    }
                    Some(_) => {}
                }
                if !names.insert(name.clone()) {
                    return Err(Problem::new(
                        field,
                        format!("{prefix}`{name}` is listed twice"),
                    ));
                }
            }
            CaseSkip::Some(names)
        }
        Some(other) => {
            return Err(Problem::new(
                field,
                format!(
                    "{prefix}expected true, false or a list of output tensor names, got {}",
                    toml_kind(&other)
                ),
            ));
        }
    })
}

/// Output `j`'s comparison in one case: skipped by the tensor or the case,
/// else its `compare` with the arguments evaluated (finite numbers).
pub(super) fn resolve(
    j: usize,
    t: &TensorInfo<'_>,
    case_skip: &CaseSkip,
    prefix: &str,
    params: &Params,
) -> Result<Comparison, Problem> {
    if t.skip_golden || case_skip.skips(t.name) {
        return Ok(Comparison::Skipped);
    }
    Ok(match t.compare {
        CompareSpec::AllClose => Comparison::AllClose,
        CompareSpec::Exact => Comparison::Exact,
        CompareSpec::Custom { name, args } => Comparison::Custom {
            name: name.clone(),
            args: resolve_args(j, args, prefix, params)?,
        },
        CompareSpec::Python { function, args } => {
            // The function sees the case params and its arguments in one
            // dict: an argument must not hide a param.
            if let Some((k, _)) = args.iter().find(|(k, _)| params.contains_key(k.as_str())) {
                return Err(Problem::new(
                    format!("tensors[{j}].compare.{k}"),
                    format!(
                        "{prefix}comparison argument `{k}` has the name of a case param; the Python comparison gets both in `params`: rename the argument"
                    ),
                ));
            }
            Comparison::Python {
                function: function.clone(),
                args: resolve_args(j, args, prefix, params)?,
            }
        }
    })
}

/// A comparison's arguments evaluated in the case (finite numbers).
fn resolve_args(
    j: usize,
    args: &[(String, ArgSpec)],
    prefix: &str,
    params: &Params,
) -> Result<BTreeMap<String, f64>, Problem> {
    let mut values = BTreeMap::new();
    for (k, spec) in args {
        let at = format!("tensors[{j}].compare.{k}");
        let v = spec
            .eval(params)
            .map_err(|e| Problem::new(&at, format!("{prefix}{e}")))?;
        if !v.is_finite() {
            return Err(Problem::new(
                at,
                format!("{prefix}comparison argument `{k}` must be finite, got {v}"),
            ));
        }
        values.insert(k.clone(), v);
    }
    Ok(values)
}

/// A Python identifier (ASCII): what `getattr(module, name)` can find.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `allow_nonfinite` only matters for an output some case skips (compared
/// outputs are judged against the golden, NaN and inf included); on an
/// output every case compares it would silently do nothing.
pub(super) fn check_allow_nonfinite(
    tensors: &[TensorInfo<'_>],
    skipped_somewhere: &[bool],
) -> Result<(), Problem> {
    for (i, t) in tensors.iter().enumerate() {
        if t.allow_nonfinite && !skipped_somewhere.get(i).copied().unwrap_or(false) {
            return Err(Problem::new(
                format!("tensors[{i}].allow_nonfinite"),
                format!(
                    "tensor `{}` is compared in every case, and its comparison judges NaN and inf \
                     against the golden (see `equal_nan`); `allow_nonfinite` applies to outputs \
                     skipped with `skip_golden`",
                    t.name
                ),
            ));
        }
    }
    Ok(())
}

fn toml_kind(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a float",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a datetime",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}
