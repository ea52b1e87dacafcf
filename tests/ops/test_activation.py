"""Activation, LeakyReLU, PReLU, Elu and SoftMax against per-element references (format-v0.md §5)."""
import math

import numpy as np
import pytest

import msv0
from msv0.fb.ActivationType import ActivationType
from msv0.builder import Builder
from msv0.fb.Format import Format
from msv0.fb.PadMode import PadMode
from oprun import Const, assert_program_matches_single_calls, run_op

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
def test_activation(isa, act, shape, rng):
    x = (rng.standard_normal(shape) * 6).astype(F)
    (y,) = run_op("Activation", [x], type=act, **PARAMS)
    ref = _per_element(lambda v: REFERENCES[act](v, PARAMS), x)
    if act in EXACT:
        np.testing.assert_array_equal(y, ref)
    else:
        np.testing.assert_allclose(y, ref, rtol=3e-7, atol=1e-30)


@pytest.mark.parametrize("kind", ["hswish", "hsigmoid"])
def test_hswish_divides_by_6_exactly_on_any_float(isa, rng, kind):
    """The vector tiers divide by 6 through FMA corrections: equal to the division on random bit
    patterns (subnormals, NaN, infinities, signed zeros; vectors with and without such a lane)
    and on numerators around 3·2^-125, below which x / 6 is subnormal and a vector divides."""
    bits = rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    edge = np.float32(2.0**-125) * np.linspace(0.25, 4, 4001, dtype=F)
    x = np.concatenate([bits.view(F), edge, -edge, np.array([0, -0.0, np.inf, -np.inf, -3, -4, 3], F)])
    y = np.empty_like(x)
    msv0._core.Activation(msv0._core.ACTIVATION_KINDS[kind], [x.size])([x], [y])
    with np.errstate(invalid="ignore", over="ignore"):
        r6 = np.minimum(np.maximum(x + F(3), F(0)), F(6))
        want = (r6 * x if kind == "hswish" else r6) / F(6)
    assert np.array_equal(y.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
    assert np.isnan(y[np.isnan(want)]).all()


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


def test_leaky_relu_op(isa, rng):
    x = (rng.standard_normal((2, 5, 3, 7)) * 3).astype(F)
    (y,) = run_op("LeakyReLU", [x], negativeSlope=0.3)
    np.testing.assert_array_equal(y, _per_element(lambda v: v if v > 0 else F(v * F(0.3)), x))


def test_elu(isa, rng):
    x = (rng.standard_normal((3, 4, 9)) * 3).astype(F)
    x[0, 0, :4] = [-1e-30, -1e-8, -0.0, -200]  # expm1's relative accuracy near 0; −1 far below
    (y,) = run_op("Elu", [x], alpha=1.7)
    ref = _per_element(lambda v: F(F(1.7) * F(math.expm1(v))) if v < 0 else v, x)
    np.testing.assert_allclose(y, ref, rtol=3e-7, atol=0)


@pytest.mark.parametrize("channels", [1, 3, 8, 17, 24, 300])  # tiled slope periods 256, 192, 256, none, 192, none
def test_prelu_per_channel(isa, channels, rng):
    x = rng.standard_normal((2, 7, 9, channels)).astype(F)
    slope = rng.standard_normal(channels).astype(F)
    (y,) = run_op("PReLU", [x, Const(slope)])
    np.testing.assert_array_equal(y, np.where(x >= 0, x, x * slope))


def test_prelu_channel_shared_uses_first_slope(rng):
    x = rng.standard_normal((2, 4, 6)).astype(F)
    slope = np.array([0.25, 9, 9, 9, 9, 9], F)
    (y,) = run_op("PReLU", [x, Const(slope)], channelShared=True)
    np.testing.assert_array_equal(y, np.where(x >= 0, x, x * F(0.25)))


def test_prelu_computed_slope(rng):
    """The slope is the kernel's second input, read at run time (here the graph's second input)."""
    x = rng.standard_normal((2, 3, 19)).astype(F)
    slope = rng.standard_normal(19).astype(F)
    (y,) = run_op("PReLU", [x, slope])
    np.testing.assert_array_equal(y, np.where(x >= 0, x, x * slope))


def test_prelu_slope_count_mismatch_fails():
    with pytest.raises(msv0.ModelError, match="slope"):
        run_op("PReLU", [np.ones((2, 5), F), Const(np.ones(3, F))])


# Every finite float32 at a stride of 2^12 in bit pattern (all exponents, subnormals included),
# both signs, and the specials.
_BITS = np.arange(0, 0x7F800000, 4093, dtype=np.uint32)
ALL_FLOATS = np.concatenate([_BITS.view(F), -_BITS.view(F), np.array([np.inf, -np.inf, np.nan, 0, -0.0], F)])


def _ulps(got, want):
    """|got − want| in units of the float32 spacing at want (want in float64); 0 where both are
    NaN or got is want rounded to an infinity."""
    with np.errstate(all="ignore"):
        w32 = want.astype(F)
        err = np.abs(got.astype(np.float64) - want) / np.spacing(np.maximum(np.abs(w32), F(2.0**-149)))
        err[(got == want) | (np.isinf(w32) & (got == w32)) | (np.isnan(got) & np.isnan(want))] = 0
    return err


KINDS = msv0._core.ACTIVATION_KINDS


def _kernel(kind: str, x, **params):
    y = np.empty_like(x)
    msv0._core.Activation(KINDS[kind], x.shape, **params)([x], [y])
    return y


def test_exp_accuracy_whole_range(isa):
    """The vector exp against float64 exp, over the whole float range, ±inf, NaN and subnormal
    results: within 1.5 ulp (what libm's expf promises is 1)."""
    want = np.exp(ALL_FLOATS.astype(np.float64))
    assert _ulps(_kernel("exp", ALL_FLOATS, alpha=1.0), want).max() <= 1.5


def test_log_accuracy_whole_range(isa):
    """The vector log (the Log op) against float64 log over the whole float range, subnormals
    included: within 1 ulp; −inf for ±0, NaN below 0 and for NaN, +inf for +inf."""
    with np.errstate(all="ignore"):
        want = np.log(ALL_FLOATS.astype(np.float64))
    y = _kernel("log", ALL_FLOATS)
    assert _ulps(y, want).max() <= 1
    np.testing.assert_array_equal(y[-5:], [np.inf, np.nan, np.nan, -np.inf, -np.inf])
    assert _kernel("log", np.array([1], F))[0] == 0


def test_sigmoid_and_elu_accuracy_whole_range(isa):
    x64 = ALL_FLOATS.astype(np.float64)
    with np.errstate(all="ignore"):
        sig = np.where(x64 > F(16.619047), 1.0, np.where(x64 < -9, np.exp(x64), 1 / (1 + np.exp(-x64))))
    assert _ulps(_kernel("sigmoid", ALL_FLOATS), sig).max() <= 2
    assert _ulps(_kernel("elu", ALL_FLOATS, alpha=1.0), np.where(x64 < 0, np.expm1(x64), x64)).max() <= 2


@pytest.mark.parametrize("act", sorted(REFERENCES), ids=lambda a: NAMES[a])
def test_activation_specials(isa, act):
    """NaN, ±inf, ±0 and subnormals through each formula (NaN stays NaN, as in r1.1's C)."""
    x = np.array([np.nan, np.inf, -np.inf, 0, -0.0, 1e-40, -1e-40, 3e38, -3e38] * 3, F)
    (y,) = run_op("Activation", [x], type=act, **PARAMS)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(y, _per_element(lambda v: REFERENCES[act](v, PARAMS), x))


GUARD = 37  # floats of NaN on each side of the output, checked untouched


@pytest.mark.parametrize("shape", [(1,), (5, 3), (2, 17), (3, 33)])
def test_prelu_kernel_canary(isa, shape, rng):
    """Every output element written, nothing outside y, across rows of channels and SIMD tails."""
    x = rng.standard_normal(shape).astype(F)
    slope = rng.standard_normal(shape[-1:]).astype(F)
    size = x.size
    buf = np.full(size + 2 * GUARD, np.nan, F)
    y = buf[GUARD:GUARD + size].reshape(shape)
    msv0._core.Activation(KINDS["prelu"], shape, slope_shape=slope.shape)([x, slope], [y])
    assert np.isnan(buf[:GUARD]).all() and np.isnan(buf[GUARD + size:]).all(), "wrote outside y"
    np.testing.assert_array_equal(y, np.where(x >= 0, x, x * slope))


def test_activation_kernel_checks_its_arguments():
    with pytest.raises(ValueError, match="slope_shape"):
        msv0._core.Activation(KINDS["prelu"], (2, 5), slope_shape=(3,))
    with pytest.raises(ValueError, match="kind"):
        msv0._core.Activation(len(KINDS), (2, 5))
    kernel = msv0._core.Activation(KINDS["relu"], (2, 5))
    with pytest.raises(ValueError, match="expected shape"):
        kernel([np.zeros((5, 2), F)], [np.zeros((2, 5), F)])


def test_activations_run_inside_one_program(rng):
    """conv → PReLU → conv → HSWISH → Elu → Exp: one native Program, equal to calling each
    kernel object alone."""
    b = Builder("prelu_net")
    x = b.input("x", (1, 9, 11, 5), np.float32)
    w1 = b.const("w1", rng.standard_normal((7, 3, 3, 5)).astype(F) * 0.3, format=Format.KHWC)
    h = b.tensor("h")
    b.node("Conv2D", [x, w1], outputs=[h], kernelH=3, kernelW=3, strideH=1, strideW=1, dilateH=1, dilateW=1,
           channelIn=5, channelOut=7, group=1, padMode=PadMode.SAME_UPPER)
    p = b.tensor("p")
    b.node("PReLU", [h, b.const("slope", rng.standard_normal(7).astype(F))], outputs=[p])
    w2 = b.const("w2", rng.standard_normal((6, 1, 1, 7)).astype(F) * 0.3, format=Format.KHWC)
    c = b.tensor("c")
    b.node("Conv2D", [p, w2], outputs=[c], kernelH=1, kernelW=1, strideH=1, strideW=1, dilateH=1, dilateW=1,
           channelIn=7, channelOut=6, group=1)
    hs, e, y = b.tensor("hs"), b.tensor("e"), b.tensor("y")
    b.node("Activation", [c], outputs=[hs], type=ActivationType.HSWISH)
    b.node("Elu", [hs], outputs=[e], alpha=0.5)
    b.node("Exp", [e], outputs=[y], base=-1.0, scale=1.0, shift=0.0)
    b.output(y)
    feeds = [rng.standard_normal((1, 9, 11, 5)).astype(F)]
    for threads in (1, 2):
        assert_program_matches_single_calls(b.finish(), feeds, threads, program_steps=6)


def _softmax_ref(x, axis):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape,axis", [((2, 3, 5, 7), -1), ((2, 3, 5, 7), 3), ((2, 3, 5, 7), 1), ((4, 17), 0),
                                        ((1, 1, 33), -1), ((9,), -1), ((3, 5, 19), 1)])
def test_softmax(isa, shape, axis, rng):
    x = (rng.standard_normal(shape) * 10).astype(F)
    (y,) = run_op("SoftMax", [x], axis=axis)
    np.testing.assert_allclose(y, _softmax_ref(x, axis), rtol=2e-6, atol=1e-12)


def test_softmax_runs_in_the_program(rng):
    b = Builder("softmax")
    x = b.input("x", (2, 9, 37), np.float32)
    s, y = b.tensor("s"), b.tensor("y")
    b.node("SoftMax", [x], outputs=[s], axis=-1)
    b.node("SoftMax", [s], outputs=[y], axis=1)
    b.output(y)
    for threads in (1, 2):
        assert_program_matches_single_calls(b.finish(), [rng.standard_normal((2, 9, 37)).astype(F)], threads,
                                            program_steps=2)


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
