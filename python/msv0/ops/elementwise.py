"""Binary element-wise ops, comparisons, logical ops, Eltwise and AddN (format-v0.md §4, §5).

Every run writes straight into the preallocated output with NumPy `out=`, so the hot residual
Add (+RELU) of MobileNetV2/ResNet makes no temporaries. NumPy's own broadcasting covers r1.1's
rule (left-pad with 1s, a 1 broadcasts); the build function checks it so that a bad model fails
at plan time instead of inside NumPy.
"""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.fb.ActivationType import ActivationType
from msv0.fb.EltwiseMode import EltwiseMode
from msv0.registry import Plan, activation_range, expect_inputs, fail, op, same_dtype

MAX_RANK = 10  # r1.1 ArithmeticParameter holds 10 dims
NUMERIC = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64))
BOOL = np.dtype(np.bool_)


def broadcast_shape(node, a: tuple, b: tuple) -> tuple:
    if len(a) > MAX_RANK or len(b) > MAX_RANK:
        raise fail(node, f"rank above {MAX_RANK}: {a} and {b}")
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise fail(node, f"shapes {a} and {b} do not broadcast")
    return tuple(out)


def fused_activation(activation_type: int):
    """The in-place clamp of a fused RELU/RELU6; every other type is silently none (§4)."""
    if activation_type == ActivationType.RELU:
        return lambda out: np.maximum(out, out.dtype.type(0), out=out)
    if activation_type == ActivationType.RELU6:
        return lambda out: np.clip(out, out.dtype.type(0), out.dtype.type(6), out=out)
    return None


def _trunc_div(a, b, out):
    # C integer `/` truncates toward zero; a − fmod(a, b) is an exact multiple of b.
    np.floor_divide(np.subtract(a, np.fmod(a, b)), b, out=out)


def _check_int_divisor(node, b):
    if not np.all(b):
        raise fail(node, "integer division by zero")


def _floor_div(a, b, out):
    np.divide(a, b, out=out)
    np.floor(out, out=out)


def _floor_mod(a, b, out):
    # a − floorf(a/b)·b, spelled out: np.mod uses a different (fmod-based) formula.
    _floor_div(a, b, out)
    np.multiply(out, b, out=out)
    np.subtract(a, out, out=out)


def _maximum(a, b, out):
    # r1.1's a > b ? a : b: b where unordered (np.maximum returns the NaN operand).
    np.copyto(out, b)
    np.copyto(out, a, where=np.greater(a, b))


def _minimum(a, b, out):
    # r1.1's a > b ? b : a: a where unordered.
    np.copyto(out, a)
    np.copyto(out, b, where=np.greater(a, b))


def _squared_difference(a, b, out):
    np.subtract(a, b, out=out)
    np.multiply(out, out, out=out)


# Kernels f(a, b, out), float forms (nnacl/fp32/arithmetic_fp32.c).
FLOAT_KERNELS = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.divide,
    "RealDiv": np.divide,
    "Maximum": _maximum,
    "Minimum": _minimum,
    "FloorDiv": _floor_div,
    "FloorMod": _floor_mod,
    "Mod": np.fmod,
    "SquaredDifference": _squared_difference,
}
# Integer forms: r1.1 uses C `/` and `%`, which truncate (so FloorDiv/FloorMod are not floor).
INT_KERNELS = {
    **FLOAT_KERNELS,
    "Div": _trunc_div,
    "RealDiv": _trunc_div,
    "FloorDiv": _trunc_div,
    "FloorMod": np.fmod,
}
DIVIDES = {"Div", "RealDiv", "FloorDiv", "FloorMod", "Mod"}


# float32 ops with a C++ kernel (csrc/kernels/binary_f32.cc) for full / row / scalar / per-row operands.
NATIVE_OPS = {"Add": 0, "Sub": 1, "Mul": 2, "Div": 3, "RealDiv": 3, "Maximum": 4, "Minimum": 5,
              "SquaredDifference": 6}
FULL, ROW, SCALAR, PER_ROW = 0, 1, 2, 3


def operand_kind(shape: tuple, out: tuple) -> tuple[int, int] | None:
    """(kind, row length) of an operand of `shape` broadcast to `out`, or None if it is
    neither full, one value, a trailing block of `out` repeated along the leading dims (ROW), nor
    a leading block of `out` whose every value repeats over the trailing dims (PER_ROW)."""
    size = int(np.prod(shape, dtype=np.int64))
    shape = (1,) * (len(out) - len(shape)) + tuple(shape)
    if shape == tuple(out):
        return FULL, 1
    if size == 1:
        return SCALAR, 1
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    if shape[k:] == tuple(out[k:]):
        return ROW, size
    k = len(shape)
    while shape[k - 1] == 1:
        k -= 1
    if shape[:k] == tuple(out[:k]):
        return PER_ROW, int(np.prod(out[k:], dtype=np.int64))
    return None


def binary_layout(a: tuple, b: tuple, out: tuple) -> tuple[int, int, int] | None:
    """(a's kind, b's kind, row length) for the binary kernels (binary_loop.h), or None when an
    operand has no kind or the two operands' rows differ."""
    ka, kb = operand_kind(a, out), operand_kind(b, out)
    if ka is None or kb is None:
        return None
    rows = {k[1] for k in (ka, kb) if k[0] in (ROW, PER_ROW)}
    if len(rows) > 1:
        return None
    return ka[0], kb[0], rows.pop() if rows else 1


def native_binary(name: str, a: tuple, b: tuple, out: tuple, activation_type: int):
    """A _core.Binary kernel object for this float32 op and these shapes, or None to use NumPy."""
    layout = binary_layout(a, b, out)
    if name not in NATIVE_OPS or layout is None:
        return None
    lo, hi = activation_range(activation_type)
    return _core.Binary(NATIVE_OPS[name], *layout, a, b, out, lo, hi)


def arithmetic_plan(node, ins, name: str, activation_type: int) -> Plan:
    expect_inputs(node, ins, 2)
    dtype = same_dtype(node, ins)
    if dtype not in NUMERIC:
        raise fail(node, f"{name} does not support dtype {dtype}")
    shape = broadcast_shape(node, ins[0].shape, ins[1].shape)
    is_int = dtype.kind == "i"
    kernel = (INT_KERNELS if is_int else FLOAT_KERNELS)[name]
    check_divisor = is_int and name in DIVIDES
    act = fused_activation(activation_type)
    if dtype == np.float32:
        binary = native_binary(name, ins[0].shape, ins[1].shape, shape, activation_type)
        if binary is not None:
            return Plan([(shape, dtype)], kernel=binary)

    def run(inputs, outputs):
        a, b = inputs
        out = outputs[0]
        if check_divisor:
            _check_int_divisor(node, b)
        with np.errstate(all="ignore"):  # IEEE inf/nan, as in C
            kernel(a, b, out=out)
        if act is not None:
            act(out)

    return Plan([(shape, dtype)], run)


def _arithmetic(name: str, has_activation: bool):
    @op(name)
    def build(node, ins):
        act = node.attrs.activationType if has_activation else ActivationType.NO_ACTIVATION
        return arithmetic_plan(node, ins, name, act)

    return build


for _name in ("Add", "Sub", "Mul", "Div"):
    _arithmetic(_name, True)
# RealDiv's populate sets no activation; the rest have no activationType field at all.
for _name in ("RealDiv", "Maximum", "Minimum", "FloorDiv", "FloorMod", "Mod", "SquaredDifference"):
    _arithmetic(_name, False)

ELTWISE_MODES = {EltwiseMode.PROD: "Mul", EltwiseMode.SUM: "Add", EltwiseMode.MAXIMUM: "Maximum"}


@op("Eltwise")
def eltwise(node, ins):
    name = ELTWISE_MODES.get(node.attrs.mode)
    if name is None:
        raise fail(node, f"unsupported Eltwise mode {node.attrs.mode}")
    return arithmetic_plan(node, ins, name, ActivationType.NO_ACTIVATION)


@op("AddN")
def add_n(node, ins):
    if not ins:
        raise fail(node, "AddN needs at least one input")
    dtype = same_dtype(node, ins)
    if dtype not in NUMERIC:
        raise fail(node, f"AddN does not support dtype {dtype}")
    # The output takes the shape of the first input with more than one element; the others
    # must have that shape or exactly one element (r1.1's only broadcast).
    shape = next((v.shape for v in ins if v.size != 1), ins[0].shape)
    for v in ins:
        if v.shape != shape and v.size != 1:
            raise fail(node, f"input {v.tensor.label} has shape {v.shape}, expected {shape}")
    if len(shape) > MAX_RANK:
        raise fail(node, f"rank above {MAX_RANK}: {shape}")

    def run(inputs, outputs):
        out = outputs[0]
        # ((in0 + in1) + in2) + ... in input order, as r1.1 accumulates.
        np.copyto(out, inputs[0].reshape(()) if inputs[0].size == 1 else inputs[0])
        for x in inputs[1:]:
            np.add(out, x.reshape(()) if x.size == 1 else x, out=out)

    return Plan([(shape, dtype)], run)


# The ufunc, and the op number of the native kernel (csrc/kernels/compare.cc).
COMPARISONS = {
    "Equal": (np.equal, 0),
    "NotEqual": (np.not_equal, 1),
    "Less": (np.less, 2),
    "LessEqual": (np.less_equal, 3),
    "Greater": (np.greater, 4),
    "GreaterEqual": (np.greater_equal, 5),
}
COMPARE_TYPES = {np.dtype(np.float32): "f", np.dtype(np.int32): "i"}  # dtypes the native kernel takes


def _comparison(name: str, ufunc, native: int):
    @op(name)
    def build(node, ins):
        expect_inputs(node, ins, 2)
        dtype = same_dtype(node, ins)
        shape = broadcast_shape(node, ins[0].shape, ins[1].shape)
        # the one exception to "output dtype = input0's"
        kinds = binary_layout(ins[0].shape, ins[1].shape, shape) if dtype in COMPARE_TYPES else None
        if kinds is not None:
            kernel = _core.Compare(native, COMPARE_TYPES[dtype], *kinds, ins[0].shape, ins[1].shape, shape)
            return Plan([(shape, BOOL)], kernel=kernel)

        def run(inputs, outputs):
            ufunc(inputs[0], inputs[1], out=outputs[0])

        return Plan([(shape, BOOL)], run)

    return build


for _name, (_ufunc, _native) in COMPARISONS.items():
    _comparison(_name, _ufunc, _native)


def _logical(name: str, ufunc):
    @op(name)
    def build(node, ins):
        expect_inputs(node, ins, 2)
        dtype = same_dtype(node, ins)
        shape = broadcast_shape(node, ins[0].shape, ins[1].shape)

        def run(inputs, outputs):
            ufunc(inputs[0], inputs[1], out=outputs[0])

        return Plan([(shape, dtype)], run)  # 0/1 in input0's dtype

    return build


_logical("LogicalAnd", np.logical_and)
_logical("LogicalOr", np.logical_or)


@op("LogicalNot")
def logical_not(node, ins):
    expect_inputs(node, ins, 1)

    def run(inputs, outputs):
        np.logical_not(inputs[0], out=outputs[0])

    return Plan([(ins[0].shape, ins[0].dtype)], run)


@op("LogicalXor")
def logical_xor(node, ins):
    """No r1.1 kernel: like LogicalAnd/Or (format-v0.md §4 broadcasting, output 0/1 in
    input 0's dtype)."""
    expect_inputs(node, ins, 2)
    dtype = same_dtype(node, ins)
    shape = broadcast_shape(node, ins[0].shape, ins[1].shape)

    def run(inputs, outputs):
        np.logical_xor(inputs[0], inputs[1], out=outputs[0])

    return Plan([(shape, dtype)], run)
