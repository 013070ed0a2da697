//! The custom comparisons every registry starts with
//! ([`BUILTIN_COMPARISONS`]): cosine, first_rows, max_abs, mean_abs.

use scene_golden::assert_close;
use scene_golden::closeness::fmt_num;
use scene_golden::measure::{abs_error, cosine_similarity, leading_rows};

use super::rule::{Comparison, ComparisonCtx, ComparisonFailure, CustomComparison};

/// The comparisons every registry starts with.
pub const BUILTIN_COMPARISONS: [(&str, CustomComparison); 4] = [
    (
        "cosine",
        CustomComparison {
            args: &["min"],
            f: cosine,
        },
    ),
    (
        "first_rows",
        CustomComparison {
            args: &["rows"],
            f: first_rows,
        },
    ),
    (
        "max_abs",
        CustomComparison {
            args: &["max"],
            f: max_abs,
        },
    ),
    (
        "mean_abs",
        CustomComparison {
            args: &["max"],
            f: mean_abs,
        },
    ),
];

/// `cosine(min)`: the cosine similarity of output and golden (in `f64`,
/// over all elements) is at least `min`. NaN or inf anywhere fails.
/// `min <= -1` is refused: every similarity is at least -1, so such a
/// bound would pass any output (issue 27, a false green).
fn cosine(ctx: &ComparisonCtx<'_>) -> Result<String, ComparisonFailure> {
    let min = ctx.arg("min")?;
    if min <= -1.0 {
        return Err(ComparisonFailure(format!(
            "min = {} accepts every output (cosine similarity is never below -1); use a bound above -1",
            fmt_num(min, false)
        )));
    }
    let c = cosine_similarity(ctx.tensor, ctx.actual, ctx.expected).map_err(|e| e.to_string())?;
    let text = format!(
        "cosine similarity {} {} min {}",
        fmt_num(c, false),
        if c >= min { ">=" } else { "<" },
        fmt_num(min, false)
    );
    if c >= min { Ok(text) } else { Err(text.into()) }
}

/// `first_rows(rows)`: allclose (the tensor's tolerance) on the first
/// `rows` rows of the leading dimension; the other rows are ignored.
/// `rows = 0` is refused: it would compare nothing and pass any output.
fn first_rows(ctx: &ComparisonCtx<'_>) -> Result<String, ComparisonFailure> {
    let rows = ctx.arg_usize("rows")?;
    if rows == 0 {
        return Err(ComparisonFailure(
            "rows = 0 compares nothing (any output would pass); rows must be at least 1".into(),
        ));
    }
    let lead = ctx.expected.shape().first().copied().unwrap_or(0);
    if ctx.actual.shape() != ctx.expected.shape() {
        return Err(ComparisonFailure(format!(
            "shape mismatch: actual {:?}, expected {:?}",
            ctx.actual.shape(),
            ctx.expected.shape()
        )));
    }
    let (Some(a), Some(e)) = (
        leading_rows(ctx.actual, rows),
        leading_rows(ctx.expected, rows),
    ) else {
        return Err(ComparisonFailure(format!(
            "rows = {rows}, but the leading dimension of {:?} has {lead} rows",
            ctx.expected.shape()
        )));
    };
    let tol = ctx.tolerance;
    let within = Comparison::AllClose.describe(&tol);
    match assert_close(ctx.tensor, &a, &e, tol) {
        Ok(()) => Ok(format!(
            "rows 0..{rows} of {lead} within {within}; rows {rows}..{lead} ignored"
        )),
        Err(m) => Err(format!("in rows 0..{rows} of {lead}: {m}").into()),
    }
}

/// `max_abs(max)`: the greatest `|a - e|` is at most `max`.
fn max_abs(ctx: &ComparisonCtx<'_>) -> Result<String, ComparisonFailure> {
    let max = non_negative_max(ctx)?;
    let s = abs_error(ctx.tensor, ctx.actual, ctx.expected).map_err(|e| e.to_string())?;
    let at = s
        .max_at
        .map(|i| format!(" at index {i:?}"))
        .unwrap_or_default();
    let ok = s.max <= max;
    let text = format!(
        "max |actual - expected| = {}{at} {} max {}",
        fmt_num(s.max, false),
        if ok { "<=" } else { ">" },
        fmt_num(max, false)
    );
    if ok { Ok(text) } else { Err(text.into()) }
}

/// `mean_abs(max)`: the mean `|a - e|` is at most `max`.
fn mean_abs(ctx: &ComparisonCtx<'_>) -> Result<String, ComparisonFailure> {
    let max = non_negative_max(ctx)?;
    let s = abs_error(ctx.tensor, ctx.actual, ctx.expected).map_err(|e| e.to_string())?;
    let ok = s.mean <= max;
    let text = format!(
        "mean |actual - expected| = {} {} max {}",
        fmt_num(s.mean, false),
        if ok { "<=" } else { ">" },
        fmt_num(max, false)
    );
    if ok { Ok(text) } else { Err(text.into()) }
}

/// The `max` of `max_abs` / `mean_abs`. Non-finite bounds are refused by
/// [`ComparisonCtx::arg`] (an infinite one would pass anything); a
/// negative one could never pass, so it is a mistake worth naming rather
/// than a plain mismatch.
fn non_negative_max(ctx: &ComparisonCtx<'_>) -> Result<f64, ComparisonFailure> {
    let max = ctx.arg("max")?;
    if max < 0.0 {
        return Err(ComparisonFailure(format!(
            "max = {} is negative: no output can be within it",
            fmt_num(max, false)
        )));
    }
    Ok(max)
}
