import numpy as np
import pytest

import msv0
from msv0 import _core
from msv0.builder import Builder
from msv0.fb.TypeId import TypeId
from oprun import run_op


def test_cast_pairs(rng):
    x = np.array([-2.7, -0.5, 0.0, 0.5, 1.99, 1e3], np.float32)
    (y,) = run_op("Cast", [x], out_dtypes=[np.int32], srcT=TypeId.kNumberTypeFloat32, dstT=TypeId.kNumberTypeInt32)
    np.testing.assert_array_equal(y, [-2, 0, 0, 0, 1, 1000])  # truncation toward zero
    (y,) = run_op("Cast", [x], out_dtypes=[np.int64], srcT=0, dstT=TypeId.kNumberTypeInt64)
    assert y.dtype == np.int64 and y.tolist() == [-2, 0, 0, 0, 1, 1000]
    (y,) = run_op("Cast", [x], out_dtypes=[np.float16], dstT=TypeId.kNumberTypeFloat16)
    np.testing.assert_array_equal(y, x.astype(np.float16))
    for src in [np.bool_, np.uint8, np.int32, np.float16]:
        v = rng.integers(0, 2 if src == np.bool_ else 200, 7).astype(src)
        (y,) = run_op("Cast", [v], dstT=TypeId.kNumberTypeFloat32)
        np.testing.assert_array_equal(y, v.astype(np.float32))
    v = rng.integers(-9, 9, 5).astype(np.int32)
    (y,) = run_op("Cast", [v], out_dtypes=[np.int64], dstT=TypeId.kNumberTypeInt64)
    np.testing.assert_array_equal(y, v)
    (y,) = run_op("Cast", [v], out_dtypes=[np.int32], dstT=TypeId.kNumberTypeInt32)
    np.testing.assert_array_equal(y, v)


@pytest.mark.parametrize("src", [np.bool_, np.uint8, np.int32])
@pytest.mark.parametrize("size", [1, 15, 16, 67])  # a tail only, whole vectors of every width, both
def test_native_cast_to_float32(isa, rng, src, size):
    """The C++ cast (csrc/kernels/cast_f32.cc) on every ISA tier against NumPy's astype; int32
    beyond 2^24 rounds to nearest even in both."""
    if src == np.int32:
        v = rng.integers(-(2**31), 2**31, size, dtype=np.int64).astype(np.int32)
    else:
        v = rng.integers(0, 2 if src == np.bool_ else 256, size).astype(src)
    y = np.full(size, np.nan, np.float32)
    _core.CastF32(np.dtype(src).char, (size,))([v], [y])
    np.testing.assert_array_equal(y, v.astype(np.float32))
    b = Builder("cast")
    b.output(b.node("Cast", [b.input("x", (size,), src)], out_dtype=np.float32, dstT=TypeId.kNumberTypeFloat32))
    s = msv0.Session(b.finish())
    assert s.plan_info.steps[0][1] is not None  # a native Program step
    np.testing.assert_array_equal(s.run([v])[s.outputs[0].name], v.astype(np.float32))


@pytest.mark.parametrize("size", [1, 15, 16, 67])
def test_native_cast_float32_to_int32(isa, rng, size):
    """Truncation toward zero; outside int32 (C leaves it undefined) saturating, NaN 0, on every
    tier and in a Session (a native step)."""
    special = np.array([np.nan, np.inf, -np.inf, 2.0**31, -(2.0**31), 3e9, -3e9, 2147483520.0, -2.5, 2.5, -0.7],
                       np.float32)
    v = np.concatenate([special, (rng.standard_normal(size) * 1e4).astype(np.float32)])[:size]
    want = np.where(np.isnan(v), 0, np.clip(np.trunc(v.astype(np.float64)), -(2**31), 2**31 - 1)).astype(np.int32)
    y = np.full(size, -7, np.int32)
    _core.CastF32("f", (size,))([v], [y])
    np.testing.assert_array_equal(y, want)
    b = Builder("cast")
    b.output(b.node("Cast", [b.input("x", (size,), np.float32)], out_dtype=np.int32, dstT=TypeId.kNumberTypeInt32))
    s = msv0.Session(b.finish())
    assert s.plan_info.steps[0][1] is not None  # a native Program step
    np.testing.assert_array_equal(s.run([v])[s.outputs[0].name], want)


def test_cast_float32_to_int64_saturates():
    """float32 -> int64 follows the int32 kernel's rule: truncation, saturation, NaN 0."""
    v = np.array([np.nan, np.inf, -np.inf, 2.0**63, -(2.0**63), 1e19, -1e19, 2.0**62, -2.5, 2.5], np.float32)
    (y,) = run_op("Cast", [v], out_dtypes=[np.int64], dstT=TypeId.kNumberTypeInt64)
    i64 = np.iinfo(np.int64)
    assert y.tolist() == [0, i64.max, i64.min, i64.max, i64.min, i64.max, i64.min, 2**62, -2, 2]


@pytest.mark.parametrize("src,dst,srcT", [(np.float32, TypeId.kNumberTypeUInt8, 0), (np.int64, TypeId.kNumberTypeFloat32, 0),
                                          (np.float32, TypeId.kNumberTypeInt32, TypeId.kNumberTypeInt32), (np.int8, TypeId.kNumberTypeFloat32, 0),
                                          (np.float32, TypeId.kObjectTypeString, 0), (np.float32, 99, 0)])
def test_cast_bad(src, dst, srcT):
    with pytest.raises(msv0.ModelError):
        run_op("Cast", [np.zeros(3, src)], out_dtypes=[np.float32], srcT=srcT, dstT=dst)


def q(scale, zp, inited=True):
    return [dict(scale=scale, zeroPoint=zp, inited=inited)]


def qcast(x, src, dst, out_dtype, in_q=None, out_q=None):
    b = msv0.builder.Builder("q")
    i = b.input("x", x.shape, x.dtype, quant=in_q)
    o = b.tensor("y", out_dtype, quant=out_q)
    b.node("QuantDTypeCast", [i], outputs=[o], srcT=src, dstT=dst)
    b.output(o)
    return msv0.Session(b.finish()).run([x])["y"]


def test_f32_to_i8_rounding_and_inf():
    # scale 0.5: reciprocal 2 is exact, so ties land exactly on .5 and round away from zero
    x = np.array([0.25, -0.25, 0.75, -0.75, 1.25, 100.0, -100.0, np.inf, -np.inf, 0.0], np.float32)
    y = qcast(x, TypeId.kNumberTypeFloat32, TypeId.kNumberTypeInt8, np.int8, out_q=q(0.5, 0))
    assert y.tolist() == [1, -1, 2, -2, 3, 127, -128, 127, 127, 0]
    y = qcast(x[:5], TypeId.kNumberTypeFloat32, TypeId.kNumberTypeInt8, np.int8, out_q=q(0.5, 3))
    assert y.tolist() == [4, 3, 5, 2, 6]  # ties 3.5, 2.5, 4.5, 1.5, 5.5 round away from zero


def ref_i8(x, scale, zp):
    v = x * (np.float32(1) / np.float32(scale)) + np.float32(zp)  # float reciprocal, then multiply
    r = np.where(v >= 0, np.floor(v.astype(np.float64) + 0.5), np.ceil(v.astype(np.float64) - 0.5))
    return np.clip(r, -128, 127).astype(np.int8)


def test_f32_to_i8_uses_float_reciprocal(rng):
    x = rng.uniform(-30, 30, 5000).astype(np.float32)
    scale = 0.1
    y = qcast(x, TypeId.kNumberTypeFloat32, TypeId.kNumberTypeInt8, np.int8, out_q=q(scale, -5))
    np.testing.assert_array_equal(y, ref_i8(x, scale, -5))
    # -44.25 / 0.3f is -147.49999 in exact arithmetic, but -44.25 · (1/0.3f) rounds to -147.5 in
    # float and then away from zero: the reciprocal form gives -148 (zp 100 → -48), division -47.
    y = qcast(np.array([-44.25], np.float32), TypeId.kNumberTypeFloat32, TypeId.kNumberTypeInt8, np.int8, out_q=q(0.3, 100))
    assert y.tolist() == [-48]


def test_f32_to_u8_divides_in_double(rng):
    x = np.concatenate([rng.uniform(-10, 40, 3000), [np.inf, -np.inf, 0.5, 1.5]]).astype(np.float32)
    scale, zp = np.float32(0.2), 10
    y = qcast(x, TypeId.kNumberTypeFloat32, TypeId.kNumberTypeUInt8, np.uint8, out_q=q(float(scale), zp))
    v = x.astype(np.float64) / np.float64(scale) + zp
    want = np.clip(np.floor(v + 0.5), 0, 255)
    want[np.isinf(x)] = 255
    np.testing.assert_array_equal(y, want.astype(np.uint8))


def test_dequant_and_shift_pairs(rng):
    qi = rng.integers(-128, 128, 300).astype(np.int8)
    y = qcast(qi, TypeId.kNumberTypeInt8, TypeId.kNumberTypeFloat32, np.float32, in_q=q(0.25, 7))
    np.testing.assert_array_equal(y, (qi.astype(np.int32) - 7).astype(np.float32) * np.float32(0.25))
    qu = rng.integers(0, 256, 300).astype(np.uint8)
    y = qcast(qu, TypeId.kNumberTypeUInt8, TypeId.kNumberTypeFloat32, np.float32, in_q=q(0.5, 128))
    np.testing.assert_array_equal(y, (qu.astype(np.int32) - 128).astype(np.float32) * np.float32(0.5))
    np.testing.assert_array_equal(qcast(qu, TypeId.kNumberTypeUInt8, TypeId.kNumberTypeInt8, np.int8), (qu.astype(np.int16) - 128).astype(np.int8))
    np.testing.assert_array_equal(qcast(qi, TypeId.kNumberTypeInt8, TypeId.kNumberTypeUInt8, np.uint8), (qi.astype(np.int16) + 128).astype(np.uint8))


def test_param_choice_prefers_inited_output():
    x = np.array([1.0, -2.0], np.float32)
    assert qcast(x, TypeId.kNumberTypeFloat32, TypeId.kNumberTypeInt8, np.int8, in_q=q(1.0, 0), out_q=q(0.5, 0)).tolist() == [2, -4]
    # an output param that is not inited is skipped in favour of the input's
    assert qcast(x, TypeId.kNumberTypeFloat32, TypeId.kNumberTypeInt8, np.int8, in_q=q(1.0, 0), out_q=q(0.5, 0, False)).tolist() == [1, -2]
    with pytest.raises(msv0.ModelError, match="quantParam"):
        qcast(x, TypeId.kNumberTypeFloat32, TypeId.kNumberTypeInt8, np.int8)


def test_i8_to_i8_requantises():
    x = np.array([-128, -3, 0, 5, 127], np.int8)
    y = qcast(x, TypeId.kNumberTypeInt8, TypeId.kNumberTypeInt8, np.int8, in_q=q(0.5, -3), out_q=q(0.25, 2))
    want = ref_i8((x.astype(np.int32) + 3).astype(np.float32) * np.float32(0.5), 0.25, 2)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("src,dst,xdt,odt", [(TypeId.kNumberTypeFloat32, TypeId.kNumberTypeInt32, np.float32, np.int32),
                                             (TypeId.kNumberTypeInt32, TypeId.kNumberTypeInt8, np.int32, np.int8),
                                             (TypeId.kNumberTypeFloat32, TypeId.kNumberTypeInt8, np.int32, np.int8),
                                             (TypeId.kNumberTypeUInt8, TypeId.kNumberTypeUInt8, np.uint8, np.uint8)])
def test_quant_cast_bad_pairs(src, dst, xdt, odt):
    with pytest.raises(msv0.ModelError):
        qcast(np.zeros(2, xdt), src, dst, odt, in_q=q(1.0, 0), out_q=q(1.0, 0))


# The C++ kernels (_core.QuantCast) of f32 <-> i8 on every tier, against the NumPy forms in
# msv0.ops.cast and against tests/int8_ref.py.
CAST_SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 33, 97]  # every tail of 4, 8 and 16 lanes
SPECIALS = [np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 3.4e38, -3.4e38, 1e-45, 0.05, -0.05, 0.15, -0.15, 12.75,
            -12.85, 127.5, -128.5, 126.49999, -128.49998, 1e10, -1e10]


def test_f32_to_i8_kernel_tiers(isa, rng):
    from int8_ref import quantize
    from msv0.ops.cast import quantize_i8

    for n in CAST_SIZES:
        x = np.concatenate([rng.uniform(-15, 15, n), SPECIALS])[: n + len(SPECIALS)].astype(np.float32)
        for scale, zp in [(0.1, 3), (0.05, -128), (0.02, 127), (7.0, 0)]:
            y = qcast(x, TypeId.kNumberTypeFloat32, TypeId.kNumberTypeInt8, np.int8, out_q=q(scale, zp))
            np.testing.assert_array_equal(y, quantize_i8(x, scale, zp))
            finite = np.isfinite(x)
            with np.errstate(over="ignore"):  # ±3.4e38 · (1/scale) overflows to ±inf: clamped
                np.testing.assert_array_equal(y[finite], quantize(x[finite], scale, zp))
            assert (y[np.isinf(x)] == 127).all() and (y[np.isnan(x)] == 0).all()


def test_f32_to_i8_unfused(isa):
    # x·(1/0.3f) rounds to exactly .5 in float before + 100, where a fused multiply-add would not:
    # -42.75 gives -42.5 -> -43 unfused (-42 fused).
    x = np.array([-42.75, -38.25, -41.25, float.fromhex("-0x1.a8cccep+4")] * 5, np.float32)
    y = qcast(x, TypeId.kNumberTypeFloat32, TypeId.kNumberTypeInt8, np.int8, out_q=q(0.3, 100))
    from msv0.ops.cast import quantize_i8

    np.testing.assert_array_equal(y, quantize_i8(x, 0.3, 100))
    assert y[:4].tolist() == [-43, -28, -38, 12]


def test_i8_to_f32_kernel_tiers(isa):
    from int8_ref import dequantize

    qi = np.tile(np.arange(-128, 128, dtype=np.int8), 3)
    for n in CAST_SIZES + [len(qi)]:
        for scale, zp in [(0.25, 7), (0.1, -128), (3e-5, 127)]:
            y = qcast(qi[:n], TypeId.kNumberTypeInt8, TypeId.kNumberTypeFloat32, np.float32, in_q=q(scale, zp))
            np.testing.assert_array_equal(y, dequantize(qi[:n], scale, zp))


def test_quant_cast_threads(rng):
    from msv0.ops.cast import dequantize, quantize_i8

    x = rng.uniform(-20, 20, (3, 20011)).astype(np.float32)
    b = msv0.builder.Builder("q")
    i = b.input("x", x.shape, x.dtype)
    m = b.tensor("m", np.int8, quant=q(0.1, -3))
    o = b.tensor("y", np.float32, quant=q(0.1, -3))
    b.node("QuantDTypeCast", [i], outputs=[m], srcT=TypeId.kNumberTypeFloat32, dstT=TypeId.kNumberTypeInt8)
    b.node("QuantDTypeCast", [m], outputs=[o], srcT=TypeId.kNumberTypeInt8, dstT=TypeId.kNumberTypeFloat32)
    b.output(m, o)
    out = msv0.Session(b.finish(), num_threads=2).run([x])
    np.testing.assert_array_equal(out["m"], quantize_i8(x, 0.1, -3))
    np.testing.assert_array_equal(out["y"], dequantize(out["m"], 0.1, -3))


def test_quant_cast_kernel_checks_arguments():
    msv0._core.QuantCast(0, [3], 1.0, 0)
    for args in [(2, [3], 1.0, 0), (0, [-1], 1.0, 0), (1, [3], 1.0, 2**31)]:
        with pytest.raises(ValueError):
            msv0._core.QuantCast(*args)
