"""Data-flow execution for graphs with control flow (format-v0.md §8).

r1.1 runs such graphs as data flow, not as a fixed list: a node fires once all its inputs are
ready; Switch makes only the taken half of its outputs ready; Merge fires when either half of
its inputs is ready (the right half is checked first) and forwards it; a produced tensor stops
being ready once every consumer has read it, so a loop's values never mix iterations. Partial
runs a subgraph in place of the node. While (no r1.1 kernel) and Loop run their subgraphs by
the semantics their schema tables define; TensorList* values are Python lists of arrays. The
ops themselves are in ops/control_flow.py and ops/tensor_list.py; this module is the executor.

Ordinary nodes are planned here at run time, once per input-shape signature, through the same
op registry the static executor uses; ops whose output shape depends on input values are
planned on every run with those values known. Graphs with such ops run here too.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from msv0.errors import Error, ModelError, node_error
from msv0.model import Model, Node
from msv0.ops.control_flow import MERGE
from msv0.ops.tensor_list import TensorList
from msv0.registry import CONTROL, OPS, Plan, Value, build, check_size, fail

MAX_NODE_RUNS = 250_000  # a graph that has not finished by then is taken to loop forever
MAX_CALL_DEPTH = 64  # nested Partial/While/Loop calls; r1.1 models nest a few levels


@dataclass
class Interpreter:
    model: Model
    plans: dict[tuple, Plan] = field(default_factory=dict)
    runs: int = 0
    depth: int = 0  # subgraph calls in progress
    consts: dict[int, np.ndarray] = field(default_factory=dict)

    def __post_init__(self):
        self.consts = {t.index: t.data for t in self.model.tensors if t.is_const}

    def count(self, node: Node) -> None:
        self.runs += 1
        if self.runs > MAX_NODE_RUNS:
            raise ModelError(f"{node.label}: the graph ran {MAX_NODE_RUNS} nodes without finishing")

    def call(self, sub, args: list[Any], caller: Node) -> list[Any]:
        """Run subgraph `sub` with its inputs bound to args; return its outputs."""
        if self.depth >= MAX_CALL_DEPTH:  # a subgraph that calls itself, directly or not
            raise fail(caller, f"subgraph calls nest deeper than {MAX_CALL_DEPTH}")
        env = {k: v for k, v in zip(sub.inputs, args)}
        self.depth += 1
        try:
            self.run(sub.nodes, env, sub.outputs)
        finally:
            self.depth -= 1
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
                if k in fixed:  # it would make itself ready again, forever
                    raise fail(node, f"writes {model.tensors[k].label}, a constant or an input of its graph")
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
                plan = build(node, ins)
            except Error:
                raise
            except Exception as e:
                raise node_error(node.label, e) from e
            if len(plan.outputs) != len(node.outputs):
                raise fail(node, f"has {len(node.outputs)} outputs, the op produces {len(plan.outputs)}")
            for k, (shape, dtype) in zip(node.outputs, plan.outputs):
                check_size(f"{node.label}: output {self.model.tensors[k].label}", shape, dtype)
            if not dynamic:
                self.plans[key] = plan
        outs = [np.empty(s, d) for s, d in plan.outputs]
        try:
            plan.run(arrays, outs)
        except Error:
            raise
        except Exception as e:
            raise node_error(node.label, e) from e
        return dict(enumerate(outs))
