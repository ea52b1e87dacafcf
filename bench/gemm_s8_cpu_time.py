"""Single-thread int8 GEMM GOP/s per ISA tier, timed in thread CPU time, against the measured
512-bit vpdpbusd peak of this core and, for the avx512vnni tier's AMX slot (where the CPU has
AMX-INT8), the measured tdpbssd peak (bench/fma_peak.c). A multiply-add counts as two ops.

    python bench/gemm_s8_cpu_time.py [m,n,k shapes separated by ';', default: cubes 256..1024
                                      and ResNet-50-like conv GEMMs] [runs, default 9]

Output is requantized int8 with per-channel parameters, as an int8 Conv2D or FullConnection
produces it (see gemm_cpu_time.py for why thread CPU time).
"""
import sys
import time

import numpy as np

import msv0
from msv0 import _core

from gemm_cpu_time import fma_peak

# (m, n, k): cubes, then im2col GEMMs of ResNet-50 3x3 convs at batch 1 (m = HW, k = 9 Cin,
# n = Cout): 56x56x64, 28x28x128, 14x14x256, 7x7x512.
SHAPES = "256,256,256;512,512,512;1024,1024,1024;3136,64,576;784,128,1152;196,256,2304;49,512,4608"


def main() -> None:
    shapes = [tuple(int(x) for x in s.split(",")) for s in (sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else SHAPES).split(";")]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    peaks = fma_peak()
    rng = np.random.default_rng(0)
    slots = [(t, False) for t in ("avx512vnni", "avx512", "avx2") if t in msv0.available_isas()]
    if "amx" in peaks:
        slots.insert(0, ("avx512vnni", True))
    for isa, amx in slots:
        _core.set_amx(amx)
        peak_name = "amx" if amx else "avx512vnni"
        peak = peaks.get(peak_name)
        with msv0.isa_cap(isa):
            for m, n, k in shapes:
                a = rng.integers(-128, 128, (m, k), dtype=np.int8)
                b = rng.integers(-128, 128, (n, k), dtype=np.int8)
                ones = np.ones(n, np.int32)
                gemm = _core.GemmS8(b, True, 3, np.zeros(n, np.int32), rng.integers(-999, 999, n, dtype=np.int32),
                                    mult=ones << 30, left=0 * ones, right=12 * ones, c_zp=-7, x_shape=a.shape)
                y = np.empty((m, n), np.int8)
                gemm([a], [y])
                times = []
                for _ in range(runs):
                    t = time.thread_time()
                    gemm([a], [y])
                    times.append(time.thread_time() - t)
                gops = 2 * m * n * k / np.median(times) / 1e9
                vs = f" = {gops / peak:.0%} of the {peak_name} peak {peak:.0f}" if peak else ""
                print(f"gemm_s8 {m}x{n}x{k} 1t [{isa}{' amx' if amx else ''}]: {gops:.1f} GOP/s{vs}", flush=True)
    _core.set_amx(True)


if __name__ == "__main__":
    main()
