//! The cases: names, platforms, params, `[derived]`, and every tensor,
//! scalar and comparison resolved in each case.

use std::collections::BTreeSet;

use scene_golden::Tolerance;

use super::{Checked, Validator, compare, is_c_identifier};
use crate::compare::Comparison;
use crate::scene::expr::{Num, Params, Value};
use crate::scene::raw::{RawCase, RawDerived, RawManual};
use crate::scene::{
    Case, CaseTensor, DTypeSpec, Derived, InitSpec, Manual, NumSpec, ScalarSpec, TensorSpec,
    ToleranceSpec, dtype_from_name,
};

/// What resolving a case needs, all valid: without it only the checks of
/// the case's own keys run.
pub(super) struct Declared<'a> {
    pub tensors: &'a [TensorSpec],
    pub scalars: &'a [ScalarSpec],
    pub tolerance: &'a ToleranceSpec,
    pub derived: &'a [Derived],
}

impl Validator<'_> {
    /// `[derived]`: plain names, well-formed expressions, and every param
    /// an expression reads is a case param or a derived param above it.
    pub(super) fn derived(&self, raw: RawDerived) -> Option<Vec<Derived>> {
        let names: Vec<&str> = raw.0.iter().map(|(n, _)| n.as_str()).collect();
        let mut out = Some(Vec::with_capacity(raw.0.len()));
        for (i, (name, value)) in raw.0.iter().enumerate() {
            let d = self.report(self.one_derived(i, name, value, &names));
            match (d, out.as_mut()) {
                (Some(d), Some(list)) => list.push(d),
                _ => out = None,
            }
        }
        out
    }

    fn one_derived(
        &self,
        i: usize,
        name: &str,
        value: &crate::scene::raw::RawNum,
        names: &[&str],
    ) -> Checked<Derived> {
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
        Ok(Derived {
            name: name.to_string(),
            value,
        })
    }

    /// Unique case names; every dtype, dim, init, tolerance and scalar
    /// resolved in every case (when the declarations are valid).
    pub(super) fn cases(
        &self,
        raw: Vec<RawCase>,
        decl: Option<&Declared<'_>>,
    ) -> Option<Vec<Case>> {
        if raw.is_empty() {
            self.problem("cases", "a scene needs at least one case");
            return None;
        }
        let mut case_names = BTreeSet::new();
        let mut cases = Some(Vec::with_capacity(raw.len()));
        let n_tensors = decl.map_or(0, |d| d.tensors.len());
        let mut skipped_somewhere = vec![false; n_tensors];
        for (i, c) in raw.into_iter().enumerate() {
            let case = self.case(i, c, &mut case_names, decl, &mut skipped_somewhere);
            match (case, cases.as_mut()) {
                (Some(case), Some(list)) => list.push(case),
                _ => cases = None,
            }
        }
        if let (Some(_), Some(decl)) = (&cases, decl) {
            let infos: Vec<_> = decl.tensors.iter().map(TensorSpec::info).collect();
            self.report(compare::check_allow_nonfinite(&infos, &skipped_somewhere))?;
        }
        cases
    }

    /// Case `i`: its own keys, then (with valid declarations) everything
    /// resolved in it. A problem with its params or `[derived]` values
    /// stops the resolution of this case only.
    fn case(
        &self,
        i: usize,
        c: RawCase,
        case_names: &mut BTreeSet<String>,
        decl: Option<&Declared<'_>>,
        skipped_somewhere: &mut [bool],
    ) -> Option<Case> {
        let field = |f: &str| format!("cases[{i}].{f}");
        let name = self.report(self.case_name(i, &c.name, case_names));
        let platforms = match &c.platforms {
            Some(p) => self.report(self.platform_list(&field("platforms"), p)),
            None => Some(()),
        };
        let manual = match c.manual {
            None | Some(RawManual::All(false)) => Some(Manual::Never),
            Some(RawManual::All(true)) => Some(Manual::Always),
            Some(RawManual::On(list)) => self
                .report(self.platform_list(&field("manual"), &list))
                .map(|()| Manual::On(list)),
        };
        let prefix = format!("case `{}`: ", c.name);
        let lists = self.all(c.params.iter().map(|(name, v)| {
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
            Ok(())
        }));
        // A bad list param would fail again in every fixture reading it.
        let decl = decl.filter(|_| lists)?;
        let (tensors, scalars, derived) = (decl.tensors, decl.scalars, decl.derived);
        let init = self.case_inits(i, &prefix, c.init, tensors);
        let env = self.report(self.case_values(i, &prefix, &c.params, derived))?;
        // A tensor whose override is bad is not resolved (its problem is
        // reported); every other one is.
        let mut resolved: Vec<Option<CaseTensor>> = tensors
            .iter()
            .enumerate()
            .map(|(j, t)| {
                let over = match init.get(&t.name) {
                    Some(None) => return None,
                    Some(Some(spec)) => Some((format!("cases[{i}].init.{}", t.name), spec)),
                    None => None,
                };
                self.report(self.case_tensor(j, t, &prefix, &env, decl.tolerance, over))
            })
            .collect();
        let infos: Vec<_> = tensors.iter().map(TensorSpec::info).collect();
        let skip = self.report(compare::case_skip(i, &c.name, c.skip_golden, &infos));
        if let Some(skip) = &skip {
            for (j, (t, r)) in infos.iter().zip(resolved.iter_mut()).enumerate() {
                if !t.output {
                    continue;
                }
                let cmp = self.report(compare::resolve(j, t, skip, &prefix, &env));
                match (cmp, r) {
                    (Some(cmp), Some(r)) => {
                        skipped_somewhere[j] |= cmp == Comparison::Skipped;
                        r.comparison = Some(cmp);
                    }
                    (None, r) => *r = None,
                    (Some(_), None) => {}
                }
            }
        }
        let mut values = Some(Vec::with_capacity(scalars.len()));
        for (j, s) in scalars.iter().enumerate() {
            let v = self.report(self.case_scalar(i, j, s, &prefix, &env, derived));
            match (v, values.as_mut()) {
                (Some(v), Some(list)) => list.push(v),
                _ => values = None,
            }
        }
        let tensors = resolved.into_iter().collect::<Option<Vec<_>>>();
        name?;
        platforms?;
        skip?;
        let init = init
            .into_iter()
            .map(|(k, v)| v.map(|v| (k, v)))
            .collect::<Option<_>>()?;
        Some(Case {
            name: c.name,
            params: c.params,
            values: env,
            init,
            platforms: c.platforms,
            manual: manual?,
            seed: c.seed.unwrap_or(0),
            tensors: tensors?,
            scalars: values?,
            group: None,
            device_memory: None,
        })
    }

    fn case_name(&self, i: usize, name: &str, case_names: &mut BTreeSet<String>) -> Checked<()> {
        let field = format!("cases[{i}].name");
        if name.is_empty() || name.contains("::") || name.contains(char::is_whitespace) {
            return Err(self.err(field, format!("`{name}` is not a valid case name")));
        }
        self.file_name(&field, "case", name)?;
        if !case_names.insert(name.to_string()) {
            return Err(self.err(field, format!("duplicate case name `{name}`")));
        }
        Ok(())
    }

    /// Scalar `j`'s value in case `i`, checked against its dtype.
    fn case_scalar(
        &self,
        i: usize,
        j: usize,
        s: &ScalarSpec,
        prefix: &str,
        env: &Params,
        derived: &[Derived],
    ) -> Checked<Num> {
        let at = match s.value.param() {
            Some(p) if derived.iter().any(|d| d.name == p) => format!("derived.{p}"),
            Some(p) => format!("cases[{i}].params.{p}"),
            None => format!("scalars[{j}].value"),
        };
        let v = s.value.eval(env).map_err(|e| {
            self.err(
                format!("scalars[{j}].value"),
                format!("{prefix}scalar `{}`: {e}", s.name),
            )
        })?;
        self.scalar_value(&at, prefix, &s.name, s.dtype, v)?;
        Ok(v)
    }

    /// A case's params plus the `[derived]` values, computed in order;
    /// a case param that a derived one would shadow is an error.
    fn case_values(
        &self,
        i: usize,
        prefix: &str,
        params: &Params,
        derived: &[Derived],
    ) -> Checked<Params> {
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

    /// Tensor `j` as one case resolves it.
    fn case_tensor(
        &self,
        j: usize,
        t: &TensorSpec,
        prefix: &str,
        params: &Params,
        scene_tol: &ToleranceSpec,
        init_override: Option<(String, &InitSpec)>,
    ) -> Checked<CaseTensor> {
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
}
