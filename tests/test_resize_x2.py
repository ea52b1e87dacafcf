"""The half-pixel bilinear ×2 that converters write as Pad + DeDepthwiseConv2D (msv0.resize_x2)
runs as one Resize step and computes what the pair does; near misses of the pattern stay apart."""
import numpy as np
import pytest

import msv0
from msv0 import straight_line
from msv0.builder import Builder
from msv0.fb.Format import Format
from msv0.fb.PaddingMode import PaddingMode

TAPS = np.array([0.25, 0.75, 0.75, 0.25], np.float32)


def pair(shape, weight=None, bias=None, paddings=(0, 0, 1, 1, 1, 1, 0, 0), crop=3, second_reader=False) -> bytes:
    n, h, w, c = shape
    b = Builder("x2")
    x = b.input("x", shape)
    p = b.node("Pad", [x], paddings=list(paddings), paddingMode=PaddingMode.SYMMETRIC)
    k = np.broadcast_to(np.outer(TAPS, TAPS)[None, :, :, None], (c, 4, 4, 1)) if weight is None else weight
    ins = [p, b.const("k", np.ascontiguousarray(k, np.float32), format=Format.KHWC)]
    if bias is not None:
        ins.append(b.const("b", bias))
    y = b.node("DeDepthwiseConv2D", ins, channelIn=c, channelMultiplier=1, kernelH=4, kernelW=4, strideH=2,
               strideW=2, dilateH=1, dilateW=1, padUp=crop, padDown=crop, padLeft=crop, padRight=crop)
    b.output(y)
    if second_reader:
        b.output(b.node("Neg", [p]))
    return b.finish()


def fused_steps(session) -> list[tuple[str, ...]]:
    return [tuple(session.model.nodes[i].op for i in nodes) for nodes, _ in session.plan_info.steps if len(nodes) > 1]


def half_pixel_x2(x):
    """NumPy reference: separable half-pixel bilinear ×2 with the source coordinate clamped."""
    def axis(a, ax):
        n = a.shape[ax]
        src = np.maximum((np.arange(2 * n) + 0.5) / 2 - 0.5, 0)
        i0 = np.floor(src).astype(int)
        i1 = np.minimum(i0 + 1, n - 1)
        wgt = (src - i0).reshape([-1 if d == ax else 1 for d in range(a.ndim)])
        return np.take(a, i0, ax) * (1 - wgt) + np.take(a, i1, ax) * wgt
    return axis(axis(x.astype(np.float64), 1), 2)


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 5, 7, 3), (1, 4, 3, 17), (1, 6, 6, 32)])
def test_pair_runs_as_one_resize(isa, monkeypatch, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    data = pair(shape)
    fused = msv0.Session(data)
    assert fused_steps(fused) == [("Pad", "DeDepthwiseConv2D")]
    got = fused.run({"x": x})
    monkeypatch.setattr(straight_line, "fuse_resizes", lambda model, planned, values, uses: planned)
    apart = msv0.Session(data)
    assert fused_steps(apart) == []
    want = apart.run({"x": x})
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got[k], half_pixel_x2(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", ["bias", "weight", "paddings", "crop", "second_reader"])
def test_near_misses_stay_apart(case):
    shape = (1, 3, 4, 2)
    weight = np.broadcast_to(np.outer(TAPS, TAPS)[None, :, :, None], (2, 4, 4, 1)).copy()
    weight[1, 0, 0, 0] = 0.0
    kw = {"bias": dict(bias=np.array([0, 1], np.float32)), "weight": dict(weight=weight),
          "paddings": dict(paddings=(0, 0, 1, 1, 2, 2, 0, 0)), "crop": dict(crop=2),
          "second_reader": dict(second_reader=True)}[case]
    assert fused_steps(msv0.Session(pair(shape, **kw))) == []
