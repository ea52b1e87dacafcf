"""Conv2D int8 (format-v0.md §3.1 "Conv2D int8", §5 Conv2D): the window as the float Conv2D's,
r1.1's requantization constants (msv0.quant); the kernel object is csrc/kernels/conv2d_s8.cc."""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0 import quant
from msv0.ops.conv import conv_window
from msv0.registry import Plan, Value, const_input, expect_inputs, fail, op


def int32_bias(node, v: Value, channels: int) -> np.ndarray:
    """An int8 conv/FC bias: int32 as stored (the converter already divided by s_in·s_w)."""
    bias = const_input(node, v, "bias")
    if bias.dtype != np.int32:
        raise fail(node, f"int8 bias {v.tensor.label} must be int32, got {bias.dtype}")
    if bias.size != channels:
        raise fail(node, f"bias has {bias.size} values for {channels} output channels")
    return np.ascontiguousarray(bias.reshape(-1))


def int8_weight(node, v: Value) -> np.ndarray:
    weight = const_input(node, v, "weight")
    if weight.dtype != np.int8:
        raise fail(node, f"int8 weight {v.tensor.label} must be int8, got {weight.dtype}")
    return np.ascontiguousarray(weight)


@op("Conv2D", int8=True)
def conv2d_s8(node, ins):
    expect_inputs(node, ins, 2, 3)
    x = ins[0]
    if len(x.shape) != 4:
        raise fail(node, f"input must be 4-D NHWC, got shape {x.shape}")
    p_in = quant.input_param(node, x)
    p_out = quant.output_param(node)
    weight = int8_weight(node, ins[1])
    win = conv_window(node, x.shape, weight.shape)
    oc = weight.shape[0]
    s_w, zp_w = quant.weight_params(node, ins[1], oc)
    mult, left, right = quant.conv_requant(node, p_in.scale, s_w, p_out.scale)
    lo, hi = quant.activation_range(node, node.attrs.activationType, p_out.scale, p_out.zeroPoint)
    bias = int32_bias(node, ins[2], oc) if len(ins) == 3 else None
    out_shape = (x.shape[0], win.oh, win.ow, oc)
    kernel = _core.Conv2dS8(weight, zp_w, bias, mult, left, right, win.group, win.sh, win.sw, win.dh, win.dw,
                            win.pt, win.pl, p_in.zeroPoint, p_out.zeroPoint, lo, hi, x.shape, out_shape)
    return Plan([(out_shape, np.dtype(np.int8))], kernel=kernel)
