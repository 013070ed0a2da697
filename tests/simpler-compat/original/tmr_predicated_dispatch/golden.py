"""Expected outputs of tmr_predicated_dispatch (mirrors the original's
test_predicated_dispatch.py): only element 0 of each tensor is touched."""

PRODUCED = 42.0   # what the producer kernel writes into X[0]
CLOBBERED = 999.0  # what the predicated kernel writes into X[0] when it runs


def compute_golden(tensors, params):
    gate_open = params["case"] == 2  # case 1 gates with 0, case 2 with 1
    tensors["gate"][0] = 1 if gate_open else 0
    final = CLOBBERED if gate_open else PRODUCED
    tensors["x"][0] = final
    tensors["y"][0] = final
