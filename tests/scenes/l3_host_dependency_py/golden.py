"""l3_host_dependency_py: the golden of the whole step sequence, and the
host step itself (`center`, run between the two chip steps)."""

import numpy as np


def center(tensors, params):
    """The host step: g[r] = f[r] - mean over ranks of f (every rank's
    slice, rank-major, as the chip steps left it)."""
    f = tensors["f"]
    tensors["g"][...] = f - f.mean(axis=0, dtype=np.float32)


def compute_golden(tensors, params):
    a, b = tensors["a"], tensors["b"]
    s = a + b
    f = (s + np.float32(1)) * (s + np.float32(2)) + s
    mean = np.zeros_like(f[0])
    for r in range(f.shape[0]):
        mean += f[r]
    mean /= np.float32(f.shape[0])
    g = f - mean
    tensors["f"][...] = f
    tensors["g"][...] = g
    tensors["y"][...] = g * a
