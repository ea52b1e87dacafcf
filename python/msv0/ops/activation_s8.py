"""int8 Activation (format-v0.md §3.1 "Activation int8"); for int8 LeakyReLU see activation.py.

An int8 input has 256 values, so each activation is computed once per Session for all of them, in
r1.1's arithmetic (vectorised int64 / float32 / float64 NumPy), into a table that a native
LookupS8 indexes.
"""
from __future__ import annotations

import math

import numpy as np

from msv0 import _core
from msv0.fb.ActivationType import ActivationType
from msv0.ops.activation import tanh_pade
from msv0.ops.fixed_point_s8 import I32_MAX, c_round, rdbpot, srdhm, wrap32
from msv0.quant import I8, f32, input_param, output_param, quantize_multiplier, round_parameter
from msv0.registry import Plan, expect_inputs, fail, op

ALL_Q = np.arange(-128, 128, dtype=np.int64)  # table index q + 128


def _relu_table(node, pi, po, act: int) -> np.ndarray:
    """ReluXInt8: zp_out at or below zp_in, else min(MBQM-like rescale + zp_out, hi), where the
    left shift follows SRDHM and the (int8_t) cast wraps: RELU6's hi is round(6/s_out + zp_out)
    unclamped, so results between 127 and hi wrap as in r1.1."""
    m, left, right = round_parameter(node, float(f32(pi.scale) / f32(po.scale)))
    hi = 127
    if act == ActivationType.RELU6:
        q6 = float(c_round(np.float32(6) / f32(po.scale) + np.float32(po.zeroPoint)))
        if not abs(q6) < 2**31:  # r1.1 converts it to int32: undefined
            raise fail(node, f"output scale {po.scale} gives no int32 RELU6 bound")
        hi = int(q6)
    d = ALL_Q - pi.zeroPoint
    y = rdbpot(wrap32(srdhm(d, m) << left), right) + po.zeroPoint
    y = np.minimum(wrap32(y), hi)
    y = np.where(ALL_Q <= pi.zeroPoint, po.zeroPoint, y)
    return ((y + 128) % 256 - 128).astype(np.int8)


def _sigmoid_table(node, pi, po) -> np.ndarray:
    """The float table of sigmoid_int8.cc. expf is exp in double rounded to float (libms differ by
    an ulp at most); entry 127, which r1.1 never fills, is computed like the others."""
    if f32(po.scale) != np.float32(1 / 256) or po.zeroPoint != -128:
        raise fail(node, f"int8 SIGMOID needs output scale 1/256 and zero point -128, has {po.scale}, {po.zeroPoint}")
    real = f32(pi.scale) * (ALL_Q - pi.zeroPoint).astype(np.float32)
    with np.errstate(over="ignore"):
        e = np.exp(-real.astype(np.float64)).astype(np.float32)
        s = np.float32(1) / (np.float32(1) + e)
    q = c_round(s / np.float32(1 / 256)) - 128
    return np.clip(q, -128, 127).astype(np.int8)


def _tanh_table(pi, po) -> np.ndarray:
    """x = (float)((q − zp_in)·s_in) in double; TanhOpt in float; round(y / s_out + zp_out) in double."""
    x = ((ALL_Q - pi.zeroPoint) * pi.scale).astype(np.float32)
    y = np.empty_like(x)
    with np.errstate(all="ignore"):
        tanh_pade(x, y)
    q = c_round(y.astype(np.float64) / po.scale + po.zeroPoint)
    return np.clip(q, -128, 127).astype(np.int8)


def _hswish_multiplier_16(node, M: float) -> tuple[int, int]:
    """QuantizeMultiplier of M (stored in float), reduced to int16 as hswish_int8.cc does."""
    m, e = quantize_multiplier(node, float(np.float32(M)))
    if m < 0:
        raise fail(node, "HSWISH needs positive scales")
    return (32767 if m >= I32_MAX - (1 << 15) else (m + (1 << 15)) >> 16), e


def _hswish_table(node, pi, po) -> np.ndarray:
    """TFLite's int16 hard-swish reference (nnacl hswish_int8.c), on int16 values in int64."""
    out_m, out_e = _hswish_multiplier_16(node, (1.0 / 128.0) * pi.scale / po.scale)
    relu_m, relu_e = _hswish_multiplier_16(node, (1.0 / 128.0) * pi.scale / (3.0 / 32768.0))
    if out_e > 0 or not -31 <= relu_e <= 16 or out_e < -31:
        raise fail(node, f"HSWISH scales {pi.scale}, {po.scale} are outside r1.1's int16 ranges")

    def sat_shl16(v, n):
        return np.clip(v * (1 << n), -32768, 32767)

    x = (ALL_Q - pi.zeroPoint) * 128  # |x| <= 255·128 fits int16
    on_out_scale = srdhm(x, out_m, 16)
    r = sat_shl16(x, relu_e - 1) if relu_e > 0 else x
    r = srdhm(r, relu_m, 16)
    if relu_e > 0:
        r = sat_shl16(r, 1)
    elif relu_e < 0:
        r = rdbpot(r, -relu_e)
    r = (r + 32768) >> 1  # from [-1, 1] to [0, 1] in Q0.15; r stays in int16 range
    y = rdbpot(srdhm(r, on_out_scale, 16), -out_e) + po.zeroPoint
    return np.clip(y, -128, 127).astype(np.int8)


def _leaky_relu_table(pi, po, alpha: float) -> np.ndarray:
    """leaky_relu_int8.c: float scale = s_in·(1/s_out), bias = −zp_in·scale; the branch tests the
    raw q (q <= 0), not q − zp_in; C round in double of the float expression, then + zp_out."""
    scale = f32(pi.scale) * (np.float32(1) / f32(po.scale))
    bias = np.float32(-pi.zeroPoint) * scale
    q = ALL_Q.astype(np.float32)
    neg = q * np.float32(alpha) * scale + bias
    pos = q * scale + bias
    y = c_round(np.where(ALL_Q <= 0, neg, pos)) + po.zeroPoint
    return np.clip(y, -128, 127).astype(np.int8)


def _table_plan(x, table: np.ndarray) -> Plan:
    return Plan([(x.shape, I8)], kernel=_core.LookupS8([table], [x.shape], 0))


@op("Activation", int8=True)
def activation_s8(node, ins):
    expect_inputs(node, ins, 1)
    x = ins[0]
    pi, po = input_param(node, x), output_param(node)
    t = node.attrs.type
    if t in (ActivationType.RELU, ActivationType.RELU6):
        table = _relu_table(node, pi, po, t)
    elif t == ActivationType.SIGMOID:
        table = _sigmoid_table(node, pi, po)
    elif t == ActivationType.TANH:
        table = _tanh_table(pi, po)
    elif t == ActivationType.HSWISH:
        table = _hswish_table(node, pi, po)
    elif t == ActivationType.LEAKY_RELU:
        if not math.isfinite(node.attrs.alpha):
            raise fail(node, f"LEAKY_RELU alpha {node.attrs.alpha} is not finite")
        table = _leaky_relu_table(pi, po, node.attrs.alpha)
    else:
        raise fail(node, f"activation type {t} has no int8 kernel in r1.1")
    return _table_plan(x, table)
