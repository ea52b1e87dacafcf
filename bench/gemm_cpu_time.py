"""Single-thread SGEMM GFLOP/s per ISA tier, timed in thread CPU time, against the FMA peak; where
the CPU has AVX512-BF16, the bf16 GEMM (Session precision="bf16") too, against the vdpbf16ps peak.

    python bench/gemm_cpu_time.py [sizes, default 256,512,1024] [runs, default 15]

bench_gemm.py times wall clock, which on a machine shared with other jobs counts the time this
thread spends descheduled; thread CPU time does not, so one-thread numbers stay comparable.
"""
import sys
import time

import numpy as np

import msv0
from msv0 import _core

from machine import run_c


def fma_peak() -> dict[str, float]:
    wide = "avx512" in msv0.available_isas()
    run = run_c("fma_peak", ["-mfma", "-mavx2"] + (["-mavx512f"] if wide else []), [] if wide else ["avx2-only"])
    run.check_returncode()
    words = run.stdout.split()
    return {name: float(value) for name, value in zip(words[::2], words[1::2])}


def main() -> None:
    sizes = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "256,512,1024").split(",")]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    peak = fma_peak()
    rng = np.random.default_rng(0)
    slots = [(t, "fp32", t) for t in ("avx512", "avx2") if t in msv0.available_isas()]
    if "avx512bf16" in peak and _core.bf16_tile()[0] != 32:  # not AMX's 32x32 tiles
        slots.insert(1, ("avx512", "bf16", "avx512bf16"))
    for isa, precision, peak_name in slots:
        with msv0.isa_cap(isa):
            for n in sizes:
                a = rng.standard_normal((n, n), dtype=np.float32)
                gemm = _core.Gemm(rng.standard_normal((n, n), dtype=np.float32), False, None, (n, n), (n, n),
                                  precision=precision)
                y = np.empty((n, n), np.float32)
                gemm([a], [y])
                times = []
                for _ in range(runs):
                    t = time.thread_time()
                    gemm([a], [y])
                    times.append(time.thread_time() - t)
                gflops = 2 * n**3 / np.median(times) / 1e9
                name = "sgemm" if precision == "fp32" else precision
                print(f"{name} {n}^3 1t [{isa}]: {gflops:.1f} GFLOP/s = {gflops / peak[peak_name]:.0%} of "
                      f"{peak[peak_name]:.0f}")


if __name__ == "__main__":
    main()
