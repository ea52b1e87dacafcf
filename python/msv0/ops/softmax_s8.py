"""int8 SoftMax (format-v0.md §3.1 "Softmax int8"): TFLite's fixed-point softmax as nnacl's
softmax_int8.c runs it, vectorised over rows in int64 NumPy. The output's quant params are
ignored: the result is always in scale 1/256, zero point −128.
"""
from __future__ import annotations

import numpy as np

from msv0.ops.activation_s8 import I32_MAX, rdbpot, srdhm, wrap32
from msv0.quant import I8, f32, input_param, smaller_than_one
from msv0.registry import Plan, expect_inputs, fail, op

INTEGER_BITS = 5  # exp_on_negative_values' input format: Q5.26
ACC_BITS = 12  # the exp sum's integer bits
# Each exp adds at most 2^19 (2^31 / 2^12) to r1.1's int32 sum: rows up to this length cannot wrap it.
MAX_AXIS = 4095


def sat_shl(x, n: int):
    """SaturatingRoundingMultiplyByPOT with a positive exponent: x·2^n saturated to int32."""
    limit = (1 << (31 - n)) - 1
    return np.where(x > limit, I32_MAX, np.where(x < -limit, -(2**31), x << n))


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


def reciprocal(s):
    """gemmlowp's GetReciprocal for a Q12.19 sum s >= 1: (Q0.31 value of 2^nb / s, nb)."""
    clz = 32 - np.frexp(s.astype(np.float64))[1]  # s < 2^31: the exponent is its bit length
    nb = ACC_BITS - clz
    a = (s << clz) - 2**31  # s normalised to [1, 2) in Q0.31, minus one
    # 1 / (1 + a) by Newton-Raphson in Q2.29 from 48/17 − 32/17·h, h = (1 + a) / 2 rounded
    # (RoundingHalfSum; the sum is positive, so C division is a floor here)
    half = (a + I32_MAX + 1) >> 1
    r = 1515870810 + srdhm(half, -1010580540)
    for _ in range(3):
        r = r + sat_shl(srdhm(r, (1 << 29) - srdhm(half, r)), 2)
    return sat_shl(r, 1), nb


@op("SoftMax", int8=True)
def softmax_s8(node, ins):
    expect_inputs(node, ins, 1)
    x = ins[0]
    pi = input_param(node, x)
    rank = len(x.shape)
    if not 1 <= rank <= 5:
        raise fail(node, f"input rank must be 1..5, got {rank}")
    axis = rank - 1 if node.attrs.axis == -1 else node.attrs.axis  # r1.1 normalises only −1
    if not 0 <= axis < rank:
        raise fail(node, f"axis {node.attrs.axis} is not supported for rank {rank}")
    if x.shape[axis] > MAX_AXIS:
        raise fail(node, f"axis length {x.shape[axis]} over {MAX_AXIS} overflows r1.1's int32 exp sum")
    M = min(float(f32(pi.scale) * np.float32(2**26)), float(I32_MAX))
    m, rs = smaller_than_one(node, M)
    left = max(-rs, 0)  # r1.1 drops a right shift
    # exp of every difference q − max_row in [−255, 0], indexed by −d
    d = -np.arange(256, dtype=np.int64)
    exp_table = exp_on_negative_values(srdhm(wrap32(d << left), m))

    def run(inputs, outputs):
        q = inputs[0].astype(np.int64)
        if q.size == 0:
            return
        e = exp_table[q.max(axis=axis, keepdims=True) - q]
        r, nb = reciprocal(rdbpot(e, ACC_BITS).sum(axis=axis, keepdims=True))
        raw = rdbpot(srdhm(r, e), nb + 31 - 8) - 128
        outputs[0][...] = np.clip(raw, -128, 127)

    return Plan([(x.shape, I8)], run)
