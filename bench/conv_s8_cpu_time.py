"""Single-thread int8 Conv2D GOP/s (_core.Conv2dS8) against the float32 Conv2D (_core.conv2d_f32,
whatever algorithm it picks) on the same ResNet-50 layer shapes, timed in thread CPU time (see
gemm_cpu_time.py for why). A multiply-add counts as two ops.

    python bench/conv_s8_cpu_time.py [ISA tiers separated by ',', default: the active one] [runs, default 7]
"""
import sys

import numpy as np

import msv0
from msv0 import _core

from cpu_time import cpu_time

# (h, w, cin, cout, k, stride, pad) at batch 1.
LAYERS = [
    (224, 224, 3, 64, 7, 2, 3),  # conv1
    (56, 56, 64, 64, 3, 1, 1),
    (56, 56, 64, 256, 1, 1, 0),
    (28, 28, 128, 128, 3, 1, 1),
    (14, 14, 256, 256, 3, 1, 1),
    (7, 7, 512, 512, 3, 1, 1),
]


def main() -> None:
    tiers = sys.argv[1].split(",") if len(sys.argv) > 1 and sys.argv[1] else [msv0.isa()]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    rng = np.random.default_rng(0)
    for isa in tiers:
        with msv0.isa_cap(isa):
            for h, w, cin, cout, k, s, p in LAYERS:
                oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
                x_shape, y_shape = (1, h, w, cin), (1, oh, ow, cout)
                ops = 2 * oh * ow * cout * k * k * cin
                w8 = rng.integers(-128, 128, (cout, k, k, cin), dtype=np.int8)
                ones = np.ones(cout, np.int32)
                conv8 = _core.Conv2dS8(w8, 0 * ones, ones, ones << 30, 0 * ones, 12 * ones, 1, s, s, 1, 1, p, p, 3,
                                       -5, -128, 127, x_shape, y_shape)
                x8, y8 = rng.integers(-128, 128, x_shape, dtype=np.int8), np.empty(y_shape, np.int8)
                convf = _core.conv2d_f32(w8.astype(np.float32), None, 1, s, s, 1, 1, p, p, x_shape, y_shape)
                xf, yf = x8.astype(np.float32), np.empty(y_shape, np.float32)
                t8 = cpu_time(lambda: conv8([x8], [y8]), runs)
                tf = cpu_time(lambda: convf([xf], [yf]), runs)
                print(f"conv {h}x{w}x{cin}->{cout} {k}x{k}/{s} 1t [{isa}]: int8 {ops / t8 / 1e9:.1f} GOP/s, "
                      f"fp32 ({convf.name}) {ops / tf / 1e9:.1f} GOP/s, int8/fp32 {tf / t8:.2f}x", flush=True)


if __name__ == "__main__":
    main()
