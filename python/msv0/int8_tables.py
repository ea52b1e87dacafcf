"""Plan-time composition of int8 table steps: an element-wise int8 Binary step whose operands are
x and a table lookup of x (an int8 Activation, ops/activation_s8.py) computes a function of x's
256 values alone. YOLO's SiLU, Mul(x, Sigmoid(x)) after each of its 58 convs, is such a pair;
it becomes one LookupS8 step whose table is the two steps' own kernels run on every int8 value,
so the result is theirs bit for bit, in one pass over the tensor instead of two.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from msv0 import _core
from msv0.registry import Plan, build

I8 = np.dtype(np.int8)
ALL_Q = np.arange(-128, 128, dtype=np.int8)
ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Maximum", "Minimum"}


def _on_all_values(node, ins: list, arrays: list[np.ndarray]) -> np.ndarray:
    """The node's int8 build for 256-element operands (its own quant params), run on `arrays`."""
    plan = build(node, [dataclasses.replace(v, shape=(256,), const=None) for v in ins])
    out = np.empty(256, I8)
    plan.run(arrays, [out])
    return out


def fuse_lookups(model, planned: list, uses: dict[int, int], values: dict) -> list:
    """planned: the (nodes, Plan, inputs, outputs) steps; uses: reads of each tensor, graph
    outputs counted. Returns the steps with each element-wise int8 Binary of x and a lookup of x
    that nothing else reads as one LookupS8 step from x, in the Binary's place."""
    producer = {outs[0]: i for i, (_, plan, _, outs) in enumerate(planned)
                if plan.kernel is not None and plan.kernel.name == "lookup_s8" and len(plan.kernel.input_shapes) == 1}
    replaced: dict[int, tuple] = {}
    dropped: set[int] = set()
    for j, (nodes, plan, ins, outs) in enumerate(planned):
        if len(nodes) != 1 or len(ins) != 2 or len(outs) != 1 or model.nodes[nodes[0]].op not in ELEMENTWISE:
            continue
        for pos in (0, 1):
            i = producer.get(ins[pos])
            if i is None or i in dropped or uses.get(ins[pos], 0) != 1 or len(planned[i][0]) != 1:
                continue
            x = planned[i][2][0]
            if ins[1 - pos] != x or values[x].const is not None or values[outs[0]].dtype != I8 \
                    or values[x].shape != values[outs[0]].shape or values[ins[pos]].shape != values[x].shape:
                continue
            looked_up = _on_all_values(model.nodes[planned[i][0][0]], [values[x]], [ALL_Q])
            operands = [ALL_Q, looked_up] if pos == 1 else [looked_up, ALL_Q]
            table = _on_all_values(model.nodes[nodes[0]], [values[k] for k in ins], operands)
            shape = values[x].shape
            step = Plan([(shape, I8)], kernel=_core.LookupS8([table], [shape], 0))
            replaced[j] = (tuple(planned[i][0]) + tuple(nodes), step, [x], outs)
            dropped.add(i)
            break
    return [replaced.get(j, step) for j, step in enumerate(planned) if j not in dropped]
