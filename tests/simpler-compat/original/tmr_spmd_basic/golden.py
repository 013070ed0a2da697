"""Expected `output` of tmr_spmd_basic (mirrors the original's
test_spmd_basic.py): one block of one mixed task reports its SPMD context."""

LINE = 16  # floats per cache line


def compute_golden(tensors, params):
    out = tensors["output"]
    block_idx, block_num = 0.0, 1.0
    out[0:2] = (block_idx, block_num)  # the AIC kernel, cache line 0
    for sub_block in (0, 1):  # each AIV kernel, cache line 1 + sub-block
        base = (1 + sub_block) * LINE
        out[base:base + 3] = (block_idx, block_num, float(sub_block))
