"""Reduce, Mean (deprecated), ArgMax and ArgMin (format-v0.md §5)."""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.fb.ReduceMode import ReduceMode
from msv0.ops.shape import int_values
from msv0.registry import Plan, const_input, expect_inputs, fail, normalize_axis, op


def _reduce_one(x: np.ndarray, axis: int, mode: int) -> np.ndarray:
    """One axis, kept as size 1; r1.1 reduces the axes one after another in list order."""
    if mode == ReduceMode.ReduceMean:
        s = x.sum(axis=axis, keepdims=True, dtype=x.dtype)
        if x.dtype.kind == "f":
            return s / x.dtype.type(x.shape[axis])
        return np.trunc(s / x.shape[axis]).astype(x.dtype)  # C integer division
    if mode == ReduceMode.ReduceMax:
        return x.max(axis=axis, keepdims=True)
    if mode == ReduceMode.ReduceMin:
        return x.min(axis=axis, keepdims=True)
    if mode == ReduceMode.ReduceProd:
        return x.prod(axis=axis, keepdims=True, dtype=x.dtype)
    if mode == ReduceMode.ReduceAll:
        return x.all(axis=axis, keepdims=True).astype(x.dtype)
    return x.sum(axis=axis, keepdims=True, dtype=x.dtype)  # ReduceSum; ReduceSumSquare/ReduceASum after their map


def reduce_plan(node, x, axes: list[int], keep_dims: bool, mode: int, coeff: float | None) -> Plan:
    rank = len(x.shape)
    if mode not in range(ReduceMode.ReduceAll + 1):
        raise fail(node, f"unsupported mode {mode}")
    boolean = mode == ReduceMode.ReduceAll
    if boolean and x.dtype != np.bool_ or not boolean and x.dtype not in (np.float32, np.int32):
        raise fail(node, f"mode {mode} does not take {x.dtype} input")
    axes = [normalize_axis(node, ax, rank) for ax in axes] if axes else list(range(rank))
    if len(set(axes)) != len(axes):
        raise fail(node, f"repeated axes {axes}")
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    if keep_dims:
        out_shape = kept
    else:
        out_shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if any(x.shape[ax] == 0 for ax in axes):
        raise fail(node, f"cannot reduce an empty dim of {x.shape}")
    if x.dtype == np.float32 and axes:
        return Plan([(out_shape, x.dtype)], kernel=_core.Reduce(x.shape, axes, mode, 1.0 if coeff is None else coeff,
                                                                out_shape))

    def run(inputs, outputs):
        y = inputs[0]
        if mode == ReduceMode.ReduceSumSquare:
            y = y * y
        elif mode == ReduceMode.ReduceASum:
            y = np.abs(y)
        for ax in axes:
            y = _reduce_one(y, ax, mode)
        if coeff is not None:
            y = y * y.dtype.type(coeff)
        outputs[0][...] = y.reshape(out_shape)

    return Plan([(out_shape, x.dtype)], run)


@op("Reduce")
def reduce_op(node, ins):
    expect_inputs(node, ins, 1, 2)
    x = ins[0]
    a = node.attrs
    axes = int_values(node, ins[1], "axes") if len(ins) == 2 else list(a.axes or ())
    keep, coeff = bool(a.keepDims), None
    if a.reduceToEnd:
        if len(axes) != 1:
            raise fail(node, f"reduceToEnd needs exactly one axis, got {axes}")
        start = normalize_axis(node, axes[0], len(x.shape))
        axes, keep = list(range(start, len(x.shape))), False
        if a.coeff != 1.0:  # coeff takes effect only with reduceToEnd
            coeff = a.coeff
    return reduce_plan(node, x, axes, keep, a.mode, coeff)


@op("Mean")
def mean(node, ins):
    expect_inputs(node, ins, 1)
    return reduce_plan(node, ins[0], list(node.attrs.axis or ()), bool(node.attrs.keepDims), ReduceMode.ReduceMean,
                       None)


def _arg_plan(node, ins, largest: bool) -> Plan:
    expect_inputs(node, ins, 1)
    x = ins[0]
    a = node.attrs
    if x.dtype != np.float32:
        raise fail(node, f"input must be float32, got {x.dtype}")
    rank = len(x.shape)
    if not 1 <= rank <= 4:
        raise fail(node, f"input rank {rank} is not in 1..4")
    if len(node.outputs) not in (1, 2):
        raise fail(node, f"expected 1 or 2 outputs, got {len(node.outputs)}")
    axis = normalize_axis(node, a.axis, rank)
    if a.topK <= 0:
        raise fail(node, f"topK must be > 0, got {a.topK}")
    k = min(a.topK, x.shape[axis])
    if k == 0:
        raise fail(node, "cannot take the arg of an empty axis")
    if k == 1 and not a.keepDims:
        out_shape = x.shape[:axis] + x.shape[axis + 1:]
    else:
        out_shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    out_values = bool(a.outMaxValue)

    def run(inputs, outputs):
        v = np.moveaxis(inputs[0], axis, -1)
        if k == 1:  # argmax/argmin return the first occurrence on ties, like r1.1's strict compare
            idx = (v.argmax(-1) if largest else v.argmin(-1))[..., None]
        else:  # r1.1 leaves the order of equal values unspecified; a stable sort is one choice
            idx = np.argsort(-v if largest else v, axis=-1, kind="stable")[..., :k]
        vals = np.take_along_axis(v, idx, -1)
        first = vals if out_values else idx.astype(np.float32)
        outputs[0][...] = np.moveaxis(first, -1, axis).reshape(out_shape)
        if len(outputs) == 2:
            outputs[1][...] = np.moveaxis(vals, -1, axis).reshape(out_shape)

    return Plan([(out_shape, x.dtype)] * len(node.outputs), run)


@op("ArgMax")
def argmax(node, ins):
    return _arg_plan(node, ins, True)


@op("ArgMin")
def argmin(node, ins):
    return _arg_plan(node, ins, False)


def _axes(node, v, rank):
    a = np.asarray(const_input(node, v, "axes")).reshape(-1)
    if a.dtype.kind not in "iu":
        raise fail(node, f"axes must be integers, got {a.dtype}")
    axes = sorted({normalize_axis(node, int(x), rank) for x in a})
    return tuple(axes)


@op("All")
def all_(node, ins):
    """No r1.1 kernel: TF All, (x, axes) -> logical AND over the constant axes (empty: none),
    bool output; `keepDims` keeps the reduced dims as 1."""
    expect_inputs(node, ins, 2)
    x = ins[0]
    axes = _axes(node, ins[1], len(x.shape))
    keep = bool(node.attrs.keepDims)
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)

    def run(inputs, outputs):
        np.copyto(outputs[0], np.all(inputs[0], axis=axes, keepdims=keep).reshape(shape))

    return Plan([(shape, np.dtype(np.bool_))], run)
