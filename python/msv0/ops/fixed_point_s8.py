"""gemmlowp's fixed-point arithmetic as nnacl's fixed_point.c spells it (format-v0.md §3.1), on
int32 values held in int64 NumPy arrays: the int8 ops that run in NumPy share these."""
from __future__ import annotations

import numpy as np

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
INTEGER_BITS = 5  # exp_on_negative_values' input format, Q5.26 (softmax's)


def wrap32(x):
    """int64 values modulo 2^32 as int32 values, as r1.1's int arithmetic wraps."""
    return (np.asarray(x, np.int64) + 2**31) % 2**32 - 2**31


def srdhm(a, b, bits: int = 32):
    """SaturatingRoundingDoublingHighMul on int{bits} values held in int64 (32 or 16)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    lo = -(1 << (bits - 1))
    p = a * b
    p = p + np.where(p >= 0, 1 << (bits - 2), 1 - (1 << (bits - 2)))
    q = np.where(p >= 0, p >> (bits - 1), -((-p) >> (bits - 1)))  # C division truncates
    return np.where((a == lo) & (b == lo), -lo - 1, q)


def rdbpot(x, n):
    """RoundingDivideByPOT: x / 2^n rounded half away from zero (exact in int64 for any n)."""
    x, n = np.asarray(x, np.int64), np.asarray(n, np.int64)
    mask = (np.int64(1) << n) - 1
    return (x >> n) + ((x & mask) > (mask >> 1) + (x < 0))


def mbqm(x, mult: int, left: int, right: int):
    """MultiplyByQuantizedMultiplier with both shifts as amounts >= 0 (the left shift wraps)."""
    return rdbpot(srdhm(wrap32(np.asarray(x, np.int64) << left), mult), right)


def c_round(x):
    """C round(): half away from zero, in float64 (x + 0.5 is exact there for float32 x)."""
    x = np.asarray(x, np.float64)
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def sat_shl(x, n: int):
    """SaturatingRoundingMultiplyByPOT with a positive exponent: x·2^n saturated to int32."""
    limit = (1 << (31 - n)) - 1
    return np.where(x > limit, I32_MAX, np.where(x < -limit, I32_MIN, x << n))


def exp_on_negative_values(a):
    """gemmlowp exp_on_negative_values<int32, 5>: exp(a / 2^26) in Q0.31 for a <= 0."""
    frac_bits = 31 - INTEGER_BITS
    quarter = 1 << (frac_bits - 2)
    a_mod = (a & (quarter - 1)) - quarter  # in [−1/4, 0)
    # exp on [−1/4, 0): Taylor around −1/8, in Q0.31
    x = sat_shl(a_mod, INTEGER_BITS) + (1 << 28)
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    poly = rdbpot(srdhm(rdbpot(x4, 2) + x3, 715827883) + x2, 1)
    result = 1895147668 + srdhm(1895147668, x + poly)
    remainder = a_mod - a
    # exp(−2^k) for k = −2..4, applied where bit (26 + k) of the remainder is set
    for k, mult in zip(range(-2, 5), (1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242)):
        result = np.where(remainder & (1 << (frac_bits + k)), srdhm(result, mult), result)
    return np.where(a == 0, I32_MAX, result)


def reciprocal(s, x_digits: int):
    """gemmlowp's GetReciprocal (nnacl ComputerReciprocal) of 1 <= s < 2^31 with x_digits integer
    bits: (1 / s as a Q0.31 value r and a shift nb, 1/s = r·2^−nb in s's units)."""
    clz = 32 - np.frexp(s.astype(np.float64))[1]  # s < 2^31: the exponent is its bit length
    nb = x_digits - clz
    a = (s << clz) - 2**31  # s normalised to [1, 2) in Q0.31, minus one
    # 1 / (1 + a) by Newton-Raphson in Q2.29 from 48/17 − 32/17·h, h = (1 + a) / 2 rounded
    # (RoundingHalfSum; the sum is positive, so C division is a floor here)
    half = (a + I32_MAX + 1) >> 1
    r = 1515870810 + srdhm(half, -1010580540)
    for _ in range(3):
        r = r + sat_shl(srdhm(r, (1 << 29) - srdhm(half, r)), 2)
    return sat_shl(r, 1), nb
