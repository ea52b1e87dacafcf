"""The arena planner: tensors alive at the same time never share bytes; offsets are aligned."""
from types import SimpleNamespace

import numpy as np
import pytest

from msv0.planner import ALIGN, Interval, allocate, plan_arena


@pytest.mark.parametrize("seed", range(20))
def test_live_tensors_never_overlap(seed):
    rng = np.random.default_rng(seed)
    intervals = []
    for k in range(int(rng.integers(1, 40))):
        first = int(rng.integers(-1, 30))
        intervals.append(Interval(k, int(rng.integers(0, 5000)), first, first + int(rng.integers(0, 8))))
    offsets, total = plan_arena(intervals)
    for a in intervals:
        assert offsets[a.key] % ALIGN == 0
        assert offsets[a.key] + a.size <= total
        for b in intervals:
            if a.key < b.key and a.first <= b.last and b.first <= a.last:
                lo, hi = sorted([(offsets[a.key], a.size), (offsets[b.key], b.size)])
                assert lo[0] + max(lo[1], 1) <= hi[0], (a, b, offsets)


def test_disjoint_lifetimes_share_memory():
    offsets, total = plan_arena([Interval(0, 1000, 0, 1), Interval(1, 1000, 2, 3)])
    assert offsets[0] == offsets[1] == 0 and total == 1024


def test_arena_buffers_are_aligned():
    values = {k: SimpleNamespace(const=None, size=s, dtype=np.dtype(np.float32), shape=(s,))
              for k, s in enumerate([3, 17, 100, 1])}
    buffers, _ = allocate(values, [([0], [1]), ([1], [2]), ([2, 0], [3])], [0], [3], 1 << 20)
    for b in buffers.values():
        assert b.ctypes.data % ALIGN == 0
