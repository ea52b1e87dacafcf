"""Pooling against a NumPy reference (format-v0.md §5). Both modes are exact: max trivially, mean
because the reference sums in float32 in r1.1's order (ky-major) and divides once."""
import numpy as np
import pytest

from msv0 import ModelError, _core
from oprun import run_op
from msv0.fb.ActivationType import ActivationType
from msv0.fb.PadMode import PadMode
from msv0.fb.PoolMode import PoolMode
from msv0.fb.RoundMode import RoundMode

CHANNELS = [1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 70]  # lane counts 1/4/8/16 +-1; 70 crosses a 4-vector block
FLT_MAX = np.finfo(np.float32).max


def pool_ref(x, mode, kh, kw, sh, sw, pt, pl, oh, ow, lo=-FLT_MAX, hi=FLT_MAX):
    """Windows clipped to the image; max starts at -FLT_MAX, mean divides by the clipped cell count."""
    n, h, w, c = x.shape
    y = np.empty((n, oh, ow, c), np.float32)
    for oy in range(oh):
        y0, y1 = max(oy * sh - pt, 0), min(oy * sh - pt + kh, h)
        for ox in range(ow):
            x0, x1 = max(ox * sw - pl, 0), min(ox * sw - pl + kw, w)
            acc = np.full((n, c), -FLT_MAX if mode == PoolMode.MAX_POOLING else 0, np.float32)
            for iy in range(y0, y1):
                for ix in range(x0, x1):
                    acc = np.maximum(acc, x[:, iy, ix]) if mode == PoolMode.MAX_POOLING else acc + x[:, iy, ix]
            if mode == PoolMode.MEAN_POOLING:
                acc = acc / np.float32((y1 - y0) * (x1 - x0))
            y[:, oy, ox] = acc
    return np.clip(y, np.float32(lo), np.float32(hi))


# (kh, kw, sh, sw, pt, pb, pl, pr, h, w): square/odd windows, stride > window, asymmetric pads.
WINDOWS = [
    (3, 3, 1, 1, 1, 1, 1, 1, 9, 7),
    (2, 2, 2, 2, 0, 0, 0, 0, 13, 6),
    (3, 3, 2, 2, 0, 1, 0, 1, 9, 7),
    (3, 1, 3, 1, 1, 1, 0, 0, 13, 6),
    (5, 5, 3, 3, 2, 2, 2, 2, 9, 7),
    (2, 2, 3, 3, 0, 0, 0, 0, 13, 6),
]


@pytest.mark.parametrize("mode", [PoolMode.MAX_POOLING, PoolMode.MEAN_POOLING], ids=["max", "mean"])
@pytest.mark.parametrize("c", CHANNELS)
@pytest.mark.parametrize("win", WINDOWS, ids=str)
def test_pool2d_f32(isa, rng, mode, c, win):
    kh, kw, sh, sw, pt, pb, pl, pr, h, w = win
    x = rng.standard_normal((2, h, w, c), dtype=np.float32)
    oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    want = pool_ref(x, mode, kh, kw, sh, sw, pt, pl, oh, ow, -1.0, 1.5)
    got = np.full_like(want, np.nan)  # canary: an element the kernel skips stays NaN
    _core.Pool2d(mode == PoolMode.MAX_POOLING, kh, kw, sh, sw, pt, pl, x.shape, got.shape, -1.0, 1.5)([x], [got])
    np.testing.assert_array_equal(got, want)


def pool_attrs(mode=PoolMode.MAX_POOLING, k=3, s=1, pads=(0, 0, 0, 0), pad_mode=PadMode.NOTSET, round_mode=RoundMode.FLOOR, act=0, glob=False):
    return {"poolingMode": mode, "windowH": k, "windowW": k, "strideH": s, "strideW": s, "padMode": pad_mode,
            "padUp": pads[0], "padDown": pads[1], "padLeft": pads[2], "padRight": pads[3],
            "roundMode": round_mode, "activationType": act, "global_": glob}


# (attrs, h, w) -> expected (k, s, pt, pl, oh, ow)
SIZE_CASES = [
    (dict(k=3, s=2, pads=(1, 0, 1, 1)), 9, 7, (3, 2, 1, 1, 4, 4)),
    (dict(k=3, s=2, pads=(1, 0, 1, 1), round_mode=RoundMode.CEIL), 9, 7, (3, 2, 1, 1, 5, 4)),
    (dict(k=3, s=3, pads=(0, 0, 0, 0), round_mode=RoundMode.CEIL), 13, 6, (3, 3, 0, 0, 5, 2)),
    (dict(k=3, s=2, pads=(4, 4, 4, 4), pad_mode=PadMode.SAME_UPPER), 13, 6, (3, 2, 1, 0, 7, 3)),  # totals 2, 1
    (dict(k=1, s=3, pads=(2, 2, 2, 2), pad_mode=PadMode.SAME_UPPER), 9, 7, (1, 3, 0, 0, 3, 3)),  # totals -2, 0 -> 0
    (dict(k=2, s=2, pad_mode=PadMode.VALID), 9, 7, (2, 2, 0, 0, 4, 3)),
    (dict(k=3, s=1, pads=(1, 1, 1, 1), pad_mode=PadMode.CAFFE), 9, 7, (3, 1, 1, 1, 9, 7)),
    (dict(k=5, s=1), 3, 3, (5, 1, 0, 0, 1, 1)),  # out <= 0 becomes 1; the window is clipped
]


@pytest.mark.parametrize("mode", [PoolMode.MAX_POOLING, PoolMode.MEAN_POOLING], ids=["max", "mean"])
@pytest.mark.parametrize("case", SIZE_CASES, ids=str)
def test_pooling_sizes(isa, rng, mode, case):
    attrs, h, w, (k, s, pt, pl, oh, ow) = case
    x = rng.standard_normal((2, h, w, 9), dtype=np.float32)
    got = run_op("Pooling", [x], num_threads=2, **pool_attrs(mode, **attrs))[0]
    np.testing.assert_array_equal(got, pool_ref(x, mode, k, k, s, s, pt, pl, oh, ow))


@pytest.mark.parametrize("mode", [PoolMode.MAX_POOLING, PoolMode.MEAN_POOLING], ids=["max", "mean"])
@pytest.mark.parametrize("shape", [(1, 7, 7, 1280), (2, 9, 7, 17), (1, 13, 6, 33)])
def test_pooling_global(isa, rng, mode, shape):
    """global: the window is the whole image; converters may leave window and strides at 0."""
    x = rng.standard_normal(shape, dtype=np.float32)
    got = run_op("Pooling", [x], num_threads=2, **pool_attrs(mode, k=0, s=0, glob=True))[0]
    n, h, w, c = shape
    np.testing.assert_array_equal(got, pool_ref(x, mode, h, w, 1, 1, 0, 0, 1, 1))


@pytest.mark.parametrize("mode", [PoolMode.MAX_POOLING, PoolMode.MEAN_POOLING], ids=["max", "mean"])
@pytest.mark.parametrize("act,lo,hi", [(ActivationType.RELU, 0, FLT_MAX), (ActivationType.RELU6, 0, 6), (0, -FLT_MAX, FLT_MAX), (5, -FLT_MAX, FLT_MAX)])
def test_pooling_activation(isa, rng, mode, act, lo, hi):
    """RELU/ActivationType.RELU6 clamp; other types are ignored; the fp32 kernel always clamps +-inf to +-FLT_MAX."""
    x = 5 * rng.standard_normal((1, 9, 7, 17), dtype=np.float32)
    x[0, 0, 0, :4] = np.inf
    x[0, 4, 4, 4:8] = -np.inf
    got = run_op("Pooling", [x], **pool_attrs(mode, 3, 2, (1, 1, 1, 1), act=act))[0]
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got, pool_ref(x, mode, 3, 3, 2, 2, 1, 1, 5, 4, lo, hi))


def test_maxpool_all_padding_window(isa, rng):
    """A max window with no image cell yields -FLT_MAX (r1.1's initial value, then clamped)."""
    x = rng.standard_normal((1, 4, 4, 3), dtype=np.float32)
    got = run_op("Pooling", [x], **pool_attrs(PoolMode.MAX_POOLING, 2, 1, (2, 0, 0, 0)))[0]
    assert got.shape == (1, 5, 3, 3)
    assert (got[0, 0] == -FLT_MAX).all()
    np.testing.assert_array_equal(got, pool_ref(x, PoolMode.MAX_POOLING, 2, 2, 1, 1, 2, 0, 5, 3))


@pytest.mark.parametrize("attrs,match", [
    (pool_attrs(PoolMode.MEAN_POOLING, 2, 1, (2, 0, 0, 0)), "entirely in padding"),  # r1.1: zero divisor at run time
    (pool_attrs(PoolMode.MAX_POOLING, 3, 0), "strides"),
    (pool_attrs(PoolMode.MAX_POOLING, 0, 1), "window"),
    (pool_attrs(PoolMode.MAX_POOLING, 3, 1, (-1, 0, 0, 0)), "negative"),
    (pool_attrs(PoolMode.MAX_POOLING, 3, 1, round_mode=2), "roundMode"),
    (pool_attrs(2, 3, 1), "poolingMode"),
])
def test_pooling_errors(rng, attrs, match):
    x = rng.standard_normal((1, 4, 4, 3), dtype=np.float32)
    with pytest.raises(ModelError, match=match):
        run_op("Pooling", [x], **attrs)


def test_pool2d_f32_bad_args():
    with pytest.raises(ValueError, match="y_shape"):
        _core.Pool2d(True, 2, 2, 2, 2, 0, 0, (1, 4, 4, 3), (1, 2, 2, 4), -FLT_MAX, FLT_MAX)
    with pytest.raises(ValueError, match="strides"):
        _core.Pool2d(False, 2, 2, 0, 2, 0, 0, (1, 4, 4, 3), (1, 2, 2, 3), -FLT_MAX, FLT_MAX)
    pool = _core.Pool2d(True, 2, 2, 2, 2, 0, 0, (1, 4, 4, 3), (1, 2, 2, 3), -FLT_MAX, FLT_MAX)
    with pytest.raises(ValueError, match="shape"):
        pool([np.zeros((1, 4, 4, 3), np.float32)], [np.zeros((1, 2, 3, 3), np.float32)])
