"""int8 Conv2D (_core.Conv2dS8 through the op) against tests/int8_ref.py's transcription of
format-v0.md §3.1, exact equality on every tier: channel counts around the SIMD widths and the
GEMM's 16-column panels, the 1x1 direct path and the im2col one (strides, dilations, asymmetric
pads, SAME_UPPER, windows past the input), groups, per-tensor and per-channel weights, zero
points at the int8 limits, multipliers from tiny to near 1, RELU/RELU6, two threads."""
import numpy as np
import pytest

import msv0
from msv0.fb.Format import Format
from msv0.fb.PadMode import PadMode

from int8_ref import out_scale, qp, ref_conv2d_acc, ref_conv2d_s8
from oprun import Const, run_op


def run_conv(x, w, bias, q_in, q_w, q_out, group=1, stride=(1, 1), dilation=(1, 1), pads=(0, 0, 0, 0),
             same_upper=False, act=0, threads=1):
    ins = [x, Const(w, format=Format.KHWC, quant=q_w)] + ([Const(bias)] if bias is not None else [])
    (y,) = run_op("Conv2D", ins, num_threads=threads, out_dtypes=[np.int8], in_quant=[q_in], out_quant=[q_out],
                  group=group, kernelH=w.shape[1], kernelW=w.shape[2], strideH=stride[0], strideW=stride[1],
                  dilateH=dilation[0], dilateW=dilation[1],
                  padMode=PadMode.SAME_UPPER if same_upper else PadMode.CAFFE, padUp=pads[0], padDown=pads[1],
                  padLeft=pads[2], padRight=pads[3], activationType=act)
    return y


def check(rng, x_shape, oc, k, group=1, per_channel=True, zp=None, ratio=1.0, multiplier=None, threads=1, bias=True,
          act=0, values=(-128, 128), **geo):
    """A random conv of x_shape NHWC to oc channels with a k=(kh, kw) kernel; zp = (in, w, out)
    zero points (random, and per channel when per_channel, when None); the output scale from
    out_scale, or s_in·s_w/multiplier; x and w drawn from [values)."""
    cg = x_shape[3] // group
    x = rng.integers(*values, x_shape, dtype=np.int8)
    w = rng.integers(*values, (oc, *k, cg), dtype=np.int8)
    b = rng.integers(-(2**14), 2**14, oc, dtype=np.int32) if bias else None
    zp_in, zp_w, zp_out = zp if zp is not None else (int(v) for v in rng.integers(-128, 128, 3))
    s_in = 0.03
    s_w = (0.002 * 10 ** rng.uniform(-0.5, 0.5, oc) if per_channel else np.full(oc, 0.002)).astype(np.float32)
    zp_ws = rng.integers(-128, 128, oc) if per_channel and zp is None else np.full(oc, zp_w)
    q_w = ([dict(scale=float(s), zeroPoint=int(z), inited=True, numBits=8) for s, z in zip(s_w, zp_ws)]
           if per_channel else qp(s_w[0], zp_ws[0]))
    s_out = (float(np.float32(s_in) * s_w[0]) / multiplier if multiplier else
             out_scale(ref_conv2d_acc(x, w, b, zp_in, zp_ws, group=group, **geo), s_in, s_w, ratio))
    y = run_conv(x, w, b, qp(s_in, zp_in), q_w, qp(s_out, zp_out), group=group, threads=threads, act=act, **geo)
    want = ref_conv2d_s8(x, w, b, s_in, zp_in, s_w, zp_ws, s_out, zp_out, act, group=group, **geo)
    assert y.dtype == np.int8 and y.shape == want.shape
    np.testing.assert_array_equal(y, want)
    return y


CASES = {
    "1x1": dict(x_shape=(1, 5, 7, 17), oc=33, k=(1, 1)),
    "1x1_c1": dict(x_shape=(2, 3, 3, 1), oc=1, k=(1, 1)),
    "1x1_stride2": dict(x_shape=(1, 7, 6, 64 + 3), oc=65, k=(1, 1), stride=(2, 2)),
    "1x1_padded": dict(x_shape=(1, 3, 4, 3), oc=16, k=(1, 1), pads=(1, 0, 0, 2)),
    "3x3_pad1": dict(x_shape=(2, 6, 5, 3), oc=17, k=(3, 3), pads=(1, 1, 1, 1)),
    "3x3_s2_d2": dict(x_shape=(1, 9, 8, 67), oc=35, k=(3, 3), stride=(2, 1), dilation=(2, 3), pads=(0, 2, 1, 0)),
    "5x3_k_chunks": dict(x_shape=(1, 6, 7, 40), oc=64, k=(5, 3), pads=(2, 1, 0, 1)),  # K = 600 > 256
    "7x7_s2_stem": dict(x_shape=(1, 19, 17, 3), oc=24, k=(7, 7), stride=(2, 2), pads=(3, 3, 3, 3)),  # K = 147
    "same_upper": dict(x_shape=(1, 7, 9, 5), oc=1, k=(5, 5), stride=(2, 3), same_upper=True),
    "window_past_x": dict(x_shape=(1, 2, 2, 3), oc=7, k=(5, 4)),  # out <= 0 -> 1
    "group3": dict(x_shape=(1, 5, 6, 9), oc=6, k=(3, 2), group=3, pads=(1, 1, 0, 1)),
    "group2_1x1": dict(x_shape=(1, 4, 4, 34), oc=66, k=(1, 1), group=2),
    "depthwise_shaped": dict(x_shape=(1, 5, 5, 19), oc=19, k=(3, 3), group=19, pads=(1, 1, 1, 1)),
    "no_bias": dict(x_shape=(1, 4, 3, 8), oc=24, k=(2, 2), bias=False),
}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_conv2d_s8_shapes(gemm_isa, rng, case):
    check(rng, **CASES[case])


# Convs whose inside pixels the AMX slot reads in place (symmetric weights, windows in whole
# 64-byte steps, 16 or more inside pixels a row): borders of one and two columns and rows, no
# border, strides, dilation (a step per tap), 2x2 over 32 channels (a step per window row), tiles
# ending past 16 and 32 inside pixels, batches, odd output channels; 1x1 convs on x's rows.
IN_PLACE = {
    "3x3_pad1": dict(x_shape=(1, 20, 19, 64), oc=70, k=(3, 3), pads=(1, 1, 1, 1)),
    "3x3_s2_batch2": dict(x_shape=(2, 21, 40, 64), oc=33, k=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
    "3x3_d2": dict(x_shape=(1, 12, 40, 128), oc=20, k=(3, 3), dilation=(2, 2), pads=(2, 2, 2, 2)),
    "2x2_c32": dict(x_shape=(1, 9, 35, 32), oc=16, k=(2, 2), pads=(0, 1, 1, 0)),
    "5x5_pad2": dict(x_shape=(1, 10, 41, 64), oc=48, k=(5, 5), pads=(2, 2, 2, 2)),
    "no_border": dict(x_shape=(1, 6, 50, 64), oc=16, k=(3, 3)),
    "wide": dict(x_shape=(1, 4, 70, 64), oc=32, k=(3, 3), pads=(1, 1, 1, 1)),
    "top_pad_only": dict(x_shape=(1, 7, 33, 64), oc=17, k=(3, 3), pads=(2, 0, 0, 3)),
    "1x1_rows": dict(x_shape=(2, 5, 7, 64), oc=40, k=(1, 1)),  # x's rows themselves, one run
    "1x1_runs": dict(x_shape=(1, 30, 17, 128), oc=16, k=(1, 1)),  # two runs of 255 pixels
}


@pytest.mark.parametrize("case", IN_PLACE, ids=str)
@pytest.mark.parametrize("threads", [1, 2])
def test_conv2d_s8_in_place(gemm_isa, rng, case, threads):
    c = IN_PLACE[case]
    zp_in = int(rng.choice([-128, 127, 5]))
    check(rng, **c, zp=(zp_in, 0, int(rng.integers(-128, 128))), threads=threads, act=int(rng.integers(0, 3)))
    # The plan is taken with the AMX slot only, and never for asymmetric weights.
    geo = dict(group=1, sh=c.get("stride", (1, 1))[0], sw=c.get("stride", (1, 1))[1], dh=c.get("dilation", (1, 1))[0],
               dw=c.get("dilation", (1, 1))[1], pt=c.get("pads", (0,) * 4)[0], pl=c.get("pads", (0,) * 4)[2])
    n, h, w, ch = c["x_shape"]
    (kh, kw), oc = c["k"], c["oc"]
    oh = (h + sum(c.get("pads", (0,) * 4)[:2]) - (kh - 1) * geo["dh"] - 1) // geo["sh"] + 1
    ow = (w + sum(c.get("pads", (0,) * 4)[2:]) - (kw - 1) * geo["dw"] - 1) // geo["sw"] + 1
    z = np.zeros(oc, np.int32)
    args = dict(weight=np.zeros((oc, kh, kw, ch), np.int8), bias=None, mult=z + 2**30, left=z, right=z, x_zp=0,
                y_zp=0, lo=-128, hi=127, x_shape=(n, h, w, ch), y_shape=(n, oh, ow, oc), **geo)
    amx = gemm_isa.endswith("amx")
    assert (msv0._core.Conv2dS8(w_zp=z, **args).name == "conv2d_s8_in_place") == amx
    assert msv0._core.Conv2dS8(w_zp=z + 1, **args).name == "conv2d_s8"


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("zp", [(-128, -128, -128), (127, 127, 127), (-128, 127, 0), (127, -128, -128),
                                (-7, 0, 5)], ids=str)
def test_conv2d_s8_zero_point_limits(gemm_isa, rng, per_channel, zp):
    check(rng, (1, 5, 4, 33), 18, (3, 3), per_channel=per_channel, zp=zp, pads=(1, 1, 1, 1))


@pytest.mark.parametrize("ratio", [1e-4, 0.1, 1.0, 10.0], ids=str)
def test_conv2d_s8_scale_ratios(gemm_isa, rng, ratio):
    check(rng, (1, 4, 5, 17), 20, (3, 3), ratio=ratio, stride=(2, 2), pads=(0, 1, 1, 1))


@pytest.mark.parametrize("multiplier", [1e-9, 0.49999997, 0.5, 0.99999994, 1.0, 1.5], ids=str)
def test_conv2d_s8_multipliers(gemm_isa, rng, multiplier):
    # Per-tensor weights: one M for every channel, at and around the powers of two where the
    # shifts change; small inputs so that M near 1 does not saturate everything.
    check(rng, (1, 3, 4, 5), 18, (2, 2), per_channel=False, multiplier=multiplier, zp=(1, -1, 3), bias=False,
          values=(-3, 4))


@pytest.mark.parametrize("act", [1, 3], ids=["relu", "relu6"])
@pytest.mark.parametrize("zp_out", [-128, -20, 100])
def test_conv2d_s8_activation(gemm_isa, rng, act, zp_out):
    y = check(rng, (1, 5, 5, 16), 17, (3, 3), zp=(3, -2, zp_out), act=act, pads=(1, 1, 1, 1), ratio=0.2)
    assert y.min() >= zp_out


@pytest.mark.parametrize("case", ["1x1", "3x3_pad1", "group3", "3x3_s2_d2"])
def test_conv2d_s8_two_threads(rng, case):
    check(rng, **{**CASES[case], "threads": 2})


def test_conv2d_s8_big_layer_two_threads(rng):
    # Enough pixels for several tiles per thread, and few pixels with many channels (threads
    # split the output channels).
    check(rng, (1, 23, 29, 24), 40, (3, 3), pads=(1, 1, 1, 1), threads=2)
    check(rng, (1, 3, 3, 70), 97, (3, 3), pads=(1, 1, 1, 1), threads=2)


def test_conv2d_s8_native_program(rng):
    from msv0.builder import Builder
    from oprun import assert_program_matches_single_calls

    b = Builder("conv_s8_chain")
    x = b.input("x", (1, 6, 6, 8), np.int8, quant=qp(0.05, 3))
    w1 = rng.integers(-128, 128, (16, 3, 3, 8), dtype=np.int8)
    w2 = rng.integers(-128, 128, (5, 1, 1, 16), dtype=np.int8)
    h = b.tensor("h", np.int8, quant=qp(2.0, -4))
    y = b.tensor("y", np.int8, quant=qp(3.0, 7))
    b.node("Conv2D", [x, b.const("w1", w1, format=Format.KHWC, quant=qp(0.01, 1))], outputs=[h], name="c1",
           group=1, kernelH=3, kernelW=3, strideH=1, strideW=1, dilateH=1, dilateW=1, padMode=PadMode.CAFFE,
           padUp=1, padDown=1, padLeft=1, padRight=1, activationType=1)
    b.node("Conv2D", [h, b.const("w2", w2, format=Format.KHWC, quant=qp(0.02, -1))], outputs=[y], name="c2",
           group=1, kernelH=1, kernelW=1, strideH=1, strideW=1, dilateH=1, dilateW=1)
    b.output(y)
    assert_program_matches_single_calls(b.finish(), [rng.integers(-128, 128, (1, 6, 6, 8), dtype=np.int8)], 2,
                                        program_steps=2)


def bad(rng, match, w_quant=None, out_quant="default", in_quant="default", bias=None, **attrs):
    x = rng.integers(-128, 128, (1, 4, 4, 6), dtype=np.int8)
    w = rng.integers(-128, 128, (4, 3, 3, 6), dtype=np.int8)
    ins = [x, Const(w, format=Format.KHWC, quant=qp(0.01, 0) if w_quant is None else w_quant)]
    ins += [Const(bias)] if bias is not None else []
    base = dict(group=1, kernelH=3, kernelW=3, strideH=1, strideW=1, dilateH=1, dilateW=1)
    with pytest.raises(msv0.ModelError, match=match):
        run_op("Conv2D", ins, out_dtypes=[np.int8], in_quant=[qp(0.1, 0) if in_quant == "default" else in_quant],
               out_quant=[qp(0.1, 0) if out_quant == "default" else out_quant], **{**base, **attrs})


def test_conv2d_s8_errors(rng):
    node = "conv2d_node"
    two = qp(0.01, 0) * 2
    bad(rng, f"{node}.*2 quantParams for 4 output channels", w_quant=two)
    bad(rng, f"{node}.*output 0 needs exactly one quantParam, has 0", out_quant=None)
    bad(rng, f"{node}.*exactly one quantParam, has 2", in_quant=two)
    bad(rng, f"{node}.*quant scale 0", in_quant=qp(0.0, 0))
    bad(rng, f"{node}.*bias.*must be int32", bias=np.zeros(4, np.float32))
    bad(rng, f"{node}.*bias has 3 values", bias=np.zeros(3, np.int32))
    bad(rng, f"{node}.*group 4 does not fit", group=4)
    bad(rng, f"{node}.*strideH must be >= 1", strideH=0)
    bad(rng, f"{node}.*kernelW=5", kernelW=5)
    # A scale ratio r1.1 cannot shift into range.
    bad(rng, f"{node}.*beyond", out_quant=qp(1e-30, 0))


def test_conv2d_s8_kernel_arg_checks():
    w = np.zeros((4, 3, 3, 2), np.int8)
    z = np.zeros(4, np.int32)
    ok = dict(weight=w, w_zp=z, bias=None, mult=z, left=z, right=z, group=1, sh=1, sw=1, dh=1, dw=1, pt=1, pl=1,
              x_zp=0, y_zp=0, lo=-128, hi=127, x_shape=(1, 5, 5, 2), y_shape=(1, 5, 5, 4))
    assert msv0._core.Conv2dS8(**ok).name == "conv2d_s8"
    for change in [dict(w_zp=np.zeros(3, np.int32)), dict(bias=np.zeros(4, np.float32)), dict(left=z + 32),
                   dict(w_zp=z + 128), dict(x_zp=-129), dict(lo=5, hi=4), dict(group=3), dict(sh=0), dict(pt=-1),
                   dict(x_shape=(1, 5, 5, 3)), dict(y_shape=(2, 5, 5, 4)), dict(weight=np.zeros((4, 3, 3), np.int8)),
                   dict(weight=w.astype(np.int16))]:
        with pytest.raises(ValueError):
            msv0._core.Conv2dS8(**{**ok, **change})
    conv = msv0._core.Conv2dS8(**ok)
    with pytest.raises(ValueError):  # the operands are checked on every Python call
        conv([np.zeros((1, 5, 5, 3), np.int8)], [np.zeros((1, 5, 5, 4), np.int8)])


@pytest.mark.parametrize("case", ["1x1", "1x1_stride2", "3x3_pad1", "3x3_s2_d2", "5x3_k_chunks", "7x7_s2_stem",
                                  "group3", "no_bias"])
def test_conv2d_s8_dynamic(gemm_isa, rng, case):
    """_core.Conv2dS8Dynamic (a dynamically quantized Conv2D) against the int64 accumulators:
    uint8 codes minus a run-time zero point, padding taps at it, weights with zero points, an int32
    bias given at run time or none, then float32 products by the scales and sums with a float bias."""
    c = dict(CASES[case])
    x_shape, oc, k, group = c.pop("x_shape"), c.pop("oc"), c.pop("k"), c.pop("group", 1)
    with_bias = c.pop("bias", True)
    cg = x_shape[3] // group
    xq = rng.integers(0, 256, x_shape).astype(np.float32)
    zp = int(rng.integers(0, 256))
    w = rng.integers(-128, 128, (oc, *k, cg), dtype=np.int8)
    w_zp = rng.integers(-128, 128, oc, dtype=np.int32)
    run_bias = rng.integers(-(2**20), 2**20, oc, dtype=np.int32) if with_bias else None
    scale = rng.uniform(1e-4, 1e-2, oc if with_bias else 1).astype(np.float32)
    bias = rng.standard_normal(oc).astype(np.float32) if with_bias else None
    acc = ref_conv2d_acc(xq.astype(np.int64), w, run_bias, zp, w_zp, group=group, **c)
    pads, (sh, sw), (dh, dw) = c.get("pads", (0, 0, 0, 0)), c.get("stride", (1, 1)), c.get("dilation", (1, 1))
    conv = msv0._core.Conv2dS8Dynamic(w, w_zp, bias, group, sh, sw, dh, dw, pads[0], pads[2], x_shape, [], [scale.size],
                                      None if run_bias is None else [1, 1, 1, oc], acc.shape)
    y = np.full(acc.shape, np.float32(7.5))
    ins = [xq, np.array(zp, np.float32), scale] + ([run_bias.reshape(1, 1, 1, oc)] if with_bias else [])
    conv(ins, [y])
    want = acc.astype(np.float32) * scale
    if with_bias:
        want = want + bias
    np.testing.assert_array_equal(y, want)
