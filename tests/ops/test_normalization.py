"""BatchNorm, FusedBatchNorm, Scale, BiasAdd, LRN, L2Norm, LayerNorm, InstanceNorm and
LpNormalization against per-element references (format-v0.md §5)."""
import numpy as np
import pytest

import msv0
from oprun import Const, run_op, ort_run

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


@pytest.mark.parametrize("p,axis", [(1, -1), (2, 0), (2, 1)])
def test_lp_normalization_matches_onnxruntime(rng, p, axis):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    x[1] = 0 if axis != 0 else x[1]
    (y,) = run_op("LpNormalization", [x], p=p, axis=axis)
    (want,) = ort_run("LpNormalization", [x], p=p, axis=axis)
    np.testing.assert_allclose(y, np.nan_to_num(want), rtol=1e-5, atol=1e-7)


# Normalisations that compute their statistics from the input (no r1.1 kernel for most).
def window_sq(x, before, after):
    c = x.shape[-1]
    out = np.zeros(x.shape, np.float64)
    for i in range(c):
        out[..., i] = np.sum(x[..., max(0, i - before):min(c, i + after + 1)].astype(np.float64) ** 2, -1)
    return out


@pytest.mark.parametrize("c,r", [(1, 0), (7, 2), (16, 5), (33, 1), (5, 9)])
def test_local_response_normalization(rng, c, r):
    x = rng.standard_normal((2, 3, 2, c)).astype(np.float32)
    (y,) = run_op("LocalResponseNormalization", [x], depthRadius=r, bias=1.5, alpha=0.3, beta=0.6)
    want = x * (1.5 + np.float64(np.float32(0.3)) * window_sq(x, r, r)) ** -0.6
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("size", [1, 4, 5])
def test_lrn_onnx_semantics(rng, size):
    x = rng.standard_normal((1, 2, 3, 9)).astype(np.float32)
    (y,) = run_op("Lrn", [x], size=size, alpha=0.01, beta=0.75, bias=2.0)
    want = x / (2.0 + 0.01 / size * window_sq(x, (size - 1) // 2, size // 2)) ** 0.75
    np.testing.assert_allclose(y, want, rtol=1e-5)


def test_lrn_bad():
    with pytest.raises(msv0.ModelError):
        run_op("Lrn", [np.zeros((1, 3), np.float32)], size=0)
    with pytest.raises(msv0.ModelError):
        run_op("LocalResponseNormalization", [np.zeros((1, 3), np.float32)], depthRadius=-1)


def test_lrn_window_work_is_bounded():
    """A window of 65535 channels over 32768 values would take 2^31 adds (a fuzzed file's 14 s)."""
    x = np.ones((1, 1 << 15), np.float32)
    with pytest.raises(msv0.ResourceError, match="window of 65535 channels over 32768 values"):
        run_op("LocalResponseNormalization", [x], depthRadius=1 << 15, bias=1.0, alpha=1.0, beta=0.5)
    with pytest.raises(msv0.ResourceError, match="window of 65535 channels"):
        run_op("Lrn", [x], size=1 << 16, alpha=1.0, beta=0.5, bias=1.0)
    (y,) = run_op("Lrn", [x], size=3, alpha=3.0, beta=0.5, bias=1.0)
    assert y[0, 0] == y[0, -1] == np.float32(1 / np.sqrt(3.0))


@pytest.mark.parametrize("axis,act", [([], 0), ([-1], 0), ([0, 1, 2], 3), ([2], 1)])
def test_l2norm(rng, axis, act):
    x = rng.standard_normal((2, 3, 17)).astype(np.float32) * 3
    (y,) = run_op("L2Norm", [x], axis=axis, epsilon=1e-6, activationType=act)
    red = None if len(axis) != 1 else -1
    want = x / np.sqrt(np.maximum(np.sum(x.astype(np.float64) ** 2, axis=red, keepdims=True), 1e-6))
    want = np.clip(want, 0, 6) if act == 3 else np.maximum(want, 0) if act == 1 else want
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-7)


def test_l2norm_epsilon_and_bad_axis():
    (y,) = run_op("L2Norm", [np.zeros((1, 4), np.float32)], axis=[-1], epsilon=1e-4)
    np.testing.assert_array_equal(y, np.zeros((1, 4), np.float32))
    with pytest.raises(msv0.ModelError):
        run_op("L2Norm", [np.zeros((2, 3, 4), np.float32)], axis=[1])
    with pytest.raises(msv0.ModelError):
        run_op("L2Norm", [np.zeros((2, 3), np.float32)], axis=[2])


def layer_norm_ref(x, k, eps, gamma=None, beta=None):
    axes = tuple(range(x.ndim - k, x.ndim))
    x64 = x.astype(np.float64)
    y = (x64 - x64.mean(axes, keepdims=True)) / np.sqrt(x64.var(axes, keepdims=True) + eps)
    return y if gamma is None else y * gamma + beta


# Blocks of 1, under and past each tier's lanes (4, 8, 16) with tails, a transformer row (256).
@pytest.mark.parametrize("shape,norm", [((2, 3, 5), [5]), ((2, 3, 4, 7), [4, 7]), ((3, 9), []), ((4, 1), [1]),
                                        ((5, 33), [33]), ((2, 3, 256), [256])], ids=str)
@pytest.mark.parametrize("threads", [1, 2])
def test_layer_norm(isa, rng, shape, norm, threads):
    x = rng.standard_normal(shape).astype(np.float32) + 2
    k = len(norm) or len(shape) - 1
    (y,) = run_op("LayerNorm", [x], normalizedShape=norm, epsilon=1e-5, num_threads=threads)
    np.testing.assert_allclose(y, layer_norm_ref(x, k, 1e-5), rtol=1e-4, atol=1e-4)
    g = rng.standard_normal(shape[len(shape) - k:]).astype(np.float32)
    b = rng.standard_normal(shape[len(shape) - k:]).astype(np.float32)
    (y,) = run_op("LayerNorm", [x, Const(g), Const(b)], normalizedShape=norm, epsilon=1e-5, elementwiseAffine=True,
                  num_threads=threads)
    np.testing.assert_allclose(y, layer_norm_ref(x, k, 1e-5, g, b), rtol=1e-4, atol=1e-4)


def test_layer_norm_bad():
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(msv0.ModelError):
        run_op("LayerNorm", [x], normalizedShape=[3])
    with pytest.raises(msv0.ModelError):
        run_op("LayerNorm", [x, Const(np.ones(4, np.float32)), Const(np.ones(4, np.float32))], normalizedShape=[4])
    with pytest.raises(msv0.ModelError):
        run_op("LayerNorm", [x, Const(np.ones(3, np.float32)), Const(np.ones(4, np.float32))], normalizedShape=[4],
               elementwiseAffine=True)


@pytest.mark.parametrize("c", [1, 3, 16])
def test_instance_norm(rng, c):
    x = rng.standard_normal((2, 4, 5, c)).astype(np.float32)
    g = rng.standard_normal(c).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    (y,) = run_op("InstanceNorm", [x, Const(g), Const(b)], epsilon=1e-3)
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean((1, 2), keepdims=True)) / np.sqrt(x64.var((1, 2), keepdims=True) + 1e-3) * g + b
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(msv0.ModelError):
        run_op("InstanceNorm", [x, Const(g[:1] if c > 1 else np.ones(2, np.float32)), Const(b)])
