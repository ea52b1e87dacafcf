"""int8 DepthwiseConv2D (format-v0.md §3.1) against tests/int8_ref.py's NumPy transcription of
r1.1's generic int8 kernel, exact equality on every tier: channel counts around every lane
width, strides, dilations (dilateH != dilateW: r1.1's row quirk), pads, per-tensor and
per-channel weights, zero points at the int8 limits, multipliers from 1e-8 to 3."""
import numpy as np
import pytest

from msv0 import ModelError, _core
from msv0.fb.ActivationType import ActivationType
from msv0.fb.Format import Format
from msv0.fb.PadMode import PadMode
from oprun import Const, run_op

from int8_ref import act_range, conv_multiplier, dwconv_s8, qp, quantize_round_parameter

CHANNELS = [1, 3, 15, 16, 17, 33, 67]  # int32 lanes 1/4/8/16 and their tails


def dw_attrs(kh, kw, sh=1, sw=1, dh=1, dw=1, pads=(0, 0, 0, 0), pad_mode=PadMode.NOTSET, act=0, mult=1):
    return dict(channelMultiplier=mult, kernelH=kh, kernelW=kw, strideH=sh, strideW=sw, dilateH=dh, dilateW=dw,
                padMode=pad_mode, padUp=pads[0], padDown=pads[1], padLeft=pads[2], padRight=pads[3],
                activationType=act)


def run_dw(rng, x, kh, kw, geom, q_in=(0.02, 3), q_out=(0.05, -5), w_scale=5e-3, w_zp=None, per_channel=True,
           act=0, threads=1, bias=True):
    """Runs the op on x with random weights; returns (got, want). geom: (sh, sw, dh, dw, pt, pl, oh, ow,
    attrs) where attrs are extra node attributes (pads, padMode)."""
    sh, sw, dh, dw, pt, pl, oh, ow, attrs = geom
    c = x.shape[3]
    w = rng.integers(-128, 128, (c, kh, kw), dtype=np.int8)
    if per_channel:
        s_w = w_scale * 10.0 ** rng.uniform(-1, 0.3, c)
        zp_w = rng.integers(-128, 128, c) if w_zp is None else np.resize(w_zp, c)
        w_quant = [qp(s, z)[0] for s, z in zip(s_w, zp_w)]
    else:
        zp = -7 if w_zp is None else w_zp
        s_w, zp_w, w_quant = np.full(c, w_scale), np.full(c, zp), qp(w_scale, zp)
    b = rng.integers(-20000, 20000, c, dtype=np.int32) if bias else np.zeros(c, np.int32)
    inputs = [x, Const(w[..., None], quant=w_quant, format=Format.KHWC)] + ([Const(b)] if bias else [])
    got = run_op("DepthwiseConv2D", inputs, out_dtypes=[np.int8], in_quant=[qp(*q_in)], out_quant=[qp(*q_out)],
                 num_threads=threads, **dw_attrs(kh, kw, sh, sw, dh, dw, act=act, **attrs))[0]
    requant = list(zip(*[quantize_round_parameter(conv_multiplier(q_in[0], s, q_out[0])) for s in s_w]))
    lo, hi = act_range(act, *q_out)
    want = dwconv_s8(x, w, zp_w, b, q_in[1], q_out[1], requant, lo, hi, sh, sw, dh, dw, pt, pl, oh, ow)
    return got, want


def notset(kh, kw, sh, sw, dh, dw, pads, h, w):
    """geom for stored pads (u, d, l, r)."""
    oh = -(-(h + pads[0] + pads[1] - (kh - 1) * dh) // sh)
    ow = -(-(w + pads[2] + pads[3] - (kw - 1) * dw) // sw)
    return (sh, sw, dh, dw, pads[0], pads[2], oh, ow, dict(pads=pads))


def image(rng, n, h, w, c):
    return rng.integers(-128, 128, (n, h, w, c), dtype=np.int8)


@pytest.mark.parametrize("c", CHANNELS)
@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
def test_dwconv_s8_channels(isa, rng, c, per_channel):
    x = image(rng, 2, 5, 6, c)
    got, want = run_dw(rng, x, 3, 3, notset(3, 3, 1, 1, 1, 1, (1, 1, 1, 1), 5, 6), per_channel=per_channel)
    np.testing.assert_array_equal(got, want)


# (kh, kw, sh, sw, dh, dw, pads (u, d, l, r), h, w)
GEOMS = [
    (3, 3, 2, 2, 1, 1, (0, 1, 0, 1), 9, 7),
    (5, 5, 1, 1, 1, 1, (2, 2, 2, 2), 6, 7),
    (3, 1, 3, 1, 1, 1, (1, 1, 0, 0), 9, 4),
    (2, 2, 2, 2, 1, 1, (0, 0, 0, 0), 7, 6),
    (3, 3, 1, 2, 2, 2, (2, 2, 1, 2), 9, 7),
    (3, 3, 1, 1, 1, 1, (3, 0, 0, 3), 6, 5),  # whole windows in padding: bias only
    (3, 3, 1, 1, 1, 1, (1, 1, 7, 6), 5, 4),  # whole columns of windows left and right of x
    (3, 3, 1, 2, 1, 1, (1, 1, 9, 8), 5, 4),
    (5, 5, 2, 3, 1, 1, (2, 2, 13, 11), 6, 5),
    (3, 3, 1, 1, 2, 2, (2, 2, 9, 9), 6, 5),
    (3, 3, 1, 1, 2, 1, (1, 1, 1, 1), 9, 7),  # dilateH 2, dilateW 1: rows 1 apart, bounded as 2
    (2, 3, 3, 1, 1, 2, (0, 0, 0, 0), 7, 9),  # dilateH 1, dilateW 2: rows 2 apart, bounded as 1
]


@pytest.mark.parametrize("c", [3, 17])
@pytest.mark.parametrize("geom", GEOMS, ids=str)
def test_dwconv_s8_geometry(isa, rng, c, geom):
    kh, kw, sh, sw, dh, dw, pads, h, w = geom
    got, want = run_dw(rng, image(rng, 2, h, w, c), kh, kw, notset(kh, kw, sh, sw, dh, dw, pads, h, w))
    np.testing.assert_array_equal(got, want)


def test_dwconv_s8_same_upper(isa, rng):
    """SAME_UPPER on 13x6, stride 2: totals 2 and 1 give pads (1, 0) whatever is stored."""
    geom = (2, 2, 1, 1, 1, 0, 7, 3, dict(pads=(5, 5, 5, 5), pad_mode=PadMode.SAME_UPPER))
    got, want = run_dw(rng, image(rng, 1, 13, 6, 17), 3, 3, geom)
    np.testing.assert_array_equal(got, want)


# (q_in, q_out, weight scale, weight zero points): zero points at the int8 limits; multipliers
# about 1e-8 (a right shift past 24), 1e-3, and 3 (a left shift: mostly saturated).
PARAMS = [
    ((0.02, -128), (0.05, 127), 5e-3, [127]),
    ((0.02, 127), (0.05, -128), 5e-3, [-128, 127]),
    ((0.5, 0), (1000.0, 0), 1e-4, None),
    ((0.1, 5), (0.01, -3), 0.3, None),
]


@pytest.mark.parametrize("params", PARAMS, ids=str)
@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
def test_dwconv_s8_params(isa, rng, params, per_channel):
    q_in, q_out, w_scale, w_zp = params
    if not per_channel and w_zp is not None:
        w_zp = w_zp[0]
    x = image(rng, 1, 6, 5, 33)
    got, want = run_dw(rng, x, 3, 3, notset(3, 3, 1, 1, 1, 1, (1, 1, 1, 1), 6, 5), q_in, q_out, w_scale, w_zp,
                       per_channel)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("act", [ActivationType.RELU, ActivationType.RELU6, ActivationType.SIGMOID])
def test_dwconv_s8_activation(isa, rng, act):
    x = image(rng, 1, 6, 5, 17)
    got, want = run_dw(rng, x, 3, 3, notset(3, 3, 1, 1, 1, 1, (1, 1, 1, 1), 6, 5), q_out=(0.03, -20), act=act)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("stride", [1, 2])
def test_dwconv_s8_threads(isa, rng, stride):
    """Two threads over a layer of MobileNetV2-like proportions, no bias."""
    x = image(rng, 1, 20, 18, 71)
    got, want = run_dw(rng, x, 3, 3, notset(3, 3, stride, stride, 1, 1, (1, 1, 1, 1), 20, 18), threads=2, bias=False)
    np.testing.assert_array_equal(got, want)


def test_dwconv_s8_errors(rng):
    x = image(rng, 1, 6, 6, 4)
    w = Const(rng.integers(-128, 128, (4, 3, 3, 1), dtype=np.int8), quant=qp(0.01, 0), format=Format.KHWC)
    io = dict(out_dtypes=[np.int8], in_quant=[qp(0.02, 0)], out_quant=[qp(0.05, 0)])
    cases = [
        (dict(mult=2), [x[..., :2], w], "channelMultiplier 1"),
        (dict(dh=1, dw=2), [x, w], "outside the input"),  # the quirk's rows leave the image at the bottom
        (dict(), [x, w, Const(np.zeros(4, np.float32))], "int32"),
        (dict(), [x, Const(w.value, quant=[qp(0.01, 0)[0]] * 3, format=Format.KHWC)], "quantParams"),
    ]
    for attrs, inputs, match in cases:
        with pytest.raises(ModelError, match=f"depthwiseconv2d_node.*{match}"):
            run_op("DepthwiseConv2D", inputs, **io, **dw_attrs(3, 3, **attrs))


def test_dwconv_s8_bad_args():
    w, z = np.zeros((4, 3, 3), np.int8), np.zeros(4, np.int32)
    ok = dict(weight=w, w_zp=z, bias=None, mult=z, left=z, right=z, x_zp=0, y_zp=0, lo=-128, hi=127, sh=1, sw=1,
              dh=1, dw=1, rd=1, pt=0, pl=0, x_shape=[1, 5, 5, 4], y_shape=[1, 3, 3, 4])
    _core.DwConv2dS8(**ok)
    for bad in [dict(left=z + 32), dict(x_zp=128), dict(w_zp=z - 129), dict(lo=5, hi=4), dict(rd=0),
                dict(rd=2), dict(x_shape=[1, 5, 5, 3]), dict(weight=w.astype(np.int16))]:
        with pytest.raises(ValueError):
            _core.DwConv2dS8(**{**ok, **bad})
