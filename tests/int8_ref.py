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


# ---- Conv2D / FullConnection / MatMul


def out_scale(acc, s_in, s_w, ratio=1.0):
    """A test's output scale: the accumulators' RMS at ~40 output steps, divided by ratio."""
    rms = np.sqrt(np.mean(np.square(acc, dtype=np.float64))) if np.size(acc) else 1.0
    return float(s_in * np.median(s_w) * max(rms, 1.0) / 40 / ratio)


def requant_out(acc, s_in, s_w, s_out, zp_out, lo=-128, hi=127):
    """r1.1's conv/FC output stage per channel (last axis): M_c = (double)(float)(s_in·s_w[c]) /
    (double)s_out, then MBQM + zp_out, clamped."""
    s_w = np.broadcast_to(np.asarray(s_w, np.float64), acc.shape[-1:])
    params = [quantize_round_parameter(conv_multiplier(s_in, s, s_out)) for s in s_w]
    m, left, right = (np.array(p, np.int64) for p in zip(*params)) if params else (np.zeros(0, np.int64),) * 3
    return np.clip(wrap32(mbqm(wrap32(acc), m, left, right) + zp_out), lo, hi).astype(np.int8)


def conv_out_size(size, k, s, d, same_upper, p0, p1):
    """§5 Conv2D: SAME_UPPER recomputes the pads (floor/ceil split); otherwise the stored pads;
    an output <= 0 becomes 1. Returns (out, leading pad)."""
    if same_upper:
        out = math.ceil(size / s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        p0 = total // 2
    else:
        out = math.ceil((size + p0 + p1 - (k - 1) * d) / s)
    return max(out, 1), p0


def ref_conv2d_s8(x, w, bias, s_in, zp_in, s_w, zp_w, s_out, zp_out, act=0, **geometry):
    """Conv2D int8 (§3.1): x NHWC int8, w [oc, kh, kw, c/group] int8, bias int32 [oc] or None,
    s_w/zp_w scalars or per output channel; geometry as ref_conv2d_acc's."""
    acc = ref_conv2d_acc(x, w, bias, zp_in, zp_w, **geometry)
    return requant_out(acc, s_in, s_w, s_out, zp_out, *act_range(act, s_out, zp_out))


def ref_conv2d_acc(x, w, bias, zp_in, zp_w, group=1, stride=(1, 1), dilation=(1, 1), pads=(0, 0, 0, 0),
                   same_upper=False):
    """The int32 accumulators Σ(x − zp_in)(w − zp_w) + bias of a Conv2D (wrapped as r1.1's);
    pads (up, down, left, right), recomputed for SAME_UPPER."""
    n, h, wd, c = x.shape
    oc, kh, kw, cg = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    oh, pt = conv_out_size(h, kh, sh, dh, same_upper, pads[0], pads[1])
    ow, pl = conv_out_size(wd, kw, sw, dw, same_upper, pads[2], pads[3])
    # Every tap the windows reach, outside x at zp_in: contributes (zp_in - zp_in)·w = 0.
    hp, wp = max(h + pt, (oh - 1) * sh + (kh - 1) * dh + 1), max(wd + pl, (ow - 1) * sw + (kw - 1) * dw + 1)
    xp = np.full((n, hp, wp, c), zp_in, np.int64)
    xp[:, pt:pt + h, pl:pl + wd] = x
    xp -= zp_in
    wz = w.astype(np.int64) - np.broadcast_to(np.asarray(zp_w, np.int64), (oc,)).reshape(oc, 1, 1, 1)
    og = oc // group
    acc = np.zeros((n, oh, ow, oc), np.int64)
    for g in range(group):
        for ky in range(kh):
            for kx in range(kw):
                taps = xp[:, ky * dh:ky * dh + (oh - 1) * sh + 1:sh, kx * dw:kx * dw + (ow - 1) * sw + 1:sw,
                          g * cg:(g + 1) * cg]
                acc[..., g * og:(g + 1) * og] += taps @ wz[g * og:(g + 1) * og, ky, kx].T
    return wrap32(acc + (0 if bias is None else np.asarray(bias, np.int64)))


def ref_fc_s8(x2, w, bias, s_in, zp_in, s_w, zp_w, s_out, zp_out, act=0):
    """FullConnection int8 on rows x2 [rows, K]: weight [N, K], per-channel params allowed."""
    wz = w.astype(np.int64) - np.broadcast_to(np.asarray(zp_w, np.int64), w.shape[:1])[:, None]
    acc = wrap32((x2.astype(np.int64) - zp_in) @ wz.T + (0 if bias is None else np.asarray(bias, np.int64)))
    return requant_out(acc, s_in, s_w, s_out, zp_out, *act_range(act, s_out, zp_out))


def ref_matmul_s8(a, b, bias, s_in, zp_in, s_w, zp_w, s_out, zp_out):
    """MatMul int8 on batched (already transposed) a [..., M, K], b [..., K, N]: one multiplier
    M = (double)((s_in_f·s_w_f)/s_out_f) in float; no fused activation."""
    acc = (a.astype(np.int64) - zp_in) @ (b.astype(np.int64) - zp_w)
    acc = wrap32(acc + (0 if bias is None else np.asarray(bias, np.int64)))
    M = float(np.float32(np.float32(s_in) * np.float32(s_w)) / np.float32(s_out))
    m, left, right = quantize_round_parameter(M)
    return np.clip(wrap32(mbqm(acc, m, left, right) + zp_out), -128, 127).astype(np.int8)

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

# ---- layout / reduce ops


def requant_float(q, s_in, zp_in, s_out, zp_out, divide=False):
    """Concat/Reshape/Squeeze/Split/Crop/DepthToSpace/BatchToSpace: everything in float32,
    s = s_in·(1/s_out) (or s_in/s_out), b = −zp_in·s, C round, + zp_out, clamp."""
    f = np.float32
    s = f(s_in) / f(s_out) if divide else f(s_in) * (f(1) / f(s_out))
    b = f(-zp_in) * s
    v = (np.asarray(q).astype(f) * s).astype(f) + b
    return np.clip(c_round(v.astype(f)) + zp_out, -128, 127).astype(np.int8)


def requant_double(q, alpha, zp_in, zp_out):
    """Slice/Gather/GatherNd: round(α·(q − zp_in)) + zp_out in double, clamp."""
    return np.clip(c_round(alpha * (np.asarray(q, np.float64) - zp_in)) + zp_out, -128, 127).astype(np.int8)


def resize_nearest_index(n_in, n_out, align):
    out = []
    for p in range(n_out):
        i = ((n_in - 1) * p + (n_out - 1) // 2) // (n_out - 1) if align and n_out != 1 else n_in * p // n_out
        out.append(min(i, n_in - 1))
    return out


def resize_bilinear_s8(x, oh, ow, align, zp_in):
    """r1.1's int8 bilinear: 10-bit fixed point when zp_in == 0, float weights otherwise; no
    requantization. Written as loops over output pixels."""
    n, h, w, c = x.shape
    y = np.zeros((n, oh, ow, c), np.int8)

    def axis(n_in, n_out):
        if zp_in == 0:
            num, den = (n_in - 1, n_out - 1) if align and n_out > 1 else (n_in, n_out)
            ratio = (1024 * num + den // 2) // den
            return [(p * ratio // 1024, min(p * ratio // 1024 + 1, n_in - 1), p * ratio - 1024 * (p * ratio // 1024))
                    for p in range(n_out)]
        ratio = (np.float32(n_in - 1) / np.float32(n_out - 1) if align and n_out > 1
                 else np.float32(n_in) / np.float32(n_out))
        res = []
        for p in range(n_out):
            s = np.float32(p) * ratio
            lo = int(np.floor(s))
            res.append((lo, min(lo + 1, n_in - 1), np.float32(s - np.float32(lo))))
        return res

    for i, (y0, y1, wy) in enumerate(axis(h, oh)):
        for j, (x0, x1, wx) in enumerate(axis(w, ow)):
            lb, lt, rb, rt = (x[:, y0, x0], x[:, y1, x0], x[:, y0, x1], x[:, y1, x1])
            if zp_in == 0:
                cfs = [(1024 - wx) * (1024 - wy), wy * (1024 - wx), wx * (1024 - wy), wx * wy]
                acc = sum(cf * q.astype(np.int64) for cf, q in zip(cfs, (lb, lt, rb, rt)))
                acc = acc + (1 << 19)
                y[:, i, j] = np.sign(acc) * (np.abs(acc) // (1 << 20))
            else:
                one = np.float32(1)
                cfs = [(one - wx) * (one - wy), wy * (one - wx), wx * (one - wy), wx * wy]
                v = np.zeros((n, c), np.float32)
                for cf, q in zip(cfs, (lb, lt, rb, rt)):
                    v = (v + np.float32(cf) * q.astype(np.float32)).astype(np.float32)
                y[:, i, j] = np.trunc(v)
    return y


def reduce_s8(x, axes, mode, s_in, zp_in, s_out, zp_out):
    """r1.1's generic int8 Reduce (modes: 0 Mean, 1 Max, 2 Min, 3 Prod, 4 Sum, 5 SumSquare),
    one axis at a time in list order, keepdims; None where r1.1 reports an int32 overflow."""
    v = np.asarray(x, np.int64)
    in_out = quantize_round_parameter(s_in / s_out)
    for k, ax in enumerate(axes):
        last = k == len(axes) - 1
        d = np.moveaxis(v, ax, -1)
        if mode in (1, 2):
            r = d.max(-1) if mode == 1 else d.min(-1)
        else:
            terms = d - zp_in
            if mode == 5:
                terms = terms * terms
            acc = np.ones(d.shape[:-1], np.int64) if mode == 3 else np.zeros(d.shape[:-1], np.int64)
            for t in np.moveaxis(terms, -1, 0):
                if mode == 5 and np.any(np.abs(t) > I32_MAX):
                    return None
                acc = acc * t if mode == 3 else acc + t
                if np.any((acc < I32_MIN) | (acc > I32_MAX)):
                    return None
            if mode == 0:
                acc = mbqm(acc, *quantize_round_parameter(1.0 / d.shape[-1]))
            elif mode == 3:
                acc = mbqm(acc, *quantize_round_parameter(s_in ** (d.shape[-1] - 1)))
            elif mode == 5:
                acc = mbqm(acc, *quantize_round_parameter(s_in * s_in / s_out if last else s_in))
            r = acc if last else acc + zp_in
        v = np.expand_dims(r, ax)
    if mode == 1:
        v = mbqm(v - zp_in, *in_out)
    elif mode == 2:
        m, left, right = in_out
        v = mbqm(v - zp_in, m, left + 20, right + 20)
    elif mode != 5:
        v = mbqm(v, *in_out)
    return np.clip(v + zp_out, -128, 127).astype(np.int8)


def mean_hw_s8(x, s_in, zp_in, s_out, zp_out):
    """r1.1's 4-D int8 mean over H and W: raw sum, one multiplier, a truncated bias."""
    n, h, w, c = x.shape
    m, left, right = quantize_round_parameter(s_in / (s_out * h * w))
    bias = math.trunc(zp_out - zp_in * s_in / s_out)
    total = np.asarray(x, np.int64).sum(axis=(1, 2), keepdims=True)
    return np.clip(mbqm(total, m, left, right) + bias, -128, 127).astype(np.int8)


def unary_s8(q, op, s_in, zp_in, s_out, zp_out):
    """r1.1's arithmetic_self int8, one element at a time; None where r1.1 errs or is undefined."""
    f = np.float32
    si, so = f(s_in), f(s_out)
    out = []
    for v in np.asarray(q).reshape(-1):
        if op == "Square":
            m, left, right = quantize_round_parameter(float(f(si * si) / so))
            d = int(v) - zp_in
            out.append(int(mbqm(d * d, m, left, right)) + zp_out)
            continue
        x = f(f(f(int(v)) * si) + f(f(-zp_in) * si))
        if (op == "Sqrt" and x < 0) or (op == "Rsqrt" and x <= 0) or (op == "Reciprocal" and x == 0):
            return None
        if op in ("Round", "Ceil"):
            y = float(c_round(float(x)) if op == "Round" else math.ceil(float(x))) / float(so)
        elif op == "Rsqrt":
            y = float(f(1) / f(f(math.sqrt(float(x))) * so))
        elif op == "Reciprocal":
            y = float(f(1) / f(x * so))
        else:
            fx = {"Abs": abs, "Floor": math.floor, "Sin": math.sin, "Cos": math.cos, "Sqrt": math.sqrt,
                  "Log": lambda t: math.log(t) if t > 0 else (-math.inf if t == 0 else math.nan)}[op](float(x))
            y = float(f(f(fx) / so))
        r = c_round(y) + zp_out
        if not abs(r) < 2**31:
            return None
        out.append(int(r))
    return np.clip(np.array(out).reshape(np.shape(q)), -128, 127).astype(np.int8)

# ---- Add / Sub / Mul / QuantDTypeCast / activations / Softmax


def _add_sub(q0, q1, s0, zp0, s1, zp1, s_out, zp_out, sign, lo, hi):
    twice_max = 2 * max(s0, s1)
    scaled = []
    for q, s, zp in ((q0, s0, zp0), (q1, s1, zp1)):
        m, left, right = quantize_round_parameter(s / twice_max)
        x = (np.asarray(q, np.int64) - zp) * 2**20 * 2**left
        scaled.append(rdbpot(srdhm(x, m), right))
    raw = scaled[0] + sign * scaled[1]
    m, left, right = quantize_round_parameter(twice_max / (2**20 * s_out))
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
    m, left, right = quantize_round_parameter(M)
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
