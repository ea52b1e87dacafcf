"""OnesLike, Tan/Atan/Asin, LogicalXor, All, Permute, UnsortedSegmentSum, LpNormalization,
Assert, Adder, and the ops rejected next to them."""
import numpy as np
import pytest

import msv0
from msv0.builder import Builder
from oprun import Const, run_op
from test_dynamic import ort_run

F32 = np.float32


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_ones_like(dtype):
    (y,) = run_op("OnesLike", [np.zeros((2, 3), dtype)], out_dtypes=[dtype])
    np.testing.assert_array_equal(y, np.ones((2, 3), dtype))


@pytest.mark.parametrize("name,onnx_op", [("Tan", "Tan"), ("Atan", "Atan"), ("Asin", "Asin")])
def test_trig_matches_onnxruntime(rng, name, onnx_op):
    x = (rng.random((3, 17)) * 2.2 - 1.1).astype(F32)  # Asin: some outside [-1, 1] -> NaN
    (y,) = run_op(name, [x])
    (want,) = ort_run(onnx_op, [x])
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-7, equal_nan=True)


def test_trig_rejects_int():
    with pytest.raises(msv0.ModelError):
        run_op("Tan", [np.zeros(3, np.int32)], out_dtypes=[np.int32])


def test_logical_xor_matches_onnxruntime(rng):
    a, b = rng.random((2, 1, 4)) > 0.5, rng.random((3, 1)) > 0.5
    (y,) = run_op("LogicalXor", [a, b], out_dtypes=[np.bool_])
    np.testing.assert_array_equal(y, ort_run("Xor", [a, b])[0])
    with pytest.raises(msv0.ModelError):
        run_op("LogicalXor", [a, np.zeros(3, bool)], out_dtypes=[np.bool_])


@pytest.mark.parametrize("axes,keep", [([1], 0), ([0, -1], 1), ([0, 1, 2], 0)])
def test_all(rng, axes, keep):
    x = rng.random((3, 4, 2)) > 0.2
    (y,) = run_op("All", [x, Const(np.array(axes, np.int32))], out_dtypes=[np.bool_], keepDims=keep)
    want = np.all(x, axis=tuple(a % 3 for a in axes), keepdims=bool(keep))
    np.testing.assert_array_equal(y, want)


def test_permute(rng):
    x = rng.standard_normal((2, 3, 4)).astype(F32)
    (y,) = run_op("Permute", [x], order=[2, 0, 1])
    np.testing.assert_array_equal(y, x.transpose(2, 0, 1))
    with pytest.raises(msv0.ModelError):
        run_op("Permute", [x], order=[0, 0, 1])


def test_unsorted_segment_sum(rng):
    data = rng.standard_normal((6, 3)).astype(F32)
    ids = np.array([0, 2, 0, 5, -1, 2], np.int32)  # 5 and -1 fall outside 4 segments: dropped
    (y,) = run_op("UnsortedSegmentSum", [data, Const(ids)], numSegments=4)
    want = np.zeros((4, 3), F32)
    for i, s in enumerate(ids):
        if 0 <= s < 4:
            want[s] += data[i]
    np.testing.assert_allclose(y, want, rtol=1e-6)
    (y,) = run_op("UnsortedSegmentSum", [data, ids, Const(np.array(4, np.int32))])
    np.testing.assert_allclose(y, want, rtol=1e-6)
    with pytest.raises(msv0.ModelError):
        run_op("UnsortedSegmentSum", [data, np.zeros(5, np.int32)], numSegments=2)


@pytest.mark.parametrize("p,axis", [(1, -1), (2, 0), (2, 1)])
def test_lp_normalization_matches_onnxruntime(rng, p, axis):
    x = rng.standard_normal((3, 5)).astype(F32)
    x[1] = 0 if axis != 0 else x[1]
    (y,) = run_op("LpNormalization", [x], p=p, axis=axis)
    (want,) = ort_run("LpNormalization", [x], p=p, axis=axis)
    np.testing.assert_allclose(y, np.nan_to_num(want), rtol=1e-5, atol=1e-7)


def _assert_model():
    b = Builder("assert")
    c = b.input("cond", (3,), np.bool_)
    x = b.input("x", (2,), np.float32)
    y = b.tensor("y", np.float32)
    b.node("Assert", [c, x], outputs=[])
    b.node("Neg", [x], outputs=[y])
    b.output(y)
    return msv0.Session(b.finish())


def test_assert():
    s = _assert_model()
    np.testing.assert_array_equal(s.run([np.ones(3, bool), np.ones(2, F32)])["y"], [-1, -1])
    with pytest.raises(msv0.ModelError, match="assertion failed"):
        s.run([np.array([True, False, True]), np.ones(2, F32)])


def adder_ref(x, w, b, group, stride, dil, pads):
    n, h, wd, c = x.shape
    oc, kh, kw, cg = w.shape
    pt, pb, pl, pr = pads
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    oh = (h + pt + pb - (kh - 1) * dil - 1) // stride + 1
    ow = (wd + pl + pr - (kw - 1) * dil - 1) // stride + 1
    y = np.zeros((n, oh, ow, oc), np.float64)
    ocg = oc // group
    for o in range(oc):
        g = o // ocg
        for i in range(oh):
            for j in range(ow):
                win = xp[:, i * stride:i * stride + (kh - 1) * dil + 1:dil, j * stride:j * stride + (kw - 1) * dil + 1:dil,
                         g * cg:(g + 1) * cg]
                y[:, i, j, o] = -np.abs(win - w[o]).sum(axis=(1, 2, 3))
    return (y + (0 if b is None else b)).astype(F32)


@pytest.mark.parametrize("c,oc,group,k,stride,dil,pads", [
    (3, 4, 1, 3, 1, 1, (1, 1, 1, 1)), (4, 6, 2, 2, 2, 1, (0, 1, 0, 1)), (1, 1, 1, 3, 1, 2, (0, 0, 0, 0)),
    (9, 3, 1, 1, 1, 1, (0, 0, 0, 0))])
def test_adder(rng, c, oc, group, k, stride, dil, pads):
    x = rng.standard_normal((2, 6, 7, c)).astype(F32)
    w = rng.standard_normal((oc, k, k, c // group)).astype(F32)
    b = rng.standard_normal(oc).astype(F32)
    (y,) = run_op("Adder", [x, Const(w, format=7), Const(b)], group=group, kernelH=k, kernelW=k, strideH=stride,
                  strideW=stride, dilateH=dil, dilateW=dil, padUp=pads[0], padDown=pads[1], padLeft=pads[2],
                  padRight=pads[3])
    np.testing.assert_allclose(y, adder_ref(x, w, b, group, stride, dil, pads), rtol=1e-5, atol=1e-4)
    (y,) = run_op("Adder", [x, Const(w, format=7)], group=group, strideH=stride, strideW=stride, dilateH=dil,
                  dilateW=dil, padUp=pads[0], padDown=pads[1], padLeft=pads[2], padRight=pads[3], activationType=1)
    np.testing.assert_allclose(y, np.maximum(adder_ref(x, w, None, group, stride, dil, pads), 0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name", ["Min", "Broadcast", "Scatter", "Constant", "ToFormat", "EmbeddingLookupSparse",
                                  "Proposal"])
def test_rejected(name):
    with pytest.raises(msv0.UnsupportedOpError):
        run_op(name, [np.zeros(2, F32)])
