"""A NumPy transcription of r1.1's int8 arithmetic (format-v0.md §3.1), written apart from the
runtime (python/msv0/quant.py derives the same constants its own way): the references every
int8 test compares against, with exact equality. Integer math in int64, wrapped to int32
where r1.1's C wraps."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def qp(scale: float, zp: int) -> list[dict]:
    """One QuantParam, as the builder writes it."""
    return [{"scale": float(scale), "zeroPoint": int(zp), "inited": True, "numBits": 8}]


def wrap32(x):
    """int64 values modulo 2^32 as int32 values (held in int64)."""
    return ((np.asarray(x, np.int64) + 2**31) % 2**32 - 2**31).astype(np.int64)


def quantize_multiplier(M):
    """QuantizeMultiplier: M = f·2^e, f in [0.5, 1); m = round(f·2^31) half away from zero, exactly."""
    if M == 0:
        return 0, 0
    f, e = math.frexp(M)
    m = math.floor(Fraction(abs(f)) * 2**31 + Fraction(1, 2)) * (1 if f > 0 else -1)
    if abs(m) == 2**31:
        m, e = m // 2, e + 1
    return m, e


def quantize_round_parameter(M):
    """(m, left shift, right shift), both shifts >= 0 (r1.1 stores the right one as <= 0)."""
    m, e = quantize_multiplier(M)
    return m, max(e, 0), -min(e, 0)


def conv_multiplier(s_in, s_w, s_out):
    """Conv/FC M_c: float product of float scales, divided in double."""
    return float(np.float32(np.float32(s_in) * np.float32(s_w))) / float(np.float32(s_out))


def srdhm(a, b):
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    p = a * b
    x = p + np.where(p >= 0, 2**30, 1 - 2**30)
    q = np.where(x >= 0, x >> 31, -((-x) >> 31))  # C division: truncation toward zero
    return np.where((a == I32_MIN) & (b == I32_MIN), I32_MAX, q)


def rdbpot(x, n):
    x, n = np.asarray(x, np.int64), np.asarray(n, np.int64)
    mask = (np.int64(1) << n) - 1
    rem = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> n) + (rem > threshold)


def mbqm(acc, mult, left, right):
    """MultiplyByQuantizedMultiplier: RDBPOT(SRDHM(acc·2^left, mult), right), the left shift wrapping."""
    return rdbpot(srdhm(wrap32(np.asarray(acc, np.int64) << np.asarray(left, np.int64)), mult), right)


def c_round(x):
    """C round(): half away from zero."""
    x = np.asarray(x, np.float64)
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def act_range(activation_type: int, scale: float, zp: int) -> tuple[int, int]:
    """CalculateActivationRangeQuantized (RELU = 1, RELU6 = 3), q6 formed in float."""
    lo, hi = -128, 127
    if activation_type in (1, 3):
        lo = max(lo, zp)
    if activation_type == 3:
        hi = min(hi, int(c_round(np.float32(6) / np.float32(scale) + np.float32(zp))))
    return lo, hi


def quantize(x, scale, zp):
    """f32 -> int8 as QuantDTypeCast writes it: x·(1.0f/scale) + zp in float, C round, clamp."""
    v = np.asarray(x, np.float32) * (np.float32(1) / np.float32(scale)) + np.float32(zp)
    return np.clip(c_round(v), -128, 127).astype(np.int8)


def dequantize(q, scale, zp):
    return (np.asarray(q, np.int32) - np.int32(zp)).astype(np.float32) * np.float32(scale)


# ---- Add / Sub / Mul / QuantDTypeCast / activations / Softmax


def smaller_than_one(M):
    """QuantizeMultiplierSmallerThanOne as (m, left, right): the exponent split into shifts."""
    m, e = quantize_multiplier(M)
    return m, max(e, 0), max(-e, 0)


def _add_sub(q0, q1, s0, zp0, s1, zp1, s_out, zp_out, sign, lo, hi):
    twice_max = 2 * max(s0, s1)
    scaled = []
    for q, s, zp in ((q0, s0, zp0), (q1, s1, zp1)):
        m, left, right = smaller_than_one(s / twice_max)
        x = (np.asarray(q, np.int64) - zp) * 2**20 * 2**left
        scaled.append(rdbpot(srdhm(x, m), right))
    raw = scaled[0] + sign * scaled[1]
    m, left, right = smaller_than_one(twice_max / (2**20 * s_out))
    return np.clip(rdbpot(srdhm(wrap32(raw * 2**left), m), right) + zp_out, lo, hi).astype(np.int8)


def add_s8(q0, q1, s0, zp0, s1, zp1, s_out, zp_out, act=0):
    """int8 Add: double scales, left shift 20, fused RELU/RELU6 range."""
    lo, hi = act_range(act, s_out, zp_out)
    return _add_sub(q0, q1, s0, zp0, s1, zp1, s_out, zp_out, 1, lo, hi)


def sub_s8(q0, q1, s0, zp0, s1, zp1, s_out, zp_out):
    """int8 Sub: Add's scheme on float scales, a0' − a1', no activation."""
    f = lambda s: float(np.float32(s))  # noqa: E731
    return _add_sub(q0, q1, f(s0), zp0, f(s1), zp1, f(s_out), zp_out, -1, -128, 127)


def mul_s8(q0, q1, s0, zp0, s1, zp1, s_out, zp_out):
    """int8 Mul: M = (s0·s1)/s_out all in float; no activation."""
    M = float(np.float32(np.float32(s0) * np.float32(s1)) / np.float32(s_out))
    m, left, right = smaller_than_one(M)
    prod = (np.asarray(q0, np.int64) - zp0) * (np.asarray(q1, np.int64) - zp1)
    return np.clip(rdbpot(srdhm(wrap32(prod * 2**left), m), right) + zp_out, -128, 127).astype(np.int8)
