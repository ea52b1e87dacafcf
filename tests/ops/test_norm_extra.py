"""LRN, L2Norm, LayerNorm, InstanceNorm against NumPy references (channels = last axis)."""
import msv0
import numpy as np
import pytest
from oprun import Const, run_op


def window_sq(x, before, after):
    c = x.shape[-1]
    out = np.zeros(x.shape, np.float64)
    for i in range(c):
        out[..., i] = np.sum(x[..., max(0, i - before):min(c, i + after + 1)].astype(np.float64) ** 2, -1)
    return out


@pytest.mark.parametrize("c,r", [(1, 0), (7, 2), (16, 5), (33, 1)])
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


@pytest.mark.parametrize("shape,norm", [((2, 3, 5), [5]), ((2, 3, 4, 7), [4, 7]), ((3, 9), [])])
def test_layer_norm(rng, shape, norm):
    x = rng.standard_normal(shape).astype(np.float32) + 2
    k = len(norm) or len(shape) - 1
    (y,) = run_op("LayerNorm", [x], normalizedShape=norm, epsilon=1e-5)
    np.testing.assert_allclose(y, layer_norm_ref(x, k, 1e-5), rtol=1e-4, atol=1e-4)
    g = rng.standard_normal(shape[len(shape) - k:]).astype(np.float32)
    b = rng.standard_normal(shape[len(shape) - k:]).astype(np.float32)
    (y,) = run_op("LayerNorm", [x, Const(g), Const(b)], normalizedShape=norm, epsilon=1e-5, elementwiseAffine=True)
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
