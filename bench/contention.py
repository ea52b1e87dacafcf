"""msv0 at N threads against 1 thread, on a quiet machine and with another process busy on one
core: a run at N threads should never be slower than at 1 (the pool's policy under contention is
in csrc/runtime/parallel.h).

    python bench/contention.py [--models iris_landmark face_landmark mobilenet_v2 resnet50]
                               [--threads 2] [--rounds 4] [--block-s 2]

Models are the zoo's (random weights) or tests/realmodels.py's (converted). Per model, in a
fresh process, one Session per thread count runs back to back for --block-s seconds, then the
next, in alternating blocks with a pause between them: first with the machine as it is, then
with a busy loop pinned to the last CPU (the CPU an N-thread pool's worker shares with it). The
pool adapts over a run's jobs, so a block is seconds long, not a few runs. Prints the median and
the mean of each (a 4 ms stall in one run of 20 moves the mean, not the median) and the N / 1
ratio of both; a ratio over 1.03 is flagged.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import msv0  # noqa: E402
from msv0 import zoo  # noqa: E402
from msv0.convert import convert  # noqa: E402

import realmodels as rm  # noqa: E402

TOLERANCE = 1.03


def model_and_feeds(name: str):
    if name in zoo.NETS:
        net = zoo.NETS[name]()
        x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
        return msv0.load(net.to_ms()), [x]
    m = rm.BY_NAME[name]
    data, feeds = rm.source_bytes(m)
    return msv0.load(convert(data)), rm.to_msv0_feeds(m, feeds)


def busy() -> None:
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    while True:
        pass


def measure(name: str, threads: list[int], rounds: int, block_s: float, pause: float, contended: bool):
    """{threads: (median s, mean s)} in this process, with a busy process beside it if contended."""
    model, feeds = model_and_feeds(name)
    sessions = {t: msv0.Session(model, num_threads=t) for t in threads}
    hog = None
    if contended:
        hog = multiprocessing.get_context("spawn").Process(target=busy, daemon=True)
        hog.start()
        time.sleep(0.5)
    try:
        times = {t: [] for t in threads}
        for s in sessions.values():
            s.run(feeds)
        for _ in range(rounds):
            for t, s in sessions.items():
                time.sleep(pause)
                end = time.perf_counter() + block_s
                while time.perf_counter() < end:
                    start = time.perf_counter()
                    s.run(feeds)
                    times[t].append(time.perf_counter() - start)
    finally:
        if hog is not None:
            hog.kill()
    return {t: (statistics.median(v), statistics.fmean(v)) for t, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = sorted(zoo.NETS) + [m.name for m in rm.MODELS]
    ap.add_argument("--models", nargs="*", default=["iris_landmark", "face_landmark", "mobilenet_v2", "resnet50"],
                    choices=names)
    ap.add_argument("--threads", type=int, default=2, help="N, measured against 1")
    ap.add_argument("--rounds", type=int, default=4, help="blocks per thread count")
    ap.add_argument("--block-s", type=float, default=2.0, help="seconds one block runs")
    ap.add_argument("--pause", type=float, default=0.2, help="seconds between blocks")
    args = ap.parse_args()
    if os.cpu_count() < 2:
        sys.exit("needs at least 2 CPUs")
    n = args.threads
    print(f"msv0 {msv0.__version__} ISA {msv0.isa()}; {os.cpu_count()} CPUs; busy loop on CPU "
          f"{max(os.sched_getaffinity(0))} when contended")
    print(f"\n{'model':24s} {'machine':9s} {'1t median':>9s} {f'{n}t median':>9s} {'ratio':>6s} "
          f"{'1t mean':>8s} {f'{n}t mean':>8s} {'ratio':>6s}")
    spawn = multiprocessing.get_context("spawn")
    for name in args.models:
        for contended in (False, True):
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as child:
                r = child.submit(measure, name, [1, n], args.rounds, args.block_s, args.pause, contended).result()
            (m1, a1), (mn, an) = r[1], r[n]
            flag = "  slower" if max(mn / m1, an / a1) > TOLERANCE else ""
            print(f"{name:24s} {'busy' if contended else 'as is':9s} {m1 * 1e3:9.3f} {mn * 1e3:9.3f} {mn / m1:6.2f} "
                  f"{a1 * 1e3:8.3f} {an * 1e3:8.3f} {an / a1:6.2f}{flag}", flush=True)


if __name__ == "__main__":
    main()
