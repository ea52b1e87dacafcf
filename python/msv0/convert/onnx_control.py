"""ONNX `If` whose condition is only known at run time -> v0 control flow (format-v0.md §8).

An If whose condition folds at conversion is inlined before emission (onnx_fold). Otherwise
both branches become v0 subgraphs (converted by the frontend through Ctx.branches) and the If
becomes Switch/Partial/Merge, as TFLite's IF does (emit.emit_if). ONNX branches read outer
values by name; v0 subgraphs take inputs, so every outer value either branch reads at run time
is routed through Switch, and both subgraphs take that same list.
"""
from __future__ import annotations

from msv0.convert.emit import Unsupported, Val, emit_if
from msv0.convert.onnx_ctx import Ctx, handles


def outer_reads(graph) -> list[str]:
    """The names `graph` (a GraphProto, nested subgraphs included) reads from enclosing scopes."""
    local = {t.name for t in graph.initializer} | {i.name for i in graph.input}
    reads: list[str] = []
    for n in graph.node:
        nested = [g for a in n.attribute for g in ([a.g] if a.HasField("g") else a.graphs)]
        for name in list(n.input) + [r for g in nested for r in outer_reads(g)]:
            if name and name not in local and name not in reads:
                reads.append(name)
        local.update(o for o in n.output if o)
    reads += [o.name for o in graph.output if o.name not in local and o.name not in reads]
    return reads


def condition_inputs(graph, name: str) -> list[str]:
    """The graph inputs the value `name` is computed from (silero-vad's If on its sample rate)."""
    producer = {o: n for n in graph.nodes for o in n.outputs}
    found, seen, todo = [], set(), [name]
    while todo:
        x = todo.pop()
        if x in seen:
            continue
        seen.add(x)
        if x in graph.inputs:
            found.append(x)
        elif x in producer:
            todo.extend(i for i in producer[x].inputs if i)
    return sorted(found)


@handles("If")
def if_(c: Ctx):
    then, other = c.attrs["then_branch"], c.attrs["else_branch"]
    reads = list(dict.fromkeys(outer_reads(then) + outer_reads(other)))
    missing = [n for n in reads if n not in c.vals or c.vals[n].index == -1]
    if missing:
        raise Unsupported(f"a branch reads '{missing[0]}', which has no static shape or was not converted")
    routed = [n for n in reads if c.vals[n].const is None]
    if not routed:
        raise Unsupported("its branches read no run-time value (v0's Switch needs one to route)")
    branches = c.branches([then, other], routed, reads)
    if branches is None:
        deciding = [] if c.graph.in_branch else condition_inputs(c.graph, c.node.inputs[0])
        hint = f"; --value / input_values for {', '.join(deciding)} would fold it to one branch" if deciding else ""
        raise Unsupported(f"a branch has nodes that cannot be converted (listed){hint}")
    (then_index, then_outs), (else_index, else_outs) = branches
    for k, (a, b) in enumerate(zip(then_outs, else_outs)):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise Unsupported(f"output {k} is {list(a.shape)} {a.dtype} in one branch and {list(b.shape)} "
                              f"{b.dtype} in the other (v0's Merge needs one static shape)")
    data = [(c.vals[n].index, c.vals[n].stored_shape, c.vals[n].dtype) for n in routed]
    outs = [(v.shape, v.dtype) for v in then_outs]
    merged = emit_if(c.e, c.name, c.e.index(c.inp(0)), data, outs, then_index, else_index)
    for k, (i, (shape, dtype)) in enumerate(zip(merged, outs)):
        c.set(k, Val(shape, dtype, index=i))
