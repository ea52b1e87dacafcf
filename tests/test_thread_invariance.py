"""Results do not depend on the thread count: every split a kernel makes for its threads (tiles
of rows, shares of output channels, blocks of Winograd tiles, the bands of a fused block) leaves
each output element's arithmetic as it is, so 1, 2 or 3 threads, and a pool running solo (split
as for one thread), give the same bits."""
import numpy as np
import pytest

import msv0
from msv0 import _core, zoo
from msv0.quantize import quantize


def outputs(op, xs, y_shapes):
    """op's outputs with no pool, on pools of 2 and 3 threads, and on a solo pool of 2."""
    runs = []
    for threads, solo in ((None, False), (2, False), (3, False), (2, True)):
        ys = [np.full(s, np.nan, np.float32) for s in y_shapes]
        pool = _core.ThreadPool(threads) if threads else None
        if pool:
            pool.solo = solo
            pool.bind()
        try:
            op(xs, ys)
        finally:
            _core.ThreadPool.unbind()
        runs.append(ys)
    return runs


def assert_same(runs):
    for ys in runs[1:]:
        for y, first in zip(ys, runs[0]):
            np.testing.assert_array_equal(y, first)


# Rows 1-3 (wide tiles of few rows), tails after whole row tiles on every tier (4, 6, 12 rows),
# the few-rows path (up to 120) and beyond, split by rows or by panels.
GEMM_SIZES = [(1, 1000, 64), (2, 100, 50), (3, 600, 300), (13, 70, 33), (29, 520, 40), (121, 17, 257), (197, 70, 33),
              (30, 512, 20)]


@pytest.mark.parametrize("m,n,k", GEMM_SIZES, ids=str)
def test_gemm(isa, rng, m, n, k):
    gemm = _core.Gemm(rng.standard_normal((n, k), dtype=np.float32), True, rng.standard_normal(n, dtype=np.float32),
                      (m, k), (m, n))
    assert_same(outputs(gemm, [rng.standard_normal((m, k), dtype=np.float32)], [(m, n)]))


# (x shape, weight shape, stride, pad, the algorithm): tiles of pixels that end inside a row tile,
# channel shares for few pixels (also of Winograd's, with weights over 1 MiB), Winograd blocks, and a batch of 1-D convs read in place
# (window_step: one GEMM per image).
CONVS = [((1, 23, 29, 16), (24, 1, 1, 16), 1, 0, "gemm1x1"),
         ((1, 19, 21, 8), (20, 3, 3, 8), 2, 1, "im2col"),
         ((1, 30, 26, 17), (20, 3, 3, 17), 1, 1, "winograd"),
         ((1, 7, 7, 40), (300, 1, 1, 40), 1, 0, "gemm1x1"),
         ((1, 7, 7, 33), (17, 3, 3, 33), 1, 1, "winograd_f2"),
         ((1, 7, 7, 512), (176, 3, 3, 512), 1, 1, "winograd_f2"),
         ((3, 37, 1, 8), (12, 5, 1, 8), 1, 0, "im2col")]


@pytest.mark.parametrize("x_shape,w_shape,stride,pad,algorithm", CONVS, ids=[f"{c[-1]}-{c[0][1]}x{c[0][2]}x{c[0][3]}" for c in CONVS])
def test_conv2d(isa, rng, x_shape, w_shape, stride, pad, algorithm):
    n, h, w, _ = x_shape
    oc, kh, kw, _ = w_shape
    y_shape = (n, (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1, oc)
    weight = rng.standard_normal(w_shape, dtype=np.float32)
    assert _core.conv2d_algorithm(weight.shape, 1, stride, stride, 1, 1, pad, pad, x_shape, y_shape) == algorithm
    conv = _core.conv2d_f32(weight, rng.standard_normal(oc, dtype=np.float32), 1, stride, stride, 1, 1, pad, pad,
                            x_shape, y_shape)
    assert_same(outputs(conv, [rng.standard_normal(x_shape, dtype=np.float32)], [y_shape]))


def test_batched_matmul(isa, rng):
    """A batch split over threads, or each product split inside: the same bits."""
    for batch in (1, 2, 5):
        a, b = rng.standard_normal((batch, 37, 19), dtype=np.float32), rng.standard_normal((batch, 19, 45), dtype=np.float32)
        mm = _core.MatMul(batch, 37, 45, 19, False, False, None, None, a.shape, b.shape, (batch, 37, 45))
        assert_same(outputs(mm, [a, b], [(batch, 37, 45)]))


# Zoo networks in fp32 and bf16 (ResNet-50 adds no kind of step to ResNet-18's and is slow under
# qemu); one quantized (calibration is slow).
SESSIONS = [(name, p) for name in ("mobilenet_tiny", "mobilenet_v2", "resnet18") for p in ("fp32", "bf16")] + \
    [("mobilenet_tiny", "int8")]


@pytest.mark.parametrize("name,precision", SESSIONS, ids=[f"{n}-{p}" for n, p in SESSIONS])
def test_sessions(name, precision):
    """Whole networks (fused inverted-residual blocks, residual Adds, the classifier's GEMV) at 1,
    2 and 3 threads; int8: the network quantized (its float-output steps included)."""
    if precision == "bf16" and not _core.bf16_available():
        pytest.skip("no AVX512-BF16 here")
    net = zoo.NETS[name]()
    model = net.to_ms()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(net.input_shape).astype(np.float32)
    if precision == "int8":
        model = quantize(model, {"input": rng.standard_normal((2, *net.input_shape[1:])).astype(np.float32)})
    session_precision = "fp32" if precision == "int8" else precision
    runs = [msv0.Session(model, num_threads=t, precision=session_precision).run([x]) for t in (1, 2, 3)]
    for out in runs[1:]:
        for k in out:
            np.testing.assert_array_equal(out[k], runs[0][k])
