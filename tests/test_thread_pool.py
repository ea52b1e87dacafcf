"""The Session's thread pool: every task runs once on each wait policy (MSV0_SPIN_US, from
polling long to sleeping at once), a Python error in a task is raised and leaves the pool
usable, and a job whose worker is held up sends the pool serial for a back-off (the paths, not
their speed: bench/contention.py measures that)."""
import threading
import time

import numpy as np
import pytest

import msv0
from msv0 import _core, zoo


@pytest.mark.parametrize("spin_us", [0, 50, 1_000_000])
@pytest.mark.parametrize("threads", [2, 3])
def test_every_task_runs_once(spin_us, threads):
    pool = _core.ThreadPool(threads, spin_us=spin_us)
    assert pool.spin_us == spin_us
    for tasks in (2, 7, 64):
        seen = []
        pool.run(tasks, seen.append)
        assert sorted(seen) == list(range(tasks))
    assert pool.stats["parallel"] + pool.stats["serial"] == 3


def test_spin_from_environment(monkeypatch):
    monkeypatch.setenv("MSV0_SPIN_US", "7")
    assert _core.ThreadPool(2).spin_us == 7
    assert _core.ThreadPool(2, spin_us=3).spin_us == 3
    monkeypatch.delenv("MSV0_SPIN_US")
    assert _core.ThreadPool(2).spin_us == 50
    for bad in ("x", "-1", "5us"):
        monkeypatch.setenv("MSV0_SPIN_US", bad)
        with pytest.raises(ValueError, match="MSV0_SPIN_US"):
            _core.ThreadPool(2)


def test_task_error_is_raised():
    pool = _core.ThreadPool(2)
    with pytest.raises(ZeroDivisionError):
        pool.run(8, lambda t: 1 / (t - 5))
    seen = []
    pool.run(8, seen.append)
    assert sorted(seen) == list(range(8))


def test_held_up_worker_backs_off():
    # The worker polls (spin 1 s), so it is awake at each post; its task sleeps, so the caller
    # waits for it far longer than its own share took: contended, and the next jobs go serial.
    pool = _core.ThreadPool(2, spin_us=1_000_000)
    caller = threading.get_ident()
    hold = lambda t: time.sleep(0.01) if threading.get_ident() != caller else None  # noqa: E731
    for _ in range(50):
        pool.run(2, hold)
        if pool.stats["contended"]:
            break
    assert pool.stats["contended"] == 1
    before = pool.stats
    seen = []
    pool.run(4, seen.append)  # back-off 1: this job runs on the caller alone
    assert sorted(seen) == list(range(4))
    assert pool.stats["serial"] == before["serial"] + 1 and pool.stats["parallel"] == before["parallel"]
    pool.run(4, lambda t: None)  # then a probe, which goes parallel again
    assert pool.stats["parallel"] == before["parallel"] + 1


@pytest.mark.parametrize("spin_us", ["0", "1000000"])
def test_threads_give_the_serial_result(spin_us, monkeypatch, rng):
    monkeypatch.setenv("MSV0_SPIN_US", spin_us)
    model = msv0.load(zoo.mobilenet_tiny())
    x = rng.standard_normal(model.inputs[0].shape).astype(np.float32)
    want = msv0.Session(model, num_threads=1).run([x])
    for threads in (2, 3):
        got = msv0.Session(model, num_threads=threads).run([x])
        assert all(np.array_equal(got[k], v) for k, v in want.items())
