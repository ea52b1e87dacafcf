import numpy as np
import pytest

import msv0
from msv0.builder import Builder
from oprun import Const, assert_program_matches_single_calls, run_op


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("idt", [np.int32, np.int64, np.float32])
def test_gather_const_indices(rng, axis, idt):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    idx = np.array([[0, 2], [2, 1], [0, 0]], idt)
    (y,) = run_op("Gather", [x, Const(idx)], axis=axis)
    np.testing.assert_array_equal(y, np.take(x, idx.astype(np.int64), axis=axis))


def test_gather_runtime_indices_and_int32_data(rng):
    x = rng.integers(-100, 100, (5, 3), dtype=np.int32)
    idx = np.array([4, 0, 4, 1], np.int32)
    (y,) = run_op("Gather", [x, idx], out_dtypes=[np.int32], axis=0)
    np.testing.assert_array_equal(y, x[idx])
    (y,) = run_op("Gather", [x, np.array([1.9, 0.2], np.float32)], out_dtypes=[np.int32], axis=1)
    np.testing.assert_array_equal(y, x[:, [1, 0]])  # float indices truncate


@pytest.mark.parametrize("bad", [[-1], [3], [0, 7]])
def test_gather_bad_indices(rng, bad):
    x = rng.standard_normal((3, 2)).astype(np.float32)
    with pytest.raises(msv0.ModelError, match="indices"):
        run_op("Gather", [x, Const(np.array(bad, np.int32))], axis=0)
    for idt in (np.int32, np.int64):  # checked by the native kernel before it copies anything
        with pytest.raises(msv0.InputError, match=r"'gather_node' \(Gather\): indices"):
            run_op("Gather", [x, np.array(bad, idt)], axis=0)


@pytest.mark.parametrize("inner", [1, 3, 16, 17])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_native_gather_kernel(isa, rng, inner, axis):
    """The C++ Gather (csrc/kernels/gather.cc) on every ISA tier: float32 and int32 data, constant and
    run-time int32 / int64 indices, against np.take."""
    shape = (2, 5, inner)
    idx = rng.integers(0, shape[axis], (3, 2))
    want_shape = shape[:axis] + idx.shape + shape[axis + 1:]
    for dt in (np.float32, np.int32):
        x = rng.integers(-1000, 1000, shape).astype(dt)
        want = np.take(x, idx, axis=axis)
        for idt in (np.int32, np.int64):
            i = idx.astype(idt)
            runtime = msv0._core.Gather(np.dtype(dt).char, shape, axis, i.shape, i.dtype.char)
            y = np.zeros(want_shape, dt)
            runtime([x, i], [y])
            np.testing.assert_array_equal(y, want)
        fixed = msv0._core.Gather(np.dtype(dt).char, shape, axis, idx.shape, "l", idx.astype(np.int64))
        y = np.zeros(want_shape, dt)
        fixed([x], [y])
        np.testing.assert_array_equal(y, want)


def test_native_gather_runs_in_one_program(rng):
    """Reduce → Gather (constant indices) → Gather (run-time int64 indices): one native Program, equal to
    calling each kernel object alone; a bad run-time index stops the Program with InputError naming its node."""
    b = Builder("gather")
    x, i = b.input("x", (4, 6, 5), np.float32), b.input("i", (3,), np.int64)
    m = b.node("Reduce", [x], axes=[2], keepDims=0, mode=1)
    g = b.node("Gather", [m, b.const("c", np.array([5, 0, 2, 2], np.int32))], axis=1)
    b.output(b.node("Gather", [g, i], axis=0, name="rows"))
    model = b.finish()
    feeds = [rng.standard_normal((4, 6, 5)).astype(np.float32), np.array([3, 0, 3], np.int64)]
    for threads in (1, 2):
        assert_program_matches_single_calls(model, feeds, threads, program_steps=3)
    with pytest.raises(msv0.InputError, match=r"'rows' \(Gather\): indices must lie in \[0, 4\), got values from 0 to 4"):
        msv0.Session(model).run([feeds[0], np.array([0, 4, 1], np.int64)])


def test_gather_bad_attrs(rng):
    x = rng.standard_normal((3, 2)).astype(np.float32)
    i = Const(np.array([0], np.int32))
    for attrs in [dict(axis=-1), dict(axis=2), dict(axis=0, batchDims=1)]:
        with pytest.raises(msv0.ModelError):
            run_op("Gather", [x, i], **attrs)
    with pytest.raises(msv0.ModelError):
        run_op("Gather", [x, Const(np.array([0], np.int8))], axis=0)


def test_unsorted_segment_sum(rng):
    data = rng.standard_normal((6, 3)).astype(np.float32)
    ids = np.array([0, 2, 0, 5, -1, 2], np.int32)  # 5 and -1 fall outside 4 segments: dropped
    (y,) = run_op("UnsortedSegmentSum", [data, Const(ids)], numSegments=4)
    want = np.zeros((4, 3), np.float32)
    for i, s in enumerate(ids):
        if 0 <= s < 4:
            want[s] += data[i]
    np.testing.assert_allclose(y, want, rtol=1e-6)
    (y,) = run_op("UnsortedSegmentSum", [data, ids, Const(np.array(4, np.int32))])
    np.testing.assert_allclose(y, want, rtol=1e-6)
    with pytest.raises(msv0.ModelError):
        run_op("UnsortedSegmentSum", [data, np.zeros(5, np.int32)], numSegments=2)
