"""DepthwiseConv2D and DeDepthwiseConv2D against NumPy references (format-v0.md §5)."""
import numpy as np
import pytest

import msv0
from msv0 import ModelError, _core
from msv0.builder import Builder
from oprun import Const, assert_program_matches_single_calls, run_op
from msv0.fb.ActivationType import ActivationType
from msv0.fb.PadMode import PadMode

CHANNELS = [1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 33]  # lane counts 1/4/8/16, each +-1, plus odd ones


def dwconv_ref(x, wt, bias, sh, sw, dh, dw, pt, pl, oh, ow, mult=1, lo=-np.inf, hi=np.inf):
    """Textbook depthwise conv in float64; wt is [cout, kh, kw]; output channel o reads input o // mult."""
    n, h, w, _ = x.shape
    cout, kh, kw = wt.shape
    xe = np.repeat(x.astype(np.float64), mult, axis=3)
    ph, pw = pt + (oh - 1) * sh + (kh - 1) * dh + 1, pl + (ow - 1) * sw + (kw - 1) * dw + 1
    xp = np.zeros((n, max(ph, pt + h), max(pw, pl + w), cout))
    xp[:, pt:pt + h, pl:pl + w] = xe
    y = np.zeros((n, oh, ow, cout)) + (0 if bias is None else bias)
    for ky in range(kh):
        for kx in range(kw):
            win = xp[:, ky * dh:ky * dh + (oh - 1) * sh + 1:sh, kx * dw:kx * dw + (ow - 1) * sw + 1:sw]
            y += win * wt[:, ky, kx]
    return np.clip(y, lo, hi).astype(np.float32)


def tol(kh, kw):
    # float32 FMA chain of kh*kw unit-normal products + bias against float64.
    return dict(rtol=1e-5, atol=2e-6 * kh * kw)


# (kh, kw, sh, sw, dh, dw, pt, pb, pl, pr, h, w): the fast 3x3/5x5 s1/s2 paths, asymmetric and
# oversized pads (whole windows in padding), and the general path (s3, 3x1, 2x2, dilation).
GEOMS = [
    (3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 9, 7),
    (3, 3, 2, 2, 1, 1, 0, 1, 0, 1, 13, 6),
    (3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 9, 7),
    (5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 13, 6),
    (5, 5, 2, 2, 1, 1, 1, 2, 2, 1, 9, 7),
    (3, 3, 1, 1, 1, 1, 3, 0, 0, 3, 9, 7),
    (3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 13, 6),
    (3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 9, 7),
    (2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 13, 6),
    (3, 3, 1, 2, 2, 2, 2, 2, 1, 2, 9, 7),
    # Wide rows: the fast paths' multi-pixel steps (8 and 4 pixels on the 32-register tiers, 4 and
    # 2 on AVX2), the half step and single pixels after them, with odd widths.
    (3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4, 47),
    (3, 3, 2, 2, 1, 1, 0, 1, 0, 1, 5, 45),
    (3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 5, 39),
    (5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 5, 30),
    # 1x1 (a per-channel scale): 8-pixel steps at stride 1 and 2, padded borders.
    (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 5, 23),
    (1, 1, 2, 2, 1, 1, 1, 0, 1, 0, 9, 29),
    # Few channels at horizontal stride 1 (c = 1, 2, 4, 8 where it divides the lane count): whole
    # rows as one run of vectors, border pixels alone; a 1x1, H strided or dilated, pads past the
    # row, and 7x9 (63 taps, past the run's 49).
    (1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 3, 45),
    (3, 3, 2, 1, 2, 1, 2, 1, 1, 1, 7, 37),
    (3, 5, 1, 1, 1, 1, 0, 0, 6, 6, 3, 3),
    (7, 9, 1, 1, 1, 1, 3, 3, 4, 4, 9, 40),
]


@pytest.mark.parametrize("c", CHANNELS)
@pytest.mark.parametrize("geom", GEOMS, ids=str)
def test_dwconv2d_f32(isa, rng, c, geom):
    kh, kw, sh, sw, dh, dw, pt, pb, pl, pr, h, w = geom
    x = rng.standard_normal((2, h, w, c), dtype=np.float32)
    wt = rng.standard_normal((c, kh, kw), dtype=np.float32)
    bias = rng.standard_normal(c, dtype=np.float32)
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (w + pl + pr - (kw - 1) * dw - 1) // sw + 1
    want = dwconv_ref(x, wt, bias, sh, sw, dh, dw, pt, pl, oh, ow, lo=-1.5, hi=2.0)
    got = np.full_like(want, np.nan)  # canary: an element the kernel skips stays NaN
    conv = _core.conv2d_f32(wt[..., None], bias, c, sh, sw, dh, dw, pt, pl, x.shape, got.shape, -1.5, 2.0)
    assert conv.name == "depthwise"
    conv([x], [got])
    np.testing.assert_allclose(got, want, **tol(kh, kw))


@pytest.mark.parametrize("shape", [(1, 28, 28, 96), (1, 14, 14, 144)])
@pytest.mark.parametrize("stride", [1, 2])
def test_dwconv2d_f32_threads(isa, rng, shape, stride):
    """A MobileNetV2-sized layer split over two threads, no bias."""
    x = rng.standard_normal(shape, dtype=np.float32)
    c = shape[3]
    wt = rng.standard_normal((c, 3, 3), dtype=np.float32)
    oh, ow = -(-shape[1] // stride), -(-shape[2] // stride)
    pt = pl = 1 if stride == 1 else 0
    want = dwconv_ref(x, wt, None, stride, stride, 1, 1, pt, pl, oh, ow)
    got = run_op("DepthwiseConv2D", [x, Const(wt[..., None], format=7)], num_threads=2, channelMultiplier=1,
                 kernelH=3, kernelW=3, strideH=stride, strideW=stride, dilateH=1, dilateW=1, padMode=PadMode.SAME_UPPER)[0]
    np.testing.assert_allclose(got, want, **tol(3, 3))


def dw_attrs(k=3, s=1, d=1, pads=(0, 0, 0, 0), pad_mode=PadMode.NOTSET, mult=1, act=0):
    return dict(channelMultiplier=mult, kernelH=k, kernelW=k, strideH=s, strideW=s, dilateH=d, dilateW=d,
                padMode=pad_mode, padUp=pads[0], padDown=pads[1], padLeft=pads[2], padRight=pads[3],
                activationType=act)


# (pad mode, stored pads (u, d, l, r), stride, dilation, h, w) -> expected (pt, pl, oh, ow)
PAD_CASES = [
    (PadMode.NOTSET, (1, 2, 0, 1), 1, 1, 9, 7, (1, 0, 10, 6)),
    (PadMode.CAFFE, (1, 1, 1, 1), 2, 1, 9, 7, (1, 1, 5, 4)),
    (PadMode.VALID, (0, 0, 0, 0), 1, 1, 9, 7, (0, 0, 7, 5)),
    (PadMode.SAME_LOWER, (1, 0, 1, 0), 2, 1, 9, 7, (1, 1, 4, 3)),  # stored pads used as is
    (PadMode.SAME_UPPER, (5, 5, 5, 5), 2, 1, 13, 6, (1, 0, 7, 3)),  # totals 2, 1: recomputed (1/1, 0/1)
    (PadMode.SAME_UPPER, (9, 9, 9, 9), 1, 2, 9, 7, (2, 2, 9, 7)),  # totals 4, 4: recomputed (2/2)
    # stride 3, 3x3 on 9x6: totals 0, 0 -> DepthwiseConv2D keeps the stored pads (unlike Conv2D)
    (PadMode.SAME_UPPER, (1, 1, 1, 0), 3, 1, 9, 6, (1, 1, 3, 2)),
]


@pytest.mark.parametrize("case", PAD_CASES, ids=str)
def test_depthwise_pad_modes(isa, rng, case):
    mode, pads, s, d, h, w, (pt, pl, oh, ow) = case
    c = 9
    x = rng.standard_normal((1, h, w, c), dtype=np.float32)
    wt = rng.standard_normal((c, 3, 3), dtype=np.float32)
    bias = rng.standard_normal(c, dtype=np.float32)
    got = run_op("DepthwiseConv2D", [x, Const(wt[..., None], format=7), Const(bias)],
                 **dw_attrs(3, s, d, pads, mode))[0]
    assert got.shape == (1, oh, ow, c)
    np.testing.assert_allclose(got, dwconv_ref(x, wt, bias, s, s, d, d, pt, pl, oh, ow), **tol(3, 3))


@pytest.mark.parametrize("act,lo,hi", [(ActivationType.RELU, 0, np.inf), (ActivationType.RELU6, 0, 6), (2, -np.inf, np.inf)])
def test_depthwise_activation(isa, rng, act, lo, hi):
    x = 4 * rng.standard_normal((1, 9, 7, 17), dtype=np.float32)
    wt = rng.standard_normal((17, 3, 3), dtype=np.float32)
    got = run_op("DepthwiseConv2D", [x, Const(wt[..., None], format=7)], **dw_attrs(pads=(1, 1, 1, 1), act=act))[0]
    np.testing.assert_allclose(got, dwconv_ref(x, wt, None, 1, 1, 1, 1, 1, 1, 9, 7, lo=lo, hi=hi), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("c", [1, 3, 8, 9])
def test_depthwise_multiplier(isa, rng, c):
    """m = 2: output channel o reads input channel o // 2 (a grouped conv), as r1.1 specifies."""
    x = rng.standard_normal((2, 9, 7, c), dtype=np.float32)
    wt = rng.standard_normal((2 * c, 3, 3), dtype=np.float32)
    bias = rng.standard_normal(2 * c, dtype=np.float32)
    got = run_op("DepthwiseConv2D", [x, Const(wt[..., None], format=7), Const(bias)], num_threads=2,
                 **dw_attrs(3, 2, 1, (1, 1, 1, 1), mult=2))[0]
    want = dwconv_ref(x, wt, bias, 2, 2, 1, 1, 1, 1, 5, 4, mult=2)
    np.testing.assert_allclose(got, want, **tol(3, 3))


def test_depthwise_int8_weight_dequant(isa, rng):
    """Rule "dtype": an int8 weight is dequantised per channel whether or not `inited` is set."""
    c = 5
    q = rng.integers(-128, 128, (c, 3, 3, 1), dtype=np.int8)
    scales = rng.uniform(0.01, 0.1, c)
    quant = [dict(scale=float(s), zeroPoint=int(z), inited=False, numBits=8) for s, z in zip(scales, range(c))]
    x = rng.standard_normal((1, 9, 7, c), dtype=np.float32)
    got = run_op("DepthwiseConv2D", [x, Const(q, format=7, quant=quant)], **dw_attrs(pads=(1, 1, 1, 1)))[0]
    wt = (q[..., 0].astype(np.float32) - np.arange(c, dtype=np.float32)[:, None, None]) \
        * scales.astype(np.float32)[:, None, None]
    np.testing.assert_allclose(got, dwconv_ref(x, wt, None, 1, 1, 1, 1, 1, 1, 9, 7), **tol(3, 3))


@pytest.mark.parametrize("bad,match", [
    (dict(pads=(0, 0, 0, 0), k=5, s=1), "output height"),  # 3x3 input, 5x5 kernel: out <= 0 is an error
    (dict(mult=2), "channelMultiplier"),
    (dict(s=0), "strides"),
    (dict(pads=(-1, 0, 0, 0)), "negative"),
])
def test_depthwise_errors(rng, bad, match):
    k = bad.get("k", 3)
    x = rng.standard_normal((1, 3, 3, 4), dtype=np.float32)
    wt = rng.standard_normal((4, k, k, 1), dtype=np.float32)
    with pytest.raises(ModelError, match=match):
        run_op("DepthwiseConv2D", [x, Const(wt, format=7)], **dw_attrs(**bad))


def test_dwconv2d_f32_bad_args():
    conv = _core.conv2d_f32(np.zeros((4, 3, 3, 1), np.float32), None, 4, 1, 1, 1, 1, 1, 1, (1, 5, 5, 4), (1, 5, 5, 4))
    with pytest.raises(ValueError, match="input 0"):
        conv([np.zeros((1, 5, 5, 3), np.float32)], [np.zeros((1, 5, 5, 4), np.float32)])
    with pytest.raises(ValueError, match="output 0"):
        conv([np.zeros((1, 5, 5, 4), np.float32)], [np.zeros((1, 5, 5, 3), np.float32)])
    with pytest.raises(ValueError, match="x_shape"):
        _core.conv2d_f32(np.zeros((4, 3, 3, 1), np.float32), None, 4, 1, 1, 1, 1, 1, 1, (1, 5, 5, 3), (1, 5, 5, 4))


def dedw_ref(x, wt, bias, sh, sw, dh, dw, pt, pl, oh, ow, lo=-np.inf, hi=np.inf):
    """Transposed depthwise conv by scattering: input (iy, ix) tap (ky, kx) lands on output
    (iy*sh + ky*dh - pt, ix*sw + kx*dw - pl) when that is inside the output."""
    n, h, w, c = x.shape
    _, kh, kw = wt.shape
    y = np.zeros((n, oh, ow, c)) + (0 if bias is None else bias)
    for iy in range(h):
        for ix in range(w):
            for ky in range(kh):
                for kx in range(kw):
                    oy, ox = iy * sh + ky * dh - pt, ix * sw + kx * dw - pl
                    if 0 <= oy < oh and 0 <= ox < ow:
                        y[:, oy, ox] += x[:, iy, ix].astype(np.float64) * wt[:, ky, kx]
    return np.clip(y, lo, hi).astype(np.float32)


# (pad mode, pads (u, d, l, r), k, s, d, h, w) -> expected (pt, pl, oh, ow)
DEDW_CASES = [
    (PadMode.NOTSET, (1, 1, 0, 1), 3, 2, 1, 5, 4, (1, 0, 9, 8)),
    (PadMode.CAFFE, (0, 0, 0, 0), 3, 1, 2, 5, 4, (0, 0, 9, 8)),
    (PadMode.SAME_UPPER, (0, 0, 0, 0), 3, 2, 1, 5, 4, (0, 0, 10, 8)),  # pu = (11 - 10) / 2 = 0
    (PadMode.SAME_UPPER, (0, 0, 0, 0), 5, 1, 1, 5, 4, (2, 2, 5, 4)),
    (PadMode.SAME_UPPER, (0, 0, 0, 0), 2, 4, 1, 3, 2, (-1, -1, 12, 8)),  # s > k: negative pad, bias-only rows
    (PadMode.VALID, (3, 3, 3, 3), 3, 2, 2, 5, 4, (0, 0, 11, 9)),  # dilation ignored in the size
]


@pytest.mark.parametrize("case", DEDW_CASES, ids=str)
@pytest.mark.parametrize("c", [1, 7, 16, 19])
def test_dedepthwise(isa, rng, case, c):
    mode, pads, k, s, d, h, w, (pt, pl, oh, ow) = case
    x = rng.standard_normal((2, h, w, c), dtype=np.float32)
    wt = rng.standard_normal((c, k, k), dtype=np.float32)
    bias = rng.standard_normal(c, dtype=np.float32)
    got = run_op("DeDepthwiseConv2D", [x, Const(wt[..., None], format=7), Const(bias)],
                 **dw_attrs(k, s, d, pads, mode, act=ActivationType.RELU6))[0]
    assert got.shape == (2, oh, ow, c)
    want = dedw_ref(x, wt, bias, s, s, d, d, pt, pl, oh, ow, lo=0, hi=6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dedepthwise_runs_in_the_program(rng):
    """Bilinear-×2-style DeDepthwiseConv2D between two native steps: one Program, equal to its
    kernel objects called alone, at 1 and 2 threads."""
    b = Builder("dedw")
    x = b.input("x", (1, 6, 7, 19), np.float32)
    up, y = b.tensor("up"), b.tensor("y")
    wt = rng.standard_normal((19, 4, 4, 1), dtype=np.float32)
    b.node("DeDepthwiseConv2D", [x, b.const("w", wt, format=7)], outputs=[up],
           **dw_attrs(4, 2, 1, (1, 1, 1, 1), PadMode.NOTSET))
    b.node("Activation", [up], outputs=[y], type=ActivationType.RELU6)
    b.output(y)
    feeds = [rng.standard_normal((1, 6, 7, 19), dtype=np.float32)]
    for threads in (1, 2):
        assert_program_matches_single_calls(b.finish(), feeds, threads, program_steps=2)


def test_dedepthwise_same_lower_fails(rng):
    x = rng.standard_normal((1, 5, 4, 3), dtype=np.float32)
    wt = rng.standard_normal((3, 3, 3, 1), dtype=np.float32)
    with pytest.raises(ModelError, match="pad mode"):
        run_op("DeDepthwiseConv2D", [x, Const(wt, format=7)], **dw_attrs(3, 2, 1, (1, 1, 1, 1), PadMode.SAME_LOWER))


def test_kernel_object_keeps_the_tier_it_was_built_for(rng):
    """A kernel object packs its weights for the slot active when it is built (channels padded to
    that tier's lane count) and keeps that slot: raising the cap later must not make it read
    whole vectors past a narrower tier's padding, nor change its result."""
    c = 5
    x = rng.standard_normal((1, 9, 7, c), dtype=np.float32)
    wt = rng.standard_normal((c, 3, 3), dtype=np.float32)
    bias = rng.standard_normal(c, dtype=np.float32)
    with msv0.isa_cap("scalar"):
        conv = _core.conv2d_f32(wt[..., None], bias, c, 1, 1, 1, 1, 1, 1, x.shape, x.shape)
        built = np.full(x.shape, np.nan, np.float32)
        conv([x], [built])
    later = np.full(x.shape, np.nan, np.float32)
    conv([x], [later])
    np.testing.assert_array_equal(later, built)
    np.testing.assert_allclose(later, dwconv_ref(x, wt, bias, 1, 1, 1, 1, 1, 1, 9, 7), **tol(3, 3))
