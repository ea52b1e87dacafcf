"""Activation, LeakyReLU, PReLU, Elu and SoftMax, fp32 (format-v0.md §5;
nnacl/fp32/activation_fp32.c, prelu_fp32.c, elu_fp32.c, softmax_fp32.c)."""
from __future__ import annotations

import numpy as np

from msv0.fb.ActivationType import ActivationType
from msv0.registry import Plan, as_float32, expect_inputs, fail, op

F32 = np.dtype(np.float32)
ZERO, ONE, THREE, SIX = np.float32(0), np.float32(1), np.float32(3), np.float32(6)


def sigmoid(x, out):
    """r1.1 (TFLite) cut-offs: above 16.619047 → 1, below −9 → exp(x), else 1/(1+exp(−x))."""
    np.negative(x, out=out)
    np.exp(out, out=out)
    out += ONE
    np.divide(ONE, out, out=out)
    out[x > np.float32(16.619047)] = ONE
    low = x < np.float32(-9)
    out[low] = np.exp(x[low])


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


def _relu6_of_x_plus_3(x, out):
    np.add(x, THREE, out=out)
    np.clip(out, ZERO, SIX, out=out)


def activation_kernel(node, act_type: int, alpha: float, min_val: float, max_val: float):
    """The f(x, out) of one ActivationType; types r1.1's fp32 kernel lacks fail at plan time."""
    alpha, lo, hi = np.float32(alpha), np.float32(min_val), np.float32(max_val)
    if act_type == ActivationType.RELU:
        return lambda x, out: np.maximum(x, ZERO, out=out)
    if act_type == ActivationType.RELU6:
        return lambda x, out: np.clip(x, ZERO, SIX, out=out)
    if act_type == ActivationType.LEAKY_RELU:  # x > 0 ? x : alpha·x
        return lambda x, out: leaky_relu(x, alpha, out)
    if act_type == ActivationType.SIGMOID:
        return sigmoid
    if act_type == ActivationType.TANH:
        return tanh_pade
    if act_type == ActivationType.SWISH:  # x·sigmoid(x)

        def swish(x, out):
            sigmoid(x, out)
            out *= x

        return swish
    if act_type == ActivationType.HSWISH:  # x·relu6(x+3)/6, multiplied before dividing

        def hswish(x, out):
            _relu6_of_x_plus_3(x, out)
            out *= x
            out /= SIX

        return hswish
    if act_type == ActivationType.HSIGMOID:  # relu6(x+3)/6

        def hsigmoid(x, out):
            _relu6_of_x_plus_3(x, out)
            out /= SIX

        return hsigmoid
    if act_type == ActivationType.HARD_TANH:  # x < min ? min : (x > max ? max : x)

        def hard_tanh(x, out):
            np.minimum(x, hi, out=out)
            out[x < lo] = lo

        return hard_tanh
    raise fail(node, f"activation type {act_type} is not supported by the fp32 Activation kernel")


def leaky_relu(x, slope, out):
    np.multiply(x, slope, out=out)
    np.copyto(out, x, where=x > ZERO)


def _float_unary(node, ins, kernel) -> Plan:
    expect_inputs(node, ins, 1)
    as_float32(node, ins[0], "input")

    def run(inputs, outputs):
        with np.errstate(all="ignore"):  # overflow in branches r1.1 masks out (exp, x⁶)
            kernel(inputs[0], outputs[0])

    return Plan([(ins[0].shape, F32)], run)


@op("Activation")
def activation(node, ins):
    a = node.attrs
    return _float_unary(node, ins, activation_kernel(node, a.type, a.alpha, a.minVal, a.maxVal))


@op("LeakyReLU")
def leaky_relu_op(node, ins):
    # r1.1 has only an int8 LeakyReLU kernel (fp32 goes through Activation); the fp32 form here
    # is the same formula as Activation LEAKY_RELU. That int8 kernel has no parameter setup for
    # this primitive, so kernel creation fails in r1.1 (format-v0.md §3.1).
    if ins and ins[0].dtype == np.int8:
        raise fail(node, "int8 LeakyReLU fails in r1.1 (no int8 parameter setup for this primitive); "
                         "use Activation LEAKY_RELU")
    slope = np.float32(node.attrs.negativeSlope)
    return _float_unary(node, ins, lambda x, out: leaky_relu(x, slope, out))


@op("Elu")
def elu(node, ins):
    alpha = np.float32(node.attrs.alpha)

    def kernel(x, out):
        np.expm1(x, out=out)
        out *= alpha
        np.copyto(out, x, where=~(x < ZERO))

    return _float_unary(node, ins, kernel)


@op("PReLU")
def prelu(node, ins):
    """y = x ≥ 0 ? x : x·slope; the slope is input[1] (the `slope` attribute is unused), one value
    for all (channelShared, or a one-element slope) or one per index of the LAST axis."""
    expect_inputs(node, ins, 2)
    x, s = ins
    as_float32(node, x, "input")
    as_float32(node, s, "slope")
    channels = x.shape[-1] if x.shape else 1
    shared = node.attrs.channelShared or s.size == 1
    if s.size == 0 or (not shared and s.size != channels):
        raise fail(node, f"slope has {s.size} values, input has {channels} channels")

    def run(inputs, outputs):
        slope = inputs[1].reshape(-1)
        slope = slope[0] if shared else slope
        out = outputs[0]
        np.multiply(inputs[0], slope, out=out)
        np.copyto(out, inputs[0], where=inputs[0] >= ZERO)

    return Plan([(x.shape, F32)], run)


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

    def run(inputs, outputs):
        src, out = inputs[0], outputs[0]
        if out.size == 0:
            return
        np.subtract(src, src.max(axis=axis, keepdims=True), out=out)
        np.exp(out, out=out)
        out /= out.sum(axis=axis, keepdims=True)

    return Plan([(x.shape, F32)], run)
