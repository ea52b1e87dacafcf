"""DepthwiseConv2D and DeDepthwiseConv2D (format-v0.md §2 weight layout, §3 dequant, §5), NHWC fp32.

DepthwiseConv2D runs the Conv2D kernel object with one channel per group, which is the
depthwise kernel (csrc/kernels/dwconv2d_f32.cc); DeDepthwiseConv2D has its own gather kernel
(csrc/kernels/dedwconv2d_f32.cc).
"""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.geometry import deconv_size, depthwise_size
from msv0.registry import Plan, activation_range, as_float32, expect_inputs, fail, op
from msv0.weights import float_weight


def _geometry(node, a, weight_shape):
    """kh, kw, sh, sw, dh, dw, checked: window from the weight, which must agree with kernelH/W."""
    _, kh, kw, _ = weight_shape
    if (a.kernelH and a.kernelH != kh) or (a.kernelW and a.kernelW != kw):
        raise fail(node, f"kernelH/W {a.kernelH}x{a.kernelW} do not match the weight's {kh}x{kw}")
    if a.strideH < 1 or a.strideW < 1:
        raise fail(node, f"strides must be >= 1, got {a.strideH}x{a.strideW}")
    if a.dilateH < 1 or a.dilateW < 1:
        raise fail(node, f"dilations must be >= 1, got {a.dilateH}x{a.dilateW}")
    if kh < 1 or kw < 1:
        raise fail(node, f"empty kernel {kh}x{kw}")
    return kh, kw, a.strideH, a.strideW, a.dilateH, a.dilateW


def _inputs(node, ins, rule):
    """x (4-D float32), the weight as float32 [C, kh, kw, 1], and the bias or None."""
    expect_inputs(node, ins, 2, 3)
    x, w = ins[0], ins[1]
    as_float32(node, x, "input")
    if len(x.shape) != 4:
        raise fail(node, f"input must be 4-D NHWC, got shape {x.shape}")
    weight = float_weight(node, w, rule)
    if weight.ndim != 4:
        raise fail(node, f"weight must be 4-D [C, kH, kW, 1], got {weight.shape}")
    if weight.shape[3] != 1:
        raise fail(node, f"weight dim 3 must be 1 (KHWC depthwise layout), got {weight.shape}")
    bias = None
    if len(ins) == 3:
        bias = float_weight(node, ins[2], "inited", "bias").reshape(-1)
        if bias.size != weight.shape[0]:
            raise fail(node, f"bias has {bias.size} values, the weight has {weight.shape[0]} channels")
    return x, weight, bias


@op("DepthwiseConv2D")
def depthwise_conv2d(node, ins):
    a = node.attrs
    x, weight, bias = _inputs(node, ins, "dtype")
    n, h, w, cin = x.shape
    cout = weight.shape[0] * weight.shape[3]
    if a.channelMultiplier * cin != weight.shape[0]:
        raise fail(node, f"channelMultiplier {a.channelMultiplier} x input channels {cin} "
                         f"!= weight dim 0 {weight.shape[0]}")
    mult = a.channelMultiplier
    kh, kw, sh, sw, dh, dw = _geometry(node, a, weight.shape)
    oh, pt = depthwise_size(node, h, kh, sh, dh, a.padMode, a.padUp, a.padDown, "height")
    ow, pl = depthwise_size(node, w, kw, sw, dw, a.padMode, a.padLeft, a.padRight, "width")
    lo, hi = activation_range(a.activationType)
    out_shape = (n, oh, ow, cout)
    conv = _core.conv2d_f32(np.ascontiguousarray(weight.reshape(cout, kh, kw, 1)), bias, cout, sh, sw, dh, dw, pt,
                            pl, (n, h, w, cout), out_shape, lo, hi)
    if mult == 1:
        return Plan([(out_shape, np.dtype(np.float32))], kernel=conv)
    # Multiplier m: output channel o reads input channel o // m (TF order c*m + j), i.e. a
    # grouped conv with one input channel per group. Repeating each input channel m times
    # turns it into a plain depthwise conv over cout channels.
    def run(inputs, outputs):  # no buffers shared between calls: runs may be concurrent
        conv([np.repeat(inputs[0], mult, axis=3)], outputs)

    return Plan([(out_shape, np.dtype(np.float32))], run)


@op("DeDepthwiseConv2D")
def de_depthwise_conv2d(node, ins):
    a = node.attrs
    x, weight, bias = _inputs(node, ins, "inited")
    n, h, w, c = x.shape
    if weight.shape[0] != c:
        raise fail(node, f"weight has {weight.shape[0]} channels, the input {c}")
    kh, kw, sh, sw, dh, dw = _geometry(node, a, weight.shape)
    oh, pt = deconv_size(node, h, kh, sh, dh, a.padMode, a.padUp, a.padDown)
    ow, pl = deconv_size(node, w, kw, sw, dw, a.padMode, a.padLeft, a.padRight)
    lo, hi = activation_range(a.activationType)
    kernel = _core.Dedwconv2d(np.ascontiguousarray(weight[..., 0]), bias, sh, sw, dh, dw, pt, pl, x.shape,
                              (n, oh, ow, c), lo, hi)
    return Plan([((n, oh, ow, c), np.dtype(np.float32))], kernel=kernel)
