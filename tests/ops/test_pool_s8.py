"""int8 Pooling (format-v0.md §3.1) against tests/int8_ref.py's NumPy transcription of r1.1's int8
pooling, exact equality on every tier: channel counts around every lane width, windows, pads,
SAME_UPPER and CEIL geometry, the copy for equal params, scale ratios from 1e-4 to 50 (where
the int8 cast wraps), zero points at the int8 limits, global windows, two threads."""
import numpy as np
import pytest

from msv0 import ModelError, _core
from msv0.fb.PadMode import PadMode
from msv0.fb.PoolMode import PoolMode
from msv0.fb.RoundMode import RoundMode
from oprun import run_op

from int8_ref import pool_s8, qp

MODES = pytest.mark.parametrize("mode", [PoolMode.MAX_POOLING, PoolMode.MEAN_POOLING], ids=["max", "mean"])
CHANNELS = [1, 3, 15, 16, 17, 33, 67]


def pool_attrs(mode, kh=3, kw=3, sh=1, sw=1, pads=(0, 0, 0, 0), pad_mode=PadMode.NOTSET, round_mode=RoundMode.FLOOR,
               glob=False):
    return {"poolingMode": mode, "windowH": kh, "windowW": kw, "strideH": sh, "strideW": sw, "padMode": pad_mode,
            "padUp": pads[0], "padDown": pads[1], "padLeft": pads[2], "padRight": pads[3],
            "roundMode": round_mode, "global_": glob}


def check(rng, mode, shape, geom, q_in=(0.05, 3), q_out=(0.07, -4), threads=1, x=None, **attrs):
    """geom: (kh, kw, sh, sw, pt, pl, oh, ow) the op should derive from attrs."""
    kh, kw, sh, sw, pt, pl, oh, ow = geom
    x = rng.integers(-128, 128, shape, dtype=np.int8) if x is None else x
    got = run_op("Pooling", [x], out_dtypes=[np.int8], in_quant=[qp(*q_in)], out_quant=[qp(*q_out)],
                 num_threads=threads, **pool_attrs(mode, **attrs))[0]
    want = pool_s8(x, mode == PoolMode.MAX_POOLING, kh, kw, sh, sw, pt, pl, oh, ow, *q_in, *q_out)
    np.testing.assert_array_equal(got, want)


@MODES
@pytest.mark.parametrize("c", CHANNELS)
def test_pool_s8_channels(isa, rng, mode, c):
    check(rng, mode, (2, 5, 6, c), (3, 3, 2, 2, 1, 1, 3, 3), sh=2, sw=2, pads=(1, 1, 1, 1))


# (kh, kw, sh, sw, pads (u, d, l, r), h, w): stride > window, asymmetric pads, 1-wide windows.
WINDOWS = [
    (3, 3, 1, 1, (1, 1, 1, 1), 9, 7),
    (2, 2, 2, 2, (0, 0, 0, 0), 8, 6),
    (3, 1, 3, 1, (1, 1, 0, 0), 9, 4),
    (5, 5, 3, 3, (2, 2, 2, 2), 9, 7),
    (2, 2, 3, 3, (0, 1, 1, 0), 8, 7),
]


@MODES
@pytest.mark.parametrize("win", WINDOWS, ids=str)
def test_pool_s8_windows(isa, rng, mode, win):
    kh, kw, sh, sw, pads, h, w = win
    oh, ow = (h + pads[0] + pads[1] - kh) // sh + 1, (w + pads[2] + pads[3] - kw) // sw + 1
    check(rng, mode, (1, h, w, 17), (kh, kw, sh, sw, pads[0], pads[2], oh, ow), kh=kh, kw=kw, sh=sh, sw=sw, pads=pads)


@MODES
def test_pool_s8_same_upper_ceil(isa, rng, mode):
    check(rng, mode, (1, 13, 6, 9), (3, 3, 2, 2, 1, 0, 7, 3), sh=2, sw=2, pads=(4, 4, 4, 4),
          pad_mode=PadMode.SAME_UPPER)
    check(rng, mode, (1, 9, 7, 9), (3, 3, 2, 2, 1, 1, 5, 4), sh=2, sw=2, pads=(1, 0, 1, 1),
          round_mode=RoundMode.CEIL)


# (q_in, q_out): equal (max copies), ratio 1 - 1e-7 (rounds like the copy almost everywhere),
# 1e-4 (everything to the zero point), 0.5 (ties, rounded away from zero), 50 (the int8 cast
# wraps), zero points at the limits.
PARAMS = [
    ((0.05, 3), (0.05, 3)),
    ((0.05, 3), (0.05 * (1 + 1e-7), 3)),
    ((0.05, -128), (0.05, 127)),
    ((1e-4, 127), (1.0, -128)),
    ((0.25, 1), (0.5, -1)),
    ((0.5, 0), (0.01, 7)),
    ((0.037, 11), (0.011, -2)),
]


@MODES
@pytest.mark.parametrize("params", PARAMS, ids=str)
def test_pool_s8_params(isa, rng, mode, params):
    check(rng, mode, (1, 6, 5, 33), (3, 3, 1, 1, 1, 1, 6, 5), *params, pads=(1, 1, 1, 1))


@MODES
def test_pool_s8_extremes(isa, mode):
    """All -128 and all 127 through the mean's rounding and the requantization."""
    for v in (-128, 127):
        x = np.full((1, 4, 4, 19), v, np.int8)
        check(None, mode, x.shape, (3, 3, 1, 1, 1, 1, 4, 4), (0.05, -128), (0.02, 100), x=x, pads=(1, 1, 1, 1))


@MODES
@pytest.mark.parametrize("hw", [(7, 7), (8, 16)], ids=str)  # 49 and 128 cells
def test_pool_s8_global(isa, rng, mode, hw):
    h, w = hw
    check(rng, mode, (2, h, w, 70), (h, w, 1, 1, 0, 0, 1, 1), threads=2, kh=0, kw=0, sh=0, sw=0, glob=True)


@MODES
def test_pool_s8_threads(isa, rng, mode):
    check(rng, mode, (2, 17, 15, 40), (3, 3, 2, 2, 1, 1, 9, 8), threads=2, sh=2, sw=2, pads=(1, 1, 1, 1))


def test_pool_s8_errors(rng):
    """Mean windows of more than 128 cells (r1.1's int16 sum could overflow) or of none."""
    x = rng.integers(-128, 128, (1, 12, 11, 4), dtype=np.int8)
    io = dict(out_dtypes=[np.int8], in_quant=[qp(0.05, 0)], out_quant=[qp(0.05, 0)])
    for attrs, match in [(dict(glob=True, kh=0, kw=0), "132 cells"), (dict(kh=2, kw=2, pads=(2, 0, 0, 0)), "no cell")]:
        with pytest.raises(ModelError, match=f"pooling_node.*{match}"):
            run_op("Pooling", [x], **io, **pool_attrs(PoolMode.MEAN_POOLING, **attrs))
    # A max window of any size is fine, and one lying in padding gives -128 requantized.
    check(rng, PoolMode.MAX_POOLING, (1, 12, 11, 4), (12, 11, 1, 1, 0, 0, 1, 1), kh=0, kw=0, glob=True)
    check(rng, PoolMode.MAX_POOLING, (1, 3, 3, 4), (2, 2, 1, 1, 2, 0, 4, 2), kh=2, kw=2, pads=(2, 0, 0, 0))
    with pytest.raises(ModelError, match="pooling_node.*beyond int32"):
        run_op("Pooling", [x], out_dtypes=[np.int8], in_quant=[qp(1.0, 0)], out_quant=[qp(1e-8, 0)],
               **pool_attrs(PoolMode.MAX_POOLING))


def test_pool_s8_bad_args():
    t = np.arange(-128, 128).astype(np.int8)
    ok = dict(max=False, kh=3, kw=3, sh=1, sw=1, pt=0, pl=0, table=t, x_shape=[1, 5, 5, 4], y_shape=[1, 3, 3, 4])
    _core.Pool2dS8(**ok)
    for bad in [dict(table=t[:255]), dict(table=t.astype(np.int16)), dict(kh=0), dict(sh=0), dict(pt=-1),
                dict(y_shape=[1, 3, 3, 5]), dict(kh=12, kw=11, x_shape=[1, 12, 11, 4], y_shape=[1, 1, 1, 4]),
                dict(pt=3, y_shape=[1, 4, 3, 4])]:
        with pytest.raises(ValueError):
            _core.Pool2dS8(**{**ok, **bad})
