"""TFLite control flow over subgraphs -> v0 control flow (format-v0.md §8), run by msv0's
data-flow executor.

WHILE maps one to one: loop variables in, cond and body subgraphs, final values out. IF has no
v0 op of its own; it becomes Switch on the condition, one Partial per branch subgraph on the
half Switch makes ready, and Merge of the two results (only the taken branch ever fires).
"""
from __future__ import annotations

from msv0.convert.emit import Unsupported, Val, handler_table

CONTROL_HANDLERS, handles = handler_table()


def _node(o, op: str, ins: list[int], outs, part: str, /, **attrs) -> list[Val]:
    idx = o.e.node(op, ins, outs, f"{o.name}/{op}{part}", **attrs)
    return [Val(shape, dtype, index=i) for i, (shape, dtype) in zip(idx, outs)]


@handles("WHILE")
def while_(o):
    opt = o.options("WhileOptions")
    cond, body = o.conv.subgraph(opt.CondSubgraphIndex()), o.conv.subgraph(opt.BodySubgraphIndex())
    o.emit_all("While", [o.inp(k) for k in range(len(o.inputs))], condSubgraphIndex=cond, bodySubgraphIndex=body)


@handles("IF")
def if_(o):
    if len(o.inputs) < 2:
        raise Unsupported("IF without data inputs (v0's Switch needs one to route)")
    opt = o.options("IfOptions")
    then, other = o.conv.subgraph(opt.ThenSubgraphIndex()), o.conv.subgraph(opt.ElseSubgraphIndex())
    ins = [o.e.index(o.inp(k)) for k in range(len(o.inputs))]
    data = [o.conv.tensors[t] for t in o.inputs[1:]]
    outs = [o.out(k) for k in range(len(o.outputs))]
    routed = [v.index for v in _node(o, "Switch", ins, data + data, "")]
    n = len(data)
    taken = _node(o, "Partial", routed[:n], outs, "_then", subGraphIndex=then)
    not_taken = _node(o, "Partial", routed[n:], outs, "_else", subGraphIndex=other)
    o.emit_all("Merge", taken + not_taken)
