"""BatchNorm, FusedBatchNorm, Scale and BiasAdd against per-element references (format-v0.md §5)."""
import numpy as np
import pytest

import msv0
from oprun import Const, run_op

F = np.float32
SHAPES = [(2, 3, 5, 1), (1, 4, 4, 7), (2, 3, 9), (5, 16), (1, 2, 2, 33)]


def _channel_ref(fn, x, *vectors):
    """fn(x_value, per-channel values...) applied element by element along the last dim."""
    out = np.empty_like(x)
    for i in np.ndindex(x.shape):
        out[i] = fn(x[i], *(v[i[-1]] for v in vectors))
    return out


def _bn(v, mean, var, eps):
    return F(F(v - mean) / F(np.sqrt(F(var + eps))))


@pytest.mark.parametrize("shape", SHAPES)
def test_batch_norm(shape, rng):
    c = shape[-1]
    x = rng.standard_normal(shape).astype(F)
    mean, var = rng.standard_normal(c).astype(F), rng.random(c).astype(F)
    (y,) = run_op("BatchNorm", [x, Const(mean), Const(var)], epsilon=1e-3)
    np.testing.assert_array_equal(y, _channel_ref(lambda v, m, s: _bn(v, m, s, F(1e-3)), x, mean, var))


@pytest.mark.parametrize("shape", SHAPES)
def test_fused_batch_norm(shape, rng):
    c = shape[-1]
    x = rng.standard_normal(shape).astype(F)
    scale, offset, mean = (rng.standard_normal(c).astype(F) for _ in range(3))
    var = rng.random(c).astype(F)
    (y,) = run_op("FusedBatchNorm", [x, Const(scale), Const(offset), Const(mean), Const(var)], epsilon=1e-5)
    ref = _channel_ref(lambda v, s, o, m, va: F(F(_bn(v, m, va, F(1e-5)) * s) + o), x, scale, offset, mean, var)
    np.testing.assert_array_equal(y, ref)


def test_batch_norm_computed_statistics(rng):
    # Mean/variance need not be constants: they are read when the node runs.
    x = rng.standard_normal((2, 3, 4)).astype(F)
    mean, var = rng.standard_normal(4).astype(F), rng.random(4).astype(F)
    (y,) = run_op("BatchNorm", [x, mean, var], epsilon=1e-5)
    np.testing.assert_array_equal(y, _channel_ref(lambda v, m, s: _bn(v, m, s, F(1e-5)), x, mean, var))


def test_batch_norm_channel_mismatch_fails():
    with pytest.raises(msv0.ModelError, match="channels"):
        run_op("BatchNorm", [np.ones((2, 3), F), Const(np.ones(2, F)), Const(np.ones(3, F))])


def test_fused_batch_norm_input_count_fails():
    with pytest.raises(msv0.ModelError, match="expected 5 inputs"):
        run_op("FusedBatchNorm", [np.ones((2, 3), F), Const(np.ones(3, F)), Const(np.ones(3, F))])


@pytest.mark.parametrize("shape,axis,sshape", [
    ((2, 3, 5, 7), 3, (7,)),
    ((2, 3, 5, 7), -1, (7,)),
    ((2, 3, 5, 7), 1, (3,)),
    ((2, 3, 5, 7), 1, (3, 5)),
    ((2, 3, 5, 7), 0, (2, 3, 5, 7)),
    ((4, 9), 1, (9,)),
])
@pytest.mark.parametrize("with_offset", [False, True])
def test_scale(shape, axis, sshape, with_offset, rng):
    x = rng.standard_normal(shape).astype(F)
    s = rng.standard_normal(sshape).astype(F)
    o = rng.standard_normal(sshape).astype(F) if with_offset else np.zeros(sshape, F)
    ins = [x, Const(s)] + ([Const(o)] if with_offset else [])
    (y,) = run_op("Scale", ins, axis=axis)
    a = axis % len(shape)
    # Index scale/offset by x's indices over the dims [a, a + len(sshape)).
    ref = np.empty_like(x)
    for i in np.ndindex(shape):
        k = i[a:a + len(sshape)]
        ref[i] = F(F(x[i] * s[k]) + o[k])
    np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("act,lo,hi", [(1, 0, np.inf), (3, 0, 6)])
def test_scale_fused_activation(act, lo, hi, rng):
    x = (rng.standard_normal((2, 4, 4, 9)) * 5).astype(F)
    s, o = rng.standard_normal(9).astype(F), rng.standard_normal(9).astype(F)
    (y,) = run_op("Scale", [x, Const(s), Const(o)], axis=-1, activationType=act)
    np.testing.assert_array_equal(y, np.clip(x * s + o, F(lo), F(hi)))


def test_scale_without_offset_adds_zero():
    # r1.1 adds a zero offset, so −0 products come out +0.
    (y,) = run_op("Scale", [np.array([[0.0, -1.0]], F), Const(np.array([-1.0, 0.0], F))], axis=1)
    assert not np.signbit(y).any()


@pytest.mark.parametrize("act", [2, 4, 5, 10, 12])
def test_scale_rejects_other_activations(act):
    with pytest.raises(msv0.ModelError, match="activation"):
        run_op("Scale", [np.ones((2, 3), F), Const(np.ones(3, F))], axis=1, activationType=act)


@pytest.mark.parametrize("axis,sshape", [(1, (4,)), (2, (4,)), (1, (3, 2)), (2, (3, 3))])
def test_scale_shape_mismatch_fails(axis, sshape):
    with pytest.raises(msv0.ModelError, match="scale shape"):
        run_op("Scale", [np.ones((2, 3, 3), F), Const(np.ones(sshape, F))], axis=axis)


@pytest.mark.parametrize("shape", [(7,), (3, 1), (2, 3, 17), (1, 5, 5, 8), (1, 2, 2, 3, 9)])
def test_bias_add(shape, rng):
    x = rng.standard_normal(shape).astype(F)
    b = rng.standard_normal(shape[-1]).astype(F)
    (y,) = run_op("BiasAdd", [x, Const(b)])
    np.testing.assert_array_equal(y, _channel_ref(lambda v, c: F(v + c), x, b))


def test_bias_add_rank_and_size_checks():
    with pytest.raises(msv0.ModelError, match="rank"):
        run_op("BiasAdd", [np.ones((1,) * 6, F), Const(np.ones(1, F))])
    with pytest.raises(msv0.ModelError, match="channels"):
        run_op("BiasAdd", [np.ones((2, 3), F), Const(np.ones(2, F))])
