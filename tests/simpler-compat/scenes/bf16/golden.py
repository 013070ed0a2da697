"""What kernels/widen_narrow.cpp computes. numpy has no bfloat16: bf16
tensors arrive and leave as float32 arrays of bf16 values, and the
rounding to bf16 (nearest, ties to even) is done on the bits here."""

import numpy as np


def to_bf16(v):
    bits = np.asarray(v, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32)


def compute_golden(tensors, params):
    x = tensors["x"].astype(np.float32)
    wide = x * np.float32(3.0)
    narrow = to_bf16(wide + np.float32(1.0) / np.float32(3.0))
    return {"wide": wide, "narrow": narrow}
