"""Time the same models under two msv0 installs, e.g. a wheel from scripts/build_wheels.sh (zig's
clang) against a build from source (gcc): each install in its own processes, in alternating
blocks with a short pause between them; medians of Session.run wall time.

    python bench/wheel_vs_source.py PYTHON_A PYTHON_B [--models mobilenet_v2,resnet50]
                                    [--rounds 3] [--runs 20] [--threads 1]

Each PYTHON is an interpreter whose environment has msv0. This interpreter writes the models once:
each zoo network in fp32 and in int8 (msv0.quantize, 8 random calibration samples).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np

from msv0 import zoo
from msv0.quantize import quantize

CHILD = """
import sys, time, numpy as np, msv0
path, threads, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = msv0.Session(open(path, "rb").read(), num_threads=threads)
feeds = [np.random.default_rng(0).standard_normal(t.shape).astype(np.float32) for t in s.inputs]
for _ in range(3):
    s.run(feeds)
times = []
for _ in range(runs):
    t = time.perf_counter()
    s.run(feeds)
    times.append(time.perf_counter() - t)
print(np.median(times) * 1e3)
"""


def write_models(names: list[str], tmp: str) -> list[str]:
    paths = []
    for name in names:
        net = zoo.NETS[name]()
        calib = np.random.default_rng(0).standard_normal((8,) + net.input_shape).astype(np.float32)
        fp32 = net.to_ms()
        for kind, data in (("fp32", fp32), ("int8", quantize(fp32, {"input": calib}))):
            path = os.path.join(tmp, f"{name}-{kind}.ms")
            with open(path, "wb") as f:
                f.write(data)
            paths.append(path)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("python_a")
    ap.add_argument("python_b")
    ap.add_argument("--models", default="mobilenet_v2,resnet50")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for path in write_models(args.models.split(","), tmp):
            times: dict[str, list[float]] = {args.python_a: [], args.python_b: []}
            for _ in range(args.rounds):
                for python, got in times.items():
                    out = subprocess.run([python, "-c", CHILD, path, str(args.threads), str(args.runs)],
                                         capture_output=True, text=True, check=True)
                    got.append(float(out.stdout.split()[-1]))
                    time.sleep(0.2)
            a, b = (statistics.median(t) for t in times.values())
            print(f"{os.path.basename(path)[:-3]:22s} {args.threads}t: A {a:8.2f} ms  B {b:8.2f} ms  B/A {b / a:.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
