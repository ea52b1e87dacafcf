"""Session.run called from many threads at once gives every caller the serial result
(design.md's contract; web servers share one Session across request threads)."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import msv0
from msv0 import zoo
from msv0.builder import Builder
from msv0.fb.ActivationType import ActivationType

THREADS = 8
RUNS_PER_THREAD = 1000


def _hammer(session, feeds_list, expected, runs):
    """Each of THREADS workers runs `runs` times, cycling through distinct feeds so that a
    shared buffer shows up as another caller's result; returns the number of mismatches."""
    def worker(t):
        bad = 0
        for r in range(runs):
            i = (t + r) % len(feeds_list)
            out = session.run(feeds_list[i])
            bad += sum(not np.array_equal(out[k], v) for k, v in expected[i].items())
        return bad

    with ThreadPoolExecutor(THREADS) as ex:
        return sum(ex.map(worker, range(THREADS)))


def _feeds(model, count, rng):
    return [[rng.standard_normal(t.shape).astype(t.dtype) for t in model.inputs] for _ in range(count)]


def _fc_model():
    b = Builder("fc")
    x = b.input("x", (3, 40))
    rng = np.random.default_rng(1)
    w = b.const("w", rng.standard_normal((24, 40)).astype(np.float32))
    bias = b.const("bias", rng.standard_normal(24).astype(np.float32))
    y = b.node("FullConnection", [x, w, bias], hasBias=True)
    b.output(b.node("Activation", [y], type=ActivationType.RELU))
    return msv0.load(b.finish())


@pytest.mark.parametrize("num_threads", [1, 2])
@pytest.mark.parametrize("build", ["mobilenet_tiny", "fc"])
def test_one_session_many_threads(build, num_threads, rng):
    model = msv0.load(zoo.mobilenet_tiny()) if build == "mobilenet_tiny" else _fc_model()
    session = msv0.Session(model, num_threads=num_threads)
    feeds = _feeds(model, 4, rng)
    expected = [session.run(f) for f in feeds]
    runs = RUNS_PER_THREAD if build == "fc" else RUNS_PER_THREAD // 10
    assert _hammer(session, feeds, expected, runs) == 0


def test_separate_sessions_many_threads(rng):
    model = msv0.load(zoo.mobilenet_tiny())
    feeds = _feeds(model, 4, rng)
    expected = [msv0.Session(model).run(f) for f in feeds]
    sessions = [msv0.Session(model) for _ in range(THREADS)]

    def worker(t):
        bad = 0
        for r in range(RUNS_PER_THREAD // 10):
            i = (t + r) % len(feeds)
            out = sessions[t].run(feeds[i])
            bad += sum(not np.array_equal(out[k], v) for k, v in expected[i].items())
        return bad

    with ThreadPoolExecutor(THREADS) as ex:
        assert sum(ex.map(worker, range(THREADS))) == 0


def test_control_flow_session_many_threads():
    """A Merge/Switch counting loop (run by the data-flow executor) shared across threads."""
    b = Builder("loop")
    x = b.input("x", (1,))
    i_next = b.tensor("i_next")
    i = b.node("Merge", [x, i_next])
    cond = b.node("Less", [i, b.const("limit", np.array([5.0], np.float32))], out_dtype=np.bool_)
    i_true, i_false = b.node("Switch", [cond, i], outputs=2)
    b.node("Add", [i_true, b.const("one", np.array([1.0], np.float32))], outputs=[i_next])
    b.output(i_false)
    session = msv0.Session(b.finish())
    feeds = [[np.array([v], np.float32)] for v in (0.0, 1.5, 3.25, 7.0)]
    expected = [session.run(f) for f in feeds]
    assert _hammer(session, feeds, expected, RUNS_PER_THREAD // 4) == 0


@pytest.mark.parametrize("num_threads", [4, 8])
def test_oversubscribed_pool_same_result_every_run(num_threads, rng):
    """More pool threads than CPUs: workers are descheduled holding tasks, and the pool benches
    them (parallel.h), dealing their tasks to the others; every run still gives the first's bits."""
    model = msv0.load(zoo.mobilenet_tiny())
    session = msv0.Session(model, num_threads=num_threads)
    feeds = _feeds(model, 1, rng)[0]
    expected = session.run(feeds)
    for _ in range(500):
        out = session.run(feeds)
        assert all(np.array_equal(out[k], v) for k, v in expected.items())
