"""Expected outputs of ex_tmr_scalar_data (mirrors the original's
test_scalar_data.py, from the inputs rather than its constants)."""

import numpy as np

INITIAL = np.float32(77.0)  # the runtime-created scalar tensor's initial value


def compute_golden(tensors, params):
    a, b = tensors["a"], tensors["b"]
    c = a + b                     # the first kernel_add, on the original b
    chk = tensors["check"]
    chk[0] = c[0]                 # read back after the kernel
    chk[1] = c[100]               # a non-zero flat index
    chk[2] = INITIAL              # initial value of a runtime-created tensor
    chk[3] = INITIAL              # unchanged by a no-op INOUT task
    chk[4] = c[0] + INITIAL       # orchestration arithmetic
    chk[5] = 42.0                 # its own write, read back
    chk[6] = np.float32(10.0) + a[0]  # its write, then a kernel reading it
    chk[7] = 88.0                 # write after the kernel reading c
    chk[8] = 55.0                 # write to b after a no-op task on it
    b_final = b.copy()
    b_final[0] = 0.0              # the orchestration restores b[0] to 0
    tensors["result"][:] = a + b_final
