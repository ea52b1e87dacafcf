"""A Session's choice between its pool and its caller alone (msv0.thread_choice): the choice
follows the measured medians, probes the other mode on schedule, and never changes results."""
import types

import numpy as np

import msv0
from msv0 import _core, zoo
from msv0.thread_choice import MIN_SAMPLES, PROBE_MAX, PROBE_MIN, PROBES, ThreadChoice


def drive(choice: ThreadChoice, runs: int, pooled_s: float, solo_s: float) -> list[tuple[bool, bool]]:
    """`runs` runs timed as pooled_s or solo_s; returns each run's (solo, timed)."""
    seen = []
    for _ in range(runs):
        mode = choice.next_run()
        seen.append((choice.pool.solo, mode is not None))
        if mode is not None:
            assert mode == choice.pool.solo
            choice.record(mode, solo_s if mode else pooled_s)
    return seen


def fresh() -> ThreadChoice:
    return ThreadChoice(types.SimpleNamespace(solo=False))


def test_probes_are_two_runs_of_the_other_mode_the_second_timed():
    seen = drive(fresh(), PROBE_MIN + 1, pooled_s=1.0, solo_s=2.0)
    assert seen[0] == (False, False)  # the signature's first run
    assert seen[1:PROBE_MIN - 2] == [(False, True)] * (PROBE_MIN - 3)
    assert seen[PROBE_MIN - 2:] == [(True, False), (True, True), (False, False)]


def test_a_faster_pool_stays_and_probes_less_often():
    choice = fresh()
    drive(choice, PROBE_MIN * MIN_SAMPLES, pooled_s=1.0, solo_s=2.0)
    assert not choice.solo and choice.every == 2 * PROBE_MIN
    drive(choice, 4000, pooled_s=1.0, solo_s=2.0)
    assert not choice.solo and choice.every == PROBE_MAX


def test_a_faster_caller_takes_over_and_hands_back_when_the_pool_wins_again():
    choice = fresh()
    drive(choice, PROBE_MIN * MIN_SAMPLES, pooled_s=1.1, solo_s=1.0)
    assert choice.solo and choice.every == PROBE_MIN  # the probe that overturned the choice
    seen = drive(choice, PROBE_MIN, pooled_s=1.1, solo_s=1.0)
    assert seen[-3:] == [(True, True), (False, False), (False, True)]  # a probe of the pool
    assert choice.solo and choice.every == 2 * PROBE_MIN
    # the host moved the vCPUs: a few probes later the pool is back, and probed often again
    drive(choice, 4 * PROBE_MAX, pooled_s=0.6, solo_s=1.0)
    assert not choice.solo


def test_a_pool_that_turns_slow_is_left_within_a_few_runs():
    """The host takes the second vCPU: the pool's runs slow down between two probes."""
    choice = fresh()
    drive(choice, 4000, pooled_s=1.0, solo_s=1.5)
    assert not choice.solo and choice.every == PROBE_MAX
    choice.left = PROBE_MAX  # far from the next probe
    seen = drive(choice, PROBES + 2, pooled_s=2.0, solo_s=1.5)
    assert [solo for solo, _ in seen] == [False] * PROBES + [True] * 2
    assert choice.solo and choice.every == PROBE_MIN  # probed often again
    drive(choice, 4 * PROBE_MIN, pooled_s=2.0, solo_s=1.5)
    assert choice.solo


def test_the_slow_runs_after_a_pause_keep_the_choice():
    """The first runs after the caller paused are slow in either mode, up to ~8x; a probe right
    after them still compares like with like."""
    choice = fresh()
    drive(choice, 4000, pooled_s=1.0, solo_s=1.5)
    colds = (8.0, 2.0, 1.6, 1.0)
    choice.left = len(colds) + 2  # the probe follows them
    for cold in colds:
        assert choice.next_run() is False
        choice.record(False, cold)
    assert drive(choice, 3, pooled_s=1.0, solo_s=1.5) == [(True, False), (True, True), (False, False)]
    assert not choice.solo and choice.every == PROBE_MAX


def test_solo_runs_give_the_pools_results():
    """The caller alone, splitting as for one thread: bit-equal outputs, at 2 and 3 threads, the
    choice forced either way."""
    net = zoo.mobilenet_tiny()
    model = msv0.load(net)
    x = np.random.default_rng(0).standard_normal(model.inputs[0].shape).astype(np.float32)
    for threads in (2, 3):
        session = msv0.Session(model, num_threads=threads)
        outs = {}
        for solo in (False, True):
            session.run([x])  # planned: the signature's choice exists
            choice = session._idle[0].choices[(x.shape,)]
            choice.solo, choice.left = solo, 10 ** 9  # no probe
            outs[solo] = session.run([x])
            assert session._idle[0].pool.solo == solo
        for name in outs[False]:
            np.testing.assert_array_equal(outs[True][name], outs[False][name])


def test_a_session_times_both_modes():
    session = msv0.Session(zoo.mobilenet_tiny(), num_threads=2)
    x = np.zeros(session.inputs[0].shape, np.float32)
    for _ in range(PROBE_MIN * MIN_SAMPLES + 1):
        session.run([x])
    times = session._idle[0].choices[(x.shape,)].times
    assert len(times[True]) >= MIN_SAMPLES and len(times[False]) >= MIN_SAMPLES
    one = msv0.Session(zoo.mobilenet_tiny(), num_threads=1)  # one thread: nothing to choose
    one.run([x])
    assert not one._idle[0].choices
    assert _core.ThreadPool(2).solo is False
