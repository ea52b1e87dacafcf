"""int8 Add / Sub / Mul / Eltwise against tests/int8_ref.py, exactly, on every ISA tier."""
import numpy as np
import pytest

import msv0
from msv0.fb.ActivationType import ActivationType
from msv0.fb.EltwiseMode import EltwiseMode
from int8_ref import add_s8, mul_s8, qp, sub_s8
from oprun import Const, run_op

REFS = {"Add": add_s8, "Sub": sub_s8, "Mul": mul_s8}
# Sizes around every lane count (1, 8, 16) and a prime.
SIZES = [1, 7, 8, 9, 15, 16, 17, 35, 97]
# (s0, zp0, s1, zp1, s_out, zp_out): ordinary, zero points at the ends, extreme scale ratios.
PARAMS = [
    (0.1, 3, 0.05, -2, 0.2, 1),
    (0.02, -128, 0.02, 127, 0.03, -128),
    (1.0, 127, 2.0**-18, -128, 0.5, 127),
    (0.0037, 0, 0.9, -7, 0.0041, 5),
    (3.0, -100, 0.007, 50, 40.0, 0),
]


def _q(rng, shape):
    return rng.integers(-128, 128, shape).astype(np.int8)


def _run(op, a, b, p, threads=1, **attrs):
    s0, zp0, s1, zp1, so, zpo = p
    (y,) = run_op(op, [a, b], out_dtypes=[np.int8], in_quant=[qp(s0, zp0), qp(s1, zp1)], out_quant=[qp(so, zpo)],
                  num_threads=threads, **attrs)
    return y


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("p", PARAMS, ids=range(len(PARAMS)))
def test_same_shape(isa, rng, op, p):
    for n in SIZES:
        a, b = _q(rng, (3, n)), _q(rng, (3, n))
        np.testing.assert_array_equal(_run(op, a, b, p, activationType=0), REFS[op](a, b, *p))


def test_full_sweep(isa):
    """Every pair of int8 values, for each op."""
    a = np.repeat(np.arange(-128, 128), 256).astype(np.int8)
    b = np.tile(np.arange(-128, 128), 256).astype(np.int8)
    p = PARAMS[0]
    for op, ref in REFS.items():
        np.testing.assert_array_equal(_run(op, a, b, p, threads=2, activationType=0), ref(a, b, *p))


# Scales whose factors are powers of two put many sums exactly on r1.1's rounding ties, where the
# kernels' float form must hand over to the integer one; the others are ordinary, far apart, or
# make Mul's factor small enough for its float form.
SWEEP_PARAMS = [
    (0.25, 0, 0.125, 0, 0.5, 0),
    (0.5, -128, 0.5, 127, 0.5, -128),
    (2.0**-6, 17, 2.0**-9, -3, 2.0**-4, 100),
    (0.01, 5, 0.02, -9, 0.5, -1),
    (0.013, -60, 0.0071, 88, 0.021, 12),
    (0.3, 127, 0.0003, -128, 0.002, -128),
]


@pytest.mark.parametrize("p", SWEEP_PARAMS, ids=range(len(SWEEP_PARAMS)))
def test_full_sweep_scales(isa, p):
    """Every pair of int8 values, for each op, on scales that reach both of the kernel's forms."""
    a = np.repeat(np.arange(-128, 128), 256).astype(np.int8)
    b = np.tile(np.arange(-128, 128), 256).astype(np.int8)
    for op, ref in REFS.items():
        np.testing.assert_array_equal(_run(op, a, b, p, activationType=0), ref(a, b, *p))


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("shapes", [((2, 5, 17), (17,)), ((2, 5, 17), (1, 5, 17)), ((17,), (2, 5, 17)),
                                    ((4, 9), (1,)), ((1,), (4, 9)), ((1, 1), (3, 33))], ids=str)
def test_broadcast_layouts(isa, rng, op, shapes):
    a, b = _q(rng, shapes[0]), _q(rng, shapes[1])
    p = PARAMS[3]
    want = REFS[op](*np.broadcast_arrays(a, b), *p)
    np.testing.assert_array_equal(_run(op, a, b, p, activationType=0), want)


# General broadcasting, one value per row (the kernel's per-row operand: a [N, H, W, 1] mask on
# NHWC, lane counts ±1 in the row), and rows of two lengths (general again).
BROADCASTS = [((2, 1, 7, 3), (2, 5, 1, 3)), ((2, 5, 17), (2, 5, 1)), ((3, 1, 1), (3, 4, 15)), ((6, 1), (6, 9)),
              ((2, 5, 17), (5, 1)), ((4, 16), (3, 4, 1))]


@pytest.mark.parametrize("op", ["Sub", "Mul"])
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
def test_general_broadcast_sub_mul(isa, rng, op, shapes):
    a, b = _q(rng, shapes[0]), _q(rng, shapes[1])
    want = REFS[op](*np.broadcast_arrays(a, b), *PARAMS[0])
    np.testing.assert_array_equal(_run(op, a, b, PARAMS[0]), want)


@pytest.mark.parametrize("shapes", [((2, 1, 7, 3), (2, 5, 1, 3)), ((2, 5, 17), (2, 5, 1))], ids=str)
def test_add_rejects_what_r11_computes_wrongly(rng, shapes):
    a, b = _q(rng, shapes[0]), _q(rng, shapes[1])
    with pytest.raises(msv0.ModelError, match="add_node.*broadcast"):
        _run("Add", a, b, PARAMS[0], activationType=0)


@pytest.mark.parametrize("act", [ActivationType.RELU, ActivationType.RELU6, ActivationType.SIGMOID])
def test_add_fused_activation(isa, rng, act):
    a, b = _q(rng, (3, 37)), _q(rng, (3, 37))
    p = (0.05, -20, 0.04, 10, 0.03, -30)
    np.testing.assert_array_equal(_run("Add", a, b, p, activationType=act), add_s8(a, b, *p, act=act))


@pytest.mark.parametrize("op", ["Sub", "Mul"])
def test_sub_mul_ignore_activation(rng, op):
    a, b = _q(rng, (3, 37)), _q(rng, (3, 37))
    p = (0.05, -20, 0.04, 10, 0.03, -30)
    np.testing.assert_array_equal(_run(op, a, b, p, activationType=ActivationType.RELU), REFS[op](a, b, *p))


def test_threads(rng):
    a, b = _q(rng, (5, 9001)), _q(rng, (9001,))
    for op, ref in REFS.items():
        np.testing.assert_array_equal(_run(op, a, b, PARAMS[1], threads=2, activationType=0),
                                      ref(*np.broadcast_arrays(a, b), *PARAMS[1]))


def test_const_input(rng):
    a, b = _q(rng, (4, 19)), _q(rng, (19,))
    (y,) = run_op("Mul", [a, Const(b, quant=qp(0.05, -2))], out_dtypes=[np.int8], in_quant=[qp(0.1, 3)],
                  out_quant=[qp(0.2, 1)])
    np.testing.assert_array_equal(y, mul_s8(*np.broadcast_arrays(a, b), 0.1, 3, 0.05, -2, 0.2, 1))


@pytest.mark.parametrize("mode,op", [(EltwiseMode.SUM, "Add"), (EltwiseMode.PROD, "Mul")])
def test_eltwise(rng, mode, op):
    a, b = _q(rng, (2, 23)), _q(rng, (2, 23))
    np.testing.assert_array_equal(_run("Eltwise", a, b, PARAMS[0], mode=mode), REFS[op](a, b, *PARAMS[0]))


def test_eltwise_maximum_rejected(rng):
    with pytest.raises(msv0.ModelError, match="eltwise_node"):
        _run("Eltwise", _q(rng, 4), _q(rng, 4), PARAMS[0], mode=EltwiseMode.MAXIMUM)


@pytest.mark.parametrize("in_quant,out_quant", [
    ([qp(0.1, 0), qp(0.0, 0)], [qp(0.1, 0)]),           # zero scale
    ([qp(0.1, 0), qp(0.1, 200)], [qp(0.1, 0)]),         # zero point outside int8
    ([qp(0.1, 0), qp(0.1, 0) * 2], [qp(0.1, 0)]),       # per-channel activation
    ([qp(1.0, 0), qp(1e-13, 0)], [qp(0.1, 0)]),          # a multiplier needing a shift past 31
    ([qp(0.1, 0), qp(0.1, 0)], [None]),                 # no output param
])
def test_bad_params(rng, in_quant, out_quant):
    a = _q(rng, 5)
    with pytest.raises(msv0.ModelError, match="add_node"):
        run_op("Add", [a, a], out_dtypes=[np.int8], in_quant=in_quant, out_quant=out_quant, activationType=0)


def test_second_input_must_be_int8(rng):
    with pytest.raises(msv0.ModelError, match="mul_node"):
        run_op("Mul", [_q(rng, 5), np.zeros(5, np.float32)], out_dtypes=[np.int8], in_quant=[qp(0.1, 0), None],
               out_quant=[qp(0.1, 0)])


def test_kernel_checks_arguments():
    ok = dict(op=0, a_kind=0, b_kind=0, inner=1, a_shape=[4], b_shape=[4], y_shape=[4], a_zp=0,
              a_requant=[1 << 30, 20, 1], b_zp=0, b_requant=[1 << 30, 20, 1], y_requant=[1 << 30, 0, 1], y_zp=0)
    msv0._core.BinaryS8(**ok)
    for bad in [dict(op=3), dict(a_kind=5), dict(b_shape=[3]), dict(a_zp=128), dict(y_requant=[1, 32, 0]),
                dict(a_requant=[1, 0]), dict(lo=5, hi=4), dict(a_kind=1, inner=3)]:
        with pytest.raises(ValueError):
            msv0._core.BinaryS8(**{**ok, **bad})


DIV_PARAMS = PARAMS + [(0.1, 0, 0.1, 0, 1e-6, 0), (1e-6, 3, 0.5, -1, 40.0, 2)]


@pytest.mark.parametrize("p", DIV_PARAMS, ids=range(len(DIV_PARAMS)))
def test_div(rng, p):
    from int8_ref import div_s8

    a, b = _q(rng, (3, 37)), _q(rng, (37,))
    b[b == p[3]] = p[3] + (1 if p[3] < 127 else -1)  # no zero divisor
    np.testing.assert_array_equal(_run("Div", a, b, p, activationType=ActivationType.RELU),
                                  div_s8(*np.broadcast_arrays(a, b), *p))


def test_div_sweep():
    from int8_ref import div_s8

    """Every dividend against divisors at the ends, around the zero point and at powers of two."""
    divisors = np.array([-128, -127, -66, -65, -64, -63, -3, -1, 0, 1, 2, 7, 62, 63, 64, 126, 127], np.int8)
    a = np.repeat(np.arange(-128, 128), len(divisors)).astype(np.int8)
    b = np.tile(divisors, 256)
    np.testing.assert_array_equal(_run("Div", a, b, PARAMS[0]), div_s8(a, b, *PARAMS[0]))


def test_div_errors(rng):
    a = _q(rng, 5)
    with pytest.raises(msv0.ModelError, match="div_node.*division by zero"):
        _run("Div", a, np.full(5, -2, np.int8), PARAMS[0])
    with pytest.raises(msv0.ModelError, match="div_node.*exponent"):
        _run("Div", a, a, (1.0, 0, 1e-4, 0, 1e-4, 0))
