"""hbg_bgemm: C[b, m, n] += sum over k of A[b, m, k] @ B[b, k, n], tiles of
64x64 stored tile-first (the layout of the original's bgemm_orch.cpp)."""

import numpy as np

TILE = 64
GRID_M = GRID_K = GRID_N = 4
BATCH = 1


def compute_golden(tensors, params):
    a = tensors["A"].astype(np.float64).reshape(BATCH, GRID_M, GRID_K, TILE, TILE)
    b = tensors["B"].astype(np.float64).reshape(BATCH, GRID_K, GRID_N, TILE, TILE)
    c = tensors["C"].astype(np.float64).reshape(BATCH, GRID_M, GRID_N, TILE, TILE)
    # one product per (m, k, n), accumulated over k: "bmkij,bknjl->bmnil"
    c = c + np.einsum("bmkij,bknjl->bmnil", a, b)
    tensors["C"][:] = c.astype(np.float32).reshape(-1)
