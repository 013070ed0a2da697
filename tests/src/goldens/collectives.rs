//! Goldens of the level-3 collectives. Every tensor is the full, all-rank
//! tensor: row r (the leading rank dimension) is rank r's slice.

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

/// `x` as rows of its leading (rank) dimension.
fn rows(ctx: &GoldenCtx<'_>, name: &str) -> Result<(Vec<Vec<f32>>, Vec<usize>), GoldenError> {
    let t = ctx.tensor(name)?;
    let shape = t.shape().to_vec();
    let ranks = shape.first().copied().unwrap_or(1).max(1);
    let v = t.to_f32_vec();
    let per = v.len() / ranks;
    Ok((v.chunks(per.max(1)).map(<[f32]>::to_vec).collect(), shape))
}

fn output(ctx: &GoldenCtx<'_>, rows: Vec<Vec<f32>>) -> Result<GoldenOutputs, GoldenError> {
    let shape = ctx.tensor("y")?.shape().to_vec();
    let flat: Vec<f32> = rows.into_iter().flatten().collect();
    Ok(GoldenOutputs::new().with("y", Tensor::from_f32(DType::F32, &shape, &flat)?))
}

/// y[r] = x[r] @ w[r]: every rank on its own shards (no communication).
pub fn rank_local_linear(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let x = ctx.tensor("x")?;
    let w = ctx.tensor("w")?;
    let (xs, ws) = (x.shape().to_vec(), w.shape().to_vec());
    let (p, m, k, n) = (xs[0], xs[1], xs[2], ws[2]);
    let (x, w) = (x.to_f32_vec(), w.to_f32_vec());
    let per_rank = (0..p)
        .map(|r| {
            let mut y = vec![0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    let acc: f64 = (0..k)
                        .map(|q| {
                            f64::from(x[(r * m + i) * k + q]) * f64::from(w[(r * k + q) * n + j])
                        })
                        .sum();
                    y[i * n + j] = acc as f32;
                }
            }
            y
        })
        .collect();
    output(ctx, per_rank)
}

/// y[r] = sum over k of x[k], for every rank r.
pub fn allreduce_sum(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let (x, _) = rows(ctx, "x")?;
    let n = x.first().map_or(0, Vec::len);
    let sum: Vec<f32> = (0..n).map(|i| x.iter().map(|r| r[i]).sum()).collect();
    output(ctx, vec![sum; x.len()])
}

/// y[r] = concat of x[0..nranks].
pub fn allgather(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let (x, _) = rows(ctx, "x")?;
    let all: Vec<f32> = x.iter().flatten().copied().collect();
    output(ctx, vec![all; x.len()])
}

/// allgather through a window tensor: y[r] = concat of x[0..nranks], and
/// rank r's window `scratch[r]` holds x[r] in slot r, zeros elsewhere (its
/// init; only the rank's own stage task writes it).
pub fn allgather_window(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let (x, _) = rows(ctx, "x")?;
    let p = x.len();
    let c = x.first().map_or(0, Vec::len);
    let mut scratch = vec![0f32; p * p * c];
    for (r, row) in x.iter().enumerate() {
        scratch[(r * p + r) * c..(r * p + r + 1) * c].copy_from_slice(row);
    }
    let shape = ctx.tensor("scratch")?.shape().to_vec();
    let scratch = Tensor::from_f32(DType::F32, &shape, &scratch)?;
    let all: Vec<f32> = x.iter().flatten().copied().collect();
    let y = output(ctx, vec![all; p])?;
    Ok(y.with("scratch", scratch))
}

/// y[r] = x[root].
pub fn broadcast(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let (x, _) = rows(ctx, "x")?;
    let root = usize::try_from(ctx.param("root")?).unwrap_or(usize::MAX);
    let src = x
        .get(root)
        .cloned()
        .ok_or_else(|| GoldenError::MissingParam(format!("root {root} is not a rank")))?;
    output(ctx, vec![src; x.len()])
}

/// y[r][j] = sum over k of x[k][r * C + j].
pub fn reduce_scatter(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let (x, _) = rows(ctx, "x")?;
    let p = x.len();
    let c = x.first().map_or(0, Vec::len) / p.max(1);
    let y = (0..p)
        .map(|r| {
            (0..c)
                .map(|j| x.iter().map(|k| k[r * c + j]).sum())
                .collect()
        })
        .collect();
    output(ctx, y)
}

/// y[r][s * C + j] = x[s][r * C + j].
pub fn all_to_all(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let (x, _) = rows(ctx, "x")?;
    let p = x.len();
    let c = x.first().map_or(0, Vec::len) / p.max(1);
    let y = (0..p)
        .map(|r| {
            (0..p)
                .flat_map(|s| (0..c).map(move |j| (s, j)))
                .map(|(s, j)| x[s][r * c + j])
                .collect()
        })
        .collect();
    output(ctx, y)
}

/// y[r] = sum over k of x[k] @ w[k] (f64 accumulation), for every rank r.
pub fn ffn_tp_parallel(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let x = ctx.tensor("x")?;
    let w = ctx.tensor("w")?;
    let (xs, ws) = (x.shape().to_vec(), w.shape().to_vec());
    let (p, m, k, n) = (xs[0], xs[1], xs[2], ws[2]);
    let (x, w) = (x.to_f32_vec(), w.to_f32_vec());
    let mut sum = vec![0f64; m * n];
    for r in 0..p {
        for i in 0..m {
            for j in 0..n {
                sum[i * n + j] += (0..k)
                    .map(|q| f64::from(x[(r * m + i) * k + q]) * f64::from(w[(r * k + q) * n + j]))
                    .sum::<f64>();
            }
        }
    }
    let one: Vec<f32> = sum.iter().map(|&v| v as f32).collect();
    output(ctx, vec![one; p])
}
