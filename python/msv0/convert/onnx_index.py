"""ONNX indexing ops with no v0 primitive of their own, or one whose semantics differ (element-wise
gather and scatter, running sums, triangle masks, one-hot, selection, NMS), written as v0 ops."""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Unsupported, Val
from msv0.convert.onnx_ctx import (Ctx, align_layouts, axis_index, broadcast, emit_binary, handles, reshaped,
                                   table_size)
from msv0.convert.scan_lowering import running_sum
from msv0.fb.ReduceMode import ReduceMode
from msv0.fb.TypeId import TypeId

_CAST_FROM_F32 = {np.dtype(np.int32): TypeId.kNumberTypeInt32, np.dtype(np.int64): TypeId.kNumberTypeInt64}


def _wrapped(c: Ctx, ind: Val, dims) -> Val:
    """ind with ONNX's negative indices wrapped by dims (broadcast over ind): v0 rejects them. An index
    still out of range stays so, and the v0 op reports it at run time."""
    dims = np.asarray(dims, ind.dtype).reshape(-1)
    if ind.const is not None:
        return Val.of(np.where(ind.const < 0, ind.const + dims, ind.const))
    ind = c.e.plain(ind, c.name)
    neg = emit_binary(c, "Less", ind, c.scalar(0, ind.dtype), ind.shape, np.bool_)
    up = emit_binary(c, "Add", ind, Val.of(dims), ind.shape, ind.dtype)
    return c.op("Where", [neg, up, ind], ind.shape, ind.dtype)


def _coords(c: Ctx, ind: Val, axis: int, size: int) -> Val:
    """GatherNd/ScatterND coordinates [*ind.shape, rank] of ind's elements: each element's own
    position, with its (wrapped) value in place of the position on axis."""
    ind = _wrapped(c, ind, size)
    grid = np.moveaxis(np.indices(ind.shape, ind.dtype), 0, -1)
    if ind.const is not None:
        grid[..., axis] = ind.const
        return Val.of(grid)
    col = reshaped(c, ind, ind.shape + (1,))
    parts = [p for p in (Val.of(grid[..., :axis]), col, Val.of(grid[..., axis + 1:])) if p.shape[-1]]
    if len(parts) == 1:
        return col
    return c.op("Concat", parts, grid.shape, ind.dtype, axis=len(ind.shape))


@handles("GatherElements")
def gather_elements(c: Ctx):
    x = c.e.plain(c.inp(0), c.name)
    shape, dtype = c.out()
    axis = axis_index(c.attr("axis", 0), len(x.shape))
    c.set(0, c.op("GatherNd", [x, _coords(c, c.inp(1), axis, x.shape[axis])], shape, dtype))


def _scatter(c: Ctx, x: Val, coords: Val, upd: Val):
    """x with the elements or slices at coords replaced by upd (reduction none), or with upd added
    there (add: every update, repeated coordinates included)."""
    reduction = c.attr("reduction", "none")
    if reduction == "add":
        return _scatter_add(c, x, coords, upd)
    if reduction in REDUCED:
        return _scatter_reduce(c, x, coords, upd, reduction)
    if reduction != "none":
        raise Unsupported(f"reduction '{reduction}' (v0 ScatterND copies each update; nothing accumulates)")
    _scatter_copy(c, x, coords, upd)


# reduction -> (v0 Reduce mode, the Binary that joins it to x, the value an update does not change)
REDUCED = {"max": (ReduceMode.ReduceMax, "Maximum", -np.inf), "min": (ReduceMode.ReduceMin, "Minimum", np.inf),
           "mul": (ReduceMode.ReduceProd, "Mul", 1.0)}


def _scatter_reduce(c: Ctx, x: Val, coords: Val, upd: Val, reduction: str):
    """max, min, mul (a graph network's per-graph readout) at coordinates into x's leading dims:
    _reduced_slots over every such slot, joined to x."""
    shape, dtype = c.out()
    q, n = coords.shape[-1], int(np.prod(coords.shape[:-1], dtype=np.int64))
    slots, rest = int(np.prod(shape[:q], dtype=np.int64)), tuple(shape[q:])
    table = Val.of(np.arange(slots, dtype=np.int32).reshape(shape[:q]))
    ids = c.op("GatherNd", [table, c.e.plain(coords, c.name)], tuple(coords.shape[:-1]), np.int32)
    ids = broadcast(c, reshaped(c, ids, (n, *(1,) * len(rest))), (n, *rest))
    y = _reduced_slots(c, ids, reshaped(c, c.e.plain(upd, c.name), (n, *rest)), slots, 0, reduction, dtype)
    _join(c, x, reshaped(c, y, shape), reduction)


def _reduced_slots(c: Ctx, ids: Val, upd: Val, slots: int, axis: int, reduction: str, dtype) -> Val:
    """upd (ids' shape) reduced along `axis` per slot 0 .. slots - 1 that ids names, the neutral
    value where none lands: every update against every slot, as a mask [slots, *upd.shape]."""
    if dtype != np.float32:
        raise Unsupported(f"reduction '{reduction}' on {dtype} (float32 only)")
    mode, _, neutral = REDUCED[reduction]
    u = tuple(upd.shape)
    table_size(slots * int(np.prod(u, dtype=np.int64)), f"reduction '{reduction}'")
    slot = Val.of(np.arange(slots, dtype=np.int32).reshape(slots, *(1,) * len(u)))
    full = (slots, *u)
    hit = emit_binary(c, "Equal", reshaped(c, ids, (1, *u)), slot, full, np.bool_)
    picked = c.op("Where", [broadcast(c, hit, full), broadcast(c, reshaped(c, upd, (1, *u)), full),
                            c.scalar(neutral, dtype)], full, dtype)
    return c.op("Reduce", [picked], (slots, *u[:axis], *u[axis + 1:]), dtype, axes=[1 + axis], keepDims=0, mode=mode)


def _join(c: Ctx, x: Val, y: Val, reduction: str) -> None:
    shape, dtype = c.out()
    c.set(0, emit_binary(c, REDUCED[reduction][1], c.e.plain(x, c.name), y, shape, dtype))


def _scatter_copy(c: Ctx, x: Val, coords: Val, upd: Val):
    """v0 ScatterND writes into zeros, so a second scatter, of ones, marks what comes from upd; Where
    then picks (x·(1 − mask) would turn an inf or NaN of x into NaN). Duplicate coordinates, which
    ONNX leaves undefined, keep the last."""
    shape, dtype = c.out()
    dims = Val.of(np.array(shape, np.int32))
    new = c.op("ScatterND", [dims, coords, c.e.plain(upd, c.name)], shape, dtype)
    hit = c.op("ScatterND", [dims, coords, Val.of(np.ones(upd.shape, np.float32))], shape, np.float32)
    hit = emit_binary(c, "Greater", hit, c.scalar(0, np.float32), shape, np.bool_)
    c.set(0, c.op("Where", [hit, new, c.e.plain(x, c.name)], shape, dtype))


def _scatter_add(c: Ctx, x: Val, coords: Val, upd: Val):
    """UnsortedSegmentSum of the updates at their flat positions (the sum of repeated ones), added to
    x. The positions are gathered from a table of them: GatherNd reports a coordinate out of range at
    run time, as ScatterND does, where arithmetic on it could land on another element."""
    shape, dtype = c.out()
    q = coords.shape[-1]
    slots = table_size(int(np.prod(shape[:q], dtype=np.int64)), "reduction 'add'")
    table = Val.of(np.arange(slots, dtype=np.int32).reshape(shape[:q]))
    ids = c.op("GatherNd", [table, c.e.plain(coords, c.name)], tuple(coords.shape[:-1]), np.int32)
    sums = c.op("UnsortedSegmentSum", [c.e.plain(upd, c.name), ids], (slots, *shape[q:]), dtype, numSegments=slots)
    c.set(0, emit_binary(c, "Add", c.e.plain(x, c.name), reshaped(c, sums, shape), shape, dtype))


@handles("ScatterElements", "Scatter")
def scatter_elements(c: Ctx):
    x, ind, upd = c.inp(0), c.inp(1), c.inp(2)
    axis = axis_index(c.attr("axis", 0), len(x.shape))
    if c.attr("reduction", "none") in REDUCED and all(
            u == n for k, (u, n) in enumerate(zip(upd.shape, x.shape)) if k != axis):
        return _scatter_reduce_axis(c, x, ind, upd, axis)
    _scatter(c, x, _coords(c, ind, axis, x.shape[axis]), upd)


def _scatter_reduce_axis(c: Ctx, x: Val, ind: Val, upd: Val, axis: int):
    """_scatter_reduce along the one axis the indices choose on (the updates span x's other dims):
    a mask [x.shape[axis], *updates] instead of one over every element of x."""
    shape, dtype = c.out()
    n, u = shape[axis], tuple(upd.shape)
    table = Val.of(np.arange(n, dtype=np.int32))  # GatherNd reports an index out of range at run time
    ids = c.op("GatherNd", [table, reshaped(c, _wrapped(c, ind, n), u + (1,))], u, np.int32)
    y = _reduced_slots(c, ids, c.e.plain(upd, c.name), n, axis, c.attr("reduction"), dtype)
    if axis:
        y = c.op("Transpose", [y], shape, dtype, perm=[*range(1, axis + 1), 0, *range(axis + 1, len(shape))])
    _join(c, x, y, c.attr("reduction"))


@handles("ScatterND")
def scatter_nd(c: Ctx):
    x, ind, upd = c.inp(0), c.inp(1), c.inp(2)
    q = ind.shape[-1]
    coords = _wrapped(c, ind, x.shape[:q])
    if len(ind.shape) == 1:  # v0 takes a list of coordinates
        coords, upd = reshaped(c, coords, (1, q)), reshaped(c, upd, (1,) + upd.shape)
    _scatter(c, x, coords, upd)


@handles("CumSum")
def cumsum(c: Ctx):
    x = c.inp(0)
    shape, dtype = c.out()
    if dtype not in (np.float32, np.int32, np.int64):
        raise Unsupported(f"CumSum on {dtype} (v0 Add takes float32, int32 and int64)")
    axis = axis_index(int(c.const(1, "axis").reshape(-1)[0]), len(shape))
    stored = Val(x.stored_shape, dtype, index=c.e.index(x))  # summed along the axis as stored
    y = running_sum(c, stored, x.axis(axis), bool(c.attr("reverse", 0)), bool(c.attr("exclusive", 0)))
    c.set(0, Val.of(np.zeros(shape, dtype)) if y.const is not None else Val(shape, dtype, index=y.index, nhwc=x.nhwc))


@handles("Trilu")
def trilu(c: Ctx):
    shape, dtype = c.out()
    k, upper = c.inp(1), c.attr("upper", 1)
    table_size(int(np.prod(shape, dtype=np.int64)), "Trilu's mask")
    rows, cols = np.indices(shape[-2:])
    if k is None or k.const is not None:
        k = 0 if k is None else int(k.const.reshape(-1)[0])
        keep = Val.of(np.broadcast_to(cols - rows >= k if upper else cols - rows <= k, shape))
    else:  # the diagonal offset a run-time value: the mask from comparing it with cols − rows
        diag = Val.of((cols - rows).astype(k.dtype))
        k = reshaped(c, k, (1,))
        keep = broadcast(c, c.op("GreaterEqual" if upper else "LessEqual", [diag, k], diag.shape, np.bool_), shape)
    # r1.1 Where takes full-size or one-element operands, and a mask multiply would make inf·0 NaN
    ins, nhwc = align_layouts(c, [keep, c.inp(0), c.scalar(0, dtype)], len(shape))
    c.set(0, c.op("Where", ins, shape, dtype, nhwc))


@handles("OneHot")
def one_hot(c: Ctx):
    """v0's (indices, depth, [off, on]) form: ONNX's value order, negatives wrapped by depth and
    indices out of range all off, as ONNX has them. Its output is float32."""
    ind, values = c.e.plain(c.inp(0), c.name), c.inp(2)
    shape, dtype = c.out()
    if ind.dtype == np.float32:  # ONNX casts non-integer indices to int64, truncating
        ind = c.op("Cast", [ind], ind.shape, np.int32, srcT=TypeId.kNumberTypeFloat32, dstT=TypeId.kNumberTypeInt32)
    elif ind.dtype not in (np.int32, np.int64):
        raise Unsupported(f"OneHot indices of {ind.dtype}")
    depth = Val.of(np.array([int(c.const(1, "depth").reshape(-1)[0])], np.int32))
    if dtype != np.float32:  # v0 OneHot writes float32: other values go through it and a Cast
        v = values.const
        if dtype not in _CAST_FROM_F32 or v is None or not np.array_equal(v.astype(np.float32).astype(dtype), v):
            raise Unsupported(f"{dtype} values that are not constants float32 holds exactly (v0 OneHot writes float32)")
        values = Val.of(v.astype(np.float32))
    axis = axis_index(c.attr("axis", -1), len(shape))
    y = c.op("OneHot", [ind, depth, values], shape, np.float32, axis=axis)
    if dtype != np.float32:
        y = c.op("Cast", [y], shape, dtype, srcT=TypeId.kNumberTypeFloat32, dstT=_CAST_FROM_F32[dtype])
    c.set(0, y)


@handles("Compress")
def compress(c: Ctx):
    v, cond = c.inp(0), c.inp(1)
    if cond.const is None:
        raise Unsupported("a runtime condition (the output size would depend on its values)")
    keep = np.flatnonzero(cond.const).astype(np.int32)
    axis = c.attr("axis")
    if axis is None:
        v, axis = reshaped(c, v, (int(np.prod(v.shape)),)), 0
    axis = axis_index(axis, len(v.shape))
    if keep.size == 0 or keep[-1] >= v.shape[axis]:
        raise Unsupported("a condition that selects nothing or reaches past the end of the axis")
    # onnx infers no size for the selected axis: it is counted here
    shape = v.shape[:axis] + (keep.size,) + v.shape[axis + 1:]
    c.set(0, c.op("Gather", [v, Val.of(keep)], shape, v.dtype, v.nhwc, axis=v.axis(axis)))


@handles("EyeLike")
def eye_like(c: Ctx):
    shape, dtype = c.out()  # the input's shape decides everything: the result is a constant
    c.set(0, Val.of(np.eye(*shape, k=int(c.attr("k", 0)), dtype=dtype)))


@handles("ReverseSequence")
def reverse_sequence(c: Ctx):
    v = c.inp(0)
    shape, dtype = c.out()
    seq, batch = (axis_index(c.attr(a, d), len(shape)) for a, d in (("time_axis", 0), ("batch_axis", 1)))
    c.set(0, c.op("ReverseSequence", [v, c.e.plain(c.inp(1), c.name)], shape, dtype, v.nhwc,
                  seqAxis=v.axis(seq), batchAxis=v.axis(batch)))


@handles("NonMaxSuppression")
def non_max_suppression(c: Ctx):
    """v0 NonMaxSuppression is ONNX's, but r1.1 stops once the boxes kept over all batches and
    classes reach max_output_boxes_per_class, where ONNX counts per class. One v0 node serves where
    that cannot differ (one batch and class, or a limit of at least the box count, raised so that
    r1.1's total never binds); otherwise one node runs per batch and class, on its slice, and
    its (0, 0, box) rows are offset to (batch, class, box). The row count depends on the data:
    the runtime sizes it as it runs."""
    boxes, scores = c.inp(0), c.inp(1)
    if boxes.dtype != np.float32 or scores.dtype != np.float32:
        raise Unsupported("boxes and scores must be float32")
    batch, classes, n = scores.shape
    limit = c.inp(2)
    if limit is None:
        limit = c.scalar(0, np.int32)
    elif limit.const is not None:
        k = max(int(limit.const.reshape(-1)[0]), 0)
        limit = c.scalar(batch * classes * n if k >= n else k, np.int32)
    free = limit.const is not None and limit.const[0] == batch * classes * n
    # ONNX without a score threshold keeps every score; r1.1's default is 0 (only -inf and NaN
    # scores are still dropped: no float is below -inf)
    thresholds = [c.inp(3) or c.scalar(0, np.float32), c.inp(4) or c.scalar(-np.inf, np.float32)]
    attrs = {"centerPointBox": int(c.attr("center_point_box", 0))}
    name = c.node.outputs[0]
    shape = c.graph.shapes.get(name, ((batch * classes * n, 3),))[0]  # a bound: the rows are counted at run time
    if free or batch * classes == 1:
        y = c.op("NonMaxSuppression", [boxes, scores, limit, *thresholds], shape, np.int32, **attrs)
    else:
        parts = []
        for b in range(batch):
            bx = boxes if batch == 1 else c.op("Slice", [boxes], (1, n, 4), np.float32, axes=[0, 1, 2],
                                                 begin=[b, 0, 0], size=[1, n, 4])
            for k in range(classes):
                sc = c.op("Slice", [scores], (1, 1, n), np.float32, axes=[0, 1, 2], begin=[b, k, 0], size=[1, 1, n])
                rows = c.op("NonMaxSuppression", [bx, sc, limit, *thresholds], (n, 3), np.int32, **attrs)
                if b or k:
                    rows = emit_binary(c, "Add", rows, Val.of(np.array([[b, k, 0]], np.int32)), (n, 3), np.int32)
                parts.append(rows)
        y = c.op("Concat", parts, shape, np.int32, axis=0)
    c.set(0, c.op("Cast", [y], shape, np.int64, srcT=TypeId.kNumberTypeInt32, dstT=TypeId.kNumberTypeInt64))
