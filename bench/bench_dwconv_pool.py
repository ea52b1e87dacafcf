"""Depthwise conv and pooling kernels on MobileNetV2 / ResNet-50 shapes, one thread.

Run: python -m pytest bench/bench_dwconv_pool.py --benchmark-only
The kernels are called directly (weights packed beforehand), so the numbers are kernel time
plus one pybind call; ISA is the best this CPU has unless MSV0_ISA caps it.
"""
import numpy as np
import pytest

from msv0 import _core

FLT_MAX = float(np.finfo(np.float32).max)

# (h, c, stride) of MobileNetV2's 3x3 depthwise layers (input size), plus one 5x5 for the fast path.
DW_SHAPES = [(112, 32, 1), (112, 96, 2), (56, 144, 1), (56, 144, 2), (28, 192, 1), (14, 576, 1), (7, 960, 1)]


@pytest.mark.parametrize("h,c,s", DW_SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("k", [3, 5])
def test_dwconv2d_f32(benchmark, h, c, s, k):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, h, h, c), dtype=np.float32)
    wt = rng.standard_normal((c, k, k), dtype=np.float32)
    bias = rng.standard_normal(c, dtype=np.float32)
    oh = -(-h // s)
    total = (oh - 1) * s + k - h
    y = np.empty((1, oh, oh, c), np.float32)
    conv = _core.conv2d_f32(wt[..., None], bias, c, s, s, 1, 1, total // 2, total // 2, x.shape, y.shape, 0.0, 6.0)
    benchmark(conv, [x], [y])


@pytest.mark.parametrize("shape", [(1, 7, 7, 1280), (1, 7, 7, 2048)], ids=str)
def test_global_avgpool2d_f32(benchmark, shape):
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    y = np.empty((1, 1, 1, shape[3]), np.float32)
    pool = _core.Pool2d(False, shape[1], shape[2], 1, 1, 0, 0, x.shape, y.shape, -FLT_MAX, FLT_MAX)
    benchmark(pool, [x], [y])


def test_maxpool2d_f32_resnet_stem(benchmark):
    x = np.random.default_rng(0).standard_normal((1, 112, 112, 64), dtype=np.float32)
    y = np.empty((1, 56, 56, 64), np.float32)
    pool = _core.Pool2d(True, 3, 3, 2, 2, 1, 1, x.shape, y.shape, -FLT_MAX, FLT_MAX)
    benchmark(pool, [x], [y])
