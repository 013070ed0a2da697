"""Expected `C` of ex_tmr_benchmark_bgemm (mirrors the original's
test_benchmark_bgemm.py): C tile (group, i) = sum over k of
A[group, k, i] @ B[group, k, i], accumulated in f32 in k order."""

import numpy as np


def compute_golden(tensors, params):
    t = int(params["incore_data_size"])
    k = int(params["grid_k"])
    loop = int(params["incore_loop"])
    groups = int(params["num_groups"])
    want = [t, k, groups, loop]
    got = [int(v) for v in tensors["config"]]
    if got != want:
        raise ValueError("config %r disagrees with the case's params %r" % (got, want))
    a = tensors["A"].reshape(groups, k, loop, t, t).astype(np.float64)
    b = tensors["B"].reshape(groups, k, loop, t, t).astype(np.float64)
    acc = tensors["C"].reshape(groups, loop, t, t).copy()  # its initial value
    for step in range(k):
        acc += np.matmul(a[:, step], b[:, step]).astype(np.float32)
    tensors["C"][:] = acc.reshape(-1)
