"""Judging tmr_available_aicore_counts (mirrors the compare_outputs of the
original's test_available_aicore_counts.py): the launch width is whatever
the run's device reports, so the outputs are checked for consistency."""

import numpy as np

LINE = 16  # floats per cache line
SLOTS = 3  # cache lines per block: AIC, AIV0, AIV1
AIV_PER_CLUSTER = 2


def compute_golden(tensors, params):
    # Nothing to predict: both outputs keep their initial value here and the
    # comparisons below judge the device's against it.
    pass


def counts_are_a_width(name, actual, expected, params):
    clusters, aivs = int(actual[0]), int(actual[1])
    top = params["max_clusters"]
    if not 1 <= clusters <= top:
        return False, "cluster count %d outside [1, %d]" % (clusters, top)
    if aivs != clusters * AIV_PER_CLUSTER:
        return False, "aiv count %d != %d clusters * %d" % (aivs, clusters, AIV_PER_CLUSTER)
    return True, "%d clusters, %d aiv" % (clusters, aivs)


def blocks_form_one_cohort(name, actual, expected, params):
    got = actual.reshape(-1, LINE)
    first = got[:, 0]
    written = first != expected.reshape(-1, LINE)[:, 0]
    clusters = int(np.count_nonzero(written)) // SLOTS
    top = params["max_clusters"]
    if not 1 <= clusters <= top:
        return False, "%d cache lines written: not a launch of 1..%d blocks" % (
            int(np.count_nonzero(written)), top)
    want = expected.reshape(-1, LINE).copy()
    idx = np.arange(clusters)
    for slot in range(SLOTS):
        want[idx * SLOTS + slot, 0] = idx.astype(np.float32)
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)[0]
        return False, "a launch of %d blocks: cache line %d float %d is %r, want %r" % (
            clusters, bad[0], bad[1], float(got[tuple(bad)]), float(want[tuple(bad)]))
    return True, "one launch of %d blocks, every slot written once" % clusters
