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


def relu_s8(q, s_in, zp_in, s_out, zp_out, relu6=False):
    """ReluXInt8: left shift after SRDHM; RELU6's bound round(6/s_out + zp_out) in float, unclamped,
    so the final (int8_t) cast wraps what lies between 127 and it."""
    m, left, right = quantize_round_parameter(float(np.float32(s_in) / np.float32(s_out)))
    hi = int(c_round(np.float32(6) / np.float32(s_out) + np.float32(zp_out))) if relu6 else 127
    out = []
    for v in np.asarray(q, np.int64).ravel().tolist():
        if v <= zp_in:
            out.append(zp_out)
            continue
        y = int(rdbpot(wrap32(int(srdhm(v - zp_in, m)) * 2**left), right)) + zp_out
        out.append(min(int(wrap32(y)), hi))
    return ((np.array(out, np.int64) + 128) % 256 - 128).astype(np.int8).reshape(np.shape(q))


def sigmoid_s8(q, s_in, zp_in):
    """The 256-entry float table (entry 127 computed like the rest); expf as exp rounded to float."""
    real = np.float32(s_in) * (np.asarray(q, np.int64) - zp_in).astype(np.float32)
    e = np.array([np.float32(math.exp(-float(r))) if -float(r) < 88.7 else np.float32(np.inf) for r in real.ravel()],
                 np.float32).reshape(real.shape)
    s = np.float32(1) / (np.float32(1) + e)
    return np.clip(c_round(s * np.float32(256)) - 128, -128, 127).astype(np.int8)


def tanh_opt(x: np.float32) -> np.float32:
    """r1.1's TanhOpt, one float at a time."""
    if x > 5:
        return np.float32(1)
    if x < -5:
        return np.float32(-1)
    f, sq = np.float32, x * x
    a = (((sq + f(378)) * sq + f(17325)) * sq + f(135135)) * x
    b = ((f(28) * sq + f(3150)) * sq + f(62370)) * sq + f(135135)
    return a / b


def tanh_s8(q, s_in, zp_in, s_out, zp_out):
    x = [np.float32((v - zp_in) * s_in) for v in np.asarray(q, np.int64).ravel().tolist()]
    y = [min(max(int(c_round(float(tanh_opt(v)) / s_out + zp_out)), -128), 127) for v in x]
    return np.array(y, np.int8).reshape(np.shape(q))


def _srdhm16(a, b):
    if a == b == -32768:
        return 32767
    p = a * b
    p += 2**14 if p >= 0 else 1 - 2**14
    return int(p / 2**15)  # exact in double; int() truncates like C division


def _int16_multiplier(M):
    m, e = quantize_multiplier(float(np.float32(M)))
    return (32767 if m >= 2**31 - 1 - 2**15 else (m + 2**15) >> 16), e


def hswish_s8(q, s_in, zp_in, s_out, zp_out):
    """TFLite's int16 reference hard-swish, as nnacl hswish_int8.c runs it."""
    om, oe = _int16_multiplier(s_in / 128 / s_out)
    rm, re_ = _int16_multiplier(s_in / 128 / (3 / 32768))
    sat = lambda v: min(max(v, -32768), 32767)  # noqa: E731
    out = []
    for v in np.asarray(q, np.int64).ravel().tolist():
        x = (v - zp_in) * 128
        pre = _srdhm16(x, om)
        r = sat(x * 2 ** (re_ - 1)) if re_ > 0 else x
        r = _srdhm16(r, rm)
        if re_ > 0:
            r = sat(r * 2)
        elif re_ < 0:
            r = int(rdbpot(r, -re_))
        r = (r + 32768) // 2
        y = int(rdbpot(_srdhm16(r, pre), -oe)) + zp_out
        out.append(min(max(y, -128), 127))
    return np.array(out, np.int8).reshape(np.shape(q))


def leaky_relu_s8(q, s_in, zp_in, s_out, zp_out, alpha):
    """Float path; the sign test is on the raw int8 value."""
    f = np.float32
    scale = f(s_in) * (f(1) / f(s_out))
    bias = f(-zp_in) * scale
    out = []
    for v in np.asarray(q, np.int64).ravel().tolist():
        t = f(v) * f(alpha) * scale + bias if v <= 0 else f(v) * scale + bias
        out.append(min(max(int(c_round(t)) + zp_out, -128), 127))
    return np.array(out, np.int8).reshape(np.shape(q))


# gemmlowp fixed point, scalar, on Python ints (exact; int32 semantics where gemmlowp has them).
def _srdhm(a, b):
    return int(srdhm(a, b))


def _sat_mul_pot(x, n):
    if n <= 0:
        return int(rdbpot(x, -n))
    t = (1 << (31 - n)) - 1
    return I32_MAX if x > t else I32_MIN if x < -t else x << n


def gemmlowp_exp_on_negative_values(a, integer_bits=5):
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod = (a & (quarter - 1)) - quarter
    x = _sat_mul_pot(a_mod, integer_bits) + (1 << 28)
    x2 = _srdhm(x, x)
    x3 = _srdhm(x2, x)
    x4 = _srdhm(x2, x2)
    x4_over_4 = _sat_mul_pot(x4, -2)
    inner = _sat_mul_pot(_srdhm(x4_over_4 + x3, 715827883) + x2, -1)
    result = 1895147668 + _srdhm(1895147668, x + inner)
    rem = a_mod - a
    for k, mult in ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
                    (3, 720401), (4, 242)):
        if integer_bits > k and rem & (1 << (frac + k)):
            result = _srdhm(result, mult)
    return I32_MAX if a == 0 else result


def gemmlowp_reciprocal(x, integer_bits):
    """GetReciprocal: (1/x scaled into Q0.31, num_bits_over_unit)."""
    lz = 32 - x.bit_length()
    shifted = ((x << lz) & 0xFFFFFFFF) - 2**31
    s = shifted + I32_MAX
    half = int((s + (1 if s >= 0 else -1)) / 2)  # RoundingHalfSum(shifted, One), C division
    r = 1515870810 + _srdhm(half, -1010580540)
    for _ in range(3):
        r = r + _sat_mul_pot(_srdhm(r, (1 << 29) - _srdhm(half, r)), 2)
    return _sat_mul_pot(r, 1), integer_bits - lz


def softmax_s8(q, s_in, axis=-1):
    """nnacl softmax_int8.c over `axis`, one row at a time; output scale 1/256, zero point -128."""
    m, e = quantize_multiplier(min(float(np.float32(s_in) * np.float32(2**26)), float(I32_MAX)))
    left = max(e, 0)
    q = np.moveaxis(np.asarray(q, np.int64), axis, -1)
    out = np.empty(q.shape, np.int8)
    cache = {}
    for idx in np.ndindex(q.shape[:-1]):
        row = q[idx].tolist()
        top = max(row)
        exps = []
        for v in row:
            if v - top not in cache:
                cache[v - top] = gemmlowp_exp_on_negative_values(_srdhm(int(wrap32((v - top) << left)), m))
            exps.append(cache[v - top])
        total = sum(int(rdbpot(x, 12)) for x in exps)
        r, nb = gemmlowp_reciprocal(total, 12)
        out[idx] = [min(max(int(rdbpot(_srdhm(r, x), nb + 23)) - 128, -128), 127) for x in exps]
    return np.moveaxis(out, -1, axis)


def div_s8(q0, q1, s0, zp0, s1, zp1, s_out, zp_out):
    """div_int8.c per element; shifts of 32 or more rounded exactly (r1.1: undefined)."""
    f = np.float32
    m, e = quantize_multiplier(float(f(s0) / (f(s1) * f(s_out))))
    out = []
    for x, y in zip(np.asarray(q0, np.int64).ravel().tolist(), np.asarray(q1, np.int64).ravel().tolist()):
        a, b = x - zp0, y - zp1
        inv, rs = gemmlowp_reciprocal(abs(b), 31)
        inv = inv if b > 0 else -inv
        lead = 32 - a.bit_length() - 1 if a >= 0 else 32 - (2 * -a).bit_length()
        raw = _srdhm(a * 2**lead, inv)
        t, n = _srdhm(raw, m), lead + rs - e
        v = (t if n == 0 else int(math.copysign((abs(t) + (1 << (n - 1))) >> n, t))) + zp_out  # half away from 0
        out.append(min(max(v, -128), 127))
    return np.array(out, np.int8).reshape(np.broadcast(q0, q1).shape)
