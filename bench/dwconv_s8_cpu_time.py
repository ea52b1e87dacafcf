"""Single-thread int8 against fp32 depthwise 3x3 conv on MobileNetV2's depthwise layers, per ISA
tier, timed in thread CPU time (see gemm_cpu_time.py for why), medians of `runs`.

    python bench/dwconv_s8_cpu_time.py [runs, default 15]
"""
import sys

import numpy as np

import msv0
from msv0 import _core

from cpu_time import cpu_time

# (h, w, c, stride) at batch 1, SAME padding: MobileNetV2's 3x3 depthwise layers.
LAYERS = [(112, 112, 32, 1), (112, 112, 96, 2), (56, 56, 144, 1), (56, 56, 144, 2), (28, 28, 192, 1),
          (28, 28, 192, 2), (14, 14, 576, 1), (14, 14, 576, 2), (7, 7, 960, 1)]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    rng = np.random.default_rng(0)
    for isa in [t for t in ("avx512vnni", "avx512", "avx2", "neondot", "neon") if t in msv0.available_isas()]:
        with msv0.isa_cap(isa):
            total = [0.0, 0.0]
            for h, w, c, s in LAYERS:
                oh, ow = -(-h // s), -(-w // s)
                pt = max(0, (oh - 1) * s + 3 - h) // 2
                shape, out = (1, h, w, c), (1, oh, ow, c)
                wf = rng.standard_normal((c, 3, 3, 1), dtype=np.float32)
                f32 = _core.conv2d_f32(wf, np.zeros(c, np.float32), c, s, s, 1, 1, pt, pt, shape, out, 0.0, 6.0)
                xf, yf = rng.standard_normal(shape, dtype=np.float32), np.empty(out, np.float32)
                z = np.zeros(c, np.int32)
                s8 = _core.DwConv2dS8(rng.integers(-128, 128, (c, 3, 3), dtype=np.int8), z + 3,
                                      rng.integers(-999, 999, c, dtype=np.int32), z + (1 << 30), z, z + 12, -5, 7,
                                      -128, 127, s, s, 1, 1, 1, pt, pt, shape, out)
                x8, y8 = rng.integers(-128, 128, shape, dtype=np.int8), np.empty(out, np.int8)
                t_f32 = cpu_time(lambda: f32([xf], [yf]), runs)
                t_s8 = cpu_time(lambda: s8([x8], [y8]), runs)
                total[0] += t_f32
                total[1] += t_s8
                print(f"dwconv 3x3 {h}x{w}x{c} s{s} 1t [{isa}]: fp32 {t_f32 * 1e3:.3f} ms, int8 {t_s8 * 1e3:.3f} ms "
                      f"({t_f32 / t_s8:.2f}x)", flush=True)
            print(f"dwconv 3x3 MobileNetV2 total 1t [{isa}]: fp32 {total[0] * 1e3:.2f} ms, "
                  f"int8 {total[1] * 1e3:.2f} ms ({total[0] / total[1]:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
