"""Packed SGEMM throughput against the measured FMA peak of this core (bench/fma_peak.c).

    pytest bench/bench_gemm.py --benchmark-enable --benchmark-columns=median

Each case reports GFLOP/s and its share of the peak of the ISA tier it runs on in
benchmark.extra_info, printed at the end of the session.
"""
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

import msv0
from msv0 import _core

SIZES = [64, 128, 256, 384, 512, 768, 1024]
HERE = os.path.dirname(__file__)
RESULTS = []


@pytest.fixture(scope="session")
def fma_peak():
    """GFLOP/s of one core per vector width, measured by bench/fma_peak.c."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not msv0.isa().startswith("avx"):
        pytest.skip("the peak program is x86-only and needs a C compiler")
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "fma_peak")
        flags = ["-mavx512f"] if "avx512" in msv0.available_isas() else []
        subprocess.run([cc, "-O2", "-mfma", "-mavx2", *flags, os.path.join(HERE, "fma_peak.c"), "-o", exe], check=True)
        out = subprocess.run([exe] + ([] if flags else ["avx2-only"]), check=True, capture_output=True, text=True).stdout
    words = out.split()
    return {name: float(value) for name, value in zip(words[::2], words[1::2])}


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("threads", [1, 2])
def test_sgemm(benchmark, fma_peak, n, threads):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    y = np.empty((n, n), np.float32)
    gemm = _core.PackedGemm(b, False)
    pool = _core.ThreadPool(threads)
    pool.bind()
    try:
        benchmark(gemm.run, a, y)
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
