"""Golden and comparison of tests/scenes/python_compare.

The output `f` is `experts` blocks of `capacity` rows of `hidden` values;
only the first `recv_count[e]` rows of block `e` are meaningful (the rest
is whatever the buffer held, as after a MoE dispatch), so the golden
computes those and fills the others with NaN, and the comparison checks
those alone.
"""

import numpy as np


def _blocks(x, params):
    return x.reshape(len(params["recv_count"]), params["capacity"], params["hidden"])


def compute_golden(tensors, params):
    s = tensors["a"] + tensors["b"]
    f = _blocks(tensors["f"], params)
    f[:] = np.nan
    full = _blocks((s + 1) * (s + 2) + s, params)
    for e, rows in enumerate(params["recv_count"]):
        f[e, :rows] = full[e, :rows]


def compare_valid_rows(name, actual, expected, params):
    """The first recv_count[e] (+ slack) rows of every expert, allclose."""
    rtol = atol = 1e-5
    a, e = _blocks(actual, params), _blocks(expected, params)
    checked = 0
    for x, rows in enumerate(params["recv_count"]):
        rows = min(rows + params["slack"], params["capacity"])
        got, want = a[x, :rows], e[x, :rows]
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            return False, "%s: expert %d row %d col %d: %r != %r (%d of %d checked rows differ)" % (
                name, x, r, c, float(got[r, c]), float(want[r, c]),
                int(bad.any(axis=1).sum()), rows,
            )
        checked += rows
    return True, "%d valid rows of %d match" % (checked, a.shape[0] * a.shape[1])
