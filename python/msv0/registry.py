"""The op registry: one build function per schema primitive, registered with @op.

A build function gets the node and what is known of its inputs at plan time (shape, dtype,
and the value when it is constant) and returns a Plan: the output shapes and dtypes, and
either a native kernel object (a _core.NativeOp built for exactly these shapes, with its
weights packed) or a run(inputs, outputs) callable; both write the outputs in place. Weight
packing and every other per-model preparation happen in the build function, once per Session.
"""
from __future__ import annotations

import contextvars
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from msv0.errors import ModelError, ResourceError
from msv0.fb.ActivationType import ActivationType
from msv0.model import Node, QuantParam, Tensor

Shape = tuple[int, ...]

# The default bound on the bytes one Session may plan (its arena, and any one tensor, folded
# constants included): far above what inference of real models needs, far below what a
# hostile file's dims would ask for.
DEFAULT_MEMORY_LIMIT = 4 << 30
# The planning Session's memory_limit (a context variable: Sessions may plan concurrently).
MEMORY_LIMIT: contextvars.ContextVar[int] = contextvars.ContextVar("msv0_memory_limit", default=DEFAULT_MEMORY_LIMIT)
# The planning Session's precision ("fp32", or "bf16" / "fp16" once the Session has checked that
# the CPU has it): the GEMM-based float kernels (Conv2D's im2col, 1x1 and bf16 Winograd, FullConnection, MatMul
# on a constant B) pass it to their kernel objects, which pack their weights for it.
PRECISION: contextvars.ContextVar[str] = contextvars.ContextVar("msv0_precision", default="fp32")
# The planning Session's dequantised weights by tensor index (msv0.weights): a re-plan for new
# input shapes reuses them. None outside a Session: nothing is kept.
WEIGHTS: contextvars.ContextVar[dict[int, np.ndarray] | None] = contextvars.ContextVar("msv0_weights", default=None)


def check_size(what: str, shape: Sequence[int], dtype) -> None:
    """Bound a tensor by the planning Session's memory_limit before anything is sized from it:
    a node's outputs (checked by the Session), and what a build function sizes from attributes
    before its output shape is returned (coordinate tables, filter banks). A zero dim counts as
    1: ops size index arrays by the other dims, and NumPy refuses such shapes even when empty."""
    nbytes = math.prod(max(int(d), 1) for d in shape) * np.dtype(dtype).itemsize
    limit = MEMORY_LIMIT.get()
    if nbytes > limit:
        raise ResourceError(f"{what} of shape {tuple(int(d) for d in shape)} needs {nbytes} bytes, over the "
                            f"Session's memory_limit of {limit}")
RunFn = Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], None]


@dataclass(frozen=True)
class Value:
    """An input of a node as known when planning."""

    shape: Shape
    dtype: np.dtype
    tensor: Tensor
    const: np.ndarray | None = None  # the value, when known before running

    @property
    def quant(self) -> tuple[QuantParam, ...]:
        return self.tensor.quant

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))  # a computed shape may hold NumPy integers


@dataclass
class Plan:
    outputs: list[tuple[Shape, np.dtype]]
    # How the step runs when it is not native: run(inputs, outputs). For a native step it calls
    # the kernel object, so every caller (Programs, the data-flow executor, constant folding)
    # runs the same object.
    run: RunFn | None = None
    # Whether a node whose inputs are all constant may run once at plan time (constant folding).
    foldable: bool = True
    # The step's _core.NativeOp, built for exactly the node's shapes; consecutive native steps
    # run as one C++ Program with no Python between them. Its inputs are the node's first
    # inputs; the node's later inputs (weights, bias) are packed into it.
    kernel: Any = None
    # Output values already known at plan time although some input is not (Shape of a
    # runtime input): the outputs become constants and the node never runs.
    known: list[np.ndarray] | None = None
    # {output k: input j}: output k is input j's data under a new shape (Reshape and its kin).
    # The session then places k on j's bytes and skips the step; `run` (a copy) is for when it
    # cannot, as when j is a constant.
    views: dict[int, int] | None = None

    def __post_init__(self):
        if self.kernel is not None:
            if self.run is not None:
                raise TypeError("a Plan has a kernel or a run function, not both")
            kernel, n = self.kernel, self.kernel_inputs
            self.run = lambda inputs, outputs: kernel(inputs[:n], outputs)

    @property
    def kernel_inputs(self) -> int:
        """How many of the node's inputs the kernel object reads."""
        return len(self.kernel.input_shapes)


@dataclass(frozen=True)
class OpDef:
    name: str
    build: Callable[[Node, list[Value]], Plan]
    # Whether a node's output shape depends on input VALUES (NonMaxSuppression, Unique,
    # one-input Where): such a node is planned anew on every run with every input's value
    # known, by the data-flow executor.
    data_dependent: Callable[[Node], bool] = lambda node: False


OPS: dict[str, OpDef] = {}

# int8 build functions, by op: r1.1 picks a node's kernel by its first input's dtype, so a node
# whose first input is int8 builds through here when its op has an entry (ops whose fp32 build
# is dtype-agnostic, such as Shape, have none).
INT8: dict[str, Callable[[Node, list[Value]], Plan]] = {}

# Ops that exist in the schema but cannot run in an inference runtime, with the reason.
REJECTED: dict[str, str] = {}


def op(*names: str, data_dependent: bool | Callable[[Node], bool] = False, int8: bool = False):
    """Register a build function for the schema primitives `names`. `data_dependent` is True,
    or a predicate on the node, when the output shape depends on input values. With int8, the
    function is the ops' int8 kernel (see INT8); the op's other registration owns its flags."""
    if int8:
        def register_int8(fn):
            for name in names:
                if name in INT8:
                    raise RuntimeError(f"int8 op {name} registered twice")
                INT8[name] = fn
            return fn

        return register_int8
    if not callable(data_dependent):
        data_dependent = (lambda node: True) if data_dependent else (lambda node: False)

    def register(fn):
        for name in names:
            if name in OPS:
                raise RuntimeError(f"op {name} registered twice")
            OPS[name] = OpDef(name, fn, data_dependent)
        return fn

    return register


def build(node: Node, ins: list[Value]) -> Plan:
    """The node's plan from its op's build function, or its int8 one (see INT8)."""
    if ins and ins[0].dtype == np.int8 and node.op in INT8:
        return INT8[node.op](node, ins)
    return OPS[node.op].build(node, ins)


# Control-flow ops: fn(interp, node, inputs) -> {output index: value}, or None when the op
# itself decides readiness (Merge). Registered in OPS too, so they count as supported.
# The interpreter is dataflow.Interpreter (a layer above: the ops get it as an argument).
Control = Callable[[Any, Node, list[Any]], dict[int, Any] | None]
CONTROL: dict[str, Control] = {}


def control(name: str, inputs: int = 0):
    """Register a control-flow op, run by the data-flow executor (msv0.dataflow), which gets at
    least `inputs` inputs (checked here, before fn reads them)."""

    def register(fn: Control) -> Control:
        def checked(interp: Any, node: Node, ins: list[Any]) -> dict[int, Any] | None:
            if len(ins) < inputs:
                raise fail(node, f"expects at least {inputs} input(s), got {len(ins)}")
            return fn(interp, node, ins)

        CONTROL[name] = checked

        def build(node: Node, ins: list[Value]) -> Plan:
            raise fail(node, f"{name} runs only in data-flow mode")

        op(name)(build)
        return fn

    return register


def reject(reason: str, *names: str) -> None:
    """Declare schema primitives that msv0 will never run, and why."""
    for name in names:
        REJECTED[name] = reason


def fail(node: Node, message: str) -> ModelError:
    return ModelError(f"{node.label}: {message}")


def expect_inputs(node: Node, ins: Sequence[Value], *counts: int) -> None:
    if len(ins) not in counts:
        want = " or ".join(str(c) for c in counts)
        raise fail(node, f"expected {want} inputs, got {len(ins)}")


def known_value(node: Node, v: Value, what: str) -> np.ndarray:
    """The value of an input of a data_dependent op: the data-flow executor plans such ops
    with every input's value known."""
    if v.const is None:  # only when built outside the data-flow executor
        raise fail(node, f"{what} ({v.tensor.label}) has no value at plan time")
    return v.const


def first_int(node: Node, v: Any, what: str) -> int:
    """The first element of a run-time value as an int (a count or an index)."""
    a = np.asarray(v).reshape(-1)
    if a.size < 1:
        raise fail(node, f"{what} is empty")
    return int(a[0])


def const_input(node: Node, v: Value, what: str) -> np.ndarray:
    if v.const is None:
        raise fail(node, f"{what} must be a constant tensor ({v.tensor.label} is computed at run time)")
    return v.const


# Fused activationType (format-v0.md §4): only RELU and RELU6 take effect.
def activation_range(activation_type: int) -> tuple[float, float]:
    if activation_type == ActivationType.RELU:
        return 0.0, float("inf")
    if activation_type == ActivationType.RELU6:
        return 0.0, 6.0
    return float("-inf"), float("inf")


def same_dtype(node: Node, ins: Sequence[Value]) -> np.dtype:
    dt = ins[0].dtype
    for v in ins[1:]:
        if v.dtype != dt:
            raise fail(node, f"input dtypes differ: {dt} and {v.dtype} ({v.tensor.label})")
    return dt


def normalize_axis(node: Node, axis: int, rank: int, what: str = "axis") -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < max(rank, 1):
        raise fail(node, f"{what} {axis} is out of range for rank {rank}")
    return a


def supported_ops(int8: bool = False) -> list[str]:
    """The schema primitives msv0 can run, sorted; with int8, those with an int8 kernel."""
    return sorted(INT8 if int8 else OPS)


def as_float32(node: Node, v: Value, what: str) -> None:
    if v.dtype != np.float32:
        raise fail(node, f"{what} must be float32, got {v.dtype}")
