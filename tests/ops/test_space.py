"""Space/depth/batch rearrangements against loop references (TF orders, NHWC)."""
import msv0
import numpy as np
import pytest
from oprun import Const, run_op


def d2s_ref(x, b):
    n, h, w, c = x.shape
    oc = c // (b * b)
    out = np.empty((n, h * b, w * b, oc), x.dtype)
    for i in range(b):
        for j in range(b):
            out[:, i::b, j::b, :] = x[:, :, :, (i * b + j) * oc:(i * b + j + 1) * oc]
    return out


def b2s_ref(x, bh, bw, crops):
    n, h, w, c = x.shape
    on = n // (bh * bw)
    full = np.empty((on, h * bh, w * bw, c), x.dtype)
    for i in range(bh):
        for j in range(bw):
            full[:, i::bh, j::bw] = x[(i * bw + j) * on:(i * bw + j + 1) * on]
    t, bo, l, r = crops
    return full[:, t:h * bh - bo, l:w * bw - r]


# float32 runs the native Copy kernel, int32 NumPy.
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("b,c", [(1, 3), (2, 4), (2, 12), (3, 9)])
def test_depth_space_roundtrip(rng, b, c, dtype):
    x = (rng.standard_normal((2, 3, 5, c)) * 100).astype(dtype)
    (y,) = run_op("DepthToSpace", [x], blockSize=b)
    np.testing.assert_array_equal(y, d2s_ref(x, b))
    (z,) = run_op("SpaceToDepth", [y], blockSize=b)
    np.testing.assert_array_equal(z, x)


def test_depth_space_bad():
    with pytest.raises(msv0.ModelError):
        run_op("DepthToSpace", [np.zeros((1, 2, 2, 6), np.float32)], blockSize=2)
    with pytest.raises(msv0.ModelError):
        run_op("SpaceToDepth", [np.zeros((1, 3, 2, 1), np.float32)], blockSize=2)
    with pytest.raises(msv0.ModelError):
        run_op("SpaceToDepth", [np.zeros((1, 2, 2, 1), np.float32)], blockSize=0)
    with pytest.raises(msv0.ModelError):
        run_op("DepthToSpace", [np.zeros((2, 2, 4), np.float32)], blockSize=2)


@pytest.mark.parametrize("op", ["BatchToSpace", "BatchToSpaceND"])
@pytest.mark.parametrize("block,crops", [([2, 2], [0, 0, 0, 0]), ([2, 3], [1, 0, 2, 1]), ([1, 2], [0, 1, 0, 0])])
def test_batch_to_space(rng, op, block, crops):
    x = rng.standard_normal((block[0] * block[1] * 2, 3, 4, 5)).astype(np.float32)
    (y,) = run_op(op, [x], blockShape=block, crops=crops)
    np.testing.assert_array_equal(y, b2s_ref(x, block[0], block[1], crops))


@pytest.mark.parametrize("op", ["SpaceToBatch", "SpaceToBatchND"])
@pytest.mark.parametrize("block,pads", [([2, 2], [0, 0, 0, 0]), ([2, 3], [1, 1, 2, 0]), ([3, 1], [0, 2, 1, 1])])
def test_space_to_batch_inverts_batch_to_space(rng, op, block, pads):
    x = rng.standard_normal((2, 6 * block[0] - pads[0] - pads[1], 3 * block[1] - pads[2] - pads[3], 3)).astype(np.float32)
    (y,) = run_op(op, [x], blockShape=block, paddings=pads)
    padded = np.pad(x, [(0, 0), (pads[0], pads[1]), (pads[2], pads[3]), (0, 0)])
    np.testing.assert_array_equal(b2s_ref(y, block[0], block[1], [0, 0, 0, 0]), padded)
    (z,) = run_op("BatchToSpaceND", [y], blockShape=block, crops=pads)
    np.testing.assert_array_equal(z, x)


def test_space_batch_const_inputs_and_bad(rng):
    x = rng.standard_normal((1, 4, 4, 2)).astype(np.float32)
    (y,) = run_op("SpaceToBatchND", [x, Const(np.array([2, 2], np.int32)), Const(np.array([[0, 0], [0, 0]], np.int32))])
    (z,) = run_op("SpaceToBatchND", [x], blockShape=[2, 2], paddings=[0, 0, 0, 0])
    np.testing.assert_array_equal(y, z)
    with pytest.raises(msv0.ModelError):
        run_op("SpaceToBatch", [x], blockShape=[3, 2], paddings=[0, 0, 0, 0])
    with pytest.raises(msv0.ModelError):
        run_op("BatchToSpace", [x], blockShape=[2, 2], crops=[0, 0, 0, 0])
    with pytest.raises(msv0.ModelError):
        run_op("BatchToSpace", [np.zeros((4, 1, 1, 1), np.float32)], blockShape=[2, 2], crops=[2, 1, 0, 0])
    with pytest.raises(msv0.ModelError):
        run_op("SpaceToBatch", [x], blockShape=[2, 2], paddings=[-1, 1, 0, 0])
