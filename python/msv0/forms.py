"""Finding the converter's lowered op sequences (forms) among a model's nodes, for the plan-time
passes that run each as one native step (msv0.gelu, msv0.dynamic_quant).

A form is a list of entries (op, operands...): an operand "x" (the form's input, a float32 value
computed at run time), k (the output of entry k) or a float (a scalar constant of that float32
value)."""
from __future__ import annotations

import numpy as np


def match(model, values, start: int, form, is_op) -> tuple[int, list[int], list[int]] | None:
    """(x, each entry's output, the nodes) where model.nodes[start:] begin with `form`, else None.
    is_op(node, k, op): whether node may stand for entry k, whose op is op."""
    if start + len(form) > len(model.nodes):
        return None
    x, outs = None, []
    for k, (op, *args) in enumerate(form):
        node = model.nodes[start + k]
        # A node whose output values lacks is in no plan (not run): no match.
        if not is_op(node, k, op) or len(node.inputs) != len(args) or len(node.outputs) != 1 \
                or node.outputs[0] not in values:
            return None
        for t, a in zip(node.inputs, args):
            v = values.get(t)
            if a == "x":
                x = t if x is None else x
                if t != x or v is None or v.const is not None or v.dtype != np.float32:
                    return None
            elif isinstance(a, int):
                if t != outs[a]:
                    return None
            elif v is None or v.const is None or v.const.size != 1 or v.const.reshape(-1)[0] != np.float32(a):
                return None
        outs.append(node.outputs[0])
    return x, outs, list(range(start, start + len(form)))
