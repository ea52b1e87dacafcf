"""int8 Activation, LeakyReLU and SoftMax against tests/int8_ref.py (scalar transcriptions), over
every int8 input value, exactly."""
import numpy as np
import pytest

import msv0
from msv0.fb.ActivationType import ActivationType as A
from int8_ref import hswish_s8, leaky_relu_s8, qp, relu_s8, sigmoid_s8, softmax_s8, tanh_s8
from oprun import run_op

ALL = np.arange(-128, 128, dtype=np.int8)
# (s_in, zp_in, s_out, zp_out): ordinary, zero points at the ends, ratios far from 1 both ways.
PARAMS = [(0.05, -10, 0.03, 4), (0.1, -128, 0.0235, -128), (0.02, 127, 0.5, 127), (0.7, 3, 0.004, -60),
          (0.0431373, -35, 0.0392157, -52)]


def act(q, p, type_, num_threads=1, **attrs):
    s_in, zp_in, s_out, zp_out = p
    (y,) = run_op("Activation", [q], out_dtypes=[np.int8], in_quant=[qp(s_in, zp_in)], out_quant=[qp(s_out, zp_out)],
                  num_threads=num_threads, type=type_, **attrs)
    return y


@pytest.mark.parametrize("p", PARAMS, ids=range(len(PARAMS)))
def test_relu_relu6(p):
    np.testing.assert_array_equal(act(ALL, p, A.RELU), relu_s8(ALL, *p))
    np.testing.assert_array_equal(act(ALL, p, A.RELU6), relu_s8(ALL, *p, relu6=True))


def test_relu6_bound_wraps_as_r11():
    p = (0.1, 0, 0.01, 0)  # round(6 / 0.01) = 600: min(out, 600) is cast to int8 and wraps
    y = act(ALL, p, A.RELU6)
    np.testing.assert_array_equal(y, relu_s8(ALL, *p, relu6=True))
    # q = 20: SRDHM(20, 0.625·2^31) = 13 before the left shift of 4 (r1.1 shifts after), so 208,
    # below the bound 600, and the int8 cast wraps it
    assert y[128 + 20] == 208 - 256


@pytest.mark.parametrize("p", PARAMS, ids=range(len(PARAMS)))
def test_tanh_hswish_leaky(p):
    np.testing.assert_array_equal(act(ALL, p, A.TANH), tanh_s8(ALL, *p))
    if p[0] / 128 / p[2] < 1:  # else r1.1's output exponent is positive (its assert): see below
        np.testing.assert_array_equal(act(ALL, p, A.HSWISH), hswish_s8(ALL, *p))
    for alpha in (0.2, -1.5):
        np.testing.assert_array_equal(act(ALL, p, A.LEAKY_RELU, alpha=alpha), leaky_relu_s8(ALL, *p, alpha))


def test_hswish_positive_output_exponent_rejected():
    with pytest.raises(msv0.ModelError, match="activation_node.*HSWISH"):
        act(ALL, PARAMS[3], A.HSWISH)


def test_hswish_r11_unit_case():
    # r1.1's own unit test: inputs -3.5 .. 6.0 in scale 0.0431373, zp -35
    q = np.array([-116, -105, -93, -35, 23, 35, 46, 104], np.int8)
    y = act(q, PARAMS[4], A.HSWISH)
    np.testing.assert_array_equal(y, hswish_s8(q, *PARAMS[4]))
    assert y.tolist() == [-52, -52, -57, -52, 7, 25, 37, 101]


@pytest.mark.parametrize("s_in,zp_in", [(0.05, -10), (0.1, 127), (0.3, -128), (1e-3, 0)])
def test_sigmoid(s_in, zp_in):
    y = act(ALL, (s_in, zp_in, 1 / 256, -128), A.SIGMOID)
    np.testing.assert_array_equal(y, sigmoid_s8(ALL, s_in, zp_in))


def test_sigmoid_needs_fixed_output_params():
    with pytest.raises(msv0.ModelError, match="activation_node.*1/256"):
        act(ALL, (0.05, 0, 1 / 255, -128), A.SIGMOID)


def test_threads_and_shape(rng):
    q = rng.integers(-128, 128, (3, 7, 11)).astype(np.int8)
    np.testing.assert_array_equal(act(q, PARAMS[0], A.TANH, num_threads=2), tanh_s8(q, *PARAMS[0]))


@pytest.mark.parametrize("type_", [A.SWISH, A.HSIGMOID, A.ELU, A.NO_ACTIVATION])
def test_unsupported_types(type_):
    with pytest.raises(msv0.ModelError, match="activation_node"):
        act(ALL, PARAMS[0], type_)


def test_leaky_relu_primitive_fails_as_in_r11():
    with pytest.raises(msv0.ModelError, match="leakyrelu_node.*int8 LeakyReLU"):
        run_op("LeakyReLU", [ALL], out_dtypes=[np.int8], in_quant=[qp(0.1, 0)], out_quant=[qp(0.1, 0)],
               negativeSlope=0.1)


def test_bad_params():
    with pytest.raises(msv0.ModelError, match="activation_node"):
        run_op("Activation", [ALL], out_dtypes=[np.int8], in_quant=[qp(0.0, 0)], out_quant=[qp(0.1, 0)], type=A.RELU)
    with pytest.raises(msv0.ModelError, match="activation_node"):
        run_op("Activation", [ALL], out_dtypes=[np.int8], in_quant=[qp(0.1, 0)], out_quant=[qp(1e-30, 0)], type=A.RELU6)


def softmax(q, s_in, axis=-1, out_quant=(0.1, 5), num_threads=1):
    (y,) = run_op("SoftMax", [q], out_dtypes=[np.int8], in_quant=[qp(s_in, 3)], out_quant=[qp(*out_quant)], axis=axis,
                  native=True, num_threads=num_threads)
    return y


@pytest.mark.parametrize("s_in", [0.1, 0.0078, 1.0, 2.0**-28])
def test_softmax_sweep(isa, s_in):
    """Every int8 value in one row, and every value against a few partners (all differences)."""
    rows = np.stack([ALL, np.roll(ALL, 77)])
    np.testing.assert_array_equal(softmax(rows, s_in), softmax_s8(rows, s_in))
    pairs = np.stack(np.broadcast_arrays(ALL[:, None], np.array([-128, -1, 0, 127], np.int8)[None, :]), -1)
    pairs = pairs.reshape(-1, 2)
    np.testing.assert_array_equal(softmax(pairs, s_in), softmax_s8(pairs, s_in))


def test_softmax_axes_and_output_params_ignored(isa, rng):
    q = rng.integers(-128, 128, (2, 5, 3, 4)).astype(np.int8)
    for axis in (0, 1, 2, 3, -1):
        np.testing.assert_array_equal(softmax(q, 0.05, axis, out_quant=(1.0, 0)), softmax_s8(q, 0.05, axis))


def test_softmax_rows_across_threads(isa, rng):
    """YOLOv8's box-distribution softmax: 16 bins along axis 1 of [1, 4, 16, 2100] (strided rows),
    enough rows that a 2-thread pool splits them, some mid-row."""
    q = rng.integers(-128, 128, (1, 4, 16, 2100)).astype(np.int8)
    np.testing.assert_array_equal(softmax(q, 0.043, 2, num_threads=2), softmax_s8(q, 0.043, 2))


def test_softmax_long_row(isa, rng):
    # 900 near-equal values: the sum reaches 2^28 and the output shift passes 31 (exact math: 0)
    q = np.concatenate([np.full(899, 100), [101]]).astype(np.int8)[None]
    np.testing.assert_array_equal(softmax(q, 0.01), softmax_s8(q, 0.01))


@pytest.mark.parametrize("shape,axis", [((2, 3), -2), ((2, 3), 2), ((1, 4096), -1), ((1,) * 6, -1)])
def test_softmax_rejects(shape, axis):
    with pytest.raises(msv0.ModelError, match="softmax_node"):
        softmax(np.zeros(shape, np.int8), 0.1, axis)


def test_lookup_kernel_maps_every_value_through_its_table(isa):
    """The native LookupS8 that int8 activations and Concat run on: y = table[x + 128], every int8
    value, an odd element count, a table per channel, and two inputs along an inner axis (an
    identity table copies); bad tables and shapes are refused."""
    from msv0 import _core
    rng = np.random.default_rng(3)
    table = rng.integers(-128, 128, 256, dtype=np.int8)
    x = np.arange(-128, 128, dtype=np.int8)[rng.integers(0, 256, (3, 7, 37))]
    y = np.empty_like(x)
    _core.LookupS8([table], [x.shape], 0)([x], [y])
    np.testing.assert_array_equal(y, table[x.astype(np.int16) + 128])
    x2 = x[:, :, :5].copy()
    y = np.empty((3, 7, 42), np.int8)
    _core.LookupS8([table, np.arange(-128, 128, dtype=np.int8)], [x.shape, x2.shape], 2)([x, x2], [y])
    np.testing.assert_array_equal(y, np.concatenate([table[x.astype(np.int16) + 128], x2], 2))
    per_channel = rng.integers(-128, 128, (37, 256), dtype=np.int8)  # a table per position of the last dim
    y = np.empty_like(x)
    _core.LookupS8([per_channel], [x.shape], 0)([x], [y])
    np.testing.assert_array_equal(y, per_channel[np.arange(37), x.astype(np.int16) + 128])
    big = np.arange(-128, 128, dtype=np.int8)[rng.integers(0, 256, (1, 181, 97, 37))]  # split mid-pixel by 2 threads
    y = np.empty_like(big)
    pool = _core.ThreadPool(2)
    pool.bind()
    try:
        _core.LookupS8([per_channel], [big.shape], 0)([big], [y])
    finally:
        _core.ThreadPool.unbind()
    np.testing.assert_array_equal(y, per_channel[np.arange(37), big.astype(np.int16) + 128])
    for bad in (table[:255], per_channel[:36]):
        with pytest.raises(ValueError, match="256 int8 values"):
            _core.LookupS8([bad], [x.shape], 0)
    with pytest.raises(ValueError, match="off the axis"):
        _core.LookupS8([table, table], [x.shape, (3, 6, 5)], 2)
    with pytest.raises(ValueError, match="axis"):
        _core.LookupS8([table], [x.shape], 3)


def test_softmax_kernel_refuses_bad_tables_and_shapes():
    """Direct callers of the native SoftmaxS8 cannot make its int32 sum wrap or its reciprocal
    divide by zero."""
    from msv0 import _core
    table = np.full(256, 1 << 20, np.int32)
    table[0] = 2**31 - 1
    _core.SoftmaxS8(table, (2, 16), 1)
    for bad in (table[:255], np.where(np.arange(256) == 0, 5, table).astype(np.int32), -table):
        with pytest.raises(ValueError, match="exp_table"):
            _core.SoftmaxS8(bad, (2, 16), 1)
    with pytest.raises(ValueError, match="4095"):
        _core.SoftmaxS8(table, (1, 4096), 1)
    for empty, axis in (((2, 16, 0), 1), ((0, 16), 1), ((2, 0), 1)):  # nothing to do, and no crash
        _core.SoftmaxS8(table, empty, axis)([np.zeros(empty, np.int8)], [np.zeros(empty, np.int8)])
    with pytest.raises(ValueError, match="axis"):
        _core.SoftmaxS8(table, (2, 16), 2)
