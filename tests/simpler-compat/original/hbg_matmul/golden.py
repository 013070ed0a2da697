"""hbg_matmul: F = exp(B @ W1 + B @ W2) with B = sqrt(log(A)), on 128x128
matrices, following the four tasks of the original's matmul_orch.cpp:
B is a half tensor there (log and sqrt on half tiles), the products are
f32."""

import numpy as np

ROWS = COLS = 128


def compute_golden(tensors, params):
    a = tensors["a"].astype(np.float32).reshape(ROWS, COLS)
    w1 = tensors["w1"].astype(np.float32).reshape(ROWS, COLS)
    w2 = tensors["w2"].astype(np.float32).reshape(ROWS, COLS)
    # t0: half in, half out (each step rounded to half)
    log_a = np.log(a).astype(np.float16).astype(np.float32)
    b = np.sqrt(log_a).astype(np.float16).astype(np.float32)
    # t1, t2: half operands, f32 results
    c = (b.astype(np.float64) @ w1.astype(np.float64)).astype(np.float32)
    d = (b.astype(np.float64) @ w2.astype(np.float64)).astype(np.float32)
    # t3
    tensors["f"][:] = np.exp(c + d).astype(np.float32).reshape(-1)
