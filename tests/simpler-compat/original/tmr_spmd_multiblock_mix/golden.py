"""Expected `output` of tmr_spmd_multiblock_mix (mirrors the original's
test_spmd_multiblock_mix.py)."""

import numpy as np

LINE = 16  # floats per cache line
SLOTS = 3  # cache lines per block: AIC, AIV0, AIV1
# (blocks, first cache line) of the five mixed tasks
LAUNCHES = ((2, 0), (8, 6), (12, 30), (24, 66), (48, 138))


def compute_golden(tensors, params):
    out = tensors["output"]
    for blocks, first in LAUNCHES:
        for slot in range(SLOTS):
            idx = np.arange(blocks)
            out[(first + idx * SLOTS + slot) * LINE] = idx.astype(np.float32)
