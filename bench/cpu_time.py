"""Median thread CPU time of a call: what the *_cpu_time.py scripts report. Thread CPU time, not
wall time, because the machines these run on are shared: a descheduled run is not charged."""
import time

import numpy as np


def cpu_time(fn, runs: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t = time.thread_time()
        fn()
        times.append(time.thread_time() - t)
    return float(np.median(times))
