"""The rows the tail kernels write (see kernels/tail.hpp)."""


def compute_golden(tensors, params):
    rows = tensors["rows"].copy()
    tag = int(params["tag"])
    for blocks, base in [(4, 0), (16, 4), (7, 20)]:
        for b in range(blocks):
            rows[base + b, :6] = [b, blocks, tag, 1, 0, 2]
    if int(params["mixed"]):
        for b in range(3):
            for slot in range(3):
                core, lane = (2, 0) if slot == 0 else (1, slot - 1)
                rows[27 + 3 * b + slot, :6] = [b, 3, tag, core, lane, 2]
    return {"rows": rows}
