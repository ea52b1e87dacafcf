"""Resize (format-v0.md §5): bilinear or nearest on NHWC, r1.1 coordinates.

Only alignCorners is honoured: src = dst·scale with scale = in/out, or (in−1)/(out−1) with
alignCorners and out > 1; there is no half-pixel offset whatever coordinateTransformMode says.
The source tables are computed here; the native Resize kernel object (csrc/kernels/resize_f32.cc)
gathers and blends with them.
"""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.fb.Format import Format
from msv0.fb.ResizeMethod import ResizeMethod
from msv0.registry import Plan, as_float32, check_size, const_input, expect_inputs, fail, op


def _out_size(node, x, ins, method) -> tuple[int, int]:
    a = node.attrs
    if len(ins) == 1:
        return int(a.newHeight), int(a.newWidth)
    s = ins[1]
    data = const_input(node, s, "size tensor")
    if data.size == 4:
        if method == ResizeMethod.LINEAR:
            # r1.1's bilinear kernel reads the scales as int32 [newH, newW]: broken, refuse it.
            raise fail(node, "LINEAR with a 4-element scale input is broken in r1.1")
        if data.dtype not in (np.int32, np.float32):
            raise fail(node, f"scale tensor must be int32 or float32, got {data.dtype}")
        fmt = s.tensor.format
        if fmt not in (Format.NCHW, Format.NHWC):
            raise fail(node, f"scale tensor format {fmt} is neither NCHW nor NHWC")
        sh, sw = (data.reshape(-1)[2:4] if fmt == Format.NCHW else data.reshape(-1)[1:3]).tolist()
        return int(np.float32(x.shape[1]) * np.float32(sh)), int(np.float32(x.shape[2]) * np.float32(sw))
    if data.size != 2 or data.dtype != np.int32:
        raise fail(node, f"size tensor must be 2 int32 values [newH, newW], got {data.size} {data.dtype}")
    h, w = data.reshape(-1).tolist()
    return int(h), int(w)


def _scale(n_in: int, n_out: int, align: bool) -> np.float32:
    if align and n_out > 1:
        return np.float32(n_in - 1) / np.float32(n_out - 1)
    return np.float32(n_in) / np.float32(n_out)


def _src(n_in: int, n_out: int, align: bool) -> np.ndarray:
    return np.arange(n_out, dtype=np.float32) * _scale(n_in, n_out, align)


def _nearest(n_in: int, n_out: int, align: bool) -> np.ndarray:
    s = _src(n_in, n_out, align).astype(np.float64)
    i = np.floor(s + 0.5) if align else np.floor(s)  # C round: half away from zero (s >= 0)
    return np.minimum(i.astype(np.int64), n_in - 1)


def _linear(n_in: int, n_out: int, align: bool):
    return linear_taps(_src(n_in, n_out, align), n_in)


def linear_taps(s: np.ndarray, n_in: int):
    """For source coordinates s >= 0: the lower and upper source indices and the upper's weight."""
    i0 = np.floor(s).astype(np.int64)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w = (s - i0.astype(np.float32)).astype(np.float32)
    return i0, i1, w


@op("Resize")
def resize(node, ins):
    expect_inputs(node, ins, 1, 2)
    x = ins[0]
    a = node.attrs
    as_float32(node, x, "input")
    if len(x.shape) != 4:
        raise fail(node, f"input must be 4-D NHWC, got {x.shape}")
    if a.method not in (ResizeMethod.LINEAR, ResizeMethod.NEAREST):
        raise fail(node, f"unsupported method {a.method} (r1.1 has LINEAR and NEAREST only)")
    if a.preserveAspectRatio:
        raise fail(node, "preserveAspectRatio is rejected by r1.1")
    n, h, w, c = x.shape
    oh, ow = _out_size(node, x, ins, a.method)
    if oh <= 0 or ow <= 0:
        raise fail(node, f"output size {oh}x{ow} is not positive")
    if h == 0 or w == 0:
        raise fail(node, f"empty input {x.shape}")
    out_shape = (n, oh, ow, c)
    check_size(f"{node.label}: output", out_shape, x.dtype)  # before the coordinate tables it sizes
    align = bool(a.alignCorners)
    if a.method == ResizeMethod.NEAREST:
        kernel = _core.Resize(x.shape, out_shape, _nearest(h, oh, align), _nearest(w, ow, align))
    else:
        y0, y1, wy = _linear(h, oh, align)
        x0, x1, wx = _linear(w, ow, align)
        kernel = _core.Resize(x.shape, out_shape, y0, x0, y1, x1, wy, wx)
    return Plan([(out_shape, x.dtype)], kernel=kernel)
