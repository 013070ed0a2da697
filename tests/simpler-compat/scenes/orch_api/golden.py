"""What orchestration.cpp computes (see its comment)."""

import numpy as np


def compute_golden(tensors, params):
    x = tensors["x"].astype(np.float32)
    n = x.shape[0]
    scale = np.float32(0.5)  # the scalar `scale` of scene.toml
    g = int(params["g"])
    scaled = x * scale
    y = np.ones(n, dtype=np.float32)
    y[n // 2:] += scaled[n // 2:]
    if g > 0:
        y[0] = 999.0
    gate = np.zeros(4, dtype=np.int32)
    gate[0] = g
    gate[1] = int(scaled[1] * np.float32(10))
    gate[2] = int(y[0])
    return {"y": y, "gate": gate, "lanes": np.array([7, 10, 11], dtype=np.int32)}
