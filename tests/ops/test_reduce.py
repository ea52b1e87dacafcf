import numpy as np
import pytest

import msv0
from msv0.builder import Builder
from oprun import Const, assert_program_matches_single_calls, run_op

REF = {0: np.mean, 1: np.max, 2: np.min, 3: np.prod, 4: np.sum, 5: lambda x, axis, keepdims: np.sum(x * x, axis, keepdims=keepdims),
       6: lambda x, axis, keepdims: np.sum(np.abs(x), axis, keepdims=keepdims)}


@pytest.mark.parametrize("mode", range(7))
@pytest.mark.parametrize("axes", [[], [1], [0, 2], [-1], [2, 0, 1]])
@pytest.mark.parametrize("keep", [0, 1])
def test_reduce_modes(rng, mode, axes, keep):
    x = (rng.uniform(0.5, 1.5, (3, 4, 5)) * rng.choice([-1, 1], (3, 4, 5))).astype(np.float32)
    (y,) = run_op("Reduce", [x], axes=axes, keepDims=keep, mode=mode)
    want = REF[mode](x.astype(np.float64), axis=tuple(axes) or None, keepdims=bool(keep))
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-6)
    if axes:  # an empty constant cannot be written (no data is not constant)
        (y2,) = run_op("Reduce", [x, Const(np.array(axes, np.int32))], keepDims=keep, mode=mode)
        np.testing.assert_array_equal(y2, y)


def _signed(rng, shape, lo, hi):
    return (rng.uniform(lo, hi, shape) * rng.choice([-1, 1], shape)).astype(np.float32)


@pytest.mark.parametrize("inner", [1, 3, 15, 16, 17, 33, 100])  # tails and whole vectors of every width
def test_native_reduce_kernel(isa, rng, inner):
    """The C++ Reduce (csrc/kernels/reduce_f32.cc) on every ISA tier, every mode, against NumPy in float64:
    axis 1 runs along inner, axis 2 (inner = 1) along rows of `inner` floats, then several axes in list
    order, non-adjacent ones and all of them."""
    shape = (3, 7, inner)
    for mode in range(7):
        x = _signed(rng, shape, 0.95, 1.05) if mode == 3 else _signed(rng, shape, 0.5, 1.5)
        for axes in ([1], [2], [2, 0], [0, 1, 2]):
            want = REF[mode](x.astype(np.float64), axis=tuple(axes), keepdims=False)
            y = np.full(want.shape, np.nan, np.float32)
            msv0._core.Reduce(shape, axes, mode, 0.5 if mode == 4 else 1.0, want.shape)([x], [y])
            if mode == 4:
                want = want * 0.5
            if mode in (1, 2):
                np.testing.assert_array_equal(y, want.astype(np.float32))
            else:
                np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)


def test_native_reduce_runs_in_one_program(rng):
    """Reduce (Mean, last axis) → Reduce (SumSquare over two axes): one native Program, equal to calling
    each kernel object alone."""
    b = Builder("reduce")
    x = b.input("x", (2, 5, 40, 24), np.float32)
    m = b.node("Reduce", [x], axes=[-1], keepDims=1, mode=0)
    b.output(b.node("Reduce", [m], axes=[2, 0], keepDims=0, mode=5))
    feeds = [rng.standard_normal((2, 5, 40, 24)).astype(np.float32)]
    for threads in (1, 2):
        assert_program_matches_single_calls(b.finish(), feeds, threads, program_steps=2)


def test_reduce_to_end_and_coeff(rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    (y,) = run_op("Reduce", [x], axes=[1], keepDims=1, mode=4, reduceToEnd=True, coeff=0.5)
    np.testing.assert_allclose(y, 0.5 * x.astype(np.float64).sum((1, 2, 3)), rtol=1e-5, atol=1e-5)
    (y,) = run_op("Reduce", [x], axes=[2], keepDims=1, mode=4, coeff=0.5)  # coeff ignored without reduceToEnd
    np.testing.assert_allclose(y, x.astype(np.float64).sum(2, keepdims=True), rtol=1e-5, atol=1e-5)
    with pytest.raises(msv0.ModelError):
        run_op("Reduce", [x], axes=[1, 2], mode=4, reduceToEnd=True)


def test_reduce_int_and_all(rng):
    x = rng.integers(-50, 50, (4, 7), dtype=np.int32)
    (y,) = run_op("Reduce", [x], out_dtypes=[np.int32], axes=[1], mode=0)
    np.testing.assert_array_equal(y, np.trunc(x.sum(1) / 7).astype(np.int32))
    b = rng.random((3, 4)) > 0.2
    (y,) = run_op("Reduce", [b], out_dtypes=[np.bool_], axes=[0], mode=7)
    np.testing.assert_array_equal(y, b.all(0))


@pytest.mark.parametrize("attrs", [dict(axes=[3]), dict(axes=[1, 1]), dict(axes=[0], mode=9), dict(axes=[0], mode=7)])
def test_reduce_bad(rng, attrs):
    with pytest.raises(msv0.ModelError):
        run_op("Reduce", [rng.standard_normal((2, 3)).astype(np.float32)], **attrs)


def test_mean_op(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    (y,) = run_op("Mean", [x], axis=[1, 2], keepDims=True)
    np.testing.assert_allclose(y, x.astype(np.float64).mean((1, 2), keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,fn", [("ArgMax", np.argmax), ("ArgMin", np.argmin)])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keep", [False, True])
def test_arg_top1(rng, op, fn, axis, keep):
    x = rng.integers(0, 4, (3, 5, 7)).astype(np.float32)  # many ties: first occurrence wins
    (y,) = run_op(op, [x], axis=axis, keepDims=keep)
    want = fn(x, axis=axis)
    want = np.expand_dims(want, axis) if keep else want
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, want.astype(np.float32))
    idx, val = run_op(op, [x], outputs=2, axis=axis, keepDims=keep)
    np.testing.assert_array_equal(idx, y)
    np.testing.assert_array_equal(val, np.take_along_axis(x, np.expand_dims(fn(x, axis=axis), axis), axis)
                                  .reshape(y.shape))
    (v,) = run_op(op, [x], axis=axis, keepDims=keep, outMaxValue=True)
    np.testing.assert_array_equal(v, val)


def test_arg_topk(rng):
    x = rng.permutation(60).astype(np.float32).reshape(3, 4, 5)
    (y,) = run_op("ArgMax", [x], axis=2, topK=3)
    np.testing.assert_array_equal(y, np.argsort(-x, axis=2)[..., :3].astype(np.float32))
    (y,) = run_op("ArgMin", [x], axis=1, topK=9, outMaxValue=True)  # topK clamps to 4
    np.testing.assert_array_equal(y, np.sort(x, axis=1))
    with pytest.raises(msv0.ModelError):
        run_op("ArgMax", [x], axis=0, topK=0)
    with pytest.raises(msv0.ModelError):
        run_op("ArgMax", [rng.standard_normal((1, 2, 1, 2, 2)).astype(np.float32)], axis=0)


@pytest.mark.parametrize("axes,keep", [([1], 0), ([0, -1], 1), ([0, 1, 2], 0)])
def test_all(rng, axes, keep):
    x = rng.random((3, 4, 2)) > 0.2
    (y,) = run_op("All", [x, Const(np.array(axes, np.int32))], out_dtypes=[np.bool_], keepDims=keep)
    want = np.all(x, axis=tuple(a % 3 for a in axes), keepdims=bool(keep))
    np.testing.assert_array_equal(y, want)
