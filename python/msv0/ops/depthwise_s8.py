"""DepthwiseConv2D int8 (format-v0.md §3.1): r1.1's generic int8 depthwise kernel, its row quirk
included (tap rows stepped by dilateW), through csrc/kernels/dwconv2d_s8.cc."""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.geometry import depthwise_size
from msv0.ops.depthwise import _geometry
from msv0.quant import activation_range, conv_requant, input_param, output_param, weight_params
from msv0.registry import Plan, const_input, expect_inputs, fail, op


@op("DepthwiseConv2D", int8=True)
def depthwise_conv2d_s8(node, ins):
    a = node.attrs
    expect_inputs(node, ins, 2, 3)
    x, w = ins[0], ins[1]
    p_in, p_out = input_param(node, x), output_param(node)
    if len(x.shape) != 4:
        raise fail(node, f"input must be 4-D NHWC, got shape {x.shape}")
    n, h, wd, c = x.shape
    # r1.1's converter turns multiplier > 1 into a grouped Conv2D; its int8 depthwise kernel
    # indexes input and output by the same channel, so only 1 computes a depthwise conv.
    if a.channelMultiplier != 1:
        raise fail(node, f"int8 DepthwiseConv2D needs channelMultiplier 1, got {a.channelMultiplier}")
    weight = const_input(node, w, "weight")
    if weight.ndim != 4 or weight.shape[0] != c or weight.shape[3] != 1:
        raise fail(node, f"weight must be [{c}, kH, kW, 1] for {c} input channels, got {weight.shape}")
    kh, kw, sh, sw, dh, dw = _geometry(node, a, weight.shape)
    oh, pt = depthwise_size(node, h, kh, sh, dh, a.padMode, a.padUp, a.padDown, "height")
    ow, pl = depthwise_size(node, wd, kw, sw, dw, a.padMode, a.padLeft, a.padRight, "width")
    s_w, zp_w = weight_params(node, w, c)
    bias = None
    if len(ins) == 3:
        bias = const_input(node, ins[2], "bias")
        if bias.dtype != np.int32 or bias.size != c:
            raise fail(node, f"int8 bias must be {c} int32 values, got {bias.size} {bias.dtype}")
        bias = np.ascontiguousarray(bias.reshape(-1))
    mult, left, right = conv_requant(node, p_in.scale, s_w, p_out.scale)
    lo, hi = activation_range(node, a.activationType, p_out.scale, p_out.zeroPoint)
    out_shape = (n, oh, ow, c)
    try:  # the kernel object rejects geometry whose quirky rows leave the input
        kernel = _core.DwConv2dS8(np.ascontiguousarray(weight.reshape(c, kh, kw)), zp_w, bias, mult, left, right,
                                  p_in.zeroPoint, p_out.zeroPoint, lo, hi, sh, sw, dh, dw, dw, pt, pl, x.shape,
                                  out_shape)
    except ValueError as e:
        raise fail(node, str(e)) from None
    return Plan([(out_shape, np.dtype(np.int8))], kernel=kernel)
