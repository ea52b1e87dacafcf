"""Data-flow execution for graphs with control flow (format-v0.md §8).

r1.1 runs such graphs as data flow, not as a fixed list: a node fires once all its inputs are
ready; Switch makes only the taken half of its outputs ready; Merge fires when either half of
its inputs is ready (the right half is checked first) and forwards it; a produced tensor stops
being ready once every consumer has read it, so a loop's values never mix iterations. Partial
runs a subgraph in place of the node. While (no r1.1 kernel) and Loop run their subgraphs by
the semantics their schema tables define; TensorList* values are Python lists of arrays. The
ops themselves are in ops/control_flow.py and ops/tensor_list.py; this module is the executor.

Ordinary nodes (neither control flow nor data-dependent) are grouped into regions: the nodes
that depend on the same set of tensors from outside them (the graph's inputs and constants
aside), when they read nothing else from outside. Every node of a region fires in the same
wave, once those tensors are ready, so the region fires as one unit: it is planned at run time,
once per input signature, as a straight line (msv0.straight_line, as a plain model's main
graph) and runs as native Programs. Nodes in no region (those alone in theirs included) are
planned one by one through the same op registry; ops whose output shape depends on input
values are planned on every run with those values known. Graphs with such ops run here too.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from msv0 import straight_line
from msv0.errors import Error, ModelError, node_error
from msv0.model import Model, Node
from msv0.ops.control_flow import MERGE
from msv0.ops.tensor_list import TensorList
from msv0.registry import CONTROL, MEMORY_LIMIT, OPS, Plan, Value, build, check_size, fail
from msv0.straight_line import CompiledPlan, StepTime

# A graph that has done this much work without finishing is taken to loop forever (a second or
# so). A node run or subgraph call costs 1, plus 1 per ELEMENTS_PER_RUN elements it produces
# (about one run's overhead in work), so a loop of large tensors is stopped as soon as a loop of
# scalars. Real models' loops (an RNN unrolled over 1000 steps) stay well under it.
MAX_NODE_RUNS = 100_000
ELEMENTS_PER_RUN = 8192
MAX_CALL_DEPTH = 64  # nested Partial/While/Loop calls; r1.1 models nest a few levels


@dataclass(frozen=True)
class Region:
    """Ordinary nodes that fire as one unit. `inputs` has one entry per read of a tensor from
    outside (as the interpreter counts reads); `outputs` are the tensors read outside or kept."""

    nodes: tuple[int, ...]  # in an order that runs them
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    feeds: tuple[int, ...]  # the inputs that are not constants, once each: what its plan is fed


Unit = Node | Region


def regions(model: Model, order: Sequence[int], fixed: set[int], keep: Sequence[int]) -> list[Unit]:
    """The graph `order` as units: each region of two or more nodes, and every other node.
    `fixed`: the tensors ready throughout (constants and the graph's inputs)."""
    nodes = [model.nodes[i] for i in order]
    writers: dict[int, int] = {}
    for node in nodes:
        for k in node.outputs:
            writers[k] = writers.get(k, 0) + 1

    def ordinary(node: Node) -> bool:
        return (node.op not in CONTROL and not OPS[node.op].data_dependent(node)
                and all(writers[k] == 1 and k not in fixed and k not in node.inputs for k in node.outputs))

    producer = {k: node.index for node in nodes if ordinary(node) for k in node.outputs}
    # Kahn's order over the ordinary nodes; a node on a cycle of them never fires, and stays alone.
    deps = {node.index: {producer[k] for k in node.inputs if k in producer} for node in nodes if ordinary(node)}
    users: dict[int, list[int]] = {}
    for i, ds in deps.items():
        for d in ds:
            users.setdefault(d, []).append(i)
    waiting = {i: len(ds) for i, ds in deps.items()}
    ready = deque(i for i in deps if not waiting[i])
    # trigger: the tensors from outside the ordinary nodes that a node depends on
    trigger: dict[int, frozenset[int]] = {}
    while ready:
        i = ready.popleft()
        node = model.nodes[i]
        outside = {k for k in node.inputs if k not in fixed and k not in producer}
        trigger[i] = frozenset(outside.union(*(trigger[d] for d in deps[i])))
        for u in users.get(i, ()):
            waiting[u] -= 1
            if not waiting[u]:
                ready.append(u)
    groups: dict[frozenset[int], list[int]] = {}
    for i in trigger:  # in Kahn's order
        groups.setdefault(trigger[i], []).append(i)
    kept = set(keep)
    found: dict[int, Region] = {}  # first node -> region
    member: set[int] = set()
    for t, group in groups.items():
        inside = {k for i in group for k in model.nodes[i].outputs}
        reads = [k for i in group for k in model.nodes[i].inputs]
        # A node reading a tensor of another region could fire before the rest of its own.
        if len(group) < 2 or any(k not in fixed and k not in t and k not in inside for k in reads):
            continue
        members = set(group)
        read_outside = {k for node in nodes if node.index not in members for k in node.inputs}
        outputs = tuple(k for i in group for k in model.nodes[i].outputs if k in read_outside or k in kept)
        inputs = tuple(k for k in reads if k not in inside)
        feeds = tuple(dict.fromkeys(k for k in inputs if not model.tensors[k].is_const))
        found[min(group, key=order.index)] = Region(tuple(group), inputs, outputs, feeds)
        member |= members
    return [found[node.index] if node.index in found else node for node in nodes
            if node.index in found or node.index not in member]


def _halves(node: Node) -> tuple[tuple[tuple[int, ...], frozenset[int]], ...]:
    """A Merge's input halves, right first (r1.1 checks that one first), each with its set."""
    n = len(node.inputs) // 2
    return tuple((half, frozenset(half)) for half in (node.inputs[n:], node.inputs[:n]))


@dataclass(frozen=True)
class Layout:
    """A graph's units and what the interpreter looks up while running them."""

    units: list[Unit]
    # per unit: a Merge's halves of inputs, right first, each as (tensors, their set); else None
    merge: list[tuple[tuple[tuple[int, ...], frozenset[int]], ...] | None]
    reads: list[tuple[int, ...]]  # per unit: its inputs that are not fixed, once per read
    needs: list[frozenset[int]]  # per unit: the set of its reads, all ready before it fires
    consumers: dict[int, list[int]]  # tensor -> the units reading it, once per read
    fixed: frozenset[int]  # tensors ready throughout: constants and the graph's inputs
    first: tuple[int, ...]  # the units ready when the graph starts (only fixed tensors exist then)


@dataclass
class Interpreter:
    model: Model
    num_threads: int = 1  # for the regions' plans
    plans: dict[tuple, Plan] = field(default_factory=dict)
    runs: int = 0
    depth: int = 0  # subgraph calls in progress
    consts: dict[int, np.ndarray] = field(default_factory=dict)
    const_ids: set[int] = field(default_factory=set)  # id() of each array in consts
    layouts: dict[tuple, Layout] = field(default_factory=dict)  # (order, keep, graph inputs) -> Layout
    # (nodes, input signature) -> (plan, its first Program's number, the feeds it is fed by position)
    region_plans: dict[tuple, tuple[CompiledPlan, int, list[int]]] = field(default_factory=dict)
    programs: int = 0  # Program numbers handed to region plans so far (StepTime.program)
    times: list[StepTime] | None = None  # where a profiled run's step times go
    t0: float = 0.0

    def __post_init__(self):
        self.consts = {t.index: t.data for t in self.model.tensors if t.is_const}
        self.const_ids = {id(a) for a in self.consts.values()}

    def start(self, times: list[StepTime] | None) -> None:
        """Begin a run of the main graph (profiled when `times` is a list)."""
        self.runs = 0
        self.times = times
        self.t0 = time.perf_counter()

    def count(self, node: Node, cost: int = 1) -> None:
        self.runs += cost
        if self.runs > MAX_NODE_RUNS:
            raise ModelError(f"{node.label}: the graph did the work of {MAX_NODE_RUNS} node runs without finishing")

    def count_region(self, region: Region) -> None:
        if self.runs + len(region.nodes) > MAX_NODE_RUNS:
            for i in region.nodes:  # raises at the node that crosses the limit
                self.count(self.model.nodes[i])
        self.runs += len(region.nodes)

    def count_elements(self, unit: Node | Region, produced: dict[int, Any]) -> None:
        cost = sum(getattr(v, "size", 0) for v in produced.values()) // ELEMENTS_PER_RUN
        if cost:
            self.count(unit if isinstance(unit, Node) else self.model.nodes[unit.nodes[-1]], cost)

    def layout(self, order: tuple[int, ...], env: dict[int, Any], keep: tuple[int, ...]) -> Layout:
        key = (order, keep, tuple(env))
        found = self.layouts.get(key)
        if found is None:
            fixed = frozenset(env) | frozenset(self.consts)
            units = regions(self.model, order, fixed, keep)
            consumers: dict[int, list[int]] = {}
            for pos, unit in enumerate(units):
                for k in unit.inputs:
                    consumers.setdefault(k, []).append(pos)
            merge = [_halves(unit) if isinstance(unit, Node) and unit.op == MERGE else None for unit in units]
            reads = [tuple(k for k in unit.inputs if k not in fixed) for unit in units]
            needs = [frozenset(r) for r in reads]
            first = tuple(pos for pos in range(len(units))
                          if (fixed >= needs[pos] if merge[pos] is None else any(fixed >= h for _, h in merge[pos])))
            found = self.layouts[key] = Layout(units, merge, reads, needs, consumers, fixed, first)
        return found

    def call(self, sub, args: list[Any], caller: Node) -> list[Any]:
        """Run subgraph `sub` with its inputs bound to args; return its outputs."""
        if self.depth >= MAX_CALL_DEPTH:  # a subgraph that calls itself, directly or not
            raise fail(caller, f"subgraph calls nest deeper than {MAX_CALL_DEPTH}")
        self.count(caller)
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
        layout = self.layout(order, env, keep)
        units, merge, reads, needs, consumers, fixed = (layout.units, layout.merge, layout.reads, layout.needs,
                                                        layout.consumers, layout.fixed)
        inputs = dict(env)
        env.update(self.consts)
        env.update(inputs)  # an input named like a constant keeps its value
        ready_now = env.keys()  # a live view: a tensor is ready while it is in env
        pending: dict[int, int] = {}  # reads left before a produced tensor stops being ready

        def merge_half(halves) -> tuple[int, ...] | None:
            for half, need in halves:
                if ready_now >= need:
                    return half
            return None

        def ready(pos: int) -> bool:
            halves = merge[pos]
            if halves is None:
                return ready_now >= needs[pos]
            return merge_half(halves) is not None

        queue = deque(layout.first)
        queued = set(queue)
        while queue:
            pos = queue.popleft()
            queued.discard(pos)
            unit = units[pos]
            if not ready(pos):  # an input was consumed since it was queued
                continue
            if isinstance(unit, Region):
                self.count_region(unit)
                used = reads[pos]
                produced = self.fire_region(unit, [env[k] for k in unit.feeds])
            elif merge[pos] is not None:
                self.count(unit)
                if len(unit.inputs) % 2 or len(unit.outputs) != len(unit.inputs) // 2:
                    raise fail(unit, "Merge expects 2N inputs and N outputs")
                used = merge_half(merge[pos])
                produced = {k: env[t] for k, t in enumerate(used)}
            else:
                self.count(unit)
                used = reads[pos]
                produced = self.fire(unit, [env[k] for k in unit.inputs])
            self.count_elements(unit, produced)
            for k in used:
                if k in pending:
                    pending[k] -= 1
                    if pending[k] <= 0 and k not in keep:
                        del pending[k]
                        env.pop(k, None)
            for slot, value in produced.items():
                if slot >= len(unit.outputs):
                    raise fail(unit, f"lists {len(unit.outputs)} output(s); its op writes output {slot}")
                k = unit.outputs[slot]
                if k in fixed:  # it would make itself ready again, forever
                    raise fail(unit, f"writes {model.tensors[k].label}, a constant or an input of its graph")
                env[k] = value
                if k not in fixed:
                    pending[k] = len(consumers.get(k, ()))
                for c in consumers.get(k, ()):
                    if c not in queued and ready(c):
                        queue.append(c)
                        queued.add(c)

    def fire_region(self, region: Region, args: list[Any]) -> dict[int, Any]:
        """Run a region's plan on the values of its feeds."""
        model = self.model
        for k, a in zip(region.feeds, args):
            if isinstance(a, TensorList):
                reader = next(model.nodes[i] for i in region.nodes if k in model.nodes[i].inputs)
                raise fail(reader, "a TensorList reached an op that takes tensors")
        args = [np.asarray(a) for a in args]
        # A model constant passed in (TFLite's IF hands the branches its weights through Switch and
        # Partial) is planned as that constant: its weights are packed once, and nodes on it fold.
        const_ids = self.const_ids
        key = (region.nodes, *[(a.shape, a.dtype, id(a) if id(a) in const_ids else None) for a in args])
        found = self.region_plans.get(key)
        if found is None:
            known = [a if id(a) in const_ids else None for a in args]
            inputs = {k: Value(a.shape, a.dtype, model.tensors[k], c) for k, a, c in zip(region.feeds, args, known)}
            fed = [j for j, c in enumerate(known) if c is None]
            prepared = straight_line.prepare(model, region.nodes, inputs, region.outputs, self.num_threads)
            plan = straight_line.bind(model, prepared, [region.feeds[j] for j in fed], region.outputs,
                                      MEMORY_LIMIT.get())
            # A loop whose shapes change every iteration would keep an arena per iteration.
            straight_line.make_room(self.region_plans, plan, MEMORY_LIMIT.get(), plan_of=lambda found: found[0])
            found = self.region_plans[key] = (plan, self.programs, fed)
            self.programs += len(plan.steps)
        plan, first, fed = found
        outs = straight_line.run(model, plan, [args[j] for j in fed], self.times, self.t0, first)
        return dict(enumerate(outs))

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
        start = time.perf_counter()
        try:
            plan.run(arrays, outs)
            if self.times is not None:
                self.times.append(StepTime((node.index,), node.op, start - self.t0, time.perf_counter() - start, None))
        except Error:
            raise
        except Exception as e:
            raise node_error(node.label, e) from e
        return dict(enumerate(outs))
