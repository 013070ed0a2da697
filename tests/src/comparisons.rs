//! Custom comparisons of the scenes package, registered by name like
//! goldens (`compare = { custom = "rel_l2", max = 1e-3 }` in a tensor of
//! `scene.toml`). The harness's built-ins (`cosine`, `first_rows`,
//! `max_abs`, `mean_abs`) need no registration.

use scene_harness::tensors::closeness::fmt_num;
use scene_harness::{ComparisonCtx, ComparisonFailure, GoldenRegistry};

/// Registers the package's comparisons.
pub fn register(r: GoldenRegistry) -> GoldenRegistry {
    r.register_comparison("rel_l2", &["max"], rel_l2)
}

/// `rel_l2(max)`: the relative L2 error `||a - e|| / ||e||` (in `f64`) is
/// at most `max`; with `e` all zero, `||a||` itself must be.
fn rel_l2(ctx: &ComparisonCtx<'_>) -> Result<String, ComparisonFailure> {
    let max = ctx.arg("max")?;
    if ctx.actual.shape() != ctx.expected.shape() || ctx.actual.dtype() != ctx.expected.dtype() {
        return Err(ComparisonFailure(format!(
            "layout mismatch: actual {} {:?}, expected {} {:?}",
            ctx.actual.dtype(),
            ctx.actual.shape(),
            ctx.expected.dtype(),
            ctx.expected.shape()
        )));
    }
    let (a, e) = (ctx.actual.to_f64_vec(), ctx.expected.to_f64_vec());
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (a, e) in a.iter().zip(&e) {
        diff += (a - e) * (a - e);
        norm += e * e;
    }
    let err = if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    };
    let ok = err <= max;
    let text = format!(
        "relative L2 error {} {} max {}",
        fmt_num(err, false),
        if ok { "<=" } else { ">" },
        fmt_num(max, false)
    );
    if ok {
        Ok(text)
    } else {
        Err(ComparisonFailure(text))
    }
}
