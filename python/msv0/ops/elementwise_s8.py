"""int8 Add, Sub, Mul, Eltwise and Div (format-v0.md §3.1): r1.1's fixed-point arithmetic, in the
_core.BinaryS8 kernel object (this module derives its multipliers and picks the operand layout)
but for the colder Div, which runs in NumPy.

Broadcasting follows r1.1 per op. Add handles a one-element input, or one input of the output's
shape and the other equal to the output's trailing block; anything else r1.1 computes with the
wrong elements, so it is a ModelError here. Sub, Mul and Div tile both inputs to the output's
shape first (general broadcasting), which shapes outside the kernel's layouts do here in NumPy.
"""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.fb.ActivationType import ActivationType
from msv0.fb.EltwiseMode import EltwiseMode
from msv0.ops.elementwise import FULL, PER_ROW, binary_layout, broadcast_shape
from msv0.ops.fixed_point_s8 import rdbpot, reciprocal, srdhm
from msv0.quant import I8, activation_range, f32, input_param, output_param, quantize_multiplier, smaller_than_one
from msv0.registry import Plan, expect_inputs, fail, op

ADD, SUB, MUL = 0, 1, 2
ADD_LEFT_SHIFT = 20  # r1.1's fixed headroom shift for Add and Sub
# Div's dividend q − zp has at least 23 bits of headroom (|q − zp| <= 255): a multiplier exponent
# above it would make r1.1's final shift negative.
DIV_MAX_EXPONENT = 23


def _requant(node, M: float) -> list[int]:
    """(mult, left, right) of QuantizeMultiplierSmallerThanOne, its exponent split as r1.1 does."""
    m, rs = smaller_than_one(node, M)
    return [m, max(-rs, 0), max(rs, 0)]


def _add_sub_params(s0: float, s1: float, s_out: float, node) -> tuple[list[int], list[int], list[int]]:
    twice_max = 2 * max(s0, s1)
    a, b = _requant(node, s0 / twice_max), _requant(node, s1 / twice_max)
    a[1] += ADD_LEFT_SHIFT
    b[1] += ADD_LEFT_SHIFT
    return a, b, _requant(node, twice_max / ((1 << ADD_LEFT_SHIFT) * s_out))


def binary_s8_plan(node, ins, kind: int, activation_type: int) -> Plan:
    expect_inputs(node, ins, 2)
    pa, pb = input_param(node, ins[0], "input 0"), input_param(node, ins[1], "input 1")
    po = output_param(node)
    a_shape, b_shape = ins[0].shape, ins[1].shape
    shape = broadcast_shape(node, a_shape, b_shape)
    lo, hi = -128, 127
    if kind == MUL:
        # (s0_f·s1_f)/s_out_f in float; the fused activation is ignored.
        M = float(f32(pa.scale) * f32(pb.scale) / f32(po.scale))
        a_req = b_req = [0, 0, 0]
        y_req = _requant(node, M)
    elif kind == ADD:  # double scales, fused RELU/RELU6 honoured
        a_req, b_req, y_req = _add_sub_params(pa.scale, pb.scale, po.scale, node)
        lo, hi = activation_range(node, activation_type, po.scale, po.zeroPoint)
    else:  # Sub: float scales, no activation
        a_req, b_req, y_req = _add_sub_params(float(f32(pa.scale)), float(f32(pb.scale)), float(f32(po.scale)), node)
    layout = binary_layout(a_shape, b_shape, shape)
    general = layout is None or (kind == ADD and PER_ROW in layout[:2])
    if general and kind == ADD:
        raise fail(node, f"int8 Add cannot broadcast {a_shape} with {b_shape}: r1.1 takes a one-element input, "
                         "or one input of the output's shape and the other equal to its trailing dims")
    if general:
        layout = (FULL, FULL, 1)
    binary = _core.BinaryS8(kind, *layout, shape if general else a_shape, shape if general else b_shape,
                            shape, pa.zeroPoint, a_req, pb.zeroPoint, b_req, y_req, po.zeroPoint, lo, hi)
    if not general:
        return Plan([(shape, I8)], kernel=binary)

    def run(inputs, outputs):
        a, b = (np.ascontiguousarray(np.broadcast_to(x, shape)) for x in inputs)
        binary([a, b], outputs)

    return Plan([(shape, I8)], run)


@op("Add", int8=True)
def add_s8(node, ins):
    return binary_s8_plan(node, ins, ADD, node.attrs.activationType)


@op("Sub", int8=True)
def sub_s8(node, ins):
    return binary_s8_plan(node, ins, SUB, ActivationType.NO_ACTIVATION)


@op("Mul", int8=True)
def mul_s8(node, ins):
    return binary_s8_plan(node, ins, MUL, ActivationType.NO_ACTIVATION)


@op("Eltwise", int8=True)
def eltwise_s8(node, ins):
    """r1.1 maps Eltwise to Add (SUM) or Mul (PROD) at populate time, with no activation."""
    kind = {EltwiseMode.SUM: ADD, EltwiseMode.PROD: MUL}.get(node.attrs.mode)
    if kind is None:
        raise fail(node, f"int8 Eltwise mode {node.attrs.mode} is not supported (only SUM and PROD)")
    return binary_s8_plan(node, ins, kind, ActivationType.NO_ACTIVATION)


def _clz32(x):
    """Leading zero bits of 0 <= x < 2^32 (32 for 0)."""
    return 32 - np.frexp(x.astype(np.float64))[1]


def _leading_sign_bits(x):
    """nnacl's CountLeadingSignBits as r1.1 compiles it (the portable branch: the macro guarding
    the builtin is misspelt), which counts one fewer for negative powers of two than clrsb."""
    return np.where(x >= 0, _clz32(x) - 1, _clz32(-2 * x))


@op("Div", int8=True)
def div_s8(node, ins):
    """div_int8.c: the divisor inverted by gemmlowp's reciprocal, the dividend normalised by its
    headroom, one multiplier M = s0/(s1·s_out) in float with a signed exponent; no activation. Where
    the final shift reaches 32 (a zero dividend, small M) r1.1's int shift is undefined: msv0
    rounds exactly there (0)."""
    expect_inputs(node, ins, 2)
    pa, pb = input_param(node, ins[0], "input 0"), input_param(node, ins[1], "input 1")
    po = output_param(node)
    shape = broadcast_shape(node, ins[0].shape, ins[1].shape)
    m, e = quantize_multiplier(node, float(f32(pa.scale) / (f32(pb.scale) * f32(po.scale))))
    if e > DIV_MAX_EXPONENT:
        raise fail(node, f"int8 Div multiplier exponent {e} exceeds {DIV_MAX_EXPONENT} "
                         "(r1.1 would shift by a negative amount)")

    def run(inputs, outputs):
        a = inputs[0].astype(np.int64) - pa.zeroPoint
        b = inputs[1].astype(np.int64) - pb.zeroPoint
        if not np.all(b):
            raise fail(node, "int8 division by zero (a divisor equals its zero point)")
        r, nb = reciprocal(np.abs(b), 31)
        lead = _leading_sign_bits(a)
        quotient = srdhm(a << lead, np.sign(b) * r)
        # past 62 (int64's limit) every int32 rounds to 0, as it does at 62
        y = rdbpot(srdhm(quotient, m), np.minimum(lead + nb - e, 62)) + po.zeroPoint
        outputs[0][...] = np.clip(y, -128, 127)

    return Plan([(shape, I8)], run)
