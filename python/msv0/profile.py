"""Profiles of Session runs: the per-op-type time table, a Chrome trace (chrome://tracing,
Perfetto), and per-node times read back from such a trace (msv0 info --graph colours by them).

A profile is a list of runs, each the StepTime list of one Session.profile call.
"""
from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Sequence

from msv0.errors import InputError
from msv0.model import Model
from msv0.session import StepTime, step_label

Profile = Sequence[Sequence[StepTime]]


def op_table(profile: Profile) -> list[tuple[str, int, float, float]]:
    """(op type, steps per run, mean ms per run, % of the steps' time), slowest first. A fused
    block counts as its ops joined by '+'."""
    total: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter = collections.Counter()
    for run in profile:
        for t in run:
            total[t.op] += t.seconds
            count[t.op] += 1
    runs, whole = len(profile), sum(total.values()) or 1.0
    rows = [(op, count[op] // runs, total[op] / runs * 1e3, 100 * total[op] / whole) for op in total]
    return sorted(rows, key=lambda r: -r[2])


def chrome_trace(model: Model, profile: Profile) -> dict:
    """The runs one after another as complete ("X") events, in microseconds; each event's args
    name its node indices, op and native Program (null: a step run from Python)."""
    events, offset = [], 0.0
    for run in profile:
        for t in run:
            events.append({"name": step_label(model, t.nodes), "cat": t.op, "ph": "X", "pid": 0, "tid": 0,
                           "ts": (offset + t.start) * 1e6, "dur": t.seconds * 1e6,
                           "args": {"nodes": list(t.nodes), "op": t.op, "program": t.program}})
        offset += max((t.start + t.seconds for t in run), default=0.0)
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"model": model.name, "runs": len(profile)}}


def write_trace(path: str | Path, model: Model, profile: Profile) -> None:
    Path(path).write_text(json.dumps(chrome_trace(model, profile)))


def node_seconds(trace_path: str | Path, model: Model) -> dict[int, float]:
    """Mean seconds per run of each node, from a trace that write_trace made for this model;
    a fused step's time is split evenly between its nodes."""
    try:
        trace = json.loads(Path(trace_path).read_text())
        runs = int(trace["otherData"]["runs"])
        events = [(e["args"]["nodes"], float(e["dur"])) for e in trace["traceEvents"]]
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(f"{trace_path}: not a trace written by msv0 bench --trace ({e})") from None
    seconds: dict[int, float] = collections.defaultdict(float)
    for nodes, dur in events:
        for i in nodes:
            if not isinstance(i, int) or not 0 <= i < len(model.nodes):
                raise InputError(f"{trace_path}: node {i!r} is not in this model ({len(model.nodes)} nodes)")
            seconds[i] += dur * 1e-6 / len(nodes) / max(runs, 1)
    return dict(seconds)
