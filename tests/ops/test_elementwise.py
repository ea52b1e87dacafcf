"""Binary element-wise ops, comparisons, logical ops, Eltwise and AddN against NumPy references."""
import math

import numpy as np
import pytest

import msv0
from msv0 import _core
from msv0.builder import Builder
from msv0.ops.elementwise import native_binary, binary_layout
from oprun import Const, run_op, ort_run

# (shape a, shape b): r1.1 broadcasting corners.
BROADCASTS = [
    ((2, 5, 7, 9), (2, 5, 7, 9)),
    ((2, 5, 7, 9), (9,)),  # [N,H,W,C] + [C]
    ((2, 1, 7, 3), (2, 5, 1, 3)),  # [N,1,W,C] + [N,H,1,C]
    ((3, 4, 17), ()),  # scalar
    ((), (3, 4, 17)),
    ((1,), (4, 1, 33)),  # rank mismatch, both sides broadcast
    ((6, 1), (1, 15)),
]


def _pair(rng, sa, sb, positive_b=False):
    a = rng.standard_normal(sa).astype(np.float32) * 4
    b = rng.standard_normal(sb).astype(np.float32) * 4
    if positive_b:
        b = np.abs(b) + np.float32(0.5)
    return a, b


def _elementwise(fn, a, b):
    """An independent per-element reference: Python scalars through np.float32."""
    a2, b2 = np.broadcast_arrays(a, b)
    out = np.empty(a2.shape, np.float32)
    for i in np.ndindex(out.shape):
        out[i] = fn(np.float32(a2[i]), np.float32(b2[i]))
    return out


REFERENCES = {
    "Add": lambda x, y: x + y,
    "Sub": lambda x, y: x - y,
    "Mul": lambda x, y: x * y,
    "Div": lambda x, y: x / y,
    "RealDiv": lambda x, y: x / y,
    "Maximum": lambda x, y: x if x > y else y,  # r1.1's C forms
    "Minimum": lambda x, y: y if x > y else x,
    "FloorDiv": lambda x, y: np.float32(math.floor(x / y)),
    "FloorMod": lambda x, y: x - np.float32(math.floor(x / y)) * y,
    "Mod": lambda x, y: np.float32(math.fmod(x, y)),
    "SquaredDifference": lambda x, y: (x - y) * (x - y),
}


@pytest.mark.parametrize("name", sorted(REFERENCES))
@pytest.mark.parametrize("sa,sb", BROADCASTS)
def test_float_binary(name, sa, sb, rng):
    a, b = _pair(rng, sa, sb, positive_b=name in ("Div", "RealDiv", "FloorDiv", "FloorMod", "Mod"))
    if name in ("FloorDiv", "FloorMod", "Mod"):
        b = -b if rng.random() < 0.5 else b  # mixed signs are where floor and fmod differ
    (y,) = run_op(name, [a, b])
    np.testing.assert_array_equal(y, _elementwise(REFERENCES[name], a, b))


def test_const_operand(rng):
    a, b = _pair(rng, (1, 4, 5, 7), (7,))
    (y,) = run_op("Add", [a, Const(b)])
    np.testing.assert_array_equal(y, a + b)


@pytest.mark.parametrize("name", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("act,lo,hi", [(1, 0, np.inf), (3, 0, 6), (2, -np.inf, np.inf), (4, -np.inf, np.inf)])
def test_fused_activation(name, act, lo, hi, rng):
    # Only RELU (1) and RELU6 (3) take effect; SIGMOID/ELU are silently none.
    a, b = _pair(rng, (2, 3, 5, 8), (8,), positive_b=name == "Div")
    (y,) = run_op(name, [a, b], activationType=act)
    ref = _elementwise(REFERENCES[name], a, b)
    np.testing.assert_array_equal(y, np.minimum(np.maximum(ref, np.float32(lo)), np.float32(hi)))


def test_relu6_clamps_both_ends():
    a = np.array([-10, -0.5, 0, 3, 5.9, 6, 7, 100], np.float32)
    (y,) = run_op("Add", [a, np.zeros(1, np.float32)], activationType=3)
    np.testing.assert_array_equal(y, np.array([0, 0, 0, 3, 5.9, 6, 6, 6], np.float32))


def test_int32_truncating_division():
    a = np.array([7, -7, 7, -7, 6, -6, 0], np.int32)
    b = np.array([2, 2, -2, -2, 3, 4, 5], np.int32)
    i32 = [np.int32]
    trunc_div = [3, -3, -3, 3, 2, -1, 0]
    trunc_mod = [1, -1, 1, -1, 0, -2, 0]
    for name, want in [("Div", trunc_div), ("FloorDiv", trunc_div), ("FloorMod", trunc_mod), ("Mod", trunc_mod)]:
        (y,) = run_op(name, [a, b], out_dtypes=i32)
        assert y.dtype == np.int32
        np.testing.assert_array_equal(y, want, err_msg=name)


def test_int32_arithmetic_broadcast_and_relu():
    a = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    b = np.array([1, -2, 3, -4], np.int32)
    (y,) = run_op("Mul", [a, b], out_dtypes=[np.int32], activationType=1)
    np.testing.assert_array_equal(y, np.maximum(a * b, 0))
    (y,) = run_op("Sub", [a, b], out_dtypes=[np.int32], activationType=3)
    np.testing.assert_array_equal(y, np.clip(a - b, 0, 6))


def test_int32_division_by_zero_is_an_error():
    a = np.array([1, 2], np.int32)
    with pytest.raises(msv0.ModelError, match="division by zero"):
        run_op("FloorDiv", [a, np.array([1, 0], np.int32)], out_dtypes=[np.int32])


def test_float_division_by_zero_is_ieee():
    (y,) = run_op("Div", [np.array([1, -1, 0], np.float32), np.zeros(3, np.float32)])
    np.testing.assert_array_equal(y[:2], [np.inf, -np.inf])
    assert np.isnan(y[2])


@pytest.mark.parametrize("sa,sb", [((2, 3), (4,)), ((2, 5, 7, 9), (2, 5, 7, 8)), ((3, 1, 4), (1, 2, 5))])
def test_incompatible_shapes_fail(sa, sb):
    with pytest.raises(msv0.ModelError, match="broadcast"):
        run_op("Add", [np.zeros(sa, np.float32), np.zeros(sb, np.float32)])


def test_rank_above_ten_fails():
    with pytest.raises(msv0.ModelError, match="rank"):
        run_op("Mul", [np.zeros((1,) * 11, np.float32), np.zeros(1, np.float32)])


def test_dtype_mismatch_fails():
    with pytest.raises(msv0.ModelError, match="dtypes differ"):
        run_op("Add", [np.zeros(3, np.float32), np.zeros(3, np.int32)])


def test_input_count_fails():
    with pytest.raises(msv0.ModelError, match="expected 2 inputs"):
        run_op("Add", [np.zeros(3, np.float32)])


@pytest.mark.parametrize("mode,ref", [(0, np.multiply), (1, np.add), (2, np.maximum)])
def test_eltwise(mode, ref, rng):
    a, b = _pair(rng, (2, 3, 3, 17), (1, 3, 1, 17))
    (y,) = run_op("Eltwise", [a, b], mode=mode)
    np.testing.assert_array_equal(y, ref(a, b))


def test_eltwise_unknown_mode_fails():
    with pytest.raises(msv0.ModelError, match="mode"):
        run_op("Eltwise", [np.zeros(3, np.float32)] * 2, mode=3)


def _add_n(xs):
    (y,) = run_op("AddN", xs)
    return y


def test_add_n_left_to_right(rng):
    xs = [rng.standard_normal((2, 3, 5, 7)).astype(np.float32) * 10 ** k for k in range(4)]
    np.testing.assert_array_equal(_add_n(xs), ((xs[0] + xs[1]) + xs[2]) + xs[3])


def test_add_n_one_element_input(rng):
    x = rng.standard_normal((4, 9)).astype(np.float32)
    s = np.array([2.5], np.float32)
    np.testing.assert_array_equal(_add_n([s, x, x]), (s[0] + x) + x)


def test_add_n_shape_mismatch_fails():
    with pytest.raises(msv0.ModelError, match="expected"):
        _add_n([np.zeros((2, 3), np.float32), np.zeros((3,), np.float32)])


def test_add_n_with_constant(rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    (y,) = run_op("AddN", [x, Const(x)])
    np.testing.assert_array_equal(y, x + x)


COMPARISONS = {
    "Equal": np.equal,
    "NotEqual": np.not_equal,
    "Less": np.less,
    "LessEqual": np.less_equal,
    "Greater": np.greater,
    "GreaterEqual": np.greater_equal,
}


@pytest.mark.parametrize("name", sorted(COMPARISONS))
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_comparisons_output_bool(name, dtype, rng):
    a = rng.integers(-3, 4, (2, 5, 1, 3)).astype(dtype)
    b = rng.integers(-3, 4, (5, 4, 3)).astype(dtype)
    (y,) = run_op(name, [a, b], out_dtypes=[np.bool_])
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y, COMPARISONS[name](a, b))


@pytest.mark.parametrize("name,ref", [("LogicalAnd", np.logical_and), ("LogicalOr", np.logical_or)])
def test_logical_binary(name, ref, rng):
    a = rng.random((3, 1, 7)) < 0.5
    b = rng.random((4, 7)) < 0.5
    (y,) = run_op(name, [a, b], out_dtypes=[np.bool_])
    np.testing.assert_array_equal(y, ref(a, b))


def test_logical_not(rng):
    a = rng.random((3, 7)) < 0.5
    (y,) = run_op("LogicalNot", [a], out_dtypes=[np.bool_])
    np.testing.assert_array_equal(y, ~a)


NATIVE_SHAPES = [  # (a, b): full/full, row or per-row value on either side, one value, SIMD tails of every width
    ((1, 7, 5, 33), (1, 7, 5, 33)),
    ((2, 3, 17), (17,)),
    ((1, 1, 1, 9), (4, 5, 3, 9)),
    ((31,), (1,)),
    ((1,), (3, 15)),
    ((2, 6, 16), (6, 16)),
    ((5, 1), (5, 1)),
    ((2, 5, 3, 1), (2, 5, 3, 19)),  # one value per pixel
    ((4, 1, 1), (1, 1, 17)),  # per-row values against a row
]


@pytest.mark.parametrize("sa,sb", NATIVE_SHAPES, ids=str)
@pytest.mark.parametrize("name,ref", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                                      ("Div", np.divide)])
@pytest.mark.parametrize("act", [0, 1, 3])
def test_native_binary_kernel(isa, rng, sa, sb, name, ref, act):
    """The C++ kernel path (float32 full / row / single-value operands) on every ISA tier."""
    a = (rng.standard_normal(sa) * 4).astype(np.float32)
    b = (rng.standard_normal(sb) * 4 + 0.5).astype(np.float32)
    (y,) = run_op(name, [a, b], activationType=act)
    want = ref(a, b)
    if act:
        want = np.clip(want, 0, 6 if act == 3 else np.inf)
    np.testing.assert_allclose(y, want, rtol=1e-6)  # one rounding (division may differ by 1 ulp)


# r1.1's C forms (nnacl/fp32/arithmetic_fp32.c) on whole arrays: where unordered, Maximum gives b
# and Minimum a (np.maximum/np.minimum give the NaN).
R11_FORMS = {
    "Maximum": lambda a, b: np.where(a > b, a, b),
    "Minimum": lambda a, b: np.where(a > b, b, a),
    "SquaredDifference": lambda a, b: (a - b) * (a - b),
}


@pytest.mark.parametrize("sa,sb", NATIVE_SHAPES + [((2, 1, 7, 3), (2, 5, 1, 3))], ids=str)  # the last: NumPy
def test_maximum_minimum_squared_difference(isa, rng, sa, sb):
    """The C++ kernel on full / row / one-value / per-row operands, every ISA tier, and the NumPy
    steps on other broadcasts: NaN, ±inf and ±0 among the operands, r1.1's results exactly."""
    a = rng.integers(-3, 4, sa).astype(np.float32)
    b = rng.integers(-3, 4, sb).astype(np.float32)
    a.flat[::5], b.flat[::3] = np.nan, np.inf
    a.flat[1::4], b.flat[2::5] = -0.0, np.nan
    for name, ref in R11_FORMS.items():
        (y,) = run_op(name, [a, b], native=(sa, sb) in NATIVE_SHAPES)
        want = ref(a, b)
        np.testing.assert_array_equal(y, want, err_msg=name)
        number = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(y[number]), np.signbit(want[number]), err_msg=name)


@pytest.mark.parametrize("size", [3, 37])  # a tail only; two AVX-512 vectors and a tail
def test_native_binary_keeps_nan_without_activation(isa, size):
    a = np.ones(size, np.float32)
    a[[0, size - 2, size - 1]] = [np.nan, 1, np.inf]
    a[size // 2] = np.nan  # in a whole vector when size > 32
    nan = np.isnan(a)
    (y,) = run_op("Add", [a, np.ones(size, np.float32)])
    assert np.isnan(y[nan]).all() and (y[~nan][:-1] == 2).all() and y[-1] == np.inf
    (y,) = run_op("Add", [a, np.ones(size, np.float32)], activationType=1)  # r1.1: x > 0 ? x : 0
    np.testing.assert_array_equal(y[nan], 0)
    np.testing.assert_array_equal(y[~nan], np.where(np.isinf(a[~nan]), np.inf, 2))


@pytest.mark.parametrize("sa,sb", NATIVE_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_native_comparison_kernel(isa, rng, sa, sb, dtype):
    """The C++ comparisons (csrc/kernels/compare.cc) on full / row / one-value / per-row
    operands, every ISA tier: each op against NumPy, NaN and infinities among the floats, every
    output byte written (the output starts as a pattern that is neither 0 nor 1)."""
    a = rng.integers(-3, 4, sa).astype(dtype)
    b = rng.integers(-3, 4, sb).astype(dtype)
    if dtype == np.float32:
        a.flat[::5], b.flat[::3] = np.nan, np.inf
    out = np.broadcast_shapes(sa, sb)
    for k, name in enumerate(COMPARISONS):
        kernel = _core.Compare(k, np.dtype(dtype).char, *binary_layout(sa, sb, out), sa, sb, out)
        raw = np.full(out, 7, np.uint8)
        kernel([a, b], [raw.view(np.bool_)])
        np.testing.assert_array_equal(raw, COMPARISONS[name](a, b), err_msg=name)
        (y,) = run_op(name, [a, b], out_dtypes=[np.bool_])
        np.testing.assert_array_equal(y, COMPARISONS[name](a, b), err_msg=name)


def test_comparison_is_native_on_float32_and_int32_only():
    b = Builder("cmp")
    x, n = b.input("x", (5, 1), np.int32), b.input("n", (5, 1), np.int64)
    b.output(b.node("Equal", [x, b.const("r", np.arange(7, dtype=np.int32).reshape(1, 7))], out_dtype=np.bool_),
             b.node("Equal", [n, b.const("r64", np.arange(7).reshape(1, 7))], out_dtype=np.bool_))
    s = msv0.Session(b.finish())
    assert [p is not None for _, p in s.plan_info.steps] == [True, False]


GUARD = 37  # floats of NaN on each side of the output, checked untouched


@pytest.mark.parametrize("sa,sb", NATIVE_SHAPES, ids=str)
def test_binary_kernel_canary(isa, rng, sa, sb):
    """Called directly: every output element written (NaN canaries), nothing outside y (guard
    regions on both sides), for full, row and single-value operands."""
    a = rng.standard_normal(sa).astype(np.float32)
    b = (rng.standard_normal(sb) + 3).astype(np.float32)
    out = np.broadcast_shapes(sa, sb)
    kernel = native_binary("Div", sa, sb, out, 3)
    size = int(np.prod(out))
    buf = np.full(size + 2 * GUARD, np.nan, np.float32)
    y = buf[GUARD:GUARD + size].reshape(out)
    kernel([a, b], [y])
    assert np.isnan(buf[:GUARD]).all() and np.isnan(buf[GUARD + size:]).all(), "wrote outside y"
    np.testing.assert_allclose(y, np.clip(a / b, 0, 6), rtol=1e-6)


def test_binary_kernel_checks_its_operands():
    kernel = _core.Binary(0, 0, 1, 4, (3, 4), (4,), (3, 4))
    with pytest.raises(ValueError, match="input 1: expected shape"):
        kernel([np.zeros((3, 4), np.float32), np.zeros((1, 4), np.float32)], [np.zeros((3, 4), np.float32)])
    with pytest.raises(ValueError, match="b_shape"):
        _core.Binary(0, 0, 1, 4, (3, 4), (5,), (3, 4))


def test_logical_xor_matches_onnxruntime(rng):
    a, b = rng.random((2, 1, 4)) > 0.5, rng.random((3, 1)) > 0.5
    (y,) = run_op("LogicalXor", [a, b], out_dtypes=[np.bool_])
    np.testing.assert_array_equal(y, ort_run("Xor", [a, b])[0])
    with pytest.raises(msv0.ModelError):
        run_op("LogicalXor", [a, np.zeros(3, bool)], out_dtypes=[np.bool_])
