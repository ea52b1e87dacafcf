"""Whether a Session's pool of several threads beats its caller running alone, measured on the
Session's own runs.

On a 2-vCPU VM the round trip between the two vCPUs moves between ~50 and ~360 ns as the host
places them (bench/core_round_trip.c), and in the slow placement models of many small layers ran
slower on 2 threads than on 1 (face_landmark 1.015 against 0.963 ms). A ThreadChoice times the
runs of one Context at one input signature: most in its current mode and, every `every` runs, a
probe of two runs in the other mode (the first only wakes the workers and warms the caches; the
second is timed). It keeps whichever mode's recent median is lower. A probe that confirms the
choice doubles the interval (the slower mode's runs cost less), one that overturns it resets it. A
solo pool's caller runs every job as one thread would (ThreadPool.solo); results do not depend on
the thread count (tests/test_thread_invariance.py), so a run's results never depend on the choice.
"""
from __future__ import annotations

import collections
import statistics

# Runs between probes: 2 of 32 runs in the slower mode at first, 2 of 256 once probes agree.
PROBE_MIN, PROBE_MAX = 32, 256
# Timed runs kept per mode; each needs MIN_SAMPLES before the choice moves.
SAMPLES, MIN_SAMPLES = 5, 3


class ThreadChoice:
    """The choice for one signature's runs on a pool (a _core.ThreadPool, or anything with a `solo`
    attribute; the signatures of a Context share its pool, each setting the mode it needs). It
    times two runs per probe cycle only, the one before the probe and the probe's second, so a
    run that is not timed costs a method call."""

    def __init__(self, pool):
        self.pool = pool
        self.solo = False
        self.every = PROBE_MIN
        self.left = PROBE_MIN  # runs until the probe's timed run
        self.times: dict[bool, collections.deque] = {m: collections.deque(maxlen=SAMPLES) for m in (False, True)}

    def next_run(self) -> bool | None:
        """Set the pool's mode for the next run; return that mode if the run is to be timed, else None."""
        self.left -= 1
        mode = self.solo != (self.left <= 1)  # the probe: a warm-up run (left 1), then the timed one (0)
        timed = self.left in (0, 2)  # the probe's second run, and the run before the probe
        if self.left == 0:
            self.left = self.every
        if mode != self.pool.solo:
            self.pool.solo = mode
        return mode if timed else None

    def record(self, solo: bool, seconds: float) -> None:
        self.times[solo].append(seconds)
        pooled, alone = self.times[False], self.times[True]
        if len(pooled) < MIN_SAMPLES or len(alone) < MIN_SAMPLES:
            return
        choice = statistics.median(alone) < statistics.median(pooled)
        if solo != self.solo:  # a probe
            self.every = min(2 * self.every, PROBE_MAX) if choice == self.solo else PROBE_MIN
        self.solo = choice
