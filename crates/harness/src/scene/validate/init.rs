//! Fixtures: a tensor's `init` (and a case's `init` overrides) parsed,
//! then resolved per case into a checked [`Init`].

use std::collections::BTreeMap;

use scene_golden::{DType, Init, ListItem};

use super::{Checked, Validator};
use crate::scene::expr::{Num, Params, Value};
use crate::scene::raw::RawInit;
use crate::scene::{ArgDirection, InitSpec, NumSpec, TensorSpec, int_range};

impl Validator<'_> {
    /// Per-case `init` overrides: each names an input tensor of the scene
    /// and is a valid `init` table. Every override is checked; a bad one
    /// maps to `None` (its problem reported).
    pub(super) fn case_inits(
        &self,
        i: usize,
        prefix: &str,
        raw: BTreeMap<String, toml::Value>,
        tensors: &[TensorSpec],
    ) -> BTreeMap<String, Option<InitSpec>> {
        raw.into_iter()
            .map(|(name, value)| {
                let spec = self.report(self.case_init(i, prefix, &name, value, tensors));
                (name, spec)
            })
            .collect()
    }

    fn case_init(
        &self,
        i: usize,
        prefix: &str,
        name: &str,
        value: toml::Value,
        tensors: &[TensorSpec],
    ) -> Checked<InitSpec> {
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
        self.init_spec(&field, raw)
    }

    /// The raw `init` with its expressions parsed.
    pub(super) fn init_spec(&self, field: &str, raw: RawInit) -> Checked<InitSpec> {
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
    pub(super) fn resolve_init(
        &self,
        field: &str,
        prefix: &str,
        spec: &InitSpec,
        dtype: DType,
        shape: &[usize],
        params: &Params,
    ) -> Checked<Init> {
        let num = |what: &str, n: &NumSpec| {
            n.eval(params)
                .map_err(|e| self.err(field, format!("{prefix}{what}: {e}")))
        };
        let float = |what: &str, n: &NumSpec| -> Checked<f64> {
            let v = num(what, n)?.as_f64();
            if v.is_finite() {
                Ok(v)
            } else {
                Err(self.err(field, format!("{prefix}{what} must be finite, got {v}")))
            }
        };
        let int = |what: &str, n: &NumSpec| -> Checked<i64> {
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
    ) -> Checked<()> {
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
