"""Conversion-time graph rewrites that need a known value: an `If` whose condition folded to a
constant becomes the nodes of the branch it takes (exporters wrap shape logic in such Ifs), and
an integer product with a constant zero factor is zero."""
from __future__ import annotations

import numpy as np

from msv0.errors import UnsupportedOpError


def taken_branch(node, cond: np.ndarray):
    """The GraphProto that If `node` runs for the folded condition `cond`."""
    if cond.size != 1:
        raise UnsupportedOpError(f"If node '{node.name}': condition has {cond.size} elements",
                                 [(node.name, "If", "condition is not a single value")])
    return node.attrs["then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"]


def zero_product(node, consts: dict, shapes: dict) -> np.ndarray | None:
    """The value of an integer Mul with an all-zero constant factor: zeros, whatever the other
    factor holds at run time (exact: integer products have no NaN or infinity). Exporters write
    `x * 0` to keep an otherwise unused input in the graph (silero-vad's int64 sample rate, which
    would then need an int64 Cast that v0 lacks). None when the node is not such a product."""
    if node.op != "Mul" or len(node.inputs) != 2:
        return None
    for zero, other in (node.inputs, node.inputs[::-1]):
        c = consts.get(zero)
        if c is not None and c.dtype.kind in "iu" and not c.any() and other in shapes:
            return np.zeros(np.broadcast_shapes(c.shape, shapes[other][0]), c.dtype)
    return None


def inline_branch(node, branch, make_node, consts: dict) -> list:
    """The branch's nodes, with its initializers added to `consts` and an Identity from each branch
    output to the If's output. Branch names are prefixed with the If's name so that they cannot
    collide with the outer graph's; names the branch reads from the outer scope stay as they are."""
    from onnx import helper, numpy_helper
    prefix = node.name + "/"
    local = {t.name for t in branch.initializer} | {o for n in branch.node for o in n.output if o}
    rename = {name: prefix + name for name in local}
    for t in branch.initializer:
        consts[rename[t.name]] = numpy_helper.to_array(t)
    nodes = []
    for k, n in enumerate(branch.node):
        p = helper.make_node(n.op_type, [rename.get(i, i) for i in n.input], [rename.get(o, o) for o in n.output],
                             name=prefix + (n.name or f"{n.op_type}_{k}"), domain=n.domain)
        p.attribute.extend(n.attribute)
        for a in p.attribute:  # nested subgraphs may read the branch's names
            for g in [a.g] if a.HasField("g") else a.graphs:
                _rename_reads(g, rename)
        nodes.append(make_node(p))
    for vi, out in zip(branch.output, node.outputs):
        if out:
            p = helper.make_node("Identity", [rename.get(vi.name, vi.name)], [out], name=f"{prefix}{out}")
            nodes.append(make_node(p))
    return nodes


def _rename_reads(graph, rename: dict) -> None:
    """Rewrite, in place, the names `graph` (and its subgraphs) reads from an enclosing scope."""
    for n in graph.node:
        n.input[:] = [rename.get(i, i) for i in n.input]
        for a in n.attribute:
            for g in [a.g] if a.HasField("g") else a.graphs:
                _rename_reads(g, rename)
    for vi in graph.output:
        vi.name = rename.get(vi.name, vi.name)
