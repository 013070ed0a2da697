//! `spmd_multiblock_mix`: simpler's `TestSpmdMultiblockMix.compute_golden`:
//! for each task `(block_num, base_cl)` and each of its blocks, the first
//! float of the block's three cache lines (cube, aiv0, aiv1) is the block
//! index; the rest keeps its input.

use scene_harness::tensors::{DType, Tensor};
use scene_harness::{GoldenCtx, GoldenError, GoldenOutputs};

const FLOATS_PER_CACHE_LINE: usize = 16;
const SLOTS_PER_BLOCK: usize = 3;
const TASKS: [(usize, usize); 5] = [(2, 0), (8, 6), (12, 30), (24, 66), (48, 138)];

pub fn golden(ctx: &GoldenCtx<'_>) -> Result<GoldenOutputs, GoldenError> {
    let input = ctx.tensor("output")?;
    let mut out = input.to_f32_vec();
    for (block_num, base_cl) in TASKS {
        for block in 0..block_num {
            for slot in 0..SLOTS_PER_BLOCK {
                let cl = base_cl + block * SLOTS_PER_BLOCK + slot;
                let at = out.get_mut(cl * FLOATS_PER_CACHE_LINE).ok_or_else(|| {
                    GoldenError::Failed(format!("`output` has no cache line {cl}"))
                })?;
                *at = block as f32;
            }
        }
    }
    Ok(GoldenOutputs::new().with("output", Tensor::from_f32(DType::F32, input.shape(), &out)?))
}
