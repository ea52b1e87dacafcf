"""Unary math, Exp and Power against per-element references written from format-v0.md §5."""
import math

import numpy as np
import pytest

import msv0
from oprun import Const, run_op, ort_run

SHAPES = [(1,), (3, 7), (2, 5, 3, 9), (1, 17, 33)]


def _per_element(fn, x):
    return np.array([fn(float(v)) for v in x.reshape(-1)], np.float32).reshape(x.shape)


def _f32(v):
    return float(np.float32(v))


REFERENCES = {
    "Abs": abs,
    "Neg": lambda v: -v,
    "Square": lambda v: _f32(np.float32(v) * np.float32(v)),
    "Floor": math.floor,
    "Ceil": math.ceil,
    "Sqrt": math.sqrt,
    "Rsqrt": lambda v: _f32(np.float32(1) / np.float32(math.sqrt(v))),
    "Reciprocal": lambda v: _f32(np.float32(1) / np.float32(v)),
    "Log": math.log,
    "Sin": math.sin,
    "Cos": math.cos,
}
EXACT = {"Abs", "Neg", "Square", "Floor", "Ceil", "Sqrt", "Rsqrt", "Reciprocal"}  # correctly rounded


@pytest.mark.parametrize("name", sorted(REFERENCES))
@pytest.mark.parametrize("shape", SHAPES)
def test_unary_float(name, shape, rng):
    x = (rng.standard_normal(shape) * 5).astype(np.float32)
    if name in ("Sqrt", "Rsqrt", "Log"):
        x = np.abs(x) + np.float32(0.01)
    (y,) = run_op(name, [x])
    ref = _per_element(REFERENCES[name], x)
    if name in EXACT:
        np.testing.assert_array_equal(y, ref)
    else:  # libm-class functions: within 2 ulp of the double result rounded to float
        np.testing.assert_allclose(y, ref, rtol=2.5e-7, atol=1e-7)


def _c_round(v):
    """C roundf: halves away from 0, the sign of v kept (−0.3 → −0)."""
    v = float(v)
    return math.copysign(math.floor(abs(v) + 0.5), v) if abs(v) < 2 ** 23 else v  # exact in double


@pytest.mark.parametrize("name", ["Abs", "Neg", "Square", "Sqrt", "Rsqrt", "Reciprocal", "Floor", "Ceil", "Round"])
def test_unary_float_specials(isa, name):
    """NaN, ±inf, ±0, subnormals, negatives, halves and integers near 2^23 through the native
    kinds, every SIMD tail: IEEE results as in C."""
    x = np.array([np.nan, np.inf, -np.inf, 0, -0.0, 1e-40, -1e-40, -2, 3e38, -3e38, 0.5, -0.5, -0.3, 2.5, -2.5,
                  0.49999997, 8388607.5, -8388607.5, 8388609, -1.0000001, 1.9999999] * 2, np.float32)
    with np.errstate(all="ignore"):
        want = {"Abs": np.abs, "Neg": np.negative, "Square": np.square, "Sqrt": np.sqrt,
                "Rsqrt": lambda v: np.float32(1) / np.sqrt(v), "Reciprocal": lambda v: np.float32(1) / v,
                "Floor": np.floor, "Ceil": np.ceil,
                "Round": lambda v: np.array([_c_round(e) for e in v], np.float32)}[name](x)
    for size in (1, 15, 16, 17, 33, x.size):
        (y,) = run_op(name, [x[:size]], native=True)
        np.testing.assert_array_equal(y, want[:size])
        number = ~np.isnan(want[:size])
        np.testing.assert_array_equal(np.signbit(y[number]), np.signbit(want[:size][number]))  # −0 stays −0


@pytest.mark.parametrize("name", ["Abs", "Neg", "Square"])
def test_unary_int32(name, rng):
    x = rng.integers(-100, 100, (4, 9)).astype(np.int32)
    (y,) = run_op(name, [x], out_dtypes=[np.int32])
    np.testing.assert_array_equal(y, {"Abs": np.abs, "Neg": np.negative, "Square": np.square}[name](x))


def test_unary_rejects_other_dtypes():
    with pytest.raises(msv0.ModelError, match="dtype"):
        run_op("Sqrt", [np.ones(3, np.int32)], out_dtypes=[np.int32])


def test_round_half_away_from_zero():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 2.4, -2.6, 0, 8388609, -1e30],
                 np.float32)
    (y,) = run_op("Round", [x])
    want = np.array([1, 2, 3, -1, -2, -3, 0, 0, 2, -3, 0, 8388609, -1e30], np.float32)
    np.testing.assert_array_equal(y, want)


def test_round_random(rng):
    x = (rng.standard_normal((5, 33)) * 20).astype(np.float32)
    (y,) = run_op("Round", [x])
    np.testing.assert_array_equal(y, _per_element(lambda v: math.copysign(math.floor(abs(v) + 0.5), v), x))


def _exp_ref(x, base, scale, shift):
    """expf(x·in_scale)·out_scale with in_scale = scale·ln(base), or 1 when scale == 1 (the bug)."""
    log_base = np.float32(1) if base == -1 else np.float32(math.log(base))
    in_scale = np.float32(1) if scale == 1 else np.float32(np.float32(scale) * log_base)
    if shift == 0:
        out_scale = 1.0
    elif log_base == 1:
        out_scale = math.exp(shift)
    else:
        out_scale = math.pow(base, shift)
    return _per_element(lambda v: _f32(_f32(math.exp(_f32(v * in_scale))) * np.float32(out_scale)), x)


@pytest.mark.parametrize("base,scale,shift", [(-1, 1, 0), (-1, 0.5, 0), (-1, 2, 1.5), (2, 3, 0), (10, 0.25, -1)])
def test_exp(base, scale, shift, rng):
    x = rng.standard_normal((3, 11)).astype(np.float32)
    (y,) = run_op("Exp", [x], base=base, scale=scale, shift=shift)
    np.testing.assert_allclose(y, _exp_ref(x, base, scale, shift), rtol=3e-7)


def test_exp_scale_one_ignores_base():
    # r1.1 bug: with scale == 1, base 2 gives e^x·2^shift, not 2^(x+shift).
    x = np.array([0, 1, 2, -1], np.float32)
    (y,) = run_op("Exp", [x], base=2.0, scale=1.0, shift=1.0)
    np.testing.assert_allclose(y, np.exp(x.astype(np.float64)) * 2, rtol=3e-7)
    assert not np.allclose(y, 2.0 ** (x + 1))


def test_exp_bad_base_fails():
    with pytest.raises(msv0.ModelError, match="base"):
        run_op("Exp", [np.ones(3, np.float32)], base=-2.0)


def _int_power(b, p):
    r, it, e = np.float32(1), np.float32(b), abs(p)
    while e:
        if e % 2:
            r = np.float32(r * it)
        it = np.float32(it * it)
        e //= 2
    return r if p >= 0 else np.float32(np.float32(1) / r)


@pytest.mark.parametrize("size", [1, 15, 16, 17, 33, 100])  # SIMD tails of every width
def test_native_log_and_power(isa, rng, size):
    """Log, and Power with its exponent fixed at plan time (attribute or one-element constant),
    run native on every tier: Log within 2 ulp of the double log, Power exactly r1.1's."""
    x = (rng.standard_normal(size) * 3).astype(np.float32)
    pos = np.abs(x) + np.float32(1e-3)
    (y,) = run_op("Log", [pos], native=True)
    np.testing.assert_allclose(y, _per_element(math.log, pos), rtol=2.5e-7, atol=1e-7)
    for p, scale, shift in [(2, 1, 0), (3, 1.5, 0.25), (-2, 1, 0.5), (0, 2, 0), (0.5, 1, 0), (1.5, 2, 1)]:
        base = (pos if p % 1 else x) * np.float32(scale) + np.float32(shift)
        fn = (lambda v: math.pow(v, p)) if p % 1 else (lambda v: _int_power(v, p))
        want = _per_element(fn, base)
        for exponent in ([], [Const(np.array([p], np.float32))]):
            (y,) = run_op("Power", [pos if p % 1 else x, *exponent], power=p, scale=scale, shift=shift, native=True)
            np.testing.assert_array_equal(y, want, err_msg=f"power {p}")


@pytest.mark.parametrize("p", [0, 1, 2, 3, 5, -1, -2, -3])
def test_power_integer_attribute(p, rng):
    x = rng.standard_normal((2, 3, 9)).astype(np.float32)
    (y,) = run_op("Power", [x], power=p, scale=1.5, shift=0.25)
    base = x * np.float32(1.5) + np.float32(0.25)
    np.testing.assert_array_equal(y, _per_element(lambda v: _int_power(v, p), base))


def test_power_fractional_attribute(rng):
    x = np.abs(rng.standard_normal((4, 7))).astype(np.float32)
    (y,) = run_op("Power", [x], power=0.5, scale=2.0, shift=1.0)
    base = x * np.float32(2) + np.float32(1)
    np.testing.assert_array_equal(y, _per_element(lambda v: math.pow(v, 0.5), base))


def test_power_exponent_tensor_elementwise(rng):
    x = np.abs(rng.standard_normal((3, 5))).astype(np.float32) + 0.5
    e = rng.integers(-3, 4, (3, 5)).astype(np.float32)
    (y,) = run_op("Power", [x, Const(e)], scale=1.0, shift=0.0)
    want = np.array([_int_power(b, int(k)) for b, k in zip(x.reshape(-1), e.reshape(-1))]).reshape(x.shape)
    np.testing.assert_array_equal(y, want)


def test_power_first_exponent_decides_method(rng):
    # The first exponent is integral, so every element uses squaring with (int)exponent: 2.7 → 2.
    x = np.array([1.5, 2.0, 3.0], np.float32)
    e = np.array([2.0, 2.7, -1.5], np.float32)
    (y,) = run_op("Power", [x, e], scale=1.0, shift=0.0, native=False)
    np.testing.assert_array_equal(y, np.array([2.25, 4.0, _int_power(3.0, -1)], np.float32))
    # A fractional first exponent sends every element through pow.
    e = np.array([0.5, 2.0, 3.0], np.float32)
    (y,) = run_op("Power", [x, e], scale=1.0, shift=0.0)
    np.testing.assert_array_equal(y, np.array([math.sqrt(1.5), 4.0, 27.0], np.float32))


def test_power_one_element_exponent_broadcasts(rng):
    x = rng.standard_normal((2, 9)).astype(np.float32)
    (y,) = run_op("Power", [x, np.array([3.0], np.float32)], scale=1.0, shift=0.0)
    np.testing.assert_array_equal(y, _per_element(lambda v: _int_power(v, 3), x))


def test_power_exponent_shape_mismatch_fails():
    with pytest.raises(msv0.ModelError, match="exponent"):
        run_op("Power", [np.ones((2, 3), np.float32), np.ones(3, np.float32)], scale=1.0)


@pytest.mark.parametrize("name,onnx_op", [("Tan", "Tan"), ("Atan", "Atan"), ("Asin", "Asin")])
def test_trig_matches_onnxruntime(rng, name, onnx_op):
    x = (rng.random((3, 17)) * 2.2 - 1.1).astype(np.float32)  # Asin: some outside [-1, 1] -> NaN
    (y,) = run_op(name, [x])
    (want,) = ort_run(onnx_op, [x])
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-7, equal_nan=True)


def test_trig_rejects_int():
    with pytest.raises(msv0.ModelError):
        run_op("Tan", [np.zeros(3, np.int32)], out_dtypes=[np.int32])
