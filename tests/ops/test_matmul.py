import numpy as np
import pytest

import msv0
from oprun import Const, run_op


def ref_mm(a, b, ta, tb, bias=None):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if ta:
        a64 = np.swapaxes(a64, -1, -2)
    if tb:
        b64 = np.swapaxes(b64, -1, -2)
    y = a64 @ b64
    return y if bias is None else y + bias


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("batch,m,k,n", [((), 1, 1, 1), ((), 5, 7, 9), ((2,), 3, 17, 33), ((2, 3), 4, 8, 15)])
@pytest.mark.parametrize("const_b", [False, True])
def test_matmul(isa, rng, ta, tb, batch, m, k, n, const_b):
    a = rng.standard_normal(batch + ((k, m) if ta else (m, k))).astype(np.float32)
    b = rng.standard_normal(batch + ((n, k) if tb else (k, n))).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    (y,) = run_op("MatMul", [a, Const(b) if const_b else b, Const(bias)], transposeA=ta, transposeB=tb)
    assert y.shape == batch + (m, n)
    np.testing.assert_allclose(y, ref_mm(a, b, ta, tb, bias), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("batch", [(1,), (3,), (2, 2)], ids=str)
@pytest.mark.parametrize("const_b", [False, True])
def test_matmul_threads(isa, rng, batch, const_b):
    # Two threads: one batch runs over the pool; >= 2 batches go one per thread. Sizes past the
    # tiles (13 rows, 47 columns) with a transposed A and B packed per run or once.
    m, k, n = 13, 33, 47
    a = rng.standard_normal(batch + (k, m)).astype(np.float32)
    b = rng.standard_normal(batch + (n, k)).astype(np.float32)
    (y,) = run_op("MatMul", [a, Const(b) if const_b else b], num_threads=2, transposeA=True, transposeB=True)
    np.testing.assert_allclose(y, ref_mm(a, b, True, True), rtol=1e-5, atol=1e-4)


def test_matmul_1d_and_4d_squeeze(isa, rng):
    a, b = rng.standard_normal(6).astype(np.float32), rng.standard_normal((6, 3)).astype(np.float32)
    (y,) = run_op("MatMul", [a, Const(b)])
    assert y.shape == (3,)
    np.testing.assert_allclose(y, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    (y,) = run_op("MatMul", [b.T.copy(), Const(a)])
    assert y.shape == (3,)
    np.testing.assert_allclose(y, b.T.astype(np.float64) @ a, rtol=1e-5, atol=1e-5)
    x4 = rng.standard_normal((2, 6, 1, 1)).astype(np.float32)
    (y,) = run_op("MatMul", [x4, Const(b)])
    assert y.shape == (2, 3)
    np.testing.assert_allclose(y, x4.reshape(2, 6).astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_matmul_weight_quant(isa, rng):
    a = rng.standard_normal((3, 5)).astype(np.float32)
    qb = rng.integers(-128, 128, (5, 4)).astype(np.int8)
    (y,) = run_op("MatMul", [a, Const(qb, quant=[dict(scale=0.02, zeroPoint=3, inited=True)])])
    w = (qb.astype(np.int64) - 3).astype(np.float32) * np.float32(0.02)
    np.testing.assert_allclose(y, a.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ashape,bshape,attrs", [((2, 3, 4), (4, 5), {}), ((3, 4), (5, 6), {}),
                                                 ((2, 3, 4), (3, 4, 5), {}), ((3, 4), (3, 5), dict(transposeB=True))])
def test_matmul_bad(rng, ashape, bshape, attrs):
    a, b = rng.standard_normal(ashape).astype(np.float32), rng.standard_normal(bshape).astype(np.float32)
    with pytest.raises(msv0.ModelError):
        run_op("MatMul", [a, Const(b)], **attrs)
    with pytest.raises(msv0.ModelError):
        run_op("MatMul", [a, b], **attrs)


def test_matmul_bias_checks(rng):
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    with pytest.raises(msv0.ModelError):
        run_op("MatMul", [a, Const(b), Const(np.zeros(3, np.float32))])
    with pytest.raises(msv0.ModelError):
        run_op("MatMul", [a, Const(b), np.zeros(4, np.float32)])
    with pytest.raises(msv0.ModelError):  # a float weight with an inited QuantParam fails in r1.1
        run_op("MatMul", [a, Const(b, quant=[dict(scale=1.0, zeroPoint=0, inited=True)])])


@pytest.mark.parametrize("shape,n", [((4, 7), 3), ((2, 3, 5), 9), ((1, 17), 33)])
@pytest.mark.parametrize("act", [0, 1, 3, 2])
def test_full_connection(isa, rng, shape, n, act):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    k = shape[-1]
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    (y,) = run_op("FullConnection", [x, Const(w), Const(b)], activationType=act, hasBias=True)
    ref = x.reshape(-1, k).astype(np.float64) @ w.T.astype(np.float64) + b
    ref = {1: np.maximum(ref, 0), 3: np.clip(ref, 0, 6)}.get(act, ref)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-4)


def test_full_connection_use_axis(isa, rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    w = rng.standard_normal((6, 20)).astype(np.float32)
    (y,) = run_op("FullConnection", [x, Const(w)], useAxis=True, axis=2)
    assert y.shape == (2, 3, 6)
    np.testing.assert_allclose(y, x.reshape(2, 3, 20).astype(np.float64) @ w.T, rtol=1e-5, atol=1e-4)
    with pytest.raises(msv0.ModelError):
        run_op("FullConnection", [x, Const(w)], useAxis=True, axis=1)
    with pytest.raises(msv0.ModelError):
        run_op("FullConnection", [x, Const(rng.standard_normal((6, 7)).astype(np.float32))])


@pytest.mark.parametrize("per_channel", [False, True])
def test_full_connection_weight_quant(isa, rng, per_channel):
    x = rng.standard_normal((3, 9)).astype(np.float32)
    qw = rng.integers(-128, 128, (4, 9)).astype(np.int8)
    if per_channel:
        params = [dict(scale=0.01 * (c + 1), zeroPoint=c - 1, inited=True) for c in range(4)]
        scale = np.array([0.01 * (c + 1) for c in range(4)], np.float32)[:, None]
        zp = np.arange(4)[:, None] - 1
    else:
        params = [dict(scale=0.03, zeroPoint=-2, inited=True)]
        scale, zp = np.float32(0.03), -2
    (y,) = run_op("FullConnection", [x, Const(qw, quant=params)])
    w = (qw.astype(np.int64) - zp).astype(np.float32) * scale
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-5, atol=1e-5)
