"""Conv2D and DeConv2D, NHWC float32 (format-v0.md §5): attribute checks and shapes; the kernel
objects (csrc/kernels/conv2d_f32.cc, deconv2d_f32.cc) choose the algorithm and pack the weights."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from msv0 import _core
from msv0.fb.PadMode import PadMode
from msv0.geometry import conv_size, deconv_size
from msv0.registry import (PRECISION, Plan, activation_range, as_float32, check_size, const_input, expect_inputs,
                           fail, op)
from msv0.weights import float_weight


def _geometry(node, a, weight_hw):
    """kh, kw, sh, sw, dh, dw after checking the attributes against the weight."""
    kh, kw = weight_hw
    for name, attr, dim in (("kernelH", a.kernelH, kh), ("kernelW", a.kernelW, kw)):
        # 0 means "not written"; any other value must agree with the weight r1.1 packs.
        if attr not in (0, dim):
            raise fail(node, f"{name}={attr} but the weight has {dim}")
    for name in ("strideH", "strideW", "dilateH", "dilateW"):
        if getattr(a, name) < 1:
            raise fail(node, f"{name} must be >= 1, got {getattr(a, name)}")
    return kh, kw, a.strideH, a.strideW, a.dilateH, a.dilateW


def _bias(node, ins, channels):
    if len(ins) < 3:
        return None
    bias = np.ascontiguousarray(const_input(node, ins[2], "bias"), np.float32).reshape(-1)
    if bias.size != channels:
        raise fail(node, f"bias has {bias.size} values for {channels} output channels")
    return bias


def _x_nhwc(node, x):
    as_float32(node, x, "input")
    if len(x.shape) != 4:
        raise fail(node, f"input must be 4-D NHWC, got shape {x.shape}")
    return x.shape


class ConvWindow(NamedTuple):
    """A Conv2D-shaped node's window after its checks."""

    group: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    oh: int
    ow: int
    pt: int
    pl: int


@dataclass(frozen=True)
class ConvGeometry:
    """A Conv2D-shaped node (Conv2D, Adder) after its checks: shapes, weight, window, clamp."""

    n: int
    h: int
    w: int
    c: int
    weight: np.ndarray  # [oc, kh, kw, c / group] float32
    bias: np.ndarray | None
    win: ConvWindow
    lo: float
    hi: float

    @property
    def oc(self) -> int:
        return self.weight.shape[0]


# The most output pixels a conv kernel gathers per thread (run_gemm's tiles in conv2d_f32.cc,
# kTileRows in conv2d_s8.cc).
IM2COL_ROWS = 240


def conv_window(node, x_shape, w_shape) -> ConvWindow:
    """The attributes checked against NHWC x_shape and a [Cout, kH, kW, Cin/group] w_shape, and the
    output size and leading pads they give (shared by the float and int8 Conv2D)."""
    a = node.attrs
    if len(w_shape) != 4:
        raise fail(node, f"weight must be 4-D [Cout, kH, kW, Cin/group], got {tuple(w_shape)}")
    _, h, w, c = x_shape
    oc, _, _, cg = w_shape
    kh, kw, sh, sw, dh, dw = _geometry(node, a, w_shape[1:3])
    group = a.group
    if group < 1 or c % group or oc % group or cg * group != c:
        raise fail(node, f"group {group} does not fit input channels {c}, weight {tuple(w_shape)}")
    if a.padMode != PadMode.SAME_UPPER and min(a.padUp, a.padDown, a.padLeft, a.padRight) < 0:
        raise fail(node, f"negative pads {a.padUp, a.padDown, a.padLeft, a.padRight}")
    # A pad past the input plus the dilated kernel only adds outputs that see nothing but padding;
    # r1.1 would compute them, but a few bytes of attributes would then buy unbounded work.
    if a.padMode != PadMode.SAME_UPPER:
        for axis, size, k, d, pads in (("height", h, kh, dh, (a.padUp, a.padDown)),
                                       ("width", w, kw, dw, (a.padLeft, a.padRight))):
            if max(pads) > size + (k - 1) * d + 1:
                raise fail(node, f"pads {pads} on {axis} exceed the input's {size} plus the dilated kernel's "
                                 f"{(k - 1) * d + 1}")
    oh, pt = conv_size(h, kh, sh, dh, a.padMode, a.padUp, a.padDown)
    ow, pl = conv_size(w, kw, sw, dw, a.padMode, a.padLeft, a.padRight)
    # Each kernel thread gathers up to IM2COL_ROWS output pixels' windows into its scratch.
    check_size(f"{node.label}: a gathered tile of {kh}x{kw}x{cg} windows", (IM2COL_ROWS, kh * kw * cg), np.float32)
    return ConvWindow(group, kh, kw, sh, sw, dh, dw, oh, ow, pt, pl)


def conv_geometry(node, ins) -> ConvGeometry:
    """Checks and output geometry shared by every op with Conv2D's attributes and inputs."""
    expect_inputs(node, ins, 2, 3)
    n, h, w, c = _x_nhwc(node, ins[0])
    weight = float_weight(node, ins[1])
    win = conv_window(node, ins[0].shape, weight.shape)
    lo, hi = activation_range(node.attrs.activationType)
    return ConvGeometry(n, h, w, c, weight, _bias(node, ins, weight.shape[0]), win, lo, hi)


@op("Conv2D")
def conv2d(node, ins):
    g = conv_geometry(node, ins)
    win = g.win
    out_shape = (g.n, win.oh, win.ow, g.oc)
    kernel = _core.conv2d_f32(g.weight, g.bias, win.group, win.sh, win.sw, win.dh, win.dw, win.pt, win.pl,
                              ins[0].shape, out_shape, g.lo, g.hi, precision=PRECISION.get())
    return Plan([(out_shape, np.dtype(np.float32))], kernel=kernel)


@op("DeConv2D")
def deconv2d(node, ins):
    a = node.attrs
    expect_inputs(node, ins, 2, 3)
    n, h, w, c = _x_nhwc(node, ins[0])
    weight = float_weight(node, ins[1])
    if weight.ndim != 4:
        raise fail(node, f"weight must be 4-D [Cin, kH, kW, Cout], got {weight.shape}")
    if weight.shape[0] != c:
        raise fail(node, f"weight {weight.shape} does not match {c} input channels")
    if a.group != 1:
        raise fail(node, f"group {a.group} is not supported (only 1)")
    oc = weight.shape[3]
    kh, kw, sh, sw, dh, dw = _geometry(node, a, weight.shape[1:3])
    bias = _bias(node, ins, oc)
    oh, pt = deconv_size(node, h, kh, sh, dh, a.padMode, a.padUp, a.padDown)
    ow, pl = deconv_size(node, w, kw, sw, dw, a.padMode, a.padLeft, a.padRight)
    lo, hi = activation_range(a.activationType)
    out_shape = (n, oh, ow, oc)
    kernel = _core.Deconv2d(weight, bias, sh, sw, dh, dw, pt, pl, ins[0].shape, out_shape, lo, hi)
    return Plan([(out_shape, np.dtype(np.float32))], kernel=kernel)
