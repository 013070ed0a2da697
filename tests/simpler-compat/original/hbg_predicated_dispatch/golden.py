"""hbg_predicated_dispatch: what the task chain of the original's
predicated_dispatch_orch.cpp leaves in element 0 of x, y and gate (the
rest keeps its initial value)."""

SENTINEL = 42.0  # WRITE_CONST's X[0]
POISON = 999.0   # CLOBBER's X[0], written only when gate[0] > 0


def compute_golden(tensors, params):
    case = int(params["case"])
    assert case in (1, 2), "the orchestration accepts cases 1 and 2 only"
    gate = 0 if case == 1 else 1
    x0 = POISON if gate > 0 else SENTINEL
    tensors["gate"][0] = gate
    tensors["x"][0] = x0
    tensors["y"][0] = x0
