"""ONNX normalisations that v0 has no primitive for, written as v0 ops
(format-v0.md §5).

GroupNormalization and MeanVarianceNormalization are Reduce(Mean) and element-wise ops, not
LayerNorm, whose r1.1 kernel takes the variance as E[x²] − mean², which cancels when the mean is
large against the spread: here it is the mean of the squared deviations. RMSNormalization is
x / sqrt(mean(x²) + epsilon) · scale in the same ops. LpNormalization is v0's LpNormalization
(no r1.1 kernel; the runtime's has ONNX's meaning).
"""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Unsupported, Val
from msv0.convert.onnx_ctx import Ctx, axis_index, emit_binary, handles, reshaped
from msv0.fb.ReduceMode import ReduceMode

F32 = np.dtype(np.float32)
MVN_EPSILON = 1e-9  # ONNX's MeanVarianceNormalization adds it to the standard deviation


def _input(c: Ctx) -> Val:
    x = c.inp(0)
    if x.dtype != F32:
        raise Unsupported(f"{c.node.op} on {x.dtype} (v0 runs it in float32 only)")
    if int(c.attr("stash_type", 1)) != 1:
        raise Unsupported(f"stash_type={c.attr('stash_type')} (v0 computes in float32 only)")
    return x


def _reduce(c: Ctx, v: Val, axes, mode=ReduceMode.ReduceMean) -> Val:
    """v reduced over the logical axes, kept as 1s, in v's layout."""
    shape = tuple(1 if a in axes else d for a, d in enumerate(v.shape))
    return c.op("Reduce", [v], shape, F32, v.nhwc, axes=[v.axis(a) for a in axes], keepDims=1, mode=mode)


def _unary(c: Ctx, op: str, v: Val, **attrs) -> Val:
    return c.op(op, [v], v.shape, F32, v.nhwc, **attrs)


def _deviation(c: Ctx, x: Val, axes) -> tuple[Val, Val]:
    """x − mean and the variance over axes, taken as the mean of the squared deviations. The
    deviations are centred once more on their own mean: a float32 sum of values with a large mean
    is off by a few of their ulps, which the first subtraction would carry into every output."""
    d = emit_binary(c, "Sub", x, _reduce(c, x, axes), x.shape, F32)
    d = emit_binary(c, "Sub", d, _reduce(c, d, axes), x.shape, F32)
    return d, _reduce(c, _unary(c, "Square", d), axes)


def _plus(c: Ctx, v: Val, eps: float) -> Val:
    return emit_binary(c, "Add", v, c.scalar(eps, F32), v.shape, F32)


@handles("GroupNormalization")
def group_norm(c: Ctx):
    x = _input(c)
    shape = x.shape  # onnx infers no shape for this function op: the input's
    groups = int(c.attr("num_groups"))
    n, ch = shape[:2]
    if ch % groups:
        raise Unsupported(f"{ch} channels do not split into {groups} groups")
    size = ch // groups
    # opset 18 scales and shifts each group, opset 21 each channel
    per = 1 if c.graph.opset < 21 else size
    if x.nhwc:  # stored [N, H, W, C]: a group is a run of the last axis, no transpose needed
        view, axes, affine = (n, shape[2] * shape[3], groups, size), (1, 3), (groups, per)
    else:
        view, axes, affine = (n, groups, size, int(np.prod(shape[2:]))), (2, 3), (groups, per, 1)
    d, var = _deviation(c, c.op("Reshape", [x], view, F32, shape=list(view)), axes)
    std = _unary(c, "Sqrt", _plus(c, var, float(c.attr("epsilon", 1e-5))))
    y = emit_binary(c, "Div", d, std, view, F32)
    for k, op in ((1, "Mul"), (2, "Add")):
        v = c.inp(k)
        if int(np.prod(v.shape)) != groups * per:
            raise Unsupported(f"{'scale' if k == 1 else 'bias'} of shape {list(v.shape)}: opset {c.graph.opset} "
                              f"takes {groups * per} values (one per {'group' if per == 1 else 'channel'})")
        y = emit_binary(c, op, y, reshaped(c, v, affine), view, F32)
    out = Val(shape, F32, nhwc=x.nhwc)
    c.set(0, c.op("Reshape", [y], shape, F32, x.nhwc, shape=list(out.stored_shape)))


@handles("MeanVarianceNormalization")
def mean_variance_norm(c: Ctx):
    x = _input(c)
    axes = sorted({axis_index(a, len(x.shape)) for a in c.attr("axes", [0, 2, 3])})
    d, var = _deviation(c, x, axes)
    std = _plus(c, _unary(c, "Sqrt", var), MVN_EPSILON)
    c.set(0, emit_binary(c, "Div", d, std, x.shape, F32))


@handles("RMSNormalization")
def rms_norm(c: Ctx):
    x = _input(c)
    axes = range(axis_index(c.attr("axis", -1), len(x.shape)), len(x.shape))
    rms = _unary(c, "Sqrt", _plus(c, _reduce(c, _unary(c, "Square", x), axes), float(c.attr("epsilon", 1e-5))))
    y = emit_binary(c, "Div", x, rms, x.shape, F32)
    s = c.inp(1)  # at x's rank, so that a runtime scale can follow x's layout
    c.set(0, emit_binary(c, "Mul", y, reshaped(c, s, (1,) * (len(x.shape) - len(s.shape)) + tuple(s.shape)), x.shape,
                         F32))


@handles("LpNormalization")
def lp_norm(c: Ctx):
    x = _input(c)
    p = int(c.attr("p", 2))
    if p not in (1, 2):
        raise Unsupported(f"p={p} (v0 LpNormalization takes 1 or 2)")
    axis = axis_index(c.attr("axis", -1), len(x.shape))
    c.set(0, c.op("LpNormalization", [x], x.shape, F32, x.nhwc, axis=x.axis(axis), p=p))
