"""Control-flow ops (format-v0.md §8): Switch, Merge, Partial, While and Loop, run by the
data-flow executor (msv0.dataflow), and Assert.

A control op gets the interpreter, the node and its input values and returns
{output index: value}; the interpreter decides when it fires (Merge: when either half of its
inputs is ready, so the interpreter runs it itself).
"""
from __future__ import annotations

import numpy as np

from msv0.errors import ModelError
from msv0.registry import Plan, control, fail, first_int, op

MERGE = "Merge"


def _flag(node, value, what: str) -> bool:
    """A condition's truth: its first element, as r1.1 reads it; an empty one is an error."""
    flat = np.asarray(value).reshape(-1)
    if flat.size == 0:
        raise fail(node, f"{what} is empty")
    return bool(flat[0])


@control("Switch")
def _switch(interp, node, ins):
    n = len(ins) - 1
    if n < 1 or len(node.outputs) != 2 * n:
        raise fail(node, f"expects cond + N data inputs and 2N outputs, got {len(ins)} inputs, "
                         f"{len(node.outputs)} outputs")
    taken = _flag(node, ins[0], "the condition")
    base = 0 if taken else n
    return {base + k: ins[1 + k] for k in range(n)}


@control(MERGE)
def _merge(interp, node, ins):
    raise AssertionError("Merge is run by the interpreter")  # pragma: no cover


@control("Partial")
def _partial(interp, node, ins):
    sub = interp.model.subgraphs[node.attrs.subGraphIndex]
    if len(sub.inputs) != len(ins) or len(sub.outputs) != len(node.outputs):
        raise fail(node, f"subgraph {node.attrs.subGraphIndex} has {len(sub.inputs)} inputs and "
                         f"{len(sub.outputs)} outputs; the node has {len(ins)} and {len(node.outputs)}")
    outs = interp.call(sub, ins, node)
    return dict(enumerate(outs))


@control("While")
def _while(interp, node, ins):
    """Loop variables = the inputs; while cond(vars) holds: vars = body(vars). Outputs = vars."""
    cond = interp.model.subgraphs[node.attrs.condSubgraphIndex]
    body = interp.model.subgraphs[node.attrs.bodySubgraphIndex]
    if len(body.inputs) != len(ins) or len(body.outputs) != len(ins) or len(cond.inputs) != len(ins):
        raise fail(node, "While body must map the loop variables to themselves and cond must take them all")
    if len(node.outputs) != len(ins):
        raise fail(node, "While needs as many outputs as loop variables")
    values = list(ins)
    while _flag(node, interp.call(cond, values, node)[0], "the cond subgraph's output"):
        values = interp.call(body, values, node)
        interp.count(node)
    return dict(enumerate(values))


@control("Loop")
def _loop(interp, node, ins):
    """ONNX-style loop over subgraph subGraphIndex: inputs (max_trip_count, cond, v...);
    body (i, cond, v...) -> (cond, v...); outputs the final v..."""
    body = interp.model.subgraphs[node.attrs.subGraphIndex]
    n = len(ins) - 2
    if n < 0 or len(body.inputs) != n + 2 or len(body.outputs) != n + 1 or len(node.outputs) != n:
        raise fail(node, "Loop expects (max_trip_count, cond, v...) -> v... and a body (i, cond, v...) -> (cond, v...)")
    trips = first_int(node, ins[0], "max_trip_count")
    keep = _flag(node, ins[1], "cond")
    values = list(ins[2:])
    i = 0
    while keep and i < trips:
        out = interp.call(body, [np.array(i, np.int64), np.array(keep), *values], node)
        keep, values = _flag(node, out[0], "the body's cond output"), list(out[1:])
        i += 1
        interp.count(node)
    return dict(enumerate(values))


@op("Assert")
def assert_(node, ins):
    """r1.1 kernel: (cond, data...) — the run fails unless every element of cond is true;
    it has no outputs (`summarize` only sizes TF's message)."""
    if not ins:
        raise fail(node, "expects a condition input")
    if len(node.outputs):
        raise fail(node, f"Assert has no outputs, the node lists {len(node.outputs)}")
    label = node.label

    def run(inputs, outputs):
        if not np.all(inputs[0]):
            raise ModelError(f"{label}: assertion failed")

    return Plan([], run, foldable=False)
