def compute_golden(tensors, params):
    pass


def first_valid(name, actual, expected, params):
    return True, ""
