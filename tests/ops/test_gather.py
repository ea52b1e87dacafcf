import numpy as np
import pytest

import msv0
from oprun import Const, run_op


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
    with pytest.raises(msv0.InputError, match="indices"):
        run_op("Gather", [x, np.array(bad, np.int32)], axis=0)


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
