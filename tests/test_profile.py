"""Session.profile (per-step times, native Program steps timed in C++), msv0.profile's op table
and Chrome trace, and `msv0 bench --profile --trace`."""
from __future__ import annotations

import json

import numpy as np
import pytest

import msv0
from msv0 import cli, profile, zoo
from msv0.builder import Builder

MODEL = zoo.mobilenet_tiny()


def feeds(model: msv0.Model, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(t.shape).astype(t.dtype) for t in model.inputs]


def mixed_model() -> bytes:
    """Native steps around a Python one (Cos runs in NumPy): two Programs with the Python step between."""
    rng = np.random.default_rng(1)
    b = Builder("mixed")
    x = b.input("x", (1, 8))
    w = b.const("w", rng.standard_normal((8, 8)).astype(np.float32))
    y = b.node("FullConnection", [x, w], name="fc1")
    y = b.node("Cos", [y], name="cos")
    y = b.node("FullConnection", [y, w], name="fc2")
    b.output(y)
    return b.finish()


@pytest.mark.parametrize("threads", [1, 2])
def test_profile_times_every_step_once(threads):
    s = msv0.Session(MODEL, num_threads=threads)
    x = feeds(s.model)
    out, times = s.profile(x)
    for k, v in s.run(x).items():
        np.testing.assert_array_equal(out[k], v)
    nodes = [i for t in times for i in t.nodes]
    assert len(nodes) == len(set(nodes)) and set(nodes) <= set(s.model.main_nodes)
    fused = [t for t in times if len(t.nodes) > 1]
    assert fused and all(t.op == "+".join(s.model.nodes[i].op for i in t.nodes) for t in fused)
    assert all(t.program == 0 for t in times)  # the whole network is one native Program
    assert all(t.seconds > 0 for t in times)
    ends = [t.start + t.seconds for t in times]
    assert all(e <= t.start + 1e-9 for e, t in zip(ends, times[1:]))  # in order, not overlapping


def test_profile_python_step_between_programs():
    s = msv0.Session(mixed_model())
    _, times = s.profile(feeds(s.model))
    assert [(s.model.nodes[t.nodes[0]].name, t.program) for t in times] == [("fc1", 0), ("cos", None), ("fc2", 2)]


def test_profile_data_flow_times_its_nodes():
    b = Builder("flow")
    x = b.input("x", (2, 3))
    c = b.input("c", (1,), np.bool_)
    xt, xf = b.node("Switch", [c, x], outputs=2)
    b.output(b.node("Merge", [b.node("Neg", [xt]), xf]))
    s = msv0.Session(b.finish())
    _, (t,) = s.profile([np.ones((2, 3), np.float32), np.array([True])])  # control-flow nodes untimed
    assert t.op == "Neg" and s.model.nodes[t.nodes[0]].op == "Neg" and t.program is None


def test_op_table_and_trace(tmp_path):
    s = msv0.Session(MODEL)
    runs = [s.profile(feeds(s.model))[1] for _ in range(3)]
    rows = profile.op_table(runs)
    assert sum(n for _, n, _, _ in rows) == len(runs[0])
    assert sum(pct for *_, pct in rows) == pytest.approx(100)
    mean_ms = sum(t.seconds for r in runs for t in r) / 3 * 1e3
    assert sum(ms for _, _, ms, _ in rows) == pytest.approx(mean_ms)
    path = tmp_path / "trace.json"
    profile.write_trace(path, s.model, runs)
    trace = json.loads(path.read_text())
    assert len(trace["traceEvents"]) == 3 * len(runs[0])
    starts = [e["ts"] for e in trace["traceEvents"]]
    assert starts == sorted(starts)
    per_node = profile.node_seconds(path, s.model)
    assert sum(per_node.values()) == pytest.approx(mean_ms / 1e3)


def test_node_seconds_rejects_other_model(tmp_path):
    s = msv0.Session(MODEL)
    path = tmp_path / "trace.json"
    profile.write_trace(path, s.model, [s.profile(feeds(s.model))[1]])
    with pytest.raises(msv0.InputError, match="not in this model"):
        profile.node_seconds(path, msv0.load(mixed_model()))
    path.write_text("{}")
    with pytest.raises(msv0.InputError, match="not a trace"):
        profile.node_seconds(path, s.model)


def test_cli_bench_profile(tmp_path, capsys):
    model = tmp_path / "m.ms"
    model.write_bytes(MODEL)
    trace = tmp_path / "t.json"
    assert cli.main(["bench", str(model), "-t", "1", "--warmup", "0", "--runs", "2", "--profile",
                     "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    table = out.split("time per op type")[1]
    for op in {n.op for n in msv0.load(MODEL).nodes}:
        assert op in table
    assert json.loads(trace.read_text())["otherData"]["runs"] == 2
