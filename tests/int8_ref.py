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


# ---- DepthwiseConv2D / Pooling


def wrap8(x):
    """int values modulo 2^8 as int8 values: a C cast to int8_t."""
    return ((np.asarray(x, np.int64) + 128) % 256 - 128).astype(np.int64)


def dwconv_s8(x, w, w_zp, bias, x_zp, y_zp, requant, lo, hi, sh, sw, dh, dw, pt, pl, oh, ow):
    """r1.1's generic int8 depthwise conv; w [c, kh, kw] int8, w_zp and bias per channel,
    requant = (mult, left, right) per channel. A tap counts when its row under dilateH is in
    the image, and then reads the row stepped by dilateW (r1.1's quirk); columns use dilateW."""
    n, h, wd, c = x.shape
    _, kh, kw = w.shape
    ws = w.astype(np.int64) - np.asarray(w_zp, np.int64)[:, None, None]
    xs = x.astype(np.int64) - x_zp
    acc = np.zeros((n, oh, ow, c), np.int64) + np.asarray(bias, np.int64)
    for oy in range(oh):
        for ky in range(kh):
            if not 0 <= oy * sh - pt + ky * dh < h:
                continue
            iy = oy * sh - pt + ky * dw
            for ox in range(ow):
                for kx in range(kw):
                    ix = ox * sw - pl + kx * dw
                    if 0 <= ix < wd:
                        acc[:, oy, ox] += xs[:, iy, ix] * ws[:, ky, kx]
    mult, left, right = (np.asarray(r, np.int64) for r in requant)
    return np.clip(wrap32(mbqm(wrap32(acc), mult, left, right) + y_zp), lo, hi).astype(np.int8)


def pool_s8(x, is_max, kh, kw, sh, sw, pt, pl, oh, ow, s_in, zp_in, s_out, zp_out):
    """r1.1's int8 pooling: windows clipped to the image; max from -128 (copied when the params
    are equal), mean = floor((S + 128·cnt + cnt/2) / cnt) − 128; then (int8)(round((v − zp_in)·r)
    + zp_out), r = s_in_f / s_out_f in float, widened."""
    n, h, w, c = x.shape
    r = float(np.float32(s_in) / np.float32(s_out))
    y = np.empty((n, oh, ow, c), np.int64)
    for oy in range(oh):
        y0, y1 = max(oy * sh - pt, 0), min(oy * sh - pt + kh, h)
        for ox in range(ow):
            x0, x1 = max(ox * sw - pl, 0), min(ox * sw - pl + kw, w)
            win = x[:, y0:y1, x0:x1].astype(np.int64).reshape(n, -1, c)
            if is_max:
                v = win.max(axis=1, initial=-128)
                if (s_in, zp_in) == (s_out, zp_out):
                    y[:, oy, ox] = v
                    continue
            else:
                cnt = win.shape[1]
                v = (win.sum(axis=1) + 128 * cnt + cnt // 2) // cnt - 128
            y[:, oy, ox] = wrap8(c_round((v - zp_in) * r) + zp_out)
    return y.astype(np.int8)
