//! The orchestration's arguments: tensors then scalars, positionally
//! matching the signature, each with a name, a dtype and (tensors) a
//! shape, fixture, tolerance and comparison.

use std::collections::BTreeSet;

use scene_golden::DType;

use super::{Checked, Validator, compare, is_c_identifier};
use crate::scene::dtype::float_exact;
use crate::scene::expr::{Num, Params};
use crate::scene::raw::{RawDim, RawScalar, RawTensor};
use crate::scene::shape::{Dim, ShapeError};
use crate::scene::{
    ArgDirection, DTypeSpec, InitSpec, NumSpec, ScalarSpec, TensorSpec, dtype_from_name, int_range,
};

impl Validator<'_> {
    /// Every tensor; `None` when any has a problem (each one reported).
    pub(super) fn tensors(
        &self,
        raw: Vec<RawTensor>,
        signature: &[ArgDirection],
        arg_names: &mut BTreeSet<String>,
    ) -> Option<Vec<TensorSpec>> {
        let mut tensors = Some(Vec::with_capacity(raw.len()));
        for (i, t) in raw.into_iter().enumerate() {
            match (self.tensor(i, t, signature, arg_names), tensors.as_mut()) {
                (Some(spec), Some(list)) => list.push(spec),
                _ => tensors = None,
            }
        }
        tensors
    }

    fn tensor(
        &self,
        i: usize,
        t: RawTensor,
        signature: &[ArgDirection],
        arg_names: &mut BTreeSet<String>,
    ) -> Option<TensorSpec> {
        let field = |f: &str| format!("tensors[{i}].{f}");
        // Past the signature's end (its length is reported apart) the
        // direction is unknown and the checks that need it are skipped.
        let direction = match signature.get(i) {
            Some(ArgDirection::Scalar) => {
                self.problem(
                    "orchestration.signature",
                    format!(
                        "entry {i} is `scalar` but argument {i} is tensor `{}`",
                        t.name
                    ),
                );
                None
            }
            other => other.copied(),
        };
        let name = self.report(
            self.file_name(&field("name"), "tensor", &t.name)
                .and_then(|()| {
                    if arg_names.insert(t.name.clone()) {
                        Ok(())
                    } else {
                        Err(self.err(
                            field("name"),
                            format!("duplicate argument name `{}`", t.name),
                        ))
                    }
                }),
        );
        let dtype = match dtype_from_name(&t.dtype) {
            Some(d) => Some(DTypeSpec::Fixed(d)),
            // A name: a string param of each case names the dtype.
            None if is_c_identifier(&t.dtype) => Some(DTypeSpec::Param(t.dtype.clone())),
            None => {
                self.problem(field("dtype"), format!("unknown dtype `{}`", t.dtype));
                None
            }
        };
        let tolerance = |f: &str, raw| {
            self.report(self.opt_num(&field(f), raw).and_then(|v| {
                self.literal_tolerance(&field(f), &v)?;
                Ok(v)
            }))
        };
        let rtol = tolerance("rtol", t.rtol);
        let atol = tolerance("atol", t.atol);
        let shape = if t.shape.is_empty() {
            self.problem(field("shape"), "must have at least one dimension");
            None
        } else {
            self.report(
                t.shape
                    .iter()
                    .map(|d| match d {
                        RawDim::Fixed(n) if *n > 0 => Ok(Dim::Fixed(*n as usize)),
                        RawDim::Fixed(n) => Err(ShapeError::NotPositive(*n)),
                        RawDim::Expr(e) => Dim::parse(e),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| self.err(field("shape"), e.to_string())),
            )
        };
        let init = match t.init {
            None => Some(InitSpec::Zeros),
            Some(init) => self.report(self.init_spec(&field("init"), init)),
        };
        let direction = direction?;
        let compare_given = t.compare.is_some();
        let own_tolerance = matches!(&rtol, Some(Some(_))) || matches!(&atol, Some(Some(_)));
        let compare = self.report(compare::compare_spec(
            i,
            (&t.name, direction.is_output(), &direction.to_string()),
            t.compare,
            own_tolerance,
        ));
        // The flags are separate keys: checked even when `compare` is bad.
        let judged = compare.clone().unwrap_or_default();
        let flags = self.report(compare::check_tensor_flags(
            i,
            &compare::TensorInfo {
                name: &t.name,
                output: direction.is_output(),
                direction: direction.to_string(),
                compare: &judged,
                allow_nonfinite: t.allow_nonfinite,
                skip_golden: t.skip_golden,
            },
            compare_given,
        ));
        let spec = TensorSpec {
            name: t.name,
            dtype: dtype?,
            shape: shape?,
            init: init?,
            seed: t.seed,
            direction,
            rtol: rtol?,
            atol: atol?,
            compare: compare?,
            allow_nonfinite: t.allow_nonfinite,
            skip_golden: t.skip_golden,
            per_rank: t.per_rank,
        };
        name?;
        flags?;
        Some(spec)
    }

    /// Every scalar; `None` when any has a problem (each one reported).
    pub(super) fn scalars(
        &self,
        raw: Vec<RawScalar>,
        signature: &[ArgDirection],
        first: usize,
        arg_names: &mut BTreeSet<String>,
    ) -> Option<Vec<ScalarSpec>> {
        let mut scalars = Some(Vec::with_capacity(raw.len()));
        for (j, s) in raw.into_iter().enumerate() {
            match (
                self.scalar(j, first + j, s, signature, arg_names),
                scalars.as_mut(),
            ) {
                (Some(spec), Some(list)) => list.push(spec),
                _ => scalars = None,
            }
        }
        scalars
    }

    fn scalar(
        &self,
        j: usize,
        i: usize,
        s: RawScalar,
        signature: &[ArgDirection],
        arg_names: &mut BTreeSet<String>,
    ) -> Option<ScalarSpec> {
        let field = |f: &str| format!("scalars[{j}].{f}");
        let direction = match signature.get(i) {
            Some(d) if *d != ArgDirection::Scalar => {
                self.problem(
                    "orchestration.signature",
                    format!("entry {i} is `{d}` but argument {i} is scalar `{}`", s.name),
                );
                None
            }
            Some(_) => Some(()),
            None => None,
        };
        let name = if arg_names.insert(s.name.clone()) {
            Some(())
        } else {
            self.problem(
                field("name"),
                format!("duplicate argument name `{}`", s.name),
            );
            None
        };
        let dtype = self.report(self.dtype(&field("dtype"), &s.dtype).and_then(|dtype| {
            if matches!(dtype, DType::F16 | DType::BF16 | DType::Bool) {
                return Err(self.err(
                    field("dtype"),
                    format!(
                        "{dtype} is not supported for scalars (use an integer type, f32 or f64)"
                    ),
                ));
            }
            Ok(dtype)
        }));
        let value = self.report(self.num(&field("value"), s.value));
        let (dtype, value) = (dtype?, value?);
        // A literal is checked once; an expression in every case.
        if let NumSpec::Int(_) | NumSpec::Float(_) = value
            && let Ok(v) = value.eval(&Params::new())
        {
            self.report(self.scalar_value(&field("value"), "", &s.name, dtype, v))?;
        }
        direction?;
        name?;
        Some(ScalarSpec {
            name: s.name,
            dtype,
            value,
        })
    }

    /// A scalar's value (a literal, or its value in one case) as its
    /// dtype passes it: in range and exact, or an error naming `field`.
    pub(super) fn scalar_value(
        &self,
        field: &str,
        prefix: &str,
        name: &str,
        dtype: DType,
        value: Num,
    ) -> Checked<()> {
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
}
