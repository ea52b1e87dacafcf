"""_core.GemmS8 against a NumPy transcription of r1.1's int8 arithmetic (format-v0.md
§3.1), exact equality on every tier: odd m, n, k around each tier's tile and SIMD tails, zero
points at the int8 limits, all -128 operands, accumulators at and past int32's range, and
requantization over the whole int32 range of accumulators, multipliers and shifts. The
parameter tests take m >= 16, so AMX (gemm_isa's avx512vnni-amx; fewer rows go to vpdpbusd)
runs them too."""
import numpy as np
import pytest

import msv0
from msv0 import _core

from int8_ref import I32_MAX, I32_MIN, conv_multiplier, quantize_round_parameter, rdbpot, srdhm, wrap32

GUARD = 37  # elements on each side of the output, checked untouched


def ref_acc(a, b, a_zp, b_zp, bias):
    acc = (a.astype(np.int64) - a_zp) @ (b.astype(np.int64) - b_zp.astype(np.int64))
    return wrap32(acc + bias)


def ref_requant(acc, mult, left, right, c_zp, lo, hi):
    x = wrap32(acc << left.astype(np.int64))
    y = wrap32(rdbpot(srdhm(x, mult), right) + c_zp)
    return np.clip(y, lo, hi)


def run(gemm, a, n, dtype):
    m = a.shape[0]
    fill = -99 if dtype == np.int8 else 0x5EED
    buf = np.full(m * n + 2 * GUARD, fill, dtype)
    y = buf[GUARD:GUARD + m * n].reshape(m, n)
    gemm([a], [y])
    assert (buf[:GUARD] == fill).all() and (buf[GUARD + m * n:] == fill).all(), "wrote outside y"
    return y.astype(np.int64)


def check(rng, m, n, k, transposed, a_zp, b_zp, bias, requant=None, a=None, b=None, lo=-128, hi=127, c_zp=0):
    a = rng.integers(-128, 128, (m, k), dtype=np.int8) if a is None else a
    b = rng.integers(-128, 128, (k, n), dtype=np.int8) if b is None else b
    stored = np.ascontiguousarray(b.T) if transposed else b
    b_zp = np.asarray(b_zp, np.int32)
    gemm = _core.GemmS8(stored, transposed, a_zp, b_zp, bias, x_shape=a.shape)
    acc = ref_acc(a, b, a_zp, b_zp, 0 if bias is None else bias)
    np.testing.assert_array_equal(run(gemm, a, n, np.int32), acc)
    if requant is not None:
        gemm = _core.GemmS8(stored, transposed, a_zp, b_zp, bias, mult=requant[0], left=requant[1],
                            right=requant[2], c_zp=c_zp, lo=lo, hi=hi, x_shape=a.shape)
        want = ref_requant(acc, *(np.asarray(r, np.int64) for r in requant), c_zp, lo, hi)
        np.testing.assert_array_equal(run(gemm, a, n, np.int8), want)


def random_requant(rng, n):
    """Per-column parameters as a conv derives them from float scales, ratios from 1e-6 to 4."""
    s_in, s_out = 0.02, 0.05
    s_w = s_out / s_in * 10.0 ** rng.uniform(-6, 0.6, n)
    params = [quantize_round_parameter(conv_multiplier(s_in, s, s_out)) for s in s_w]
    return [np.array(col, np.int32) for col in zip(*params)]


# Around the tiles (rows 2, 4, 6, 8, 12; 16 columns per panel, two per AVX-512 tile; vector
# widths 4, 8, 16 int32 and 4..64 bytes of a row of A) with tails everywhere; AMX (from 16 rows,
# k 32 and n 33: 16- and 32-row tiles, 64 bytes of k per step, 256 per chunk, a lone last panel)
# and the shapes it leaves to vpdpbusd.
SIZES = [(1, 1, 1), (1, 16, 4), (2, 15, 3), (3, 17, 5), (5, 31, 63), (7, 33, 65), (8, 32, 64), (9, 47, 129),
         (12, 32, 16), (13, 49, 17), (25, 20, 255), (4, 100, 1), (6, 8, 7), (37, 64, 300), (1, 70, 1000),
         (15, 33, 64), (16, 16, 64), (17, 47, 65), (32, 32, 256), (33, 17, 257), (50, 81, 321), (40, 33, 32),
         (40, 33, 31), (97, 96, 16), (81, 33, 100)]


@pytest.mark.parametrize("m,n,k", SIZES, ids=str)
@pytest.mark.parametrize("transposed", [False, True])
def test_gemm_s8_sizes(gemm_isa, rng, m, n, k, transposed):
    b_zp = rng.integers(-128, 128, n)
    bias = rng.integers(-(2**20), 2**20, n, dtype=np.int32)
    check(rng, m, n, k, transposed, int(rng.integers(-128, 128)), b_zp, bias, random_requant(rng, n),
          c_zp=int(rng.integers(-128, 128)))


@pytest.mark.parametrize("m,n,k", SIZES, ids=str)
def test_gemm_s8_symmetric_weights(gemm_isa, rng, m, n, k):
    # Every b_zp 0: the kernel drops the b_zp · row-sum term.
    bias = rng.integers(-(2**20), 2**20, n, dtype=np.int32)
    check(rng, m, n, k, True, int(rng.integers(-128, 128)), np.zeros(n), bias, random_requant(rng, n),
          c_zp=int(rng.integers(-128, 128)))


@pytest.mark.parametrize("a_zp,b_zp", [(-128, -128), (127, 127), (-128, 127), (127, -128), (0, 0)])
def test_gemm_s8_zero_point_limits(gemm_isa, rng, a_zp, b_zp):
    m, n, k = 19, 35, 70
    check(rng, m, n, k, False, a_zp, np.full(n, b_zp), None, random_requant(rng, n), c_zp=a_zp)


def test_gemm_s8_all_minus_128(gemm_isa, rng):
    # (-128 - 127)^2 = 65025 per product: 33000 of them reach 2.146e9, just under 2^31 - 1; the
    # bias pushes some columns past it, where int32 wraps as in r1.1.
    m, n, k = 17, 21, 33000
    a = np.full((m, k), -128, np.int8)
    b = np.full((k, n), -128, np.int8)
    bias = np.linspace(-(2**31) + 1, 2**31 - 1, n).astype(np.int32)
    check(rng, m, n, k, True, 127, np.full(n, 127), bias, random_requant(rng, n), a=a, b=b)
    check(rng, m, n, k, False, -128, np.full(n, -128), None, random_requant(rng, n), a=a, b=b)


@pytest.mark.parametrize("m,n,k", [(0, 5, 3), (4, 0, 3), (0, 0, 0)], ids=str)
def test_gemm_s8_empty(gemm_isa, rng, m, n, k):
    check(rng, m, n, k, False, 1, np.zeros(n), None)


def test_gemm_s8_no_k(gemm_isa, rng):
    n = 19
    bias = rng.integers(I32_MIN, I32_MAX, n, dtype=np.int32, endpoint=True)
    check(rng, 5, n, 0, False, 3, np.zeros(n), bias, random_requant(rng, n))


@pytest.mark.parametrize("ratio", [1.0, 1 - 2**-40, 1 + 2**-23, 0.5, 0.49999999, 2**-31 * 1.5, 1e-9, 3.999, 2**30])
def test_gemm_s8_multiplier_extremes(gemm_isa, rng, ratio):
    m, n, k = 19, 33, 40
    params = quantize_round_parameter(ratio)
    requant = [np.full(n, p, np.int32) for p in params]
    bias = rng.integers(-(2**30), 2**30, n, dtype=np.int32)
    check(rng, m, n, k, False, int(rng.integers(-128, 128)), rng.integers(-128, 128, n), bias, requant,
          c_zp=int(rng.integers(-128, 128)))


def test_gemm_s8_requantize_full_range(gemm_isa, rng):
    # k = 1 with x = a_zp makes acc = bias: every int32 accumulator, any int32 multiplier but
    # INT32_MIN (QuantizeMultiplier never gives it; refused below) and every shift.
    m, n = 17, 4096
    bias = rng.integers(I32_MIN, I32_MAX, n, dtype=np.int32, endpoint=True)
    mult = rng.integers(I32_MIN + 1, I32_MAX, n, dtype=np.int32, endpoint=True)
    edges = np.array([I32_MIN, I32_MAX, 0, 1, -1, 2**30, -(2**30)], np.int32)
    bias[:49], mult[:49] = np.repeat(edges, 7), np.tile(np.maximum(edges, I32_MIN + 1), 7)
    left, right = rng.integers(0, 32, n, dtype=np.int32), rng.integers(0, 32, n, dtype=np.int32)
    left[:49] = right[:49] = 0
    left[49:80], right[80:111] = np.arange(31), np.arange(31)
    a = np.full((m, 1), 7, np.int8)
    b = rng.integers(-128, 128, (1, n), dtype=np.int8)
    check(rng, m, n, 1, False, 7, rng.integers(-128, 128, n), bias, (mult, left, right), a=a, b=b, c_zp=-5)


@pytest.mark.parametrize("lo,hi", [(-128, 127), (-5, -5), (0, 127), (-20, 60)])
def test_gemm_s8_clamp(gemm_isa, rng, lo, hi):
    m, n, k = 18, 40, 50
    check(rng, m, n, k, True, -3, rng.integers(-128, 128, n), None, random_requant(rng, n), lo=lo, hi=hi, c_zp=-1)


# Model shapes: a MobileNetV2 1x1 conv at 14x14 (m=196, k=384, n=64), a 3x3 conv's im2col
# (m=49, k=4608, n=512 scaled down to n=40) and a batch-1 classifier; B in two 1 MiB blocks
# (17 panels of 65 KB) under row tiles of 32 and 8 rows (AMX finishes each tile one behind).
@pytest.mark.parametrize("m,n,k", [(196, 64, 384), (49, 40, 4608), (1, 1000, 1280), (40, 260, 4100)], ids=str)
def test_gemm_s8_model_sizes(gemm_isa, rng, m, n, k):
    check(rng, m, n, k, True, -128, rng.integers(-10, 10, n), rng.integers(-(2**16), 2**16, n, dtype=np.int32),
          random_requant(rng, n), c_zp=3)


def test_gemm_s8_threads(gemm_isa, rng):
    # Split by rows (197 x 70) and by pairs of panels (1 x 1000, 3 x 100).
    pool = _core.ThreadPool(2)
    pool.bind()
    try:
        for m, n, k in [(1, 1000, 64), (3, 100, 50), (197, 70, 33)]:
            check(rng, m, n, k, True, 5, rng.integers(-128, 128, n), None, random_requant(rng, n))
    finally:
        _core.ThreadPool.unbind()


def test_gemm_s8_amx_switch():
    # /proc/cpuinfo, not msv0's own detection, says whether the AMX slot must be taken.
    if "avx512vnni" not in msv0.available_isas() or " amx_int8" not in open("/proc/cpuinfo").read():
        pytest.skip("no AMX-INT8 here")
    before = _core.amx_enabled()
    try:
        with msv0.isa_cap("avx512vnni"):
            _core.set_amx(True)
            assert _core.gemm_s8_tile() == (32, 32)
            _core.set_amx(False)
            assert _core.gemm_s8_tile() == (12, 32)
    finally:
        _core.set_amx(before)


def test_gemm_s8_rejects_bad_arguments(rng):
    b = np.zeros((4, 3), np.int8)
    zp = np.zeros(3, np.int32)
    with pytest.raises(ValueError, match="a_zp"):
        _core.GemmS8(b, False, 128, zp, x_shape=(2, 4))
    with pytest.raises(ValueError, match="b_zp"):
        _core.GemmS8(b, False, 0, np.array([0, 0, -129], np.int32), x_shape=(2, 4))
    with pytest.raises(ValueError, match="shifts"):
        _core.GemmS8(b, False, 0, zp, mult=zp, left=zp, right=np.array([0, 32, 0], np.int32), x_shape=(2, 4))
    with pytest.raises(ValueError, match="mult must be in"):
        _core.GemmS8(b, False, 0, zp, mult=zp + I32_MIN, left=zp, right=zp, x_shape=(2, 4))
    with pytest.raises(ValueError, match="mult, left and right"):
        _core.GemmS8(b, False, 0, zp, mult=zp, x_shape=(2, 4))
    with pytest.raises(ValueError, match="x_shape"):
        _core.GemmS8(b, False, 0, zp, x_shape=(2, 5))
    gemm = _core.GemmS8(b, False, 0, zp, x_shape=(2, 4))
    with pytest.raises(ValueError, match="dtype"):  # without requantization the output is int32
        gemm([np.zeros((2, 4), np.int8)], [np.zeros((2, 3), np.int8)])
    with pytest.raises(ValueError, match="shape"):
        gemm([np.zeros((3, 4), np.int8)], [np.zeros((2, 3), np.int32)])


@pytest.mark.parametrize("s_in, s_out", [(0.02, 0.05), (1e-3, 7.0), (0.5, 1e-4), (0.1, 0.1)])
def test_per_channel_requant_constants_match_reference(s_in, s_out):
    """msv0.quant.conv_requant (over arrays) against r1.1's QuantizeRoundParameter per channel:
    random scales over four decades, just below and at powers of two, and zero."""
    from msv0.quant import conv_requant

    class Node:
        label = "node 0 'conv'"

    rng = np.random.default_rng(3)
    s_w = np.concatenate([rng.uniform(1e-3, 1, 2000), 10 ** rng.uniform(-3, 1, 2000),
                          [0.0, 0.25, 0.5, 0.49999997, 0.99999994, 1.0, 2.0**-10]]).astype(np.float32)
    got = np.stack(conv_requant(Node(), s_in, s_w, s_out), axis=1)
    want = np.array([quantize_round_parameter(conv_multiplier(s_in, s, s_out)) for s in s_w])
    np.testing.assert_array_equal(got, want)


def check_dynamic(rng, m, n, k, zp, scales, with_bias, xq=None, b_zp=None):
    """_core.GemmS8Dynamic (a dynamically quantized FullConnection) against NumPy: exact int
    sums, then float32 products and sums, each rounded."""
    b = rng.integers(-128, 128, (n, k), dtype=np.int8)
    b_zp = np.zeros(n, np.int32) if b_zp is None else b_zp
    xq = rng.integers(0, 256, (m, k)).astype(np.float32) if xq is None else xq
    scale = (rng.uniform(1e-4, 1e-2, scales)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    gemm = _core.GemmS8Dynamic(b, b_zp, bias, [m, k], [], [scales], [m, n])
    buf = np.full(m * n + 2 * GUARD, np.float32(7.5))
    y = buf[GUARD:GUARD + m * n].reshape(m, n)
    gemm([xq, np.array(zp, np.float32), scale], [y])
    assert (buf[:GUARD] == 7.5).all() and (buf[GUARD + m * n:] == 7.5).all(), "wrote outside y"
    acc = (xq.astype(np.int64) - zp) @ (b.astype(np.int64) - b_zp[:, None]).T
    want = acc.astype(np.float32) * scale
    if with_bias:
        want = want + bias
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("m,n,k", SIZES, ids=str)
def test_gemm_s8_dynamic_sizes(gemm_isa, rng, m, n, k):
    b_zp = rng.integers(-128, 128, n, dtype=np.int32) if m % 2 else None
    check_dynamic(rng, m, n, k, int(rng.integers(0, 256)), n if n % 2 else 1, with_bias=k % 2 == 1, b_zp=b_zp)


@pytest.mark.parametrize("zp", [0, 255])
def test_gemm_s8_dynamic_limits(gemm_isa, rng, zp):
    """Codes and zero points at both ends of uint8, sums past 2^24 (where float32 steps would round)."""
    m, n, k = 19, 33, 1100
    xq = np.full((m, k), 255 - zp, np.float32)
    xq[::2, ::3] = zp
    check_dynamic(rng, m, n, k, zp, n, with_bias=True, xq=xq, b_zp=np.full(n, -128 if zp else 127, np.int32))


def test_gemm_s8_dynamic_rejects_bad_arguments(rng):
    b, zp = rng.integers(-128, 128, (8, 5), dtype=np.int8), np.zeros(8, np.int32)
    with pytest.raises(ValueError, match="scale_shape"):
        _core.GemmS8Dynamic(b, zp, None, [3, 5], [1], [3], [3, 8])
    with pytest.raises(ValueError, match="zp_shape"):
        _core.GemmS8Dynamic(b, zp, None, [3, 5], [2], [1], [3, 8])
    with pytest.raises(ValueError, match="x_shape"):
        _core.GemmS8Dynamic(b, zp, None, [3, 6], [1], [1], [3, 8])
    with pytest.raises(ValueError, match="bias"):
        _core.GemmS8Dynamic(b, zp, np.zeros(7, np.float32), [3, 5], [1], [1], [3, 8])
    with pytest.raises(ValueError, match="b_zp"):
        _core.GemmS8Dynamic(b, zp + 128, None, [3, 5], [1], [1], [3, 8])
