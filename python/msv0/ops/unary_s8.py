"""int8 unary math ops as r1.1's arithmetic_self int8 kernel computes them (format-v0.md §6).

x = q·s_in + (−zp_in·s_in) in float, then the float function, divided by s_out, C round,
+ zp_out, clamped. The precision of each step follows the C: floorf/fabsf/sinf/... keep float,
while round() and ceil() return double, so Round and Ceil divide by s_out in double. Square
is fixed point: MBQM((q − zp_in)², (s_in·s_in)/s_out in float). Each op is a function of the
int8 value, so it is a 256-entry table; values where r1.1 stops with an error (Sqrt of a
negative, Rsqrt of x <= 0, Reciprocal of 0) or converts a non-finite or out-of-range double to
int (undefined: Log of x <= 0) fail at run time when they occur.
"""
from __future__ import annotations

import numpy as np

from msv0.errors import InputError
from msv0.ops.array_s8 import Q, lookup
from msv0.ops.fixed_point_s8 import c_round, mbqm
from msv0.quant import I8, f32, input_param, output_param, smaller_than_one
from msv0.registry import Plan, expect_inputs, op

F32 = np.float32


def _f64(fn):
    """A float function evaluated in double and rounded once to float: round() takes the float
    as a double, and glibc's sinf/cosf/logf are correctly rounded in all but rare cases."""
    return lambda x: fn(x.astype(np.float64)).astype(F32)


# name -> (f(x), whether the result is divided by s_out in double, domain of x)
FLOAT_OPS = {
    "Abs": (np.abs, False, None),
    "Floor": (np.floor, False, None),
    "Ceil": (np.ceil, True, None),
    "Round": (_f64(c_round), True, None),
    "Sin": (_f64(np.sin), False, None),
    "Cos": (_f64(np.cos), False, None),
    "Log": (_f64(np.log), False, None),
    "Sqrt": (np.sqrt, False, lambda x: x >= 0),
}


def _table(x_out: np.ndarray, zp_out: int) -> tuple[np.ndarray, np.ndarray]:
    """C round + zp_out, clamped; and which entries r1.1 cannot convert to int32."""
    with np.errstate(invalid="ignore"):
        r = c_round(x_out) + zp_out
        bad = ~(np.abs(r) < 2.0**31)
    return np.clip(np.where(bad, 0, r), -128, 127).astype(np.int8), bad


@op("Abs", "Floor", "Ceil", "Round", "Sin", "Cos", "Log", "Sqrt", "Rsqrt", "Reciprocal", "Square", int8=True)
def unary_s8(node, ins):
    expect_inputs(node, ins, 1)
    p_in, p_out = input_param(node, ins[0]), output_param(node)
    s_in, s_out = f32(p_in.scale), f32(p_out.scale)
    with np.errstate(all="ignore"):
        x = Q.astype(F32) * s_in + F32(-p_in.zeroPoint) * s_in
        if node.op == "Square":
            m, rs = smaller_than_one(node, float((s_in * s_in) / s_out))
            d = Q - p_in.zeroPoint
            table = np.clip(mbqm(d * d, m, max(-rs, 0), max(rs, 0)) + p_out.zeroPoint, -128, 127).astype(I8)
            bad = np.zeros(256, bool)
        elif node.op in ("Rsqrt", "Reciprocal"):
            y = F32(1) / (np.sqrt(x) * s_out if node.op == "Rsqrt" else x * s_out)
            table, bad = _table(y.astype(np.float64), p_out.zeroPoint)
            bad |= x <= 0 if node.op == "Rsqrt" else x == 0
        else:
            fn, in_double, domain = FLOAT_OPS[node.op]
            fx = fn(x).astype(F32)
            y = fx.astype(np.float64) / float(s_out) if in_double else (fx / s_out).astype(np.float64)
            table, bad = _table(y, p_out.zeroPoint)
            if domain is not None:
                bad |= ~domain(x)
    label = node.label

    def run(inputs, outputs):
        if bad.any() and lookup(bad, inputs[0]).any():
            raise InputError(f"{label}: an input value is outside {node.op}'s domain, or its result does not "
                             "convert to int (r1.1 stops with an error or is undefined there)")
        outputs[0][...] = lookup(table, inputs[0])

    return Plan([(ins[0].shape, I8)], run)
