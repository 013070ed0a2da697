"""Expected `f` of ex_tmr_vector_example (mirrors the original's
test_vector_example.py): f = (s + 1) * (s + 2) + s with s = a + b, each step
rounded to f32 as the kernels round it."""

import numpy as np


def compute_golden(tensors, params):
    s = tensors["a"] + tensors["b"]
    one, two = np.float32(1.0), np.float32(2.0)
    tensors["f"][:] = (s + one) * (s + two) + s
