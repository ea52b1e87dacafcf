"""Pooling (format-v0.md §5): max or mean over NHWC windows, fp32, through csrc/kernels/pool_f32.cc."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from msv0 import _core
from msv0.fb.PoolMode import PoolMode
from msv0.fb.RoundMode import RoundMode
from msv0.geometry import pool_size
from msv0.registry import Plan, activation_range, as_float32, check_size, expect_inputs, fail, op

FLT_MAX = float(np.finfo(np.float32).max)


def _empty_window(size, k, s, p0, out):
    """Whether some window along this axis holds no cell of the image."""
    starts = np.arange(out) * s - p0
    return bool(np.any(np.minimum(starts + k, size) <= np.maximum(starts, 0)))


class PoolWindow(NamedTuple):
    """A Pooling node's window after its checks."""

    max: bool
    kh: int
    kw: int
    sh: int
    sw: int
    pt: int
    pl: int
    out_shape: tuple[int, int, int, int]


def pool_window(node, x) -> PoolWindow:
    """The attributes checked against NHWC input x, and the window and output shape they give
    (shared by the float and int8 Pooling)."""
    a = node.attrs
    if len(x.shape) != 4:
        raise fail(node, f"input must be 4-D NHWC, got shape {x.shape}")
    if a.poolingMode not in (PoolMode.MAX_POOLING, PoolMode.MEAN_POOLING):
        raise fail(node, f"unsupported poolingMode {a.poolingMode}")
    if a.roundMode not in (RoundMode.FLOOR, RoundMode.CEIL):
        raise fail(node, f"unsupported roundMode {a.roundMode}")
    n, h, w, c = x.shape
    kh, kw, sh, sw = a.windowH, a.windowW, a.strideH, a.strideW
    if a.global_:  # flatc spells the schema field `global` as global_
        kh, kw = h, w
        # A global window has one position whatever the stride; converters may leave it 0.
        sh, sw = max(sh, 1), max(sw, 1)
    if kh < 1 or kw < 1:
        raise fail(node, f"window must be >= 1, got {kh}x{kw}")
    if sh < 1 or sw < 1:
        raise fail(node, f"strides must be >= 1, got {sh}x{sw}")
    oh, pt = pool_size(node, h, kh, sh, a.padMode, a.roundMode, a.padUp, a.padDown, "height")
    ow, pl = pool_size(node, w, kw, sw, a.padMode, a.roundMode, a.padLeft, a.padRight, "width")
    check_size(f"{node.label}: output", (n, oh, ow, c), x.dtype)  # before the window checks size arrays by it
    return PoolWindow(a.poolingMode == PoolMode.MAX_POOLING, kh, kw, sh, sw, pt, pl, (n, oh, ow, c))


@op("Pooling")
def pooling(node, ins):
    expect_inputs(node, ins, 1)
    x = ins[0]
    as_float32(node, x, "input")
    win = pool_window(node, x)
    _, h, w, _ = x.shape
    _, oh, ow, _ = win.out_shape
    if not win.max and (_empty_window(h, win.kh, win.sh, win.pt, oh) or _empty_window(w, win.kw, win.sw, win.pl, ow)):
        # r1.1 fails at run time (a zero divisor); the geometry is known now.
        raise fail(node, f"a mean window lies entirely in padding (input {h}x{w}, window {win.kh}x{win.kw}, "
                         f"stride {win.sh}x{win.sw}, pads {win.pt},{win.pl})")
    lo, hi = activation_range(node.attrs.activationType)
    lo, hi = max(lo, -FLT_MAX), min(hi, FLT_MAX)  # the fp32 kernel always clamps to finite values
    kernel = _core.Pool2d(win.max, win.kh, win.kw, win.sh, win.sw, win.pt, win.pl, x.shape, win.out_shape, lo, hi)
    return Plan([(win.out_shape, np.dtype(np.float32))], kernel=kernel)
