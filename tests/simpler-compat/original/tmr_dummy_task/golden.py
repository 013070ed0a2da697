"""Expected outputs of tmr_dummy_task (mirrors the original's
test_dummy_task.py): dummies run no kernel, so the producer's value reaches
Y[0] whatever graph of dummies lies between."""

PRODUCED = 42.0  # what the producer kernel writes into element 0


def compute_golden(tensors, params):
    tensors["x"][0] = PRODUCED
    tensors["y"][0] = PRODUCED
    if params["case"] == 3:  # the barrier case has a second producer, on W
        tensors["w"][0] = PRODUCED
