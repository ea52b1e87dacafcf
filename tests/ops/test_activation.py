"""Activation, LeakyReLU, PReLU, Elu and SoftMax against per-element references (format-v0.md §5)."""
import math

import numpy as np
import pytest

import msv0
from msv0.fb.ActivationType import ActivationType
from oprun import Const, run_op

F = np.float32
SHAPES = [(7,), (2, 3, 5, 9), (1, 4, 4, 16), (3, 17)]


def _per_element(fn, x):
    return np.array([fn(F(v)) for v in x.reshape(-1)], F).reshape(x.shape)


def _sigmoid(v):
    if v > F(16.619047):
        return F(1)
    if v < F(-9):
        return F(math.exp(v))
    return F(F(1) / F(F(1) + F(math.exp(-v))))


def _tanh_pade(v):
    """The formula of §5, in float32 and the r1.1 evaluation order; never libm tanh."""
    if v > 5:
        return F(1)
    if v < -5:
        return F(-1)
    s = F(v * v)
    a = F(F(F(F(F(F(s + F(378)) * s) + F(17325)) * s) + F(135135)) * v)
    b = F(F(F(F(F(F(F(28) * s) + F(3150)) * s) + F(62370)) * s) + F(135135))
    return F(a / b)


def _relu6(v):
    return min(max(v, F(0)), F(6))


REFERENCES = {
    ActivationType.RELU: lambda v, p: max(v, F(0)),
    ActivationType.RELU6: lambda v, p: _relu6(v),
    ActivationType.LEAKY_RELU: lambda v, p: v if v > 0 else F(v * F(p["alpha"])),
    ActivationType.SIGMOID: lambda v, p: _sigmoid(v),
    ActivationType.TANH: lambda v, p: _tanh_pade(v),
    ActivationType.SWISH: lambda v, p: F(v * _sigmoid(v)),
    ActivationType.HSWISH: lambda v, p: F(F(v * _relu6(F(v + F(3)))) / F(6)),
    ActivationType.HSIGMOID: lambda v, p: F(_relu6(F(v + F(3))) / F(6)),
    ActivationType.HARD_TANH: lambda v, p: F(p["minVal"]) if v < F(p["minVal"]) else min(v, F(p["maxVal"])),
}
# Test ids: the schema names, lower case.
NAMES = {v: k.lower() for k, v in vars(ActivationType).items() if not k.startswith("_")}
PARAMS = {"alpha": 0.15, "minVal": -0.75, "maxVal": 2.5}
# Sigmoid/Swish go through exp: NumPy's float32 exp and the reference's double exp may differ by 1 ulp.
EXACT = {ActivationType.RELU, ActivationType.RELU6, ActivationType.LEAKY_RELU, ActivationType.TANH,
         ActivationType.HSWISH, ActivationType.HSIGMOID, ActivationType.HARD_TANH}


@pytest.mark.parametrize("act", sorted(REFERENCES), ids=lambda a: NAMES[a])
@pytest.mark.parametrize("shape", SHAPES)
def test_activation(act, shape, rng):
    x = (rng.standard_normal(shape) * 6).astype(F)
    (y,) = run_op("Activation", [x], type=act, **PARAMS)
    ref = _per_element(lambda v: REFERENCES[act](v, PARAMS), x)
    if act in EXACT:
        np.testing.assert_array_equal(y, ref)
    else:
        np.testing.assert_allclose(y, ref, rtol=3e-7, atol=1e-30)


def test_tanh_is_pade_not_libm():
    x = np.array([0.0, 0.1, -0.5, 1.0, 2.0, 3.5, 4.9, 4.999, 5.0, 5.0001, -5.0, -5.0001, 9.0, -30.0], F)
    (y,) = run_op("Activation", [x], type=10)
    np.testing.assert_array_equal(y, _per_element(_tanh_pade, x))
    # The Padé form overshoots 1 just below the cut-off, where libm tanh stays below 1.
    assert y[7] > 1 and np.tanh(np.float64(x[7])) < 1
    np.testing.assert_array_equal(y[[8, 9, 10, 11, 12, 13]], [_tanh_pade(F(5)), 1, _tanh_pade(F(-5)), -1, 1, -1])


def test_sigmoid_thresholds():
    cut = F(16.619047)
    x = np.array([cut, np.nextafter(cut, F(100)), 20, -9, np.nextafter(F(-9), F(-100)), -20, -100, 0], F)
    (y,) = run_op("Activation", [x], type=2)
    assert y[1] == 1 and y[2] == 1  # above the cut-off: exactly 1
    assert y[0] == F(1) / (F(1) + np.exp(-cut))  # at the cut-off: the formula
    np.testing.assert_allclose(y[3], 1 / (1 + math.exp(9)), rtol=3e-7)  # −9 itself: the formula
    np.testing.assert_allclose(y[4:7], np.exp(x[4:7].astype(np.float64)).astype(F), rtol=3e-7, atol=2e-45)  # below: exp(x)
    assert y[6] > 0  # exp(−100) is a float32 denormal, not 0 as 1/(1+e^100) would round to
    assert y[7] == F(0.5)


def test_hard_tanh_min_above_max():
    # x < min ? min : (x > max ? max : x), checked in that order.
    x = np.array([-3, 0, 0.5, 3], F)
    (y,) = run_op("Activation", [x], type=16, minVal=1.0, maxVal=0.0)
    np.testing.assert_array_equal(y, np.array([1, 1, 1, 0], F))


@pytest.mark.parametrize("act", [0, 4, 6, 7, 8, 9, 11, 14, 15, 17])
def test_unsupported_activation_fails(act):
    with pytest.raises(msv0.ModelError, match="activation type"):
        run_op("Activation", [np.ones(3, F)], type=act)


def test_activation_rejects_int():
    with pytest.raises(msv0.ModelError, match="float32"):
        run_op("Activation", [np.ones(3, np.int32)], out_dtypes=[np.int32], type=1)


def test_leaky_relu_op(rng):
    x = (rng.standard_normal((2, 5, 3, 7)) * 3).astype(F)
    (y,) = run_op("LeakyReLU", [x], negativeSlope=0.3)
    np.testing.assert_array_equal(y, _per_element(lambda v: v if v > 0 else F(v * F(0.3)), x))


def test_elu(rng):
    x = (rng.standard_normal((3, 4, 9)) * 3).astype(F)
    (y,) = run_op("Elu", [x], alpha=1.7)
    ref = _per_element(lambda v: F(F(1.7) * F(math.expm1(v))) if v < 0 else v, x)
    np.testing.assert_allclose(y, ref, rtol=3e-7, atol=0)


@pytest.mark.parametrize("channels", [1, 3, 8, 17])
def test_prelu_per_channel(channels, rng):
    x = rng.standard_normal((2, 3, 5, channels)).astype(F)
    slope = rng.standard_normal(channels).astype(F)
    (y,) = run_op("PReLU", [x, Const(slope)])
    np.testing.assert_array_equal(y, np.where(x >= 0, x, x * slope))


def test_prelu_channel_shared_uses_first_slope(rng):
    x = rng.standard_normal((2, 4, 6)).astype(F)
    slope = np.array([0.25, 9, 9, 9, 9, 9], F)
    (y,) = run_op("PReLU", [x, Const(slope)], channelShared=True)
    np.testing.assert_array_equal(y, np.where(x >= 0, x, x * F(0.25)))


def test_prelu_slope_count_mismatch_fails():
    with pytest.raises(msv0.ModelError, match="slope"):
        run_op("PReLU", [np.ones((2, 5), F), Const(np.ones(3, F))])


def _softmax_ref(x, axis):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape,axis", [((2, 3, 5, 7), -1), ((2, 3, 5, 7), 3), ((2, 3, 5, 7), 1), ((4, 17), 0),
                                        ((1, 1, 33), -1), ((9,), -1)])
def test_softmax(shape, axis, rng):
    x = (rng.standard_normal(shape) * 10).astype(F)
    (y,) = run_op("SoftMax", [x], axis=axis)
    np.testing.assert_allclose(y, _softmax_ref(x, axis), rtol=2e-6, atol=1e-12)


def test_softmax_large_values_are_max_subtracted():
    x = np.array([[1000, 1001, 1002], [-1000, -1000, -1000]], F)
    (y,) = run_op("SoftMax", [x])
    np.testing.assert_allclose(y, _softmax_ref(x, -1), rtol=2e-6)


@pytest.mark.parametrize("axis", [-2, -3, 4])
def test_softmax_other_negative_or_out_of_range_axis_fails(axis):
    with pytest.raises(msv0.ModelError, match="axis"):
        run_op("SoftMax", [np.ones((2, 3, 4, 5), F)], axis=axis)


def test_softmax_rank_above_five_fails():
    with pytest.raises(msv0.ModelError, match="rank"):
        run_op("SoftMax", [np.ones((1,) * 6, F)])
