"""int8 FullConnection and MatMul against tests/int8_ref.py's transcription of format-v0.md
§3.1, exact equality on every tier: odd N and K around the GEMM's panels and SIMD widths,
per-tensor and per-channel FC weights, useAxis, zero points at the int8 limits, multipliers from
tiny to near 1, RELU/RELU6 (FC), transposes, batches, a run-time B (MatMul), two threads."""
import numpy as np
import pytest

import msv0

from int8_ref import out_scale, qp, ref_fc_s8, ref_matmul_s8
from oprun import Const, run_op


def per_channel_quant(scales, zps):
    return [dict(scale=float(s), zeroPoint=int(z), inited=True, numBits=8) for s, z in zip(scales, zps)]


def check_fc(rng, x_shape, n, k, per_channel=True, zp=None, ratio=1.0, act=0, bias=True, threads=1, **attrs):
    x = rng.integers(-128, 128, x_shape, dtype=np.int8)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    b = rng.integers(-(2**14), 2**14, n, dtype=np.int32) if bias else None
    zp_in, zp_w, zp_out = zp if zp is not None else (int(v) for v in rng.integers(-128, 128, 3))
    s_in = 0.04
    s_w = (0.003 * 10 ** rng.uniform(-0.5, 0.5, n) if per_channel else np.full(n, 0.003)).astype(np.float32)
    zp_ws = rng.integers(-128, 128, n) if per_channel and zp is None else np.full(n, zp_w)
    q_w = per_channel_quant(s_w, zp_ws) if per_channel else qp(s_w[0], zp_ws[0])
    acc = (x.reshape(-1, k).astype(np.int64) - zp_in) @ (w.astype(np.int64) - zp_ws[:, None]).T
    s_out = out_scale(acc + (0 if b is None else b), s_in, s_w, ratio)
    ins = [x, Const(w, quant=q_w)] + ([Const(b)] if bias else [])
    (y,) = run_op("FullConnection", ins, num_threads=threads, out_dtypes=[np.int8], in_quant=[qp(s_in, zp_in)],
                  out_quant=[qp(s_out, zp_out)], activationType=act, hasBias=bias, **attrs)
    want = ref_fc_s8(x.reshape(-1, k), w, b, s_in, zp_in, s_w, zp_ws, s_out, zp_out, act)
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y.reshape(-1, n), want)
    return y


@pytest.mark.parametrize("x_shape,n,k", [((1, 1), 1, 1), ((4, 7), 3, 7), ((2, 3, 5), 17, 15), ((1, 17), 33, 17),
                                         ((13, 64 + 5), 64 + 7, 69), ((1, 300), 16, 300), ((5, 2, 2, 3), 20, 12),
                                         ((2, 23, 129), 47, 129)],
                         ids=str)
@pytest.mark.parametrize("per_channel", [False, True])
def test_fc_s8_shapes(gemm_isa, rng, x_shape, n, k, per_channel):
    check_fc(rng, x_shape, n, k, per_channel=per_channel)


def test_fc_s8_use_axis(gemm_isa, rng):
    y = check_fc(rng, (2, 3, 4, 5), 7, 20, useAxis=True, axis=2)
    assert y.shape == (2, 3, 7)


@pytest.mark.parametrize("zp", [(-128, -128, -128), (127, 127, 127), (-128, 127, 5), (127, -128, -128)], ids=str)
def test_fc_s8_zero_point_limits(gemm_isa, rng, zp):
    check_fc(rng, (6, 40), 19, 40, zp=zp)
    check_fc(rng, (6, 40), 19, 40, per_channel=False, zp=zp)


@pytest.mark.parametrize("ratio", [1e-4, 0.1, 1.0, 10.0], ids=str)
def test_fc_s8_scale_ratios(gemm_isa, rng, ratio):
    check_fc(rng, (5, 33), 18, 33, ratio=ratio)


@pytest.mark.parametrize("act", [1, 3], ids=["relu", "relu6"])
def test_fc_s8_activation(gemm_isa, rng, act):
    y = check_fc(rng, (7, 24), 35, 24, zp=(4, -3, -30), act=act, ratio=0.2, bias=False)
    assert y.min() >= -30


def test_fc_s8_two_threads(rng):
    check_fc(rng, (70, 50), 40, 50, threads=2)
    check_fc(rng, (1, 500), 100, 500, threads=2)


def test_fc_s8_errors(rng):
    x = rng.integers(-128, 128, (3, 8), dtype=np.int8)
    w = rng.integers(-128, 128, (5, 8), dtype=np.int8)

    def bad(match, w_quant=qp(0.01, 0), out_quant=qp(0.2, 0), extra=()):
        with pytest.raises(msv0.ModelError, match="fullconnection_node.*" + match):
            run_op("FullConnection", [x, Const(w, quant=w_quant), *extra], out_dtypes=[np.int8],
                   in_quant=[qp(0.1, 0)], out_quant=[out_quant])

    bad("3 quantParams for 5 output channels", w_quant=qp(0.01, 0) * 3)
    bad("output 0 needs exactly one quantParam, has 0", out_quant=None)
    bad("bias has 4 values", extra=[Const(np.zeros(4, np.int32))])
    with pytest.raises(msv0.ModelError, match="fullconnection_node.*must be int8"):
        run_op("FullConnection", [x, Const(w.astype(np.float32))], out_dtypes=[np.int8], in_quant=[qp(0.1, 0)],
               out_quant=[qp(0.2, 0)])


def run_matmul(a, b, bias, q_a, q_b, q_out, const_b=True, threads=1, **attrs):
    ins = [a, Const(b, quant=q_b) if const_b else b] + ([Const(bias)] if bias is not None else [])
    (y,) = run_op("MatMul", ins, num_threads=threads, out_dtypes=[np.int8],
                  in_quant=[q_a, None if const_b else q_b], out_quant=[q_out], **attrs)
    return y


def check_mm(rng, batch, m, k, n, ta=False, tb=False, const_b=True, zp=None, ratio=1.0, bias=True, threads=1):
    a = rng.integers(-128, 128, batch + ((k, m) if ta else (m, k)), dtype=np.int8)
    b = rng.integers(-128, 128, batch + ((n, k) if tb else (k, n)), dtype=np.int8)
    bias_v = rng.integers(-(2**14), 2**14, n, dtype=np.int32) if bias else None
    zp_a, zp_b, zp_out = zp if zp is not None else (int(v) for v in rng.integers(-128, 128, 3))
    s_a, s_b = 0.07, 0.013
    av = np.swapaxes(a, -1, -2) if ta else a
    bv = np.swapaxes(b, -1, -2) if tb else b
    s_out = out_scale((av.astype(np.int64) - zp_a) @ (bv.astype(np.int64) - zp_b), s_a, s_b, ratio)
    y = run_matmul(a, b, bias_v, qp(s_a, zp_a), qp(s_b, zp_b), qp(s_out, zp_out), const_b=const_b, threads=threads,
                   transposeA=ta, transposeB=tb)
    want = ref_matmul_s8(av, bv, bias_v, s_a, zp_a, s_b, zp_b, s_out, zp_out)
    assert y.dtype == np.int8 and y.shape == want.shape
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("batch,m,k,n", [((), 1, 1, 1), ((), 5, 7, 3), ((), 13, 69, 33), ((2,), 3, 17, 16),
                                         ((2, 3), 4, 5, 17), ((), 37, 130, 19)], ids=str)
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)], ids=str)
def test_matmul_s8_shapes(gemm_isa, rng, batch, m, k, n, ta, tb):
    check_mm(rng, batch, m, k, n, ta, tb)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)], ids=str)
def test_matmul_s8_runtime_b(gemm_isa, rng, ta, tb):
    check_mm(rng, (2,), 6, 19, 21, ta, tb, const_b=False)


@pytest.mark.parametrize("zp", [(-128, -128, -128), (127, 127, 127), (-128, 127, 0)], ids=str)
@pytest.mark.parametrize("ratio", [1e-4, 1.0, 10.0], ids=str)
def test_matmul_s8_params(gemm_isa, rng, zp, ratio):
    check_mm(rng, (), 9, 40, 18, zp=zp, ratio=ratio, bias=False)


def test_matmul_s8_multiplier_in_float(rng):
    # For these scales (s_a·s_b)/s_out in float gives a multiplier 63 units above the conv rule's
    # (float product, double divide); the reference forms it in float, as r1.1's MatMul does.
    s_a, s_b, s_out = 0.034313488579691624, 0.7102170416433428, 0.002706941299741837
    a = rng.integers(-3, 4, (4, 9), dtype=np.int8)
    b = rng.integers(-3, 4, (9, 5), dtype=np.int8)
    y = run_matmul(a, b, None, qp(s_a, 0), qp(s_b, 0), qp(s_out, 0))
    np.testing.assert_array_equal(y, ref_matmul_s8(a, b, None, s_a, 0, s_b, 0, s_out, 0))


def test_matmul_s8_two_threads(rng):
    check_mm(rng, (), 80, 50, 40, threads=2)
    check_mm(rng, (2,), 3, 30, 70, ta=True, threads=2)


def test_matmul_s8_errors(rng):
    a = rng.integers(-128, 128, (3, 8), dtype=np.int8)
    b = rng.integers(-128, 128, (8, 5), dtype=np.int8)
    q = qp(0.1, 0)
    with pytest.raises(msv0.ModelError, match="matmul_node.*output 0 needs exactly one quantParam"):
        run_matmul(a, b, None, q, q, None)
    with pytest.raises(msv0.ModelError, match="matmul_node.*B.*needs exactly one quantParam, has 0"):
        run_matmul(a, b, None, q, None, q)
    with pytest.raises(msv0.ModelError, match="matmul_node.*rank >= 2"):
        run_matmul(a[0], b, None, q, q, q)
    with pytest.raises(msv0.ModelError, match="matmul_node.*cannot run A of shape"):
        run_matmul(a.reshape(3, 8, 1, 1), b, None, q, q, q)
    with pytest.raises(msv0.ModelError, match="matmul_node.*inner dims differ"):
        run_matmul(a, b[:7], None, q, q, q)
    with pytest.raises(msv0.ModelError, match="matmul_node.*batch dims"):
        run_matmul(a.reshape(1, 3, 8), b, None, q, q, q)


def test_gemm_s8_y_shape(rng):
    # GemmS8 with y_shape: x of any shape holding its rows of k (FullConnection's flattening).
    b = rng.integers(-128, 128, (6, 10), dtype=np.int8)
    zp = np.zeros(6, np.int32)
    g = msv0._core.GemmS8(b, True, 0, zp, x_shape=(2, 3, 5, 2), y_shape=(3, 2, 6))
    x = rng.integers(-128, 128, (2, 3, 5, 2), dtype=np.int8)
    y = np.empty((3, 2, 6), np.int32)
    g([x], [y])
    np.testing.assert_array_equal(y.reshape(6, 6), x.reshape(6, 10).astype(np.int64) @ b.T.astype(np.int64))
    for x_shape, y_shape in [((2, 3, 5, 2), (3, 2, 5)), ((2, 3, 5, 2), (4, 6)), ((7,), (1, 6)), ((6, 10), ())]:
        with pytest.raises(ValueError):
            msv0._core.GemmS8(b, True, 0, zp, x_shape=x_shape, y_shape=y_shape)
