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


def _values(shapes: dict, const=()):
    return {k: SimpleNamespace(const=np.zeros(s, np.float32) if k in const else None, size=int(np.prod(s)),
                               dtype=np.dtype(np.float32), shape=s) for k, s in shapes.items()}


def test_a_view_shares_its_inputs_bytes_and_keeps_them_alive():
    # 0 (input) -> step 0 -> 1 -> step 1 (reshape) -> 2 (view of 1) ; step 2: 0 -> 3 ; step 3: 2, 3 -> 4
    values = _values({0: (4, 8), 1: (4, 8), 2: (32,), 3: (4, 8), 4: (32,)})
    steps = [([0], [1]), ([1], [2]), ([0], [3]), ([2, 3], [4])]
    buffers, _ = allocate(values, steps, [0], [4], 1 << 20, views={2: 1})
    assert buffers[2].shape == (32,) and buffers[2].ctypes.data == buffers[1].ctypes.data
    # 1's own last read is step 1, but its bytes are read through 2 at step 3: 3 must not reuse them
    assert not np.shares_memory(buffers[3], buffers[1])


def test_views_chain_and_may_start_at_a_graph_input_or_end_at_a_graph_output():
    values = _values({0: (2, 3), 1: (6,), 2: (3, 2), 3: (6,)})
    steps = [([0], [1]), ([1], [2]), ([0], [3])]
    buffers, total = allocate(values, steps, [0], [2, 3], 1 << 20, views={1: 0, 2: 1})
    assert buffers[0].ctypes.data == buffers[1].ctypes.data == buffers[2].ctypes.data
    assert not np.shares_memory(buffers[3], buffers[0])  # the graph output 2 keeps 0's bytes to the end


def _reshape_model(reshape_of_input: bool):
    """a = Neg(x) (or x), b = Reshape(a), y = Neg(b) + Exp(Reshape(x)); outputs y and b. Exp's
    output is computed after a's last direct read, so a reuse of a's bytes would show in y."""
    from msv0.builder import Builder

    b = Builder("views")
    x = b.input("x", (2, 3, 4))
    src = x if reshape_of_input else b.node("Neg", [x])
    flat = b.node("Reshape", [src], shape=[6, 4])
    e = b.node("Exp", [b.node("Reshape", [x], shape=[6, 4])])
    y = b.node("Add", [b.node("Neg", [flat]), e])
    b.output(y, flat)
    return b.finish()


@pytest.mark.parametrize("reshape_of_input", [False, True])
def test_session_skips_reshape_steps_and_stays_correct(reshape_of_input):
    import msv0

    s = msv0.Session(_reshape_model(reshape_of_input))
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    src = x if reshape_of_input else -x
    out = s.run([x])
    ys = list(out.values())
    np.testing.assert_allclose(ys[0], -src.reshape(6, 4) + np.exp(x.reshape(6, 4)), rtol=1e-6)
    np.testing.assert_array_equal(ys[1], src.reshape(6, 4))  # a view that is a graph output
    plan = next(iter(s._idle[0].plans.values()))
    assert not any("Reshape" in step.label for step in plan.steps)
    # results are copies: running again does not change what was returned
    s.run([x + 1])
    np.testing.assert_array_equal(ys[1], src.reshape(6, 4))


def test_reshape_of_a_constant_is_folded_not_aliased():
    import msv0
    from msv0.builder import Builder

    b = Builder("const")
    x = b.input("x", (6,))
    c = b.node("Reshape", [b.const("c", np.arange(6, dtype=np.float32).reshape(2, 3))], shape=[6])
    b.output(b.node("Add", [x, c]))
    y = next(iter(msv0.Session(b.finish()).run([np.ones(6, np.float32)]).values()))
    np.testing.assert_array_equal(y, np.arange(6) + 1)
