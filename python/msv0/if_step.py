"""The if/else the converters write (msv0.convert.emit.emit_if, format-v0.md §8): Switch on a
condition routes N values to one of two halves, a Partial on each half runs its subgraph, and
Merge forwards the outputs of the Partial that ran. When those four nodes are the whole of the
construct (nothing else reads the Switch's or the Partials' outputs) and both subgraphs are
straight lines of ordinary nodes, the four plan as one step of a straight-line plan
(straight_line.infer): the taken branch's own plan runs, without the data-flow executor's
per-node Python around it."""
from __future__ import annotations

from dataclasses import dataclass

from msv0.model import Model
from msv0.registry import CONTROL, OPS


@dataclass(frozen=True)
class IfElse:
    nodes: tuple[int, int, int, int]  # Switch, Partial (taken), Partial (not taken), Merge
    then: int  # subgraph indices
    other: int


def _ordinary(model: Model, i: int) -> bool:
    node = model.nodes[i]
    return node.op in OPS and node.op not in CONTROL and not OPS[node.op].data_dependent(node)


def find(model: Model) -> dict[int, IfElse] | None:
    """The main graph's if/else constructs by their Switch node ({} for none), or None when it has
    control flow or data-dependent nodes of another kind: then the model runs as data flow."""
    main = model.main_nodes
    readers: dict[int, list[int]] = {}
    for i in main:
        for k in model.nodes[i].inputs:
            readers.setdefault(k, []).append(i)
    for k in model.graph_outputs:
        readers.setdefault(k, []).append(-1)

    def only_reader(tensors) -> int | None:
        """The one node that reads every tensor of `tensors`, once each and nothing else of it."""
        found = {r for k in tensors for r in readers.get(k, [-1, -1])}
        if len(found) != 1 or any(len(readers.get(k, ())) != 1 for k in tensors):
            return None
        return found.pop()

    found: dict[int, IfElse] = {}
    covered: set[int] = set()
    for i in main:
        node = model.nodes[i]
        if node.op != "Switch":
            continue
        n = len(node.inputs) - 1
        if n < 1 or len(node.outputs) != 2 * n:
            return None
        taken, not_taken = only_reader(node.outputs[:n]), only_reader(node.outputs[n:])
        if taken is None or not_taken is None or taken < 0 or not_taken < 0:
            return None
        parts = [model.nodes[taken], model.nodes[not_taken]]
        if any(p.op != "Partial" or list(p.inputs) != list(half) for p, half in
               zip(parts, (node.outputs[:n], node.outputs[n:]))):
            return None
        m = len(parts[0].outputs)
        merge = only_reader(tuple(parts[0].outputs) + tuple(parts[1].outputs))
        if merge is None or merge < 0 or len(parts[1].outputs) != m:
            return None
        mnode = model.nodes[merge]
        if mnode.op != "Merge" or list(mnode.inputs) != list(parts[0].outputs) + list(parts[1].outputs) \
                or len(mnode.outputs) != m:
            return None
        subs = []
        for p in parts:
            j = p.attrs.subGraphIndex
            if not 0 <= j < len(model.subgraphs):
                return None
            sub = model.subgraphs[j]
            if len(sub.inputs) != n or len(sub.outputs) != m or not all(_ordinary(model, k) for k in sub.nodes):
                return None
            subs.append(j)
        found[i] = IfElse((i, taken, not_taken, merge), subs[0], subs[1])
        covered.update((i, taken, not_taken, merge))
    if not all(i in covered or _ordinary(model, i) for i in main):
        return None
    return found
