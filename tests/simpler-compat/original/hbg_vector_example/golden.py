"""hbg_vector_example: f = (a + b + 1) * (a + b + 2), step by step in f32
as the task graph of the original's example_orch.cpp computes it."""

import numpy as np


def compute_golden(tensors, params):
    a = tensors["a"].astype(np.float32)
    b = tensors["b"].astype(np.float32)
    c = a + b                      # task 0 (ADD)
    d = c + np.float32(1.0)        # task 1 (ADD_SCALAR, 1.0)
    e = c + np.float32(2.0)        # task 2 (ADD_SCALAR, 2.0)
    tensors["f"][:] = d * e        # task 3 (MUL)
