"""Session: plans a model once per input-shape signature, then runs the plan.

Planning walks the main graph in file order: each node's registered build function infers
its output shapes and prepares its kernel (weights packed here, once); nodes whose inputs are
all constant run at plan time (constant folding, which also settles shape arithmetic); the
intermediates get offsets in one arena from their live ranges. Running copies the feeds into
their buffers, calls each step, and returns fresh copies of the outputs.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from msv0 import _core
from msv0 import ops as _ops  # noqa: F401  (registers every op)
from msv0.dataflow import Interpreter
from msv0.fusion import fuse_blocks
from msv0.errors import Error, InputError, ModelError, UnsupportedOpError, node_error
from msv0.model import Model, load
from msv0.planner import allocate
from msv0.registry import (CONTROL, DEFAULT_MEMORY_LIMIT, MEMORY_LIMIT, OPS, PRECISION, REJECTED, WEIGHTS, Plan, RunFn,
                           Shape, Value, build, check_size)

Signature = tuple[Shape, ...]
PRECISIONS = ("fp32", "bf16")


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


@dataclass(frozen=True)
class PlanInfo:
    """What the plan for the model's declared input shapes runs: each step's nodes with the
    index of the native Program step it runs in (None: from Python; as in StepTime.program),
    and every tensor's planned shape and dtype. Nodes in no step were folded at plan time.
    Empty for a model that runs as data flow."""

    steps: list[tuple[tuple[int, ...], int | None]]
    shapes: dict[int, tuple[Shape, np.dtype]]


@dataclass
class Prepared:
    """A shape signature's plan before any buffer exists: shared by every concurrent caller
    (kernel objects and their packed weights are built once)."""

    values: dict[int, Value]
    steps: list[tuple[tuple[int, ...], Plan, list[int], list[int]]]  # (nodes, plan, inputs, outputs)
    views: dict[int, int]  # tensor -> the computed tensor whose bytes it is (Reshape and kin)


@dataclass
class Context:
    """What one caller of run() holds for the length of the call: a thread pool and, per shape
    signature, an arena with its steps bound to it (or a data-flow interpreter). Concurrent
    callers each take their own, so no buffer is shared between runs."""

    pool: object  # _core.ThreadPool
    interpreter: Interpreter | None
    plans: dict[Signature, CompiledPlan] = field(default_factory=dict)


def _run_program(program) -> RunFn:
    return lambda inputs, outputs: program.run()


def step_label(model: Model, nodes: tuple[int, ...]) -> str:
    labels = [model.nodes[i].label for i in nodes]
    return labels[0] if len(labels) == 1 else "fused " + " + ".join(labels)


def step_op(model: Model, nodes: tuple[int, ...]) -> str:
    """The op type a step counts as in a profile: a fused block is its ops joined by '+'."""
    return "+".join(model.nodes[i].op for i in nodes)


def check_supported(model: Model) -> None:
    """Raise UnsupportedOpError listing every node of the model that msv0 cannot run."""
    bad = []
    # With control flow, subgraph bodies run too; list every node of the file then.
    order = range(len(model.nodes)) if len(model.subgraphs) > 1 else model.main_nodes
    for i in order:
        node = model.nodes[i]
        if node.op not in OPS:
            reason = REJECTED.get(node.op, "not implemented")
            bad.append((node.name, node.op, reason))
    if bad:
        lines = "\n".join(f"  {name}: {op} ({reason})" for name, op, reason in bad)
        raise UnsupportedOpError(f"{len(bad)} node(s) cannot run:\n{lines}", bad)


class Session:
    """Runs a model. `model` is a Model or anything msv0.load accepts. `memory_limit` bounds the
    bytes the Session plans for its tensors (ResourceError beyond it). `precision="bf16"` rounds
    the weights and activations of the GEMM-based float kernels to bf16 (float sums) where the
    CPU has AVX512-BF16, and warns and runs fp32 elsewhere. run() may be called from many
    threads at once: each concurrent call gets its own arena and thread pool (kept for reuse),
    so every caller gets the serial result."""

    def __init__(self, model: Model | str | os.PathLike | bytes, num_threads: int = 1,
                 memory_limit: int = DEFAULT_MEMORY_LIMIT, precision: str = "fp32"):
        self.model = model if isinstance(model, Model) else load(model)
        if not isinstance(num_threads, int) or num_threads < 1:
            raise InputError(f"num_threads must be a positive int, got {num_threads!r}")
        self.num_threads = num_threads
        if not isinstance(memory_limit, int) or memory_limit < 1:
            raise InputError(f"memory_limit must be a positive int (bytes), got {memory_limit!r}")
        self.memory_limit = memory_limit
        if precision not in PRECISIONS:
            raise InputError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if precision == "bf16" and not _core.bf16_available():
            warnings.warn(f"precision='bf16' needs AVX512-BF16 and the avx512 tier (active: {_core.isa()}): "
                          "running fp32", RuntimeWarning, stacklevel=2)
            precision = "fp32"
        self.precision = precision  # what runs: "bf16" only where the CPU has it
        check_supported(self.model)
        self._input_tensors = [self.model.tensors[i] for i in self.model.graph_inputs]
        # Graphs with control flow or data-dependent shapes run as data flow (format-v0.md §8),
        # planned node by node.
        nodes = self.model.nodes
        self._dataflow = any(nodes[i].op in CONTROL or OPS[nodes[i].op].data_dependent(nodes[i])
                             for i in self.model.main_nodes)
        self._prepared: dict[Signature, Prepared] = {}
        self._weights: dict[int, np.ndarray] = {}  # dequantised once, for every plan (msv0.weights)
        self._lock = threading.Lock()  # guards _prepared and _idle
        self._idle: list[Context] = [self._new_context()]
        self.plan_info = PlanInfo([], {})
        if not self._dataflow:
            default = tuple(t.shape for t in self._input_tensors)
            prepared = self._prepare(default)
            plan = self._idle[0].plans[default] = self._bind(prepared)
            self.plan_info = PlanInfo(
                [(nodes, k if step.program is not None else None) for k, step in enumerate(plan.steps) for nodes in step.nodes],
                {k: (v.shape, v.dtype) for k, v in prepared.values.items()})

    def __reduce__(self):
        # Plans, arenas and thread pools stay behind: the receiver plans and packs once, anew.
        return Session, (self.model, self.num_threads, self.memory_limit, self.precision)

    @property
    def inputs(self):
        return self.model.inputs

    @property
    def outputs(self):
        return self.model.outputs

    def run(self, feeds: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        """Run once. Feeds by input name, or positionally; returns {output name: array}."""
        return self._run(feeds, None)

    def profile(self, feeds: Mapping[str, np.ndarray] | Sequence[np.ndarray]
                ) -> tuple[dict[str, np.ndarray], list[StepTime]]:
        """run() that also times each step (each native step of a Program too, by a clock read
        in C++ around it). A model that runs as data flow gives one step spanning its nodes."""
        times: list[StepTime] = []
        return self._run(feeds, times), times

    def _run(self, feeds, times: list[StepTime] | None) -> dict[str, np.ndarray]:
        arrays = self._check_feeds(feeds)
        with self._lock:
            ctx = self._idle.pop() if self._idle else None
        if ctx is None:  # another caller holds every context: this one gets its own
            ctx = self._new_context()
        ctx.pool.bind()
        try:
            with self._planning():  # a re-plan (or data flow) builds ops now
                if not self._dataflow:
                    return self._run_plan(ctx, arrays, times)
                start = time.perf_counter()
                result = self._run_dataflow(ctx, arrays)
            if times is not None:
                nodes = tuple(self.model.main_nodes)
                times.append(StepTime(nodes, "data flow", 0.0, time.perf_counter() - start, None))
            return result
        finally:
            _core.ThreadPool.unbind()
            with self._lock:
                self._idle.append(ctx)

    @contextlib.contextmanager
    def _planning(self):
        """This Session's settings, for the ops built meanwhile (the registry's context variables)."""
        tokens = [(var, var.set(value)) for var, value in
                  ((MEMORY_LIMIT, self.memory_limit), (PRECISION, self.precision), (WEIGHTS, self._weights))]
        try:
            yield
        finally:
            for var, token in reversed(tokens):
                var.reset(token)

    def _new_context(self) -> Context:
        return Context(_core.ThreadPool(self.num_threads), Interpreter(self.model) if self._dataflow else None)

    def _run_plan(self, ctx: Context, arrays: list[np.ndarray], times: list[StepTime] | None) -> dict[str, np.ndarray]:
        sig = tuple(a.shape for a in arrays)
        plan = ctx.plans.get(sig)
        if plan is None:
            with self._lock:
                prepared = self._prepared.get(sig)
            if prepared is None:
                try:
                    prepared = self._prepare(sig)
                except ModelError as e:
                    raise InputError(f"the model cannot run with input shapes {list(sig)}: {e}") from None
            plan = ctx.plans[sig] = self._bind(prepared)
        for buf, a in zip(plan.inputs, arrays):
            np.copyto(buf, a)
        t0 = time.perf_counter()
        for k, step in enumerate(plan.steps):
            try:
                if times is None:
                    step.run(step.inputs, step.outputs)
                else:
                    self._timed(step, k, t0, times)
            except Error:
                raise
            except Exception as e:
                raise node_error(step.label, e) from e
        names = [self.model.tensors[i].name for i in self.model.graph_outputs]
        return {name: out.copy() for name, out in zip(names, plan.outputs)}

    def _timed(self, step: Step, k: int, t0: float, times: list[StepTime]) -> None:
        start = time.perf_counter()
        if step.program is None:
            step.run(step.inputs, step.outputs)
            spans = [(0.0, time.perf_counter() - start)]
        else:
            spans = step.program.run_timed()
        program = None if step.program is None else k
        for nodes, (a, b) in zip(step.nodes, spans):
            times.append(StepTime(nodes, step_op(self.model, nodes), start - t0 + a, b - a, program))

    def _run_dataflow(self, ctx: Context, arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
        model = self.model
        env = {k: a.copy() for k, a in zip(model.graph_inputs, arrays)}
        ctx.interpreter.runs = 0
        ctx.interpreter.run(model.main_nodes, env, model.graph_outputs)
        result = {}
        for k in model.graph_outputs:
            t = model.tensors[k]
            if k not in env:
                raise ModelError(f"graph output {t.label} was not produced (its branch did not run)")
            value = env[k]
            if not isinstance(value, np.ndarray):
                raise ModelError(f"graph output {t.label} is a TensorList, not a tensor")
            result[t.name] = value.copy()
        return result

    def _check_feeds(self, feeds) -> list[np.ndarray]:
        tensors = self._input_tensors
        if isinstance(feeds, Mapping):
            names = [t.name for t in tensors]
            missing = [n for n in names if n not in feeds]
            extra = [n for n in feeds if n not in names]
            if missing or extra:
                raise InputError(f"feeds do not match the model inputs {names}: missing {missing}, unexpected {extra}")
            values = [feeds[n] for n in names]
        else:
            values = list(feeds)
            if len(values) != len(tensors):
                raise InputError(f"the model has {len(tensors)} input(s), got {len(values)}")
        arrays = []
        for t, v in zip(tensors, values):
            a = np.asarray(v)
            if a.dtype != t.dtype:
                raise InputError(f"input '{t.name}': expected dtype {t.dtype}, got {a.dtype}")
            if a.ndim != len(t.shape):
                raise InputError(f"input '{t.name}': expected shape {t.shape}, got {a.shape}")
            if 0 in a.shape:  # kernels divide work by dims; an empty batch has nothing to run
                raise InputError(f"input '{t.name}': shape {a.shape} has a zero-size dimension")
            arrays.append(a)
        return arrays

    def _prepare(self, sig: Signature) -> Prepared:
        """Shape inference, kernel objects and fusion for one signature, cached for every caller."""
        model = self.model
        with self._planning():
            values, planned = self._infer(sig)
        uses: dict[int, int] = {}
        for k in [k for _, _, ins, _ in planned for k in ins] + list(model.graph_outputs):
            uses[k] = uses.get(k, 0) + 1
        planned = fuse_blocks(planned, uses, self.num_threads)
        # Outputs that are views of a computed input share its bytes; a view of a constant is copied.
        views = {outs[k]: ins[j] for _, plan, ins, outs in planned for k, j in (plan.views or {}).items()
                 if values[ins[j]].const is None}
        prepared = Prepared(values, planned, views)
        with self._lock:
            return self._prepared.setdefault(sig, prepared)

    def _bind(self, prepared: Prepared) -> CompiledPlan:
        """An arena for one context, and the steps bound to its buffers."""
        model = self.model
        values, planned, views = prepared.values, prepared.steps, prepared.views
        buffers, total = allocate(values, [(ins, outs) for _, _, ins, outs in planned], model.graph_inputs,
                                  model.graph_outputs, self.memory_limit, views)

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
        return CompiledPlan([buffers[k] for k in model.graph_inputs], steps,
                            [array(k) for k in model.graph_outputs], total)

    def _infer(self, sig: Signature) -> tuple[dict[int, Value], list[tuple[tuple[int, ...], Plan, list[int], list[int]]]]:
        """Shape inference and kernel preparation over the main graph: what is known of every
        tensor, and the steps left to run (nodes on constants were run here, folded)."""
        model = self.model
        values: dict[int, Value] = {}
        for t in model.tensors:
            if t.is_const:
                data = t.data
                values[t.index] = Value(tuple(data.shape) if data.ndim else t.shape, t.dtype, t, data)
        for t, shape in zip(self._input_tensors, sig):
            check_size(f"graph input {t.label}", shape, t.dtype)
            values[t.index] = Value(tuple(shape), t.dtype, t)

        planned: list[tuple[tuple[int, ...], Plan, list[int], list[int]]] = []
        for i in model.main_nodes:
            node = model.nodes[i]
            ins = []
            for k in node.inputs:
                if k not in values:
                    raise ModelError(f"{node.label}: input {model.tensors[k].label} is neither constant, "
                                     "a graph input, nor produced by an earlier node")
                ins.append(values[k])
            try:
                plan: Plan = build(node, ins)
            except Error:
                raise
            except Exception as e:
                raise node_error(node.label, e) from e
            if len(plan.outputs) != len(node.outputs):
                raise ModelError(f"{node.label}: has {len(node.outputs)} outputs, the op produces {len(plan.outputs)}")
            for k, (shape, dtype) in zip(node.outputs, plan.outputs):
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
                for k, o in zip(node.outputs, outs):
                    o.flags.writeable = False
                    values[k] = Value(o.shape, o.dtype, model.tensors[k], o)
                continue
            for k, (shape, dtype) in zip(node.outputs, plan.outputs):
                values[k] = Value(tuple(int(d) for d in shape), np.dtype(dtype), model.tensors[k])
            planned.append(((i,), plan, list(node.inputs), list(node.outputs)))

        for k in model.graph_outputs:
            if k not in values:
                raise ModelError(f"graph output {model.tensors[k].label} is never produced")
        return values, planned
