"""Adder (r1.1 AdderNet conv) against a loop reference."""
import numpy as np
import pytest

from msv0.fb.ActivationType import ActivationType
from msv0.fb.Format import Format
from oprun import Const, run_op

F32 = np.float32


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
    (y,) = run_op("Adder", [x, Const(w, format=Format.KHWC), Const(b)], group=group, kernelH=k, kernelW=k, strideH=stride,
                  strideW=stride, dilateH=dil, dilateW=dil, padUp=pads[0], padDown=pads[1], padLeft=pads[2],
                  padRight=pads[3])
    np.testing.assert_allclose(y, adder_ref(x, w, b, group, stride, dil, pads), rtol=1e-5, atol=1e-4)
    (y,) = run_op("Adder", [x, Const(w, format=Format.KHWC)], group=group, strideH=stride, strideW=stride, dilateH=dil,
                  dilateW=dil, padUp=pads[0], padDown=pads[1], padLeft=pads[2], padRight=pads[3], activationType=ActivationType.RELU)
    np.testing.assert_allclose(y, np.maximum(adder_ref(x, w, None, group, stride, dil, pads), 0), rtol=1e-5, atol=1e-4)
