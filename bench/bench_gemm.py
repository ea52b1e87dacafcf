"""Packed SGEMM throughput against the measured FMA peak of this core (bench/fma_peak.c).

    pytest bench/bench_gemm.py --benchmark-enable --benchmark-columns=median

Each case reports GFLOP/s and its share of the peak of the ISA tier it runs on in
benchmark.extra_info, printed at the end of the session.
"""
import shutil

import numpy as np
import pytest

import gemm_cpu_time
import msv0
from msv0 import _core

SIZES = [64, 128, 256, 384, 512, 768, 1024]
RESULTS = []


@pytest.fixture(scope="session")
def fma_peak():
    """GFLOP/s of one core per vector width, measured by bench/fma_peak.c."""
    if shutil.which("cc") is None and shutil.which("gcc") is None or not msv0.isa().startswith("avx"):
        pytest.skip("the peak program is x86-only and needs a C compiler")
    return gemm_cpu_time.fma_peak()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("threads", [1, 2])
def test_sgemm(benchmark, fma_peak, n, threads):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    y = np.empty((n, n), np.float32)
    gemm = _core.Gemm(b, False, None, a.shape, y.shape)
    pool = _core.ThreadPool(threads)
    pool.bind()
    try:
        benchmark(gemm, [a], [y])
    finally:
        _core.ThreadPool.unbind()
    np.testing.assert_allclose(y, a @ b, rtol=1e-3, atol=1e-3 * np.sqrt(n))
    if benchmark.stats is None:  # --benchmark-disable
        return
    gflops = 2 * n**3 / benchmark.stats.stats.median / 1e9
    tier = "avx512" if msv0.isa().startswith("avx512") else "avx2"
    share = gflops / (fma_peak[tier] * threads)
    benchmark.extra_info.update(gflops=round(gflops, 1), peak_share=round(share, 3), isa=msv0.isa())
    RESULTS.append(f"sgemm {n}^3 {threads}t [{msv0.isa()}]: {gflops:.1f} GFLOP/s = {share:.0%} of "
                   f"{threads} x {fma_peak[tier]:.0f} GFLOP/s peak")


@pytest.fixture(scope="session", autouse=True)
def report():
    yield
    if RESULTS:
        print("\n" + "\n".join(RESULTS))
