"""Data-flow execution for graphs with control flow (format-v0.md §8).

r1.1 runs such graphs as data flow, not as a fixed list: a node fires once all its inputs are
ready; Switch makes only the taken half of its outputs ready; Merge fires when either half of
its inputs is ready (the right half is checked first) and forwards it; a produced tensor stops
being ready once every consumer has read it, so a loop's values never mix iterations. Partial
runs a subgraph in place of the node. While (no r1.1 kernel) and Loop run their subgraphs by
the semantics their schema tables define; TensorList* values are Python lists of arrays.

Ordinary nodes are planned here at run time, once per input-shape signature, through the same
op registry the static executor uses; ops whose output shape depends on input values are
planned on every run with those values known. Graphs with such ops run here too.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from msv0.errors import ModelError
from msv0.model import Model, Node
from msv0.dtypes import to_numpy
from msv0.registry import OPS, Plan, Value, fail, op

MAX_NODE_RUNS = 1_000_000  # a graph that has not finished by then is taken to loop forever


@dataclass
class TensorList:
    items: list[np.ndarray | None]
    element_shape: tuple[int, ...] | None
    dtype: np.dtype

    def stacked(self, node: Node) -> np.ndarray:
        if any(x is None for x in self.items) and self.element_shape is None:
            raise fail(node, "stacking a TensorList with unset items and no element shape")
        shape = self.element_shape
        items = [np.zeros(shape, self.dtype) if x is None else x for x in self.items]
        if not items:
            return np.zeros((0,) + tuple(shape or ()), self.dtype)
        if any(x.shape != items[0].shape for x in items):
            raise fail(node, "TensorList items have different shapes")
        return np.stack(items)


# Control-flow ops: fn(interp, node, inputs) -> {output index: value}, or None when the op
# itself decides readiness (Merge). Registered in OPS too, so they count as supported.
Control = Callable[["Interpreter", Node, list[Any]], dict[int, Any]]
CONTROL: dict[str, Control] = {}
MERGE = "Merge"


def control(name: str):
    def register(fn: Control) -> Control:
        CONTROL[name] = fn

        def build(node: Node, ins: list[Value]) -> Plan:
            raise fail(node, f"{name} runs only in data-flow mode")

        op(name)(build)
        return fn

    return register


def _index(node: Node, v: Any, what: str) -> int:
    a = np.asarray(v).reshape(-1)
    if a.size < 1:
        raise fail(node, f"{what} is empty")
    return int(a[0])


def _element_shape(v: Any) -> tuple[int, ...] | None:
    a = np.asarray(v).reshape(-1)
    if a.size == 0 or (a < 0).any():
        return None
    return tuple(int(x) for x in a)


@control("Switch")
def _switch(interp, node, ins):
    n = len(ins) - 1
    if n < 1 or len(node.outputs) != 2 * n:
        raise fail(node, f"expects cond + N data inputs and 2N outputs, got {len(ins)} inputs, "
                         f"{len(node.outputs)} outputs")
    taken = bool(np.asarray(ins[0]).reshape(-1)[0])
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
    while bool(np.asarray(interp.call(cond, values, node)[0]).reshape(-1)[0]):
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
    trips = _index(node, ins[0], "max_trip_count")
    keep = bool(np.asarray(ins[1]).reshape(-1)[0])
    values = list(ins[2:])
    i = 0
    while keep and i < trips:
        out = interp.call(body, [np.array(i, np.int64), np.array(keep), *values], node)
        keep, values = bool(np.asarray(out[0]).reshape(-1)[0]), list(out[1:])
        i += 1
        interp.count(node)
    return dict(enumerate(values))


@control("TensorListFromTensor")
def _list_from_tensor(interp, node, ins):
    x = np.asarray(ins[0])
    if x.ndim < 1:
        raise fail(node, "input must have at least one dimension")
    shape = _element_shape(ins[1]) if len(ins) > 1 else tuple(x.shape[1:])
    return {0: TensorList([x[i].copy() for i in range(x.shape[0])], shape or tuple(x.shape[1:]), x.dtype)}


def _as_list(node: Node, v: Any) -> TensorList:
    if not isinstance(v, TensorList):
        raise fail(node, "input 0 is not a TensorList")
    return v


@control("TensorListReserve")
def _list_reserve(interp, node, ins):
    if len(ins) != 2:
        raise fail(node, "expects (element_shape, num_elements)")
    count = _index(node, ins[1], "num_elements")
    if count < 0:
        raise fail(node, f"num_elements {count} is negative")
    return {0: TensorList([None] * count, _element_shape(ins[0]), to_numpy(node.attrs.elementDType, node.label))}


def _item_index(node: Node, lst: TensorList, v: Any) -> int:
    i = _index(node, v, "index")
    if not 0 <= i < len(lst.items):
        raise fail(node, f"index {i} out of range for a list of {len(lst.items)}")
    return i


@control("TensorListGetItem")
def _list_get(interp, node, ins):
    lst = _as_list(node, ins[0])
    i = _item_index(node, lst, ins[1])
    item = lst.items[i]
    if item is None:
        if lst.element_shape is None:
            raise fail(node, f"item {i} is unset and the element shape is unknown")
        item = np.zeros(lst.element_shape, lst.dtype)
    return {0: item}


@control("TensorListSetItem")
def _list_set(interp, node, ins):
    lst = _as_list(node, ins[0])
    i = _item_index(node, lst, ins[1])
    items = list(lst.items)
    items[i] = np.array(ins[2], lst.dtype)
    return {0: TensorList(items, lst.element_shape, lst.dtype)}


@control("TensorListStack")
def _list_stack(interp, node, ins):
    lst = _as_list(node, ins[0])
    out = lst.stacked(node)
    n = node.attrs.numElements
    if n not in (-1, 0) and n != len(lst.items):
        raise fail(node, f"numElements {n} but the list holds {len(lst.items)}")
    return {0: out}


@dataclass
class Interpreter:
    model: Model
    plans: dict[tuple, Plan] = field(default_factory=dict)
    runs: int = 0
    consts: dict[int, np.ndarray] = field(default_factory=dict)

    def __post_init__(self):
        self.consts = {t.index: t.data for t in self.model.tensors if t.is_const}

    def count(self, node: Node) -> None:
        self.runs += 1
        if self.runs > MAX_NODE_RUNS:
            raise ModelError(f"{node.label}: the graph ran {MAX_NODE_RUNS} nodes without finishing")

    def call(self, sub, args: list[Any], caller: Node) -> list[Any]:
        """Run subgraph `sub` with its inputs bound to args; return its outputs."""
        env = {k: v for k, v in zip(sub.inputs, args)}
        self.run(sub.nodes, env, sub.outputs)
        missing = [k for k in sub.outputs if k not in env]
        if missing:
            raise fail(caller, f"subgraph '{sub.name}' did not produce {[self.model.tensors[k].label for k in missing]}")
        return [env[k] for k in sub.outputs]

    def run(self, order: tuple[int, ...], env: dict[int, Any], keep: tuple[int, ...]) -> None:
        model = self.model
        nodes = [model.nodes[i] for i in order]
        consumers: dict[int, list[int]] = {}
        for pos, node in enumerate(nodes):
            for k in node.inputs:
                consumers.setdefault(k, []).append(pos)
        for k, v in self.consts.items():
            env.setdefault(k, v)
        fixed = {k for k in env}  # constants and inputs stay ready
        pending: dict[int, int] = {}  # reads left before a produced tensor stops being ready

        def merge_half(node: Node) -> list[int] | None:
            n = len(node.inputs) // 2
            right, left = list(node.inputs[n:]), list(node.inputs[:n])
            for half in (right, left):
                if all(k in env for k in half):
                    return half
            return None

        def ready(node: Node) -> bool:
            if node.op == MERGE:
                return merge_half(node) is not None
            return all(k in env for k in node.inputs)

        queue = deque(pos for pos, node in enumerate(nodes) if ready(node))
        queued = set(queue)
        while queue:
            pos = queue.popleft()
            queued.discard(pos)
            node = nodes[pos]
            if not ready(node):  # an input was consumed since it was queued
                continue
            self.count(node)
            if node.op == MERGE:
                if len(node.inputs) % 2 or len(node.outputs) != len(node.inputs) // 2:
                    raise fail(node, "Merge expects 2N inputs and N outputs")
                used = merge_half(node)
                produced = {k: env[t] for k, t in enumerate(used)}
            else:
                used = list(node.inputs)
                produced = self.fire(node, [env[k] for k in used])
            for k in used:
                if k in pending:
                    pending[k] -= 1
                    if pending[k] <= 0 and k not in keep:
                        del pending[k]
                        env.pop(k, None)
            for slot, value in produced.items():
                k = node.outputs[slot]
                env[k] = value
                if k not in fixed:
                    pending[k] = len(consumers.get(k, ()))
                for c in consumers.get(k, ()):
                    if c not in queued and ready(nodes[c]):
                        queue.append(c)
                        queued.add(c)

    def fire(self, node: Node, args: list[Any]) -> dict[int, Any]:
        if node.op in CONTROL:
            return CONTROL[node.op](self, node, args)
        for a in args:
            if isinstance(a, TensorList):
                raise fail(node, "a TensorList reached an op that takes tensors")
        arrays = [np.asarray(a) for a in args]
        dynamic = OPS[node.op].data_dependent(node)
        key = (node.index,) + tuple((a.shape, a.dtype.str) for a in arrays)
        plan = None if dynamic else self.plans.get(key)
        if plan is None:
            ins = []
            for k, a in zip(node.inputs, arrays):
                t = self.model.tensors[k]
                known = a if dynamic else t.data if t.is_const else None
                ins.append(Value(a.shape, a.dtype, t, known))
            try:
                plan = OPS[node.op].build(node, ins)
            except ModelError:
                raise
            except Exception as e:
                raise ModelError(f"{node.label}: {type(e).__name__}: {e}") from e
            if len(plan.outputs) != len(node.outputs):
                raise fail(node, f"has {len(node.outputs)} outputs, the op produces {len(plan.outputs)}")
            if not dynamic:
                self.plans[key] = plan
        outs = [np.empty(s, d) for s, d in plan.outputs]
        plan.run(arrays, outs)
        return dict(enumerate(outs))
