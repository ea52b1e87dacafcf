"""Whether a Session's pool of several threads beats its caller running alone, measured on the
Session's own runs.

On a 2-vCPU VM the round trip between the two vCPUs moves between ~50 and ~360 ns as the host
places them (bench/core_round_trip.c), and the second vCPU is at times taken by the host for whole
seconds: then models of many small layers ran slower on 2 threads than on 1 (ocr_cls 0.698 against
0.514 ms). A ThreadChoice times each run of one Context at one input signature but the first after
a change of mode (it wakes the workers and warms the caches). Most runs are in its current mode;
every `every` runs a probe of two runs tries the other, and the choice goes to the mode whose
recent median is lower. Between probes, PROBES runs in a row slower than the other mode's median
leave the current mode at once. A probe that confirms the choice doubles the interval (the slower
mode's runs cost less); a change of choice resets it. A solo pool's caller runs every job as one
thread would (ThreadPool.solo); results do not depend on the thread count
(tests/test_thread_invariance.py), so a run's results never depend on the choice.
"""
from __future__ import annotations

import collections
import itertools

# Runs between probes: 2 of 32 runs in the slower mode at first, 2 of 256 once probes agree.
PROBE_MIN, PROBE_MAX = 32, 256
# Timed runs kept per mode. The chosen mode's median is over the RUNS it keeps, which the slow
# first runs after the caller paused (up to ~8x, in either mode) move little; the probed mode's is
# over its last PROBES, so that it is new again after a few probes. MIN_SAMPLES before a choice.
RUNS, PROBES, MIN_SAMPLES = 15, 5, 3


def _last(times: collections.deque, n: int) -> list[float]:
    return list(itertools.islice(times, max(0, len(times) - n), None))


def _median(times: list[float]) -> float:
    return sorted(times)[len(times) // 2]  # half the cost of statistics.median


class ThreadChoice:
    """The choice for one signature's runs on a pool (a _core.ThreadPool, or anything with a `solo`
    attribute; the signatures of a Context share its pool, each setting the mode it needs)."""

    def __init__(self, pool):
        self.pool = pool
        self.solo = False
        self.every = PROBE_MIN
        self.left = PROBE_MIN  # runs until the probe's second run
        self.last: bool | None = None  # the mode of this signature's previous run
        self.bar = float("inf")  # the probed mode's median, once both modes have been timed
        self.times: dict[bool, collections.deque] = {m: collections.deque(maxlen=RUNS) for m in (False, True)}

    def next_run(self) -> bool | None:
        """Set the pool's mode for the next run; return that mode if the run is to be timed, else None."""
        self.left -= 1
        mode = self.solo != (self.left <= 1)  # the probe: runs at left 1 and 0
        if self.left == 0:
            self.left = self.every
        if mode != self.pool.solo:
            self.pool.solo = mode
        timed = mode == self.last
        self.last = mode
        return mode if timed else None

    def record(self, solo: bool, seconds: float) -> None:
        mine = self.times[solo]
        mine.append(seconds)
        if solo == self.solo:  # PROBES runs in a row slower than the probed mode: leave at once
            if seconds > self.bar and min(_last(mine, PROBES)) > self.bar:
                self.choose(not solo)
            return
        chosen = self.times[self.solo]  # a probe
        if len(mine) >= MIN_SAMPLES and len(chosen) >= MIN_SAMPLES:
            self.choose(solo if _median(_last(mine, PROBES)) < _median(list(chosen)) else self.solo)

    def choose(self, solo: bool) -> None:
        if solo == self.solo:  # a probe confirmed the choice: probe less often
            self.every = min(2 * self.every, PROBE_MAX)
        else:
            self.solo, self.every, self.left = solo, PROBE_MIN, min(self.left, PROBE_MIN)
        self.bar = _median(_last(self.times[not solo], PROBES))
