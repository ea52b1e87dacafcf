"""Conv2D and DeConv2D (format-v0.md §5) against direct NumPy convolutions in float64."""
import numpy as np
import pytest

import msv0
from msv0 import _core
from oprun import assert_program_matches_single_calls, Const, run_op
from msv0.fb.ActivationType import ActivationType
from msv0.fb.PadMode import PadMode

EPS = np.finfo(np.float32).eps


def conv_out(size, k, s, d, mode, p0, p1):
    """format-v0.md §5 Conv2D output size, with the PadMode.SAME_UPPER pad recompute."""
    if mode == PadMode.SAME_UPPER:
        out = (size + s - 1) // s
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        p0, p1 = total // 2, total - total // 2
    else:
        out = (size + p0 + p1 - (k - 1) * d + s - 1) // s
    return max(out, 1), p0


def conv_ref(x, w, b, group, stride, dilation, oh, ow, pt, pl):
    """Direct convolution: one matrix product per (group, tap) over the zero-padded input."""
    n, h, wd, c = x.shape
    oc, kh, kw, cg = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    og = oc // group
    # Pad far enough for every tap of every output pixel (out <= 0 -> 1 may reach past the pads).
    ph = pt + max(h, (oh - 1) * sh + (kh - 1) * dh + 1)
    pw = pl + max(wd, (ow - 1) * sw + (kw - 1) * dw + 1)
    xp = np.zeros((n, ph, pw, c))
    xp[:, pt:pt + h, pl:pl + wd] = x
    y = np.zeros((n, oh, ow, oc))
    for g in range(group):
        for ky in range(kh):
            for kx in range(kw):
                patch = xp[:, ky * dh: ky * dh + (oh - 1) * sh + 1: sh, kx * dw: kx * dw + (ow - 1) * sw + 1: sw,
                           g * cg:(g + 1) * cg]
                y[..., g * og:(g + 1) * og] += patch @ w[g * og:(g + 1) * og, ky, kx, :].T.astype(np.float64)
    return y + (0 if b is None else b)


def close(got, want, absref, k):
    """float32 sums of k products, in any order and with FMA: each output's error is a few
    rounding errors of its running sums, which grow like sqrt(k)·eps·sum|x·w| for random data
    (k·eps is the worst case); 4·sqrt(k) leaves room for unlucky orders without hiding a wrong
    tap, which would be off by a whole product."""
    assert got.shape == want.shape
    tol = 4 * np.sqrt(k) * EPS * absref + 1e-30
    bad = np.abs(got.astype(np.float64) - want) > tol
    assert not bad.any(), f"{bad.sum()} of {bad.size} outside tolerance; max err {np.abs(got - want).max()}"


def act(y, activation):
    if activation == ActivationType.RELU:
        return np.maximum(y, 0)
    if activation == ActivationType.RELU6:
        return np.clip(y, 0, 6)
    return y


def check_conv(rng, x_shape, oc, kernel, stride=(1, 1), dilation=(1, 1), group=1, mode=PadMode.CAFFE, pads=(0, 0, 0, 0),
               activation=0, bias=True, threads=1):
    n, h, wd, c = x_shape
    kh, kw = kernel
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((oc, kh, kw, c // group)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32) if bias else None
    oh, pt = conv_out(h, kh, stride[0], dilation[0], mode, pads[0], pads[1])
    ow, pl = conv_out(wd, kw, stride[1], dilation[1], mode, pads[2], pads[3])
    want = conv_ref(x, w, b, group, stride, dilation, oh, ow, pt, pl)
    absref = conv_ref(np.abs(x), np.abs(w), None if b is None else np.abs(b), group, stride, dilation, oh, ow, pt, pl)
    ins = [x, Const(w, format=7)] + ([Const(b)] if bias else [])
    (got,) = run_op("Conv2D", ins, num_threads=threads, group=group, kernelH=kh, kernelW=kw,
                    strideH=stride[0], strideW=stride[1], dilateH=dilation[0], dilateW=dilation[1], padMode=mode,
                    padUp=pads[0], padDown=pads[1], padLeft=pads[2], padRight=pads[3], activationType=activation)
    close(got, act(want, activation), absref, kh * kw * c // group)


CHANNELS = [1, 3, 7, 8, 9, 15, 16, 17, 33]  # 1, lane counts 8/16 and +-1 around them, a prime past 32


@pytest.mark.parametrize("c", CHANNELS)
def test_conv2d_f32_channels(isa, rng, c):
    oc = CHANNELS[(CHANNELS.index(c) + 4) % len(CHANNELS)]
    check_conv(rng, (1, 9, 7, c), oc, (3, 3), pads=(1, 1, 1, 1))


@pytest.mark.parametrize("c", [1, 8, 17, 33])
def test_conv2d_f32_1x1_direct(isa, rng, c):
    # 1x1, stride 1, no pads: the GEMM reads the NHWC rows of x in place.
    check_conv(rng, (2, 13, 6, c), 40, (1, 1))


CASES = {
    "1x1_s2": dict(kernel=(1, 1), stride=(2, 2)),
    "3x3_s2_pad": dict(kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
    "5x5_s3_asym": dict(kernel=(5, 5), stride=(3, 3), pads=(2, 0, 1, 2)),
    "3x1": dict(kernel=(3, 1), pads=(1, 1, 0, 0)),
    "3x1_s12": dict(kernel=(3, 1), stride=(1, 2)),
    # 1-D windows that are runs of x: the GEMM reads x in place, rows `step` apart
    "1d_rows": dict(kernel=(5, 1), x=(2, 19, 1, 9), oc=20),
    "1d_rows_s2": dict(kernel=(3, 1), stride=(2, 1), x=(1, 17, 1, 33), oc=17),
    "1d_rows_whole_width": dict(kernel=(3, 4), x=(1, 11, 4, 6)),
    "1d_cols_s3": dict(kernel=(1, 7), stride=(1, 3), x=(2, 1, 40, 5)),
    "1d_rows_threads2": dict(kernel=(5, 1), threads=2, x=(3, 64, 1, 16), oc=40),
    "1d_stft_one_channel": dict(kernel=(1, 300), stride=(1, 70), x=(1, 1, 650, 1), oc=33),  # K past direct's 256
    "dilate2": dict(kernel=(3, 3), dilation=(2, 2), pads=(2, 2, 2, 2)),
    "dilate21": dict(kernel=(3, 3), dilation=(2, 1), pads=(1, 0, 0, 1)),
    "stride_gt_kernel": dict(kernel=(2, 2), stride=(3, 3)),
    "out_le0_is1": dict(kernel=(5, 5), mode=PadMode.VALID, x=(1, 3, 2, 5)),
    "valid": dict(kernel=(3, 3), mode=PadMode.VALID),
    "notset_asym": dict(kernel=(3, 3), mode=PadMode.NOTSET, pads=(0, 2, 1, 0)),
    "same_lower_stored": dict(kernel=(3, 3), mode=PadMode.SAME_LOWER, pads=(1, 1, 1, 1), stride=(2, 2)),
    "same_upper": dict(kernel=(3, 3), mode=PadMode.SAME_UPPER, pads=(5, 5, 5, 5)),
    "same_upper_s2": dict(kernel=(3, 3), mode=PadMode.SAME_UPPER, stride=(2, 2)),
    "same_upper_s3_k4": dict(kernel=(4, 4), mode=PadMode.SAME_UPPER, stride=(3, 3)),
    "same_upper_s2_d2": dict(kernel=(3, 3), mode=PadMode.SAME_UPPER, stride=(2, 2), dilation=(2, 2)),
    "same_upper_k1_s3": dict(kernel=(1, 1), mode=PadMode.SAME_UPPER, stride=(3, 3)),
    "group2": dict(kernel=(3, 3), group=2, pads=(1, 1, 1, 1), c=16, oc=18),
    "group3_s2": dict(kernel=(3, 3), group=3, stride=(2, 2), pads=(1, 1, 1, 1), c=9, oc=33),
    "group2_1x1": dict(kernel=(1, 1), group=2, c=34, oc=16),
    "depthwise": dict(kernel=(3, 3), group=17, pads=(1, 1, 1, 1), c=17, oc=17),
    "depthwise_s2": dict(kernel=(3, 3), group=33, stride=(2, 2), mode=PadMode.SAME_UPPER, c=33, oc=33),
    "depthwise_mult2": dict(kernel=(3, 3), group=8, pads=(1, 1, 1, 1), c=8, oc=16),
    "relu": dict(kernel=(3, 3), pads=(1, 1, 1, 1), activation=ActivationType.RELU),
    "relu6": dict(kernel=(3, 3), pads=(1, 1, 1, 1), activation=ActivationType.RELU6),
    "sigmoid_ignored": dict(kernel=(3, 3), activation=ActivationType.SIGMOID),
    "no_bias": dict(kernel=(3, 3), pads=(1, 1, 1, 1), bias=False),
    "threads2": dict(kernel=(3, 3), pads=(1, 1, 1, 1), threads=2, x=(2, 13, 6, 15), oc=33),
    "threads2_1x1": dict(kernel=(1, 1), threads=2, x=(1, 30, 30, 16), oc=24),
    # Few pixels on two threads split the output channels: 5 pairs of panels (split 5 + 5 panels)
    # and 3 pairs (split 2 + 3 panels).
    "threads2_7x7_10_panels": dict(kernel=(1, 1), threads=2, x=(1, 7, 7, 40), oc=160),
    "threads2_7x7_5_panels": dict(kernel=(3, 3), pads=(1, 1, 1, 1), threads=2, x=(1, 7, 7, 9), oc=72),
    "big_k": dict(kernel=(5, 5), pads=(2, 2, 2, 2), c=40, oc=20),
    "group2_threads2": dict(kernel=(3, 3), group=2, stride=(2, 1), pads=(1, 1, 1, 1), threads=2, c=18, oc=34),
    "depthwise_dilate2_threads2": dict(kernel=(3, 3), group=16, dilation=(2, 2), pads=(2, 2, 2, 2), threads=2,
                                       c=16, oc=16),
    "dilate2_s2_same_upper": dict(kernel=(3, 3), stride=(2, 2), dilation=(2, 2), mode=PadMode.SAME_UPPER, c=16, oc=17),
}


@pytest.mark.parametrize("case", CASES)
def test_conv2d_f32_cases(isa, rng, case):
    kw = dict(CASES[case])
    c, oc = kw.pop("c", 7), kw.pop("oc", 9)
    x = kw.pop("x", (1, 13, 6, c))
    check_conv(rng, x, oc, **kw)


# (x shape, oc, padMode, pads, activation, bias, threads): 3x3 stride 1 shapes that take
# Winograd F(4x4, 3x3): >= 16 channels each side, >= 16 output tiles, partial edge tiles; few tiles
# with > 2^20 transformed weights on two threads split the output channels (11 panels: a lone one).
WINOGRAD = {
    "pad1_odd": ((1, 23, 29, 17), 33, PadMode.CAFFE, (1, 1, 1, 1), 0, True, 1),
    "batch2_relu6": ((2, 13, 17, 16), 16, PadMode.CAFFE, (1, 1, 1, 1), ActivationType.RELU6, True, 1),
    "asym_no_bias": ((1, 30, 31, 33), 20, PadMode.NOTSET, (0, 2, 1, 0), ActivationType.RELU, False, 1),
    "same_upper_threads2": ((1, 25, 27, 16), 17, PadMode.SAME_UPPER, (0, 0, 0, 0), 0, True, 2),
    "valid_threads2": ((1, 26, 35, 24), 48, PadMode.VALID, (0, 0, 0, 0), 0, True, 2),
    "16_tiles_big_weights_threads2": ((1, 14, 14, 176), 168, PadMode.CAFFE, (1, 1, 1, 1), ActivationType.RELU, True, 2),
    "16_tiles_edges": ((1, 15, 13, 17), 33, PadMode.CAFFE, (1, 1, 1, 1), 0, True, 1),
    "20_tiles_threads2": ((1, 17, 14, 16), 16, PadMode.CAFFE, (1, 1, 1, 1), ActivationType.RELU6, False, 2),
}
# Fewer than 16 4x4 tiles but at least 16 2x2 ones take F(2x2, 3x3): odd channels, clipped edge
# tiles in a batch, and weights large enough for two threads to split the output channels.
WINOGRAD_F2 = {
    "f2_7x7_odd_channels": ((1, 7, 7, 33), 17, PadMode.CAFFE, (1, 1, 1, 1), ActivationType.RELU, True, 1),
    "f2_batch2_edges_threads2": ((2, 5, 9, 16), 24, PadMode.CAFFE, (1, 1, 1, 1), 0, False, 2),
    "f2_big_weights_threads2": ((1, 7, 7, 512), 176, PadMode.CAFFE, (1, 1, 1, 1), 0, True, 2),
}


@pytest.mark.parametrize("case", [*WINOGRAD, *WINOGRAD_F2])
def test_conv2d_f32_winograd(isa, rng, case):
    x_shape, oc, mode, pads, activation, bias, threads = {**WINOGRAD, **WINOGRAD_F2}[case]
    n, h, wd, c = x_shape
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((oc, 3, 3, c)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32) if bias else None
    oh, pt = conv_out(h, 3, 1, 1, mode, pads[0], pads[1])
    ow, pl = conv_out(wd, 3, 1, 1, mode, pads[2], pads[3])
    algorithm = "winograd_f2" if case in WINOGRAD_F2 else "winograd"
    assert _core.conv2d_algorithm(w.shape, 1, 1, 1, 1, 1, pt, pl, x_shape, (n, oh, ow, oc)) == algorithm
    want = conv_ref(x, w, b, 1, (1, 1), (1, 1), oh, ow, pt, pl)
    absref = conv_ref(np.abs(x), np.abs(w), None if b is None else np.abs(b), 1, (1, 1), (1, 1), oh, ow, pt, pl)
    ins = [x, Const(w, format=7)] + ([Const(b)] if bias else [])
    (got,) = run_op("Conv2D", ins, num_threads=threads, group=1, kernelH=3, kernelW=3, strideH=1, strideW=1,
                    dilateH=1, dilateW=1, padMode=mode, padUp=pads[0], padDown=pads[1], padLeft=pads[2],
                    padRight=pads[3], activationType=activation)
    # The F(4,3) transforms scale values by up to 5 (input) and 8 (output) before and after the
    # float32 GEMM, so rounding errors grow by a constant factor over direct summation. Measured
    # on these shapes on every tier, the worst error is 1.7·sqrt(k)·eps·sum|x·w|, inside the
    # default 4x bound (2.4x margin), while a wrong tap still fails by orders of magnitude.
    # F(2,3)'s transforms only add and subtract: less growth.
    close(got, act(want, activation), absref, 9 * c)


def test_conv2d_f32_weight_quant_per_channel(isa, rng):
    x = rng.standard_normal((1, 9, 7, 5)).astype(np.float32)
    q = rng.integers(-128, 128, (6, 3, 3, 5)).astype(np.int8)
    scale = rng.uniform(0.01, 0.1, 6).astype(np.float32)
    zp = rng.integers(-3, 4, 6)
    quant = [dict(scale=float(s), zeroPoint=int(z), numBits=8, inited=True) for s, z in zip(scale, zp)]
    w = (q.astype(np.float32) - zp[:, None, None, None]) * scale[:, None, None, None]
    b = rng.standard_normal(6).astype(np.float32)
    (got,) = run_op("Conv2D", [x, Const(q, format=7, quant=quant), Const(b)], group=1, kernelH=3, kernelW=3,
                    strideH=1, strideW=1, dilateH=1, dilateW=1, padMode=PadMode.CAFFE, padUp=1, padDown=1, padLeft=1,
                    padRight=1)
    want = conv_ref(x, w, b, 1, (1, 1), (1, 1), 9, 7, 1, 1)
    absref = conv_ref(np.abs(x), np.abs(w), np.abs(b), 1, (1, 1), (1, 1), 9, 7, 1, 1)
    close(got, want, absref, 45)


@pytest.mark.parametrize("attrs, message", [
    (dict(group=2), "group"),
    (dict(group=0), "group"),
    (dict(strideH=0), "strideH"),
    (dict(kernelH=5), "kernelH"),
])
def test_conv2d_bad_attrs(isa, rng, attrs, message):
    x = rng.standard_normal((1, 5, 5, 3)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    base = dict(group=1, kernelH=3, kernelW=3, strideH=1, strideW=1, dilateH=1, dilateW=1, padMode=PadMode.CAFFE)
    with pytest.raises(msv0.ModelError, match=message):
        run_op("Conv2D", [x, Const(w, format=7)], **{**base, **attrs})


def deconv_out(size, k, s, d, mode, p0, p1):
    """format-v0.md §5 DeConv2D output size and crop offset."""
    if mode in (PadMode.NOTSET, PadMode.CAFFE):
        return (size - 1) * s + (k - 1) * d + 1 - p0 - p1, p0
    if mode == PadMode.SAME_UPPER:
        out = size * s
        v = (size - 1) * s + (k - 1) * d + 1 - out
        return out, int(v / 2)  # C division truncates toward zero
    assert mode == PadMode.VALID
    return (size - 1) * s + k, 0


def deconv_ref(x, w, b, stride, dilation, oh, ow, pt, pl):
    """Scatter every input pixel through every tap into the full output, then crop at (pt, pl)."""
    n, h, wd, c = x.shape
    _, kh, kw, oc = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    fh, fw = (h - 1) * sh + (kh - 1) * dh + 1, (wd - 1) * sw + (kw - 1) * dw + 1
    # Margins so that a crop window with negative offset or past the end reads zeros.
    m = abs(pt) + abs(pl) + oh + ow
    full = np.zeros((n, fh + 2 * m, fw + 2 * m, oc))
    for iy in range(h):
        for ix in range(wd):
            for ky in range(kh):
                for kx in range(kw):
                    full[:, m + iy * sh + ky * dh, m + ix * sw + kx * dw] += x[:, iy, ix] @ w[:, ky, kx].astype(np.float64)
    y = full[:, m + pt: m + pt + oh, m + pl: m + pl + ow]
    return y + (0 if b is None else b)


DECONV_CASES = {
    "caffe_k3_s2_p1": dict(kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
    "notset_asym": dict(kernel=(4, 3), stride=(2, 1), pads=(1, 2, 0, 1)),
    "caffe_k2_s2": dict(kernel=(2, 2), stride=(2, 2), c=17, oc=33),
    "caffe_dilate2": dict(kernel=(3, 3), dilation=(2, 2), pads=(1, 0, 2, 1)),
    "same_upper_s2": dict(kernel=(3, 3), stride=(2, 2), mode=PadMode.SAME_UPPER),
    "same_upper_s3_k4": dict(kernel=(4, 4), stride=(3, 3), mode=PadMode.SAME_UPPER, c=16, oc=8),
    "same_upper_neg_pad": dict(kernel=(1, 1), stride=(3, 3), mode=PadMode.SAME_UPPER),
    "valid": dict(kernel=(3, 3), stride=(2, 2), mode=PadMode.VALID, c=1, oc=15),
    "valid_dilate2": dict(kernel=(3, 3), stride=(1, 1), dilation=(2, 2), mode=PadMode.VALID),
    "relu6": dict(kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1), activation=ActivationType.RELU6),
    "relu_no_bias": dict(kernel=(3, 3), stride=(1, 1), activation=ActivationType.RELU, bias=False, c=9, oc=16),
    "threads2": dict(kernel=(3, 3), stride=(2, 2), pads=(0, 1, 0, 1), threads=2, c=33, oc=17),
}


@pytest.mark.parametrize("case", DECONV_CASES)
def test_deconv2d_f32(isa, rng, case):
    kw_ = dict(DECONV_CASES[case])
    c, oc = kw_.pop("c", 7), kw_.pop("oc", 9)
    kh, kw = kw_["kernel"]
    stride, dilation = kw_.get("stride", (1, 1)), kw_.get("dilation", (1, 1))
    mode, pads = kw_.get("mode", PadMode.CAFFE), kw_.get("pads", (0, 0, 0, 0))
    activation, bias = kw_.get("activation", 0), kw_.get("bias", True)
    x = rng.standard_normal((2, 6, 5, c)).astype(np.float32)
    w = rng.standard_normal((c, kh, kw, oc)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32) if bias else None
    oh, pt = deconv_out(6, kh, stride[0], dilation[0], mode, pads[0], pads[1])
    ow, pl = deconv_out(5, kw, stride[1], dilation[1], mode, pads[2], pads[3])
    want = deconv_ref(x, w, b, stride, dilation, oh, ow, pt, pl)
    absref = deconv_ref(np.abs(x), np.abs(w), None if b is None else np.abs(b), stride, dilation, oh, ow, pt, pl)
    ins = [x, Const(w, format=7)] + ([Const(b)] if bias else [])
    (got,) = run_op("DeConv2D", ins, num_threads=kw_.get("threads", 1), group=1, kernelH=kh, kernelW=kw,
                    strideH=stride[0], strideW=stride[1], dilateH=dilation[0], dilateW=dilation[1], padMode=mode,
                    padUp=pads[0], padDown=pads[1], padLeft=pads[2], padRight=pads[3], activationType=activation)
    # Each output sums at most c·kh·kw products (c per tap, taps summed in float32 after the GEMM).
    close(got, act(want, activation), absref, c * kh * kw)


GUARD = 37  # floats of NaN on each side of an output, checked untouched


@pytest.mark.parametrize("oc", [1, 9, 16, 17])  # one lane, odd, a whole AVX-512 vector, one past it
def test_deconv2d_kernel_canary(isa, rng, oc):
    """Called directly: every output written (NaN canaries), nothing outside y (guard regions on
    both sides), including the negative-pad case where some outputs get bias only."""
    c, kh, kw, sh, sw, pt, pl = 5, 3, 2, 3, 2, -1, 1
    x = rng.standard_normal((2, 4, 5, c)).astype(np.float32)
    w = rng.standard_normal((c, kh, kw, oc)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    oh, ow = 12, 9
    kernel = _core.Deconv2d(w, b, sh, sw, 1, 1, pt, pl, x.shape, (2, oh, ow, oc), -1.0, 2.0)
    size = 2 * oh * ow * oc
    buf = np.full(size + 2 * GUARD, np.nan, np.float32)
    y = buf[GUARD:GUARD + size].reshape(2, oh, ow, oc)
    kernel([x], [y])
    assert np.isnan(buf[:GUARD]).all() and np.isnan(buf[GUARD + size:]).all(), "wrote outside y"
    want = np.clip(deconv_ref(x, w, b, (sh, sw), (1, 1), oh, ow, pt, pl), -1.0, 2.0)
    absref = deconv_ref(np.abs(x), np.abs(w), np.abs(b), (sh, sw), (1, 1), oh, ow, pt, pl)
    close(y, want, absref, c * kh * kw)


@pytest.mark.parametrize("attrs, message", [
    (dict(padMode=PadMode.SAME_LOWER), "pad mode"),
    (dict(group=2), "group"),
    (dict(padUp=9, padDown=9), "output size"),
])
def test_deconv2d_rejects(isa, rng, attrs, message):
    x = rng.standard_normal((1, 4, 4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 5)).astype(np.float32)
    base = dict(group=1, kernelH=3, kernelW=3, strideH=2, strideW=2, dilateH=1, dilateW=1, padMode=PadMode.CAFFE)
    with pytest.raises(msv0.ModelError, match=message):
        run_op("DeConv2D", [x, Const(w, format=7)], **{**base, **attrs})


def conv_chain_model(rng):
    """Conv (3x3, Winograd-sized) -> 1x1 conv -> grouped stride-2 conv -> deconv -> FullConnection:
    every step has a native form, so the whole graph is one Program."""
    from msv0.builder import Builder

    def w(*shape):
        return rng.standard_normal(shape).astype(np.float32) * 0.3

    b = Builder("chain")
    x = b.input("x", (1, 29, 31, 16))
    t = b.node("Conv2D", [x, b.const("w0", w(24, 3, 3, 16), format=7), b.const("b0", w(24))], kernelH=3, kernelW=3,
               strideH=1, strideW=1, dilateH=1, dilateW=1, group=1, padMode=PadMode.SAME_UPPER, activationType=ActivationType.RELU)
    t = b.node("Conv2D", [t, b.const("w1", w(17, 1, 1, 24), format=7)], kernelH=1, kernelW=1, strideH=1, strideW=1,
               dilateH=1, dilateW=1, group=1, padMode=PadMode.CAFFE)
    t = b.node("Conv2D", [t, b.const("w1b", w(32, 1, 1, 17), format=7)], kernelH=1, kernelW=1, strideH=1,
               strideW=1, dilateH=1, dilateW=1, group=1, padMode=PadMode.CAFFE)
    t = b.node("Conv2D", [t, b.const("w2", w(32, 3, 3, 16), format=7), b.const("b2", w(32))], kernelH=3, kernelW=3,
               strideH=2, strideW=2, dilateH=1, dilateW=1, group=2, padMode=PadMode.CAFFE, padUp=1, padDown=1, padLeft=1,
               padRight=1, activationType=ActivationType.RELU6)
    t = b.node("DeConv2D", [t, b.const("w3", w(32, 2, 2, 8)), b.const("b3", w(8))], kernelH=2, kernelW=2, strideH=2,
               strideW=2, dilateH=1, dilateW=1, group=1, padMode=PadMode.CAFFE)
    t = b.node("FullConnection", [t, b.const("w4", w(10, 30 * 32 * 8)), b.const("b4", w(10))], hasBias=True)
    b.output(t)
    return b.finish(), rng.standard_normal((1, 29, 31, 16)).astype(np.float32)


@pytest.mark.parametrize("threads", [1, 2])
def test_native_program_matches_single_calls(isa, rng, threads):
    model, x = conv_chain_model(rng)
    assert_program_matches_single_calls(model, [x], threads, program_steps=6)


@pytest.mark.parametrize("case", [((1, 5, 6, 20), 70, 1), ((1, 4, 4, 24), 68, 2), ((1, 7, 7, 40), 33, 1),
                                  ((2, 9, 7, 8), 16, 1)], ids=str)
def test_conv2d_f32_two_threads_split_channels(isa, rng, case):
    """Fewer than 48 pixels per thread: the two threads split the output channels (panel pairs)."""
    x_shape, oc, group = case
    check_conv(rng, x_shape, oc, (3, 3), group=group, pads=(1, 1, 1, 1), threads=2)
    check_conv(rng, x_shape, oc, (1, 1), group=group, threads=2)


# (x shape, weight shape, group, stride, dilation, pads (pt, pl), y shape) -> the algorithm the
# C++ selector picks.
ALGORITHMS = [
    ((1, 9, 7, 8), (8, 3, 3, 1), 8, (1, 1), (1, 1), (1, 1), (1, 9, 7, 8), "depthwise"),
    ((1, 9, 7, 8), (8, 1, 1, 1), 8, (1, 1), (1, 1), (0, 0), (1, 9, 7, 8), "depthwise"),  # 1x1 depthwise too
    ((1, 9, 7, 4), (8, 1, 1, 1), 4, (1, 1), (1, 1), (0, 0), (1, 9, 7, 8), "im2col"),  # multiplier 2 as Conv2D
    ((1, 224, 224, 3), (32, 3, 3, 3), 1, (2, 2), (1, 1), (0, 0), (1, 112, 112, 32), "direct"),
    ((1, 9, 7, 4), (8, 1, 1, 4), 1, (1, 1), (1, 1), (0, 0), (1, 9, 7, 8), "gemm1x1"),  # 1x1 before stems
    ((1, 9, 7, 4), (8, 1, 1, 4), 1, (2, 2), (1, 1), (0, 0), (1, 5, 4, 8), "direct"),  # a strided 1x1 stem
    ((1, 1, 1280, 1), (257, 1, 256, 1), 1, (1, 160), (1, 1), (0, 0), (1, 1, 7, 257), "direct"),  # K = 256
    ((1, 1, 1280, 1), (257, 1, 512, 1), 1, (1, 160), (1, 1), (0, 0), (1, 1, 5, 257), "im2col"),  # an STFT
    ((1, 14, 14, 2), (8, 12, 12, 2), 1, (1, 1), (1, 1), (0, 0), (1, 3, 3, 8), "im2col"),  # K = 288
    ((1, 9, 7, 5), (8, 1, 1, 5), 1, (1, 1), (1, 1), (0, 0), (1, 9, 7, 8), "gemm1x1"),
    ((1, 9, 7, 5), (8, 1, 1, 5), 1, (2, 2), (1, 1), (0, 0), (1, 5, 4, 8), "im2col"),  # strided 1x1
    ((1, 9, 7, 5), (8, 1, 1, 5), 1, (1, 1), (1, 1), (1, 0), (1, 11, 7, 8), "im2col"),  # padded 1x1
    ((1, 9, 7, 10), (8, 1, 1, 5), 2, (1, 1), (1, 1), (0, 0), (1, 9, 7, 8), "im2col"),  # grouped 1x1
    ((1, 16, 16, 16), (16, 3, 3, 16), 1, (1, 1), (1, 1), (1, 1), (1, 16, 16, 16), "winograd"),  # 16 tiles
    ((1, 15, 16, 16), (16, 3, 3, 16), 1, (1, 1), (1, 1), (1, 1), (1, 12, 16, 16), "winograd_f2"),  # 12 tiles, 48 of 2x2
    ((1, 7, 6, 16), (16, 3, 3, 16), 1, (1, 1), (1, 1), (1, 1), (1, 7, 6, 16), "im2col"),  # 12 tiles of 2x2
    ((1, 16, 16, 15), (16, 3, 3, 15), 1, (1, 1), (1, 1), (1, 1), (1, 16, 16, 16), "im2col"),  # 15 channels in
    ((1, 16, 16, 16), (15, 3, 3, 16), 1, (1, 1), (1, 1), (1, 1), (1, 16, 16, 15), "im2col"),  # 15 out
    ((1, 16, 16, 16), (16, 3, 3, 16), 1, (2, 2), (1, 1), (1, 1), (1, 8, 8, 16), "im2col"),  # stride 2
    ((1, 16, 16, 16), (16, 3, 3, 16), 1, (1, 1), (2, 2), (2, 2), (1, 16, 16, 16), "im2col"),  # dilated
    ((1, 16, 16, 32), (32, 3, 3, 16), 2, (1, 1), (1, 1), (1, 1), (1, 16, 16, 32), "im2col"),  # grouped 3x3
    ((1, 16, 16, 16), (16, 5, 5, 16), 1, (1, 1), (1, 1), (2, 2), (1, 16, 16, 16), "im2col"),
]


@pytest.mark.parametrize("x, w, group, stride, dilation, pads, y, want", ALGORITHMS, ids=[a[-1] for a in ALGORITHMS])
def test_conv2d_algorithm(x, w, group, stride, dilation, pads, y, want):
    got = _core.conv2d_algorithm(w, group, *stride, *dilation, *pads, x, y)
    assert got == want
    weight = np.zeros(w, np.float32)
    assert _core.conv2d_f32(weight, None, group, *stride, *dilation, *pads, x, y).name == want


def test_conv2d_algorithm_bad_geometry():
    with pytest.raises(ValueError, match="channels"):
        _core.conv2d_algorithm((8, 3, 3, 4), 1, 1, 1, 1, 1, 1, 1, (1, 9, 7, 5), (1, 9, 7, 8))
    with pytest.raises(ValueError, match="group"):
        _core.conv2d_algorithm((8, 3, 3, 4), 0, 1, 1, 1, 1, 1, 1, (1, 9, 7, 4), (1, 9, 7, 8))
    with pytest.raises(ValueError, match="strides"):
        _core.conv2d_algorithm((8, 3, 3, 4), 1, 0, 1, 1, 1, 1, 1, (1, 9, 7, 4), (1, 9, 7, 8))


# Group-1 convs with <= 4 input channels (network stems) take the direct kernel, vectorised over
# output channels: every Cout tail across lane counts 8/16 and the 4 x 16 block, odd sizes.
@pytest.mark.parametrize("c", [1, 2, 3, 4])
@pytest.mark.parametrize("oc", [1, 7, 16, 17, 32, 33, 64])
def test_conv2d_f32_direct_channels(isa, rng, c, oc):
    check_conv(rng, (1, 13, 9, c), oc, (3, 3), stride=(2, 2), mode=PadMode.SAME_UPPER)


DIRECT_CASES = {
    "3x3_s2_asym_pads": dict(kernel=(3, 3), stride=(2, 2), pads=(0, 2, 2, 1), x=(1, 13, 9, 3), oc=32),
    "7x7_s2_pad3": dict(kernel=(7, 7), stride=(2, 2), pads=(3, 3, 3, 3), x=(1, 29, 31, 3), oc=64),
    "7x7_s2_pad3_batch2": dict(kernel=(7, 7), stride=(2, 2), pads=(3, 3, 3, 3), x=(2, 13, 9, 4), oc=33),
    "5x5_s1_dilate2": dict(kernel=(5, 5), dilation=(2, 2), pads=(4, 4, 4, 4), x=(1, 29, 31, 2), oc=17),
    "5x5_dilate2_no_pads": dict(kernel=(5, 5), dilation=(2, 2), x=(1, 13, 29, 3), oc=16),
    "1x3": dict(kernel=(1, 3), pads=(0, 0, 1, 1), x=(1, 13, 9, 1), oc=7),
    "1x3_s2_valid": dict(kernel=(1, 3), stride=(2, 2), mode=PadMode.VALID, x=(1, 29, 31, 4), oc=64),
    "kernel_wider_than_x": dict(kernel=(7, 7), stride=(2, 2), pads=(3, 3, 3, 3), x=(1, 4, 3, 3), oc=32),
    "relu6": dict(kernel=(3, 3), stride=(2, 2), mode=PadMode.SAME_UPPER, activation=ActivationType.RELU6, x=(1, 29, 31, 3), oc=32),
    "no_bias": dict(kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1), bias=False, x=(1, 13, 9, 3), oc=33),
    "threads2": dict(kernel=(7, 7), stride=(2, 2), pads=(3, 3, 3, 3), threads=2, x=(2, 29, 31, 3), oc=64),
    "threads2_relu": dict(kernel=(3, 3), stride=(2, 2), mode=PadMode.SAME_UPPER, activation=ActivationType.RELU, threads=2,
                          x=(1, 29, 31, 3), oc=17),
}


@pytest.mark.parametrize("case", DIRECT_CASES)
def test_conv2d_f32_direct_cases(isa, rng, case):
    kw = dict(DIRECT_CASES[case])
    x, oc = kw.pop("x"), kw.pop("oc")
    check_conv(rng, x, oc, **kw)


@pytest.mark.parametrize("oc", [17, 64])
def test_conv2d_direct_kernel_canary_and_nan(isa, rng, oc):
    """Called directly: every output written, nothing past y's end (masked Cout tail), and a NaN
    in x reaches exactly the outputs whose window holds it, through the ActivationType.RELU6 clamp."""
    x = rng.standard_normal((1, 29, 31, 3)).astype(np.float32)
    x[0, 10, 0, 1] = np.nan  # a left-border column: the per-pixel path
    x[0, 20, 15, 2] = np.nan  # an interior column: the blocked path
    w = rng.standard_normal((oc, 7, 7, 3)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    oh, ow = 15, 16
    conv = _core.conv2d_f32(w, b, 1, 2, 2, 1, 1, 3, 3, x.shape, (1, oh, ow, oc), 0.0, 6.0)
    assert conv.name == "direct"
    buf = np.full(oh * ow * oc + 16, np.nan, np.float32)
    y = buf[:oh * ow * oc].reshape(1, oh, ow, oc)
    conv([x], [y])
    assert np.isnan(buf[oh * ow * oc:]).all()
    want = np.clip(conv_ref(x, w, b, 1, (2, 2), (1, 1), oh, ow, 3, 3), 0, 6)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    assert np.isnan(want).any() and not np.isnan(want).all()
    finite = ~np.isnan(want)
    absref = conv_ref(np.abs(np.nan_to_num(x)), np.abs(w), np.abs(b), 1, (2, 2), (1, 1), oh, ow, 3, 3)
    close(np.where(finite, y, 0), np.where(finite, want, 0), absref, 7 * 7 * 3)


def stem_model(rng):
    """A stem (3x3 stride 2, RGB -> 32, ActivationType.RELU6) then a 1x1 conv: both steps native."""
    from msv0.builder import Builder

    def w(*shape):
        return rng.standard_normal(shape).astype(np.float32) * 0.3

    b = Builder("stem")
    x = b.input("x", (1, 29, 31, 3))
    t = b.node("Conv2D", [x, b.const("w0", w(32, 3, 3, 3), format=7), b.const("b0", w(32))], kernelH=3, kernelW=3,
               strideH=2, strideW=2, dilateH=1, dilateW=1, group=1, padMode=PadMode.SAME_UPPER, activationType=ActivationType.RELU6)
    t = b.node("Conv2D", [t, b.const("w1", w(17, 1, 1, 32), format=7)], kernelH=1, kernelW=1, strideH=1, strideW=1,
               dilateH=1, dilateW=1, group=1, padMode=PadMode.CAFFE)
    b.output(t)
    return b.finish(), rng.standard_normal((1, 29, 31, 3)).astype(np.float32)


@pytest.mark.parametrize("threads", [1, 2])
def test_conv2d_direct_program_matches_single_calls(isa, rng, threads):
    model, x = stem_model(rng)
    assert_program_matches_single_calls(model, [x], threads, program_steps=2)


@pytest.mark.parametrize("cin", [3, 8])  # the direct (few-channel) and the im2col paths
def test_negative_stored_pads_are_model_errors(cin):
    x = np.zeros((1, 9, 9, cin), np.float32)
    with pytest.raises(msv0.ModelError, match="negative pads"):
        run_op("Conv2D", [x, Const(np.ones((4, 3, 3, cin), np.float32), format=7)], kernelH=3, kernelW=3,
               strideH=1, strideW=1, dilateH=1, dilateW=1, group=1, padMode=0, padUp=-2, padLeft=-1)
