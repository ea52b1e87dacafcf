"""Session: plans a model once per input-shape signature, then runs the plan.

A plain model's main graph is planned as one straight line (msv0.straight_line); a model with
control flow or data-dependent shapes runs as data flow (msv0.dataflow), whose straight-line
regions are planned the same way. Running copies the feeds into their buffers, calls each
step, and returns fresh copies of the outputs.
"""
from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
import warnings
from dataclasses import dataclass, field
from collections.abc import Mapping, Sequence

import numpy as np

from msv0 import _core, if_step, straight_line
from msv0 import ops as _ops  # noqa: F401  (registers every op)
from msv0.dataflow import Interpreter
from msv0.errors import InputError, ModelError, UnsupportedOpError
from msv0.model import Model, load
from msv0.registry import DEFAULT_MEMORY_LIMIT, MEMORY_LIMIT, OPS, PRECISION, REJECTED, WEIGHTS, Shape, Value
from msv0.straight_line import CompiledPlan, Prepared, StepTime, step_label, step_op  # noqa: F401  (the API's names)
from msv0.thread_choice import ThreadChoice

Signature = tuple[Shape, ...]
# Plans are kept for this many input signatures, the most recently run: a model fed many shapes
# (audio of every length) plans an evicted one anew instead of holding packed weights and an
# arena for every shape it has seen.
MAX_SIGNATURES = 8
PRECISIONS = ("fp32", "bf16", "fp16")
# What each reduced precision needs from the CPU and the active tier (its warning).
_NEEDS = {"bf16": "AVX512-BF16 and the avx512 tier", "fp16": "FP16 arithmetic (ARMv8.2-A) and the neon tier"}


@dataclass(frozen=True)
class PlanInfo:
    """What the plan for the model's declared input shapes runs: each step's nodes with the
    index of the native Program step it runs in (None: from Python; as in StepTime.program),
    and every tensor's planned shape and dtype. Nodes in no step were folded at plan time.
    Empty for a model that runs as data flow."""

    steps: list[tuple[tuple[int, ...], int | None]]
    shapes: dict[int, tuple[Shape, np.dtype]]


@dataclass
class Context:
    """What one caller of run() holds for the length of the call: a thread pool and, per shape
    signature, an arena with its steps bound to it (or a data-flow interpreter). Concurrent
    callers each take their own, so no buffer is shared between runs."""

    pool: object  # _core.ThreadPool
    interpreter: Interpreter | None
    plans: dict[Signature, CompiledPlan] = field(default_factory=dict)
    # Per planned signature, whether the pool runs solo (where it has several threads): each
    # shape's runs are timed against their own kind.
    choices: dict[Signature, ThreadChoice] = field(default_factory=dict)
    # The signature last run: feeds that match its input buffers exactly run it unchecked.
    last: Signature | None = None


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
    bytes the Session plans for its tensors (ResourceError beyond it): a plan's arena, the values
    it folds at plan time, and together the arenas it keeps for the input shapes run most recently
    (the oldest go first, planned anew if they come back). `precision="bf16"` rounds
    the weights and activations of the GEMM-based float kernels to bf16 (float sums) where the
    CPU has AVX512-BF16; `precision="fp16"` computes them in fp16 (r1.1's enable_float16) where
    it has ARMv8.2-A FP16 arithmetic; elsewhere each warns and runs fp32. run() may be called
    from many threads at once: each concurrent call gets its own arena and thread pool (kept for
    reuse), so every caller gets the serial result."""

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
        available = {"fp32": True, "bf16": _core.bf16_available(), "fp16": _core.fp16_available()}
        if not available[precision]:
            warnings.warn(f"precision={precision!r} needs {_NEEDS[precision]} (active: {_core.isa()}): "
                          "running fp32", RuntimeWarning, stacklevel=2)
            precision = "fp32"
        self.precision = precision  # what runs: a reduced one only where the CPU has it
        check_supported(self.model)
        self._input_tensors = [self.model.tensors[i] for i in self.model.graph_inputs]
        self._input_names = [t.name for t in self._input_tensors]
        self._input_name_set = set(self._input_names)
        self._input_dtypes = [np.dtype(t.dtype) for t in self._input_tensors]
        self._input_ndims = [len(t.shape) for t in self._input_tensors]
        self._output_names = [self.model.tensors[k].name for k in self.model.graph_outputs]
        # Graphs with control flow or data-dependent shapes run as data flow (format-v0.md §8),
        # planned node by node; if/else constructs alone plan as steps of a straight line.
        constructs = if_step.find(self.model)
        self._dataflow = constructs is None
        self._prepared: dict[Signature, Prepared] = {}
        self._weights: dict[int, np.ndarray] = {}  # dequantised once, for every plan (msv0.weights)
        self._lock = threading.Lock()  # guards _prepared
        # Contexts no caller holds. A deque's pop and append are atomic: no lock on every run.
        self._idle: collections.deque[Context] = collections.deque([self._new_context()])
        self.plan_info = PlanInfo([], {})
        if not self._dataflow:
            default = tuple(t.shape for t in self._input_tensors)
            try:
                prepared = self._prepare(default)
            except ModelError:
                if not constructs:
                    raise
                # branches that give different shapes: data flow plans them as they run
                self._dataflow = True
                self._idle = collections.deque([self._new_context()])
        if not self._dataflow:
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
        """Run once. Feeds by input name, or positionally; returns {output name: array}. By name,
        an input with a default (Model.input_defaults: a streaming model's initial state) may be
        left out."""
        return self._run(feeds, None)

    def profile(self, feeds: Mapping[str, np.ndarray] | Sequence[np.ndarray]
                ) -> tuple[dict[str, np.ndarray], list[StepTime]]:
        """run() that also times each step (each native step of a Program too, by a clock read
        in C++ around it). In a model that runs as data flow, the steps are those of its
        straight-line regions and the other nodes it ran, control-flow nodes left out (a node
        in a loop or a subgraph called twice appears once per run of it)."""
        times: list[StepTime] = []
        return self._run(feeds, times), times

    def _run(self, feeds, times: list[StepTime] | None) -> dict[str, np.ndarray]:
        try:
            ctx = self._idle.pop()
        except IndexError:  # another caller holds every context: this one gets its own
            ctx = self._new_context()
        ctx.pool.bind()
        try:
            last = ctx.plans.get(ctx.last)
            if last is not None and type(feeds) is dict and len(feeds) == len(self._input_names):
                # A streaming model's step takes a few microseconds: feeds by name that are C-ordered
                # arrays of exactly the dtypes and shapes of the last run's inputs need no checks.
                values = [feeds.get(n) for n in self._input_names]
                if _core.same_arrays(last.inputs, values):
                    return self._run_compiled(ctx, ctx.last, values, times)
            arrays = self._check_feeds(feeds)
            if not self._dataflow:
                return self._run_plan(ctx, arrays, times)
            with self._planning():  # data flow builds ops as it runs
                return self._run_dataflow(ctx, arrays, times)
        finally:
            _core.ThreadPool.unbind()
            self._idle.append(ctx)

    @contextlib.contextmanager
    def _planning(self):
        """This Session's settings, for the ops built meanwhile (the registry's context variables);
        their packed weights share huge-page mappings (_core.WeightPool)."""
        tokens = [(var, var.set(value)) for var, value in
                  ((MEMORY_LIMIT, self.memory_limit), (PRECISION, self.precision), (WEIGHTS, self._weights))]
        try:
            with _core.WeightPool():
                yield
        finally:
            for var, token in reversed(tokens):
                var.reset(token)

    def _new_context(self) -> Context:
        pool = _core.ThreadPool(self.num_threads)
        return Context(pool, Interpreter(self.model, self.num_threads) if self._dataflow else None)

    def _run_plan(self, ctx: Context, arrays: list[np.ndarray], times: list[StepTime] | None) -> dict[str, np.ndarray]:
        sig = tuple([a.shape for a in arrays])
        plan = ctx.plans.pop(sig, None)  # put back last: the most recently run
        if plan is None:
            with self._lock:
                prepared = self._prepared.get(sig)
            if prepared is None:
                try:
                    prepared = self._prepare(sig)
                except ModelError as e:
                    raise InputError(f"the model cannot run with input shapes {list(sig)}: {e}") from None
            plan = self._bind(prepared)
            straight_line.make_room(ctx.plans, plan, self.memory_limit, MAX_SIGNATURES)
            for gone in ctx.choices.keys() - ctx.plans.keys():
                del ctx.choices[gone]
        ctx.plans[sig] = plan
        ctx.last = sig
        return self._run_compiled(ctx, sig, arrays, times)

    def _run_compiled(self, ctx: Context, sig: Signature, arrays: list[np.ndarray],
                      times: list[StepTime] | None) -> dict[str, np.ndarray]:
        plan, choice = ctx.plans[sig], None
        if self.num_threads > 1 and times is None:  # a profiled run keeps the pool's mode
            choice = ctx.choices.get(sig)
            if choice is None:  # its first runs are not timed (the plan's first touches its arena)
                choice = ctx.choices[sig] = ThreadChoice(ctx.pool)
        mode = choice.next_run() if choice else None  # timed runs only
        start = time.perf_counter() if mode is not None or times is not None else 0.0
        outs = straight_line.run(self.model, plan, arrays, times, start)
        if mode is not None:
            choice.record(mode, time.perf_counter() - start)
        return dict(zip(self._output_names, outs))

    def _run_dataflow(self, ctx: Context, arrays: list[np.ndarray], times: list[StepTime] | None) -> dict[str, np.ndarray]:
        model = self.model
        env = {k: a.copy() for k, a in zip(model.graph_inputs, arrays)}
        ctx.interpreter.start(times)
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
        tensors, names = self._input_tensors, self._input_names
        if isinstance(feeds, dict) or isinstance(feeds, Mapping):  # dict first: the cheap check
            if len(feeds) != len(names) and self.model.input_defaults:
                feeds = {**self.model.input_defaults, **feeds}
            if len(feeds) != len(names) or feeds.keys() != self._input_name_set:
                missing = [n for n in names if n not in feeds]
                extra = [n for n in feeds if n not in names]
                raise InputError(f"feeds do not match the model inputs {names}: missing {missing}, unexpected {extra}")
            values = [feeds[n] for n in names]
        else:
            values = list(feeds)
            if len(values) != len(tensors):
                raise InputError(f"the model has {len(tensors)} input(s), got {len(values)}")
        arrays = []
        # The cheapest tests first, as a streaming model's step is a few microseconds: the type,
        # then the dtype by identity (NumPy's built-in dtypes are singletons).
        for t, dtype, ndim, v in zip(tensors, self._input_dtypes, self._input_ndims, values):
            a = v if type(v) is np.ndarray else np.asarray(v)
            if a.dtype is not dtype and a.dtype != dtype:
                raise InputError(f"input '{t.name}': expected dtype {dtype}, got {a.dtype}")
            if a.ndim != ndim:
                raise InputError(f"input '{t.name}': expected shape {t.shape}, got {a.shape}")
            if not a.size:  # kernels divide work by dims; an empty batch has nothing to run
                raise InputError(f"input '{t.name}': shape {a.shape} has a zero-size dimension")
            arrays.append(a)
        return arrays

    def _prepare(self, sig: Signature) -> Prepared:
        """Shape inference, kernel objects and fusion for one signature, cached for every caller."""
        model = self.model
        inputs = {t.index: Value(tuple(shape), t.dtype, t) for t, shape in zip(self._input_tensors, sig)}
        with self._planning():
            prepared = straight_line.prepare(model, model.main_nodes, inputs, model.graph_outputs, self.num_threads)
        with self._lock:
            prepared = self._prepared.setdefault(sig, prepared)
            while len(self._prepared) > MAX_SIGNATURES:
                del self._prepared[next(iter(self._prepared))]
            return prepared

    def _bind(self, prepared: Prepared) -> CompiledPlan:
        return straight_line.bind(self.model, prepared, self.model.graph_inputs, self.model.graph_outputs,
                                  self.memory_limit)
