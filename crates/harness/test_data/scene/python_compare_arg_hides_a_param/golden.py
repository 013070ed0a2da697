def compute_golden(tensors, params):
    pass


def compare(name, actual, expected, params):
    return True, ""
