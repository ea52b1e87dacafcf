"""int8 Reduce / ArgMax / ArgMin against tests/int8_ref.py (r1.1's int8 kernels), exact
equality: every mode, axis orders (each axis is requantized in turn), the 4-D mean over H and
W with its own rounding, saturation, and the cases r1.1 cannot run."""
import numpy as np
import pytest

from msv0.errors import InputError, ModelError

from int8_ref import mean_hw_s8, qp, reduce_s8
from oprun import run_op

I8 = [np.int8]
PARAMS = [(0.1, 3, 0.1, 3), (0.05, -128, 0.2, 127), (0.3, 127, 0.02, -128), (0.0123, -7, 0.07, 11)]
MODES = {"mean": 0, "max": 1, "min": 2, "sum": 4, "sumsquare": 5}


def reduce(x, p, **attrs):
    return run_op("Reduce", [x], out_dtypes=I8, in_quant=[qp(*p[:2])], out_quant=[qp(*p[2:])], **attrs)[0]


@pytest.mark.parametrize("p", PARAMS, ids=str)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("axes", [[1], [2, 0], [0, 2], [0, 1, 2]], ids=str)
def test_reduce_s8_modes(rng, p, mode, axes):
    x = rng.integers(-128, 128, (3, 4, 5), dtype=np.int8)
    x[0, 0] = -128
    want = reduce_s8(x, axes, MODES[mode], p[0], p[1], p[2], p[3])
    if want is None:  # squares of requantized sums can leave int32: r1.1 stops with an error
        with pytest.raises(InputError, match="overflows int32"):
            reduce(x, p, mode=MODES[mode], axes=axes)
        return
    y = reduce(x, p, mode=MODES[mode], axes=axes, keepDims=True)
    np.testing.assert_array_equal(y, want)
    y = reduce(x, p, mode=MODES[mode], axes=axes, keepDims=False)
    np.testing.assert_array_equal(y, want.reshape(y.shape))


@pytest.mark.parametrize("p", PARAMS, ids=str)
def test_reduce_s8_prod(rng, p):
    x = rng.integers(-3, 4, (2, 3, 4), dtype=np.int8) + np.int8(p[1] if abs(p[1]) < 120 else 0)
    y = reduce(x, (0.5, p[1] if abs(p[1]) < 120 else 0, 0.3, p[3]), mode=3, axes=[2, 1], keepDims=True)
    np.testing.assert_array_equal(y, reduce_s8(x, [2, 1], 3, 0.5, p[1] if abs(p[1]) < 120 else 0, 0.3, p[3]))


@pytest.mark.parametrize("p", PARAMS, ids=str)
@pytest.mark.parametrize("shape,axes", [((1, 5, 7, 3), [1, 2]), ((3, 4, 2, 8), [2, 1])], ids=str)
def test_reduce_s8_mean_hw(rng, p, shape, axes):
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    np.testing.assert_array_equal(reduce(x, p, mode=0, axes=axes, keepDims=True), mean_hw_s8(x, *p))


def test_reduce_s8_sum_saturates_and_all_axes(rng):
    x = np.full((4, 6), 127, np.int8)
    np.testing.assert_array_equal(reduce(x, (0.1, 0, 0.1, 0), mode=4, axes=[1]), np.full(4, 127))
    x = rng.integers(-128, 128, (4, 6), dtype=np.int8)
    want = reduce_s8(x, [0, 1], 4, 0.1, 2, 3.0, -5).reshape(())
    np.testing.assert_array_equal(reduce(x, (0.1, 2, 3.0, -5), mode=4, axes=[]), want)


def test_reduce_s8_overflow_is_an_input_error():
    x = np.full((1, 8), -128, np.int8)
    with pytest.raises(InputError, match="overflows int32"):
        reduce(x, (0.5, 127, 0.5, 0), mode=3, axes=[1])


@pytest.mark.parametrize("attrs,match", [({"mode": 0, "axes": [-1]}, "non-negative"),
                                         ({"mode": 5, "axes": []}, "one per reduced dim"),
                                         ({"mode": 3, "axes": [1], "reduceToEnd": True}, "one per reduced dim"),
                                         ({"mode": 0, "axes": [3, 0]}, "mean over H and W"),
                                         ({"mode": 0, "axes": [1, 2]}, "C % 4"),
                                         ({"mode": 6, "axes": [1]}, "no mode")])
def test_reduce_s8_rejects(rng, attrs, match):
    x = rng.integers(-128, 128, (2, 3, 4, 5), dtype=np.int8)
    with pytest.raises(ModelError, match=f"reduce_node.*{match}"):
        reduce(x, (0.1, 0, 0.1, 0), **attrs)


def argref(x, axis, largest, values, s_in, zp_in, s_out, zp_out):
    f = np.float32
    real = (x.astype(f) * f(s_in)).astype(f) + f(-zp_in) * f(s_in)
    idx = real.argmax(axis) if largest else real.argmin(axis)
    r = np.take_along_axis(real, np.expand_dims(idx, axis), axis).squeeze(axis) if values else idx.astype(f)
    return np.trunc((r * (f(1) / f(s_out))).astype(f) + f(zp_out)).astype(np.int8)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("values", [False, True])
def test_argminmax_s8(rng, op, values):
    x = rng.integers(-128, 128, (3, 6, 4), dtype=np.int8)
    x[0, :, 0] = 5  # ties: the first wins
    p = (0.1, 3, 0.25, -40) if values else (0.1, 3, 0.5, -128)
    y = run_op(op, [x], out_dtypes=I8, in_quant=[qp(*p[:2])], out_quant=[qp(*p[2:])], axis=-2, topK=1,
               outMaxValue=values)[0]
    np.testing.assert_array_equal(y, argref(x, 1, op == "ArgMax", values, *p))


def test_argminmax_s8_rejects(rng):
    x = rng.integers(-128, 128, (3, 6), dtype=np.int8)
    with pytest.raises(ModelError, match="argmax_node.*topK 2"):
        run_op("ArgMax", [x], out_dtypes=I8, in_quant=[qp(0.1, 0)], out_quant=[qp(1, 0)], axis=1, topK=2)
    with pytest.raises(InputError, match="argmax_node.*does not fit int8"):
        run_op("ArgMax", [x], out_dtypes=I8, in_quant=[qp(0.1, 0)], out_quant=[qp(0.01, 0)], axis=1, topK=1,
               outMaxValue=True)


@pytest.mark.parametrize("mode,axes,want", [(5, [3, 2], 114), (3, [2, 3], 3)])
def test_reduce_s8_r11_unit_test_values(mode, axes, want):
    """Values r1.1's own int8 Reduce unit tests pin (all-105 input, s 0.005 zp 5 -> s 0.01 zp 1):
    SumSquare over two axes squares the requantized partial sums, giving 114 (exact math: 127)."""
    x = np.full((1, 2, 2, 3), 105, np.int8)
    np.testing.assert_array_equal(reduce(x, (0.005, 5, 0.01, 1), mode=mode, axes=axes), [[want, want]])
