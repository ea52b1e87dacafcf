"""TFLite control flow over subgraphs -> v0 control flow (format-v0.md §8), run by msv0's
data-flow executor.

WHILE maps one to one: loop variables in, cond and body subgraphs, final values out. IF has no
v0 op of its own; it becomes Switch/Partial/Merge (emit.emit_if, shared with ONNX's If).
"""
from __future__ import annotations

from msv0.convert.emit import Unsupported, Val, emit_if, handler_table

CONTROL_HANDLERS, handles = handler_table()


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
    data = [(o.e.index(o.inp(k)), *o.conv.tensors[t]) for k, t in enumerate(o.inputs) if k > 0]
    outs = [o.out(k) for k in range(len(o.outputs))]
    merged = emit_if(o.e, o.name, o.e.index(o.inp(0)), data, outs, then, other)
    for k, (i, (shape, dtype)) in enumerate(zip(merged, outs)):
        o.set(Val(shape, dtype, index=i), k)
