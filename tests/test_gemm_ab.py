"""bench/gemm_ab.py builds both SGEMM objects and its driver, checks that they agree and times
them: run on one small product, so that the A/B tool cannot stop linking unnoticed (it did once,
when the kernels' slot declarations changed)."""
import os
import platform
import shutil
import subprocess
import sys

import pytest

import msv0

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def test_gemm_ab_builds_and_runs():
    if os.environ.get("MSV0_SANITIZED") or os.environ.get("MSV0_TEST_PYTHON"):
        pytest.skip("the native, unsanitized run covers it")
    if platform.machine() != "x86_64" or shutil.which("g++") is None or shutil.which("git") is None:
        pytest.skip("needs g++ and git on x86_64")
    if not os.path.isdir(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    tier = "avx512" if "avx512" in msv0.available_isas() else "avx2"
    if tier not in msv0.available_isas():
        pytest.skip("no AVX2 here")
    run = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gemm_ab.py"), "HEAD", "13x40x70", "3", tier],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "13x40x70 GFLOP/s" in run.stdout and "new: median" in run.stdout
