"""Planning a straight-line list of nodes into steps bound to one arena: the whole main graph
of a plain model (msv0.session), or a region of a data-flow graph with no control flow in it
(msv0.dataflow).

Planning walks the nodes in order: each node's registered build function infers its output
shapes and prepares its kernel (weights packed here, once); nodes whose inputs are all constant
run at plan time (constant folding, which also settles shape arithmetic); fusion merges
inverted-residual blocks; the intermediates get offsets in one arena from their live ranges;
consecutive native steps become one C++ Program.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from msv0 import _core, dynamic_quant, if_step
from msv0.dynamic_quant import fuse_dynamic_quantize, fuse_integer_ops
from msv0.errors import Error, ModelError, ResourceError, node_error
from msv0.fusion import fuse_activations, fuse_blocks, fuse_residuals
from msv0.gelu import fuse_gelu, profile_op
from msv0.int8_tables import fuse_tables
from msv0.model import Model
from msv0.planner import allocate
from msv0.registry import MEMORY_LIMIT, Plan, RunFn, Value, build, check_size
from msv0.resize_x2 import fuse_resizes

PlannedStep = tuple[tuple[int, ...], Plan, list[int], list[int]]  # (nodes, plan, inputs, outputs)


@dataclass
class Step:
    label: str
    run: RunFn
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    # The nodes each timed unit stands for: one entry, or one per native step of a Program.
    nodes: list[tuple[int, ...]]
    program: object = None  # the _core.Program a "native program" step runs


@dataclass(frozen=True)
class StepTime:
    """One step of a profiled run: the nodes it ran (several for a fused block), its time span
    in seconds from the run's start, and the native Program it ran in (None: run from Python)."""

    nodes: tuple[int, ...]
    op: str
    start: float
    seconds: float
    program: int | None


@dataclass
class CompiledPlan:
    inputs: list[np.ndarray]  # buffers the feeds are copied into
    steps: list[Step]
    outputs: list[np.ndarray]  # views whose contents become the results
    arena_bytes: int


@dataclass
class Prepared:
    """A plan before any buffer exists: shared by every caller that binds it (kernel objects
    and their packed weights are built once)."""

    values: dict[int, Value]
    steps: list[PlannedStep]
    views: dict[int, int]  # tensor -> the computed tensor whose bytes it is (Reshape and kin)


def step_label(model: Model, nodes: tuple[int, ...]) -> str:
    labels = [model.nodes[i].label for i in nodes]
    return labels[0] if len(labels) == 1 else "fused " + " + ".join(labels)


def step_op(model: Model, nodes: tuple[int, ...]) -> str:
    """The op type a step counts as in a profile: a fused block is its ops joined by '+', with the
    lowered GELU and DynamicQuantizeLinear named as such."""
    return dynamic_quant.profile_op(profile_op("+".join(model.nodes[i].op for i in nodes)))


def _run_program(program) -> RunFn:
    return lambda inputs, outputs: program.run()


def infer(model: Model, order: Sequence[int], inputs: Mapping[int, Value], outputs: Sequence[int],
          num_threads: int = 1) -> tuple[dict[int, Value], list[PlannedStep]]:
    """Shape inference and kernel preparation over the nodes `order` given what is known of
    their inputs: what is known of every tensor, and the steps left to run (nodes on constants
    were run here, folded). An if/else construct (msv0.if_step) is one step, planned at its
    Switch."""
    values: dict[int, Value] = {}
    for t in model.tensors:
        if t.is_const:
            data = t.data
            values[t.index] = Value(tuple(data.shape) if data.ndim else t.shape, t.dtype, t, data)
    for k, v in inputs.items():
        check_size(f"graph input {v.tensor.label}", v.shape, v.dtype)
        values[k] = v

    planned: list[PlannedStep] = []
    # Folded values are each within the memory_limit (check_size); their sum is held to it too,
    # or a chain of large constant steps could hold many times the limit.
    folded_bytes, memory_limit = 0, MEMORY_LIMIT.get()
    constructs = if_step.find(model) if any(model.nodes[i].op == "Switch" for i in order) else {}
    inside = {j for c in (constructs or {}).values() for j in c.nodes[1:]}
    for i in order:
        if i in inside:
            continue
        node = model.nodes[i]
        construct = (constructs or {}).get(i)
        nodes, out_tensors = (i,), node.outputs
        if construct is not None:
            nodes, out_tensors = construct.nodes, model.nodes[construct.nodes[3]].outputs
        ins = []
        for k in node.inputs:
            if k not in values:
                raise ModelError(f"{node.label}: input {model.tensors[k].label} is neither constant, "
                                 "a graph input, nor produced by an earlier node")
            ins.append(values[k])
        try:
            plan: Plan = build(node, ins) if construct is None else _plan_if_else(model, construct, ins, num_threads)
        except Error:
            raise
        except Exception as e:
            raise node_error(node.label, e) from e
        if len(plan.outputs) != len(out_tensors):
            raise ModelError(f"{node.label}: has {len(out_tensors)} outputs, the op produces {len(plan.outputs)}")
        for k, (shape, dtype) in zip(out_tensors, plan.outputs):
            check_size(f"{node.label}: output {model.tensors[k].label}", shape, dtype)
            if k in values:  # a graph input or a constant, which not even a folded value replaces
                raise ModelError(f"{node.label}: output {model.tensors[k].label} is already defined")
        if plan.known is not None or (plan.foldable and all(v.const is not None for v in ins)):
            if plan.known is not None:
                outs = [np.array(v) for v in plan.known]
            else:
                outs = [np.empty(s, d) for s, d in plan.outputs]
                try:
                    plan.run([v.const for v in ins], outs)
                except Error:
                    raise
                except Exception as e:
                    raise node_error(node.label, e) from e
            folded_bytes += sum(o.nbytes for o in outs)
            if folded_bytes > memory_limit:
                raise ResourceError(f"{node.label}: the values folded at plan time so far take {folded_bytes} bytes, "
                                    f"over the Session's memory_limit of {memory_limit}")
            for k, o in zip(out_tensors, outs):
                o.flags.writeable = False
                values[k] = Value(o.shape, o.dtype, model.tensors[k], o)
            continue
        for k, (shape, dtype) in zip(out_tensors, plan.outputs):
            values[k] = Value(tuple(int(d) for d in shape), np.dtype(dtype), model.tensors[k])
        if plan.kernel is not None:  # its weights are packed: their file pages need not stay
            for v in ins:
                if v.const is not None and v.tensor.raw is not None:
                    model.release_pages(v.tensor)
        planned.append((nodes, plan, list(node.inputs), list(out_tensors)))

    for k in outputs:
        if k not in values:
            raise ModelError(f"graph output {model.tensors[k].label} is never produced")
    return values, planned


def prepare(model: Model, order: Sequence[int], inputs: Mapping[int, Value], outputs: Sequence[int],
            num_threads: int) -> Prepared:
    """infer(), then fusion: the plan of the nodes `order` for one input signature."""
    values, planned = infer(model, order, inputs, outputs, num_threads)
    uses: dict[int, int] = {}
    for k in [k for _, _, ins, _ in planned for k in ins] + list(outputs):
        uses[k] = uses.get(k, 0) + 1
    planned = fuse_integer_ops(model, fuse_gelu(model, planned, uses, values), uses, values)
    planned = fuse_dynamic_quantize(model, fuse_tables(model, planned, uses, values), uses, values)
    planned = fuse_blocks(fuse_resizes(model, planned, values, uses), uses, num_threads)
    planned = fuse_activations(fuse_residuals(planned, uses), uses, values)
    # Outputs that are views of a computed input share its bytes; a view of a constant is copied.
    views = {outs[k]: ins[j] for _, plan, ins, outs in planned for k, j in (plan.views or {}).items()
             if values[ins[j]].const is None}
    return Prepared(values, planned, views)


def bind(model: Model, prepared: Prepared, inputs: Sequence[int], outputs: Sequence[int],
         memory_limit: int) -> CompiledPlan:
    """An arena for one caller, and the steps bound to its buffers."""
    values, planned, views = prepared.values, prepared.steps, prepared.views
    buffers, total = allocate(values, [(ins, outs) for _, _, ins, outs in planned], inputs, outputs,
                              memory_limit, views)

    def array(k: int) -> np.ndarray:
        return values[k].const if values[k].const is not None else buffers[k]

    steps: list[Step] = []
    program = None
    for nodes, plan, ins, outs in planned:
        if plan.views and all(k in views for k in outs):  # its outputs already are its inputs' bytes
            continue
        in_arrays, out_arrays = [array(k) for k in ins], [buffers[k] for k in outs]
        if plan.kernel is None:
            steps.append(Step(step_label(model, nodes), plan.run, in_arrays, out_arrays, [nodes]))
            program = None
            continue
        if program is None:  # start a run of native steps
            program = _core.Program()
            steps.append(Step("native program", _run_program(program), [], [], [], program))
        steps[-1].nodes.append(nodes)
        program.add(plan.kernel, [np.require(a, requirements="C") for a in in_arrays[:plan.kernel_inputs]], out_arrays)
    return CompiledPlan([buffers[k] for k in inputs], steps, [array(k) for k in outputs], total)


def make_room(plans: dict, new: CompiledPlan, memory_limit: int, count: int | None = None,
              plan_of: Callable[[object], CompiledPlan] = lambda v: v) -> None:
    """Drop the oldest of the cached `plans` (insertion order) until `new` fits beside them: their
    arenas and its within memory_limit together, and fewer than `count` of them left. A cache of
    plans per input signature would otherwise keep an arena for every shape it has seen."""
    kept = sum(plan_of(v).arena_bytes for v in plans.values())
    while plans and ((count is not None and len(plans) >= count) or kept + new.arena_bytes > memory_limit):
        kept -= plan_of(plans.pop(next(iter(plans)))).arena_bytes


def run(model: Model, plan: CompiledPlan, arrays: Sequence[np.ndarray], times: list[StepTime] | None,
        t0: float, first_program: int = 0) -> list[np.ndarray]:
    """Copy `arrays` into the plan's input buffers, run its steps, and return fresh copies of
    its outputs. With `times`, each step's span (from t0) is appended; the k-th step, when a
    Program, counts as Program first_program + k."""
    _core.copy_in(plan.inputs, arrays)
    for k, step in enumerate(plan.steps):
        try:
            if times is None:
                step.run(step.inputs, step.outputs)
            else:
                _timed(model, step, first_program + k, t0, times)
        except Error:
            raise
        except Exception as e:
            raise node_error(step.label, e) from e
    return _core.copies(plan.outputs)


def _timed(model: Model, step: Step, k: int, t0: float, times: list[StepTime]) -> None:
    start = time.perf_counter()
    if step.program is None:
        step.run(step.inputs, step.outputs)
        spans = [(0.0, time.perf_counter() - start)]
    else:
        spans = step.program.run_timed()
    program = None if step.program is None else k
    for nodes, (a, b) in zip(step.nodes, spans):
        times.append(StepTime(nodes, step_op(model, nodes), start - t0 + a, b - a, program))


def _plan_if_else(model: Model, construct: if_step.IfElse, ins: list[Value], num_threads: int) -> Plan:
    """One step for an if/else: each branch planned as a straight line on the Switch's data
    (those that are model constants stay constants in it); a run checks the condition's first
    element, as Switch does, and runs the taken branch's plan. Each thread binds its own arenas,
    so concurrent callers never share a buffer."""
    data = ins[1:]
    fed = [n for n, v in enumerate(data) if v.const is None]  # the data a run passes in
    branches = []
    for j in (construct.then, construct.other):
        sub = model.subgraphs[j]
        values = {k: Value(v.shape, v.dtype, model.tensors[k], v.const) for k, v in zip(sub.inputs, data)}
        branches.append((prepare(model, sub.nodes, values, sub.outputs, num_threads), sub))
    outs = [[(p.values[k].shape, p.values[k].dtype) for k in sub.outputs] for p, sub in branches]
    if outs[0] != outs[1]:
        raise ModelError(f"{model.nodes[construct.nodes[3]].label}: the branches give {outs[0]} and {outs[1]}")
    memory_limit = MEMORY_LIMIT.get()
    local = threading.local()

    def run_taken(inputs, outputs):
        flat = np.asarray(inputs[0]).reshape(-1)
        if flat.size == 0:
            raise ModelError(f"{model.nodes[construct.nodes[0]].label}: the condition is empty")
        k = 0 if flat[0] else 1
        bound = getattr(local, "plans", None)
        if bound is None:
            bound = local.plans = [bind(model, p, [sub.inputs[n] for n in fed], sub.outputs, memory_limit)
                                   for p, sub in branches]
        for out, value in zip(outputs, run(model, bound[k], [inputs[1 + n] for n in fed], None, 0.0)):
            np.copyto(out, value)

    return Plan(outs[0], run_taken, foldable=False)
