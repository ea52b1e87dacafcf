"""Fuzz target: bytes -> msv0.load -> Session -> run. Every outcome but success or an msv0.Error
is a finding (atheris reports the exception, a crash, a hang over -timeout, or RSS over
-rss_limit_mb). Run through scripts/fuzz.sh, which builds the seed corpus from the test suite."""
import math
import sys

import atheris
import numpy as np

import msv0
from instrument import instrument_msv0

MAX_FEED_ELEMENTS = 1 << 20  # a feed's size is the fuzzer's to choose only up to this
MEMORY_LIMIT = 256 << 20  # with ops' temporaries, RSS stays under -rss_limit_mb (scripts/fuzz.sh)


def feeds_for(model, data: bytes):
    feeds = {}
    rng = np.random.default_rng(len(data))
    for t in model.inputs:
        # Python ints (no wrap), and a zero dim counted as 1: NumPy refuses an empty array whose
        # other dims multiply past its size limit.
        if min(t.shape, default=0) < 0 or math.prod(max(d, 1) for d in t.shape) > MAX_FEED_ELEMENTS:
            return None
        if t.dtype.kind == "f":
            feeds[t.name] = (rng.standard_normal(t.shape) * 4).astype(t.dtype)
        elif t.dtype.kind in "iub":
            feeds[t.name] = rng.integers(-3, 8, t.shape).astype(t.dtype)
        else:
            feeds[t.name] = np.zeros(t.shape, t.dtype)
    return feeds


def test_one_input(data: bytes) -> None:
    try:
        model = msv0.load(data)
        session = msv0.Session(model, memory_limit=MEMORY_LIMIT)
        feeds = feeds_for(model, data)
        if feeds is not None:
            session.run(feeds)
    except msv0.Error:
        pass


if __name__ == "__main__":
    instrument_msv0()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
