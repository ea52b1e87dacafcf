"""Activation, LeakyReLU, PReLU, Elu and SoftMax, fp32, as native kernel objects (format-v0.md §5;
nnacl/fp32/activation_fp32.c, prelu_fp32.c, elu_fp32.c, softmax_fp32.c)."""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.fb.ActivationType import ActivationType
from msv0.registry import Plan, as_float32, expect_inputs, fail, op

F32 = np.dtype(np.float32)
ONE = np.float32(1)


def tanh_pade(x, out):
    """The r1.1 TanhOpt Padé form in float32 (not libm tanh), evaluated in its exact order:
    a = (((x² + 378)·x² + 17325)·x² + 135135)·x, b = ((28·x² + 3150)·x² + 62370)·x² + 135135."""
    sq = x * x
    b = sq * np.float32(28)
    b += np.float32(3150)
    b *= sq
    b += np.float32(62370)
    b *= sq
    b += np.float32(135135)
    np.add(sq, np.float32(378), out=out)
    out *= sq
    out += np.float32(17325)
    out *= sq
    out += np.float32(135135)
    out *= x
    out /= b
    out[x > np.float32(5)] = ONE
    out[x < np.float32(-5)] = -ONE


KINDS = _core.ACTIVATION_KINDS  # the native Activation kernel's kinds by name
# ActivationType -> kind; other types fail at plan time, as r1.1's fp32 kernel lacks them.
ACTIVATION_KINDS = {getattr(ActivationType, name.upper()): kind for name, kind in KINDS.items()
                    if name in ("relu", "relu6", "leaky_relu", "sigmoid", "tanh", "swish", "hswish", "hsigmoid",
                                "hard_tanh")}


def native_unary(node, ins, kind: int, **params) -> Plan:
    """One float32 input through the native Activation kernel object of `kind`."""
    expect_inputs(node, ins, 1)
    as_float32(node, ins[0], "input")
    return Plan([(ins[0].shape, F32)], kernel=_core.Activation(kind, ins[0].shape, **params))


@op("Activation")
def activation(node, ins):
    a = node.attrs
    if a.type not in ACTIVATION_KINDS:
        raise fail(node, f"activation type {a.type} is not supported by the fp32 Activation kernel")
    return native_unary(node, ins, ACTIVATION_KINDS[a.type], alpha=a.alpha, lo=a.minVal, hi=a.maxVal)


@op("LeakyReLU")
def leaky_relu_op(node, ins):
    # r1.1 has only an int8 LeakyReLU kernel (fp32 goes through Activation); the fp32 form here
    # is the same formula as Activation LEAKY_RELU. That int8 kernel has no parameter setup for
    # this primitive, so kernel creation fails in r1.1 (format-v0.md §3.1).
    if ins and ins[0].dtype == np.int8:
        raise fail(node, "int8 LeakyReLU fails in r1.1 (no int8 parameter setup for this primitive); "
                         "use Activation LEAKY_RELU")
    return native_unary(node, ins, ACTIVATION_KINDS[ActivationType.LEAKY_RELU], alpha=node.attrs.negativeSlope)


@op("Elu")
def elu(node, ins):
    return native_unary(node, ins, KINDS["elu"], alpha=node.attrs.alpha)


@op("PReLU")
def prelu(node, ins):
    """y = x ≥ 0 ? x : x·slope; the slope is input[1] (the `slope` attribute is unused), one value
    for all (channelShared, or a one-element slope) or one per index of the LAST axis."""
    expect_inputs(node, ins, 2)
    x, s = ins
    as_float32(node, x, "input")
    as_float32(node, s, "slope")
    channels = x.shape[-1] if x.shape else 1
    shared = bool(node.attrs.channelShared) or s.size == 1
    if s.size == 0 or (not shared and s.size != channels):
        raise fail(node, f"slope has {s.size} values, input has {channels} channels")
    kernel = _core.Activation(KINDS["prelu"], x.shape, slope_shape=s.shape, channel_shared=shared)
    return Plan([(x.shape, F32)], kernel=kernel)


@op("SoftMax")
def softmax(node, ins):
    expect_inputs(node, ins, 1)
    x = ins[0]
    as_float32(node, x, "input")
    rank = len(x.shape)
    if not 1 <= rank <= 5:
        raise fail(node, f"input rank must be 1..5, got {rank}")
    axis = node.attrs.axis
    # r1.1 normalises only −1; any other negative axis is undefined behaviour there.
    if axis == -1:
        axis = rank - 1
    if not 0 <= axis < rank:
        raise fail(node, f"axis {node.attrs.axis} is not supported for rank {rank}")
    return Plan([(x.shape, F32)], kernel=_core.Softmax(x.shape, axis))
