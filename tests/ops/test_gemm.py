"""The _core.Gemm kernel object directly: every m, n, k in 1..17, sizes around each ISA's tile and blocking,
and model-sized products, with NaN canaries in the output and guard elements around it."""
import numpy as np
import pytest

from msv0 import _core

GUARD = 37  # floats of NaN on each side of the output, checked untouched


def ref_gemm(a, b, transposed, bias, lo, hi):
    w = b.T if transposed else b
    y = a.astype(np.float64) @ w.astype(np.float64)
    if bias is not None:
        y += bias
    return np.clip(y, lo, hi)


def check(rng, m, n, k, transposed, with_bias=True, lo=-np.inf, hi=np.inf):
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if transposed else (k, n), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32) if with_bias else None
    gemm = _core.Gemm(b, transposed, bias, (m, k), (m, n), lo, hi)
    buf = np.full(m * n + 2 * GUARD, np.nan, np.float32)  # canary: a skipped element stays NaN
    y = buf[GUARD:GUARD + m * n].reshape(m, n)
    gemm([a], [y])
    assert np.isnan(buf[:GUARD]).all() and np.isnan(buf[GUARD + m * n:]).all(), "wrote outside y"
    # float32 sums of k products, in blocked order: error grows like sqrt(k) * eps * |a||b|.
    np.testing.assert_allclose(y, ref_gemm(a, b, transposed, bias, lo, hi), rtol=1e-5, atol=2e-6 * k + 1e-6)


@pytest.mark.parametrize("transposed", [False, True])
def test_gemm_small(isa, rng, transposed):
    for m in range(1, 18):
        for n in range(1, 18):
            for k in range(1, 18):
                check(rng, m, n, k, transposed, with_bias=(m + n + k) % 2 == 0)


# Around the tiles: rows 4 (scalar), 6 (AVX2, NEON), 12 (AVX-512); columns 16 (one panel) and
# 32 (two panels per AVX-512 tile); k around the 256-row block; n around the 32-panel block.
TILE_SIZES = [(m, n, 9) for m in (3, 4, 5, 6, 7, 11, 12, 13, 23, 24, 25) for n in (15, 16, 17, 24, 28, 31, 32, 33, 47, 48, 49)]
BLOCK_SIZES = [(13, 20, 255), (13, 20, 256), (13, 20, 257), (25, 40, 513), (5, 511, 7), (5, 512, 7), (5, 513, 7),
               (14, 528, 300)]
# Around the few-rows path (up to 120 rows: all row tiles of a k block packed at once, panel
# groups outside), with several k blocks and a lone last panel: 49 and 119/120/121 rows.
FEW_ROWS_SIZES = [(49, 80, 600), (119, 33, 300), (120, 48, 513), (121, 17, 257), (2, 49, 520)]


# The tile each tier's slot declares: rows by the register file, columns in 16-float panels.
SGEMM_TILES = {"scalar": (4, 16), "avx2": (6, 16), "avx512": (12, 32), "avx512vnni": (12, 32),
               "neon": (6, 16), "neondot": (6, 16)}


def test_gemm_tile_of_the_active_tier(isa, rng):
    """The scheduler splits on the slot's tile: sizes 1 around it, on rows and columns, and
    split over two threads by rows and by panels."""
    mr, nr = _core.sgemm_tile()
    assert (mr, nr) == SGEMM_TILES[isa]
    for m in (mr - 1, mr, mr + 1, 2 * mr + 1):
        for n in (nr - 1, nr, nr + 1, 3 * nr + 1):
            check(rng, m, n, 19, True)
    pool = _core.ThreadPool(2)
    pool.bind()
    try:
        for m, n in ((mr + 1, 5 * nr + 3), (64 + mr + 1, nr + 1)):
            check(rng, m, n, 19, True)
    finally:
        _core.ThreadPool.unbind()


@pytest.mark.parametrize("m,n,k", TILE_SIZES + BLOCK_SIZES + FEW_ROWS_SIZES, ids=str)
@pytest.mark.parametrize("transposed", [False, True])
def test_gemm_tiles(isa, rng, m, n, k, transposed):
    check(rng, m, n, k, transposed)


# MobileNetV2 1x1 conv at 14x14 (m=196, k=384, n=64), ResNet-50 stage-3 1x1 (m=196, k=1024,
# n=256), a batch-1 classifier (m=1, k=1280, n=1000).
@pytest.mark.parametrize("m,n,k", [(196, 64, 384), (196, 256, 1024), (1, 1000, 1280)], ids=str)
def test_gemm_model_sizes(isa, rng, m, n, k):
    check(rng, m, n, k, transposed=True)


def test_gemm_clamp_and_k0(isa, rng):
    check(rng, 13, 33, 40, False, lo=0.0, hi=6.0)
    # k == 0: the product is empty, so y = clamp(bias).
    bias = rng.standard_normal(5, dtype=np.float32)
    gemm = _core.Gemm(np.zeros((0, 5), np.float32), False, bias, (3, 0), (3, 5), -0.5, 0.5)
    y = np.full((3, 5), np.nan, np.float32)
    gemm([np.zeros((3, 0), np.float32)], [y])
    np.testing.assert_array_equal(y, np.broadcast_to(np.clip(bias, -0.5, 0.5), (3, 5)))


@pytest.mark.parametrize("threads", [2])
def test_gemm_threads(isa, rng, threads):
    pool = _core.ThreadPool(threads)
    pool.bind()
    try:
        for m, n, k in [(1, 1000, 64), (3, 100, 50), (197, 70, 33), (30, 512, 20)]:
            check(rng, m, n, k, transposed=True)
    finally:
        _core.ThreadPool.unbind()


@pytest.mark.parametrize("lo,hi", [(-np.inf, np.inf), (0.0, np.inf), (0.0, 6.0)])
def test_nan_propagates_through_the_epilogue(isa, lo, hi):
    """NaN in A reaches C unchanged, with or without a fused clamp (r1.1's C epilogue,
    MSMIN(hi, MSMAX(lo, x)), keeps NaN); it must never become an infinite clamp bound."""
    a = np.ones((5, 7), np.float32)
    a[2, 3] = np.nan
    gemm = _core.Gemm(np.ones((7, 19), np.float32), False, None, (5, 7), (5, 19), lo, hi)
    y = np.zeros((5, 19), np.float32)
    gemm([a], [y])
    assert np.isnan(y[2]).all()
    np.testing.assert_array_equal(y[[0, 1, 3, 4]], min(7.0, hi))


def test_gemm_checks_its_operands():
    """The object runs only on arrays of the dtype, layout and exact shapes it was built for."""
    gemm = _core.Gemm(np.ones((7, 19), np.float32), False, None, (5, 7), (5, 19))
    x, y = np.ones((5, 7), np.float32), np.zeros((5, 19), np.float32)
    for args, match in [(([x.astype(np.float64)], [y]), "dtype"), (([np.ones((7, 5), np.float32).T], [y]), "contiguous"),
                        (([x], [np.zeros((5, 18), np.float32)]), "shape"), (([x, x], [y]), "input"),
                        (([x], [np.zeros((5, 19), np.float32)[:, ::-1]]), "contiguous")]:
        with pytest.raises(ValueError, match=match):
            gemm(*args)
    y.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        gemm([x], [y])
    with pytest.raises(ValueError, match="rows"):
        _core.Gemm(np.ones((7, 19), np.float32), False, None, (5, 6), (5, 19))
