"""TFLite indexing, scatter, segment and rearranging builtins, written as v0 ops.

Where r1.1's op means what TFLite means it is used as it is; where not (ScatterND keeps the last
of repeated updates where TFLite adds them, OneHot writes only float32, ReverseSequence rejects
the negative lengths TFLite ignores), the TFLite result is built from other v0 ops. An index
TFLite rejects at run time fails the v0 run too (GatherNd, EmbeddingLookup, SparseToDense and
ReverseSequence check every one) or is dropped (scatter and segment ids): nothing reads or
writes outside a tensor. Ops whose output size depends on data (WHERE, UNIQUE, SEGMENT_SUM)
convert only when that data is a constant.
"""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Unsupported, Val, handler_table
from msv0.convert.scan_lowering import running_sum
from msv0.convert.tflite_array import axis_of, const_ints
from msv0.fb.PaddingMode import PaddingMode
from msv0.fb.ReduceMode import ReduceMode

INDEX_HANDLERS, handles = handler_table()
TFL_REFLECT = 0  # tflite MirrorPadMode; SYMMETRIC is 1
# UNSORTED_SEGMENT_* without a v0 op of their own
SEGMENT_REDUCE = {"UNSORTED_SEGMENT_MAX": ReduceMode.ReduceMax, "UNSORTED_SEGMENT_MIN": ReduceMode.ReduceMin,
                  "UNSORTED_SEGMENT_PROD": ReduceMode.ReduceProd}


def _reshaped(o, v: Val, shape) -> Val:
    shape = tuple(int(d) for d in shape)
    if tuple(v.shape) == shape:
        return v
    if v.const is not None:
        return Val.of(v.const.reshape(shape))
    return o.op("Reshape", [v], shape, v.dtype, shape=list(shape))


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


@handles("GATHER_ND")
def gather_nd(o):
    """v0 GatherNd is TF's gather_nd; an index outside its dim fails the run, as in TFLite."""
    shape, dtype = o.out()
    o.set(o.op("GatherNd", [o.inp(0), o.inp(1)], shape, dtype))


def _flat_ids(o, ind: Val, dims) -> Val:
    """The flat position in dims of each index row of ind [..., len(dims)], or -1 for a row with
    a coordinate outside its dim (TFLite rejects those; a flat sum alone could land in range)."""
    n, q = _size(ind.shape[:-1]), len(dims)
    strides = np.array([_size(dims[k + 1:]) for k in range(q)], ind.dtype)
    limits = np.array(dims, ind.dtype)
    if ind.const is not None:
        rows = ind.const.reshape(n, q)
        inside = ((rows >= 0) & (rows < limits)).all(axis=1)
        return Val.of(np.where(inside, rows @ strides, -1).astype(ind.dtype))
    rows = _reshaped(o, ind, (n, q))
    low = o.op("GreaterEqual", [rows, o.scalar(0, ind.dtype)], (n, q), np.bool_)
    high = o.op("Less", [rows, Val.of(limits)], (n, q), np.bool_)
    inside = o.op("LogicalAnd", [low, high], (n, q), np.bool_)
    inside = o.op("Reduce", [inside], (n,), np.bool_, axes=[1], keepDims=0, mode=ReduceMode.ReduceAll)
    flat = o.op("Mul", [rows, Val.of(strides)], (n, q), ind.dtype)
    flat = o.op("Reduce", [flat], (n,), ind.dtype, axes=[1], keepDims=0, mode=ReduceMode.ReduceSum)
    return o.op("Where", [inside, flat, o.scalar(-1, ind.dtype)], (n,), ind.dtype)


@handles("SCATTER_ND")
def scatter_nd(o):
    """TFLite adds the updates of repeated indices where v0 ScatterND keeps the last one: each
    index row becomes the flat position of its slice, and UnsortedSegmentSum adds the slices
    there in TFLite's order (dropping the -1 of a row outside the shape)."""
    ind, upd = o.inp(0), o.inp(1)
    shape = tuple(const_ints(o, 2, "shape"))
    if ind.dtype != np.int32:  # as TFLite; v0 Reduce sums int32, not int64
        raise Unsupported(f"{ind.dtype} indices")
    q = ind.shape[-1]
    slots, tail = _size(shape[:q]), shape[q:]
    rows = _reshaped(o, upd, (_size(ind.shape[:-1]),) + tail)
    y = o.op("UnsortedSegmentSum", [rows, _flat_ids(o, ind, shape[:q])], (slots,) + tail, upd.dtype,
             numSegments=slots)
    o.set(_reshaped(o, y, shape))


@handles("ONE_HOT")
def one_hot(o):
    """Indices outside [0, depth), negative ones included, give all off values in TFLite and in
    v0's 4-input OneHot. OneHot writes float32: other dtypes compare the indices with each
    position along the new axis and pick on or off with Where."""
    ind, on, off = o.inp(0), o.inp(2), o.inp(3)
    shape, dtype = o.out()
    depth = int(o.const(1, "depth").reshape(-1)[0])
    opt = o.options("OneHotOptions")
    axis = axis_of(opt.Axis() if opt else -1, len(shape))
    if dtype == np.float32:
        o.set(o.op("OneHot", [ind, Val.of(np.array([depth], np.int32)), on, off], shape, dtype, axis=axis))
        return
    spread = shape[:axis] + (1,) + shape[axis + 1:]
    positions = np.arange(depth, dtype=ind.dtype).reshape((depth,) + (1,) * (len(shape) - axis - 1))
    hot = o.op("Equal", [_reshaped(o, ind, spread), Val.of(positions)], shape, np.bool_)
    o.set(o.op("Where", [hot, on, off], shape, dtype))


@handles("TOPK_V2")
def top_k(o):
    """v0 TopK sorted: descending, equal values by lower index first, as TFLite orders them."""
    k = int(o.const(1, "k").reshape(-1)[0])
    o.emit_all("TopK", [o.inp(0)], k=k, sorted=True)


@handles("REVERSE_V2")
def reverse(o):
    x = o.inp(0)
    o.set(o.op("Reverse", [x], x.shape, x.dtype, axis=[axis_of(a, len(x.shape)) for a in const_ints(o, 1, "axis")]))


@handles("REVERSE_SEQUENCE")
def reverse_sequence(o):
    """TFLite leaves a row with a negative length as it is, which v0 rejects: length 0 does the same."""
    x, lengths = o.inp(0), o.inp(1)
    opt = o.options("ReverseSequenceOptions")
    if lengths.const is not None:
        lengths = Val.of(np.maximum(lengths.const, 0))
    else:
        lengths = o.op("Maximum", [lengths, o.scalar(0, lengths.dtype)], lengths.shape, lengths.dtype)
    o.set(o.op("ReverseSequence", [x, lengths], x.shape, x.dtype, seqAxis=opt.SeqDim(), batchAxis=opt.BatchDim()))


@handles("MIRROR_PAD")
def mirror_pad(o):
    x = o.inp(0)
    shape, dtype = o.out()
    pads = o.const(1, "paddings").astype(np.int64).reshape(-1, 2)
    opt = o.options("MirrorPadOptions")
    reflect = opt is None or opt.Mode() == TFL_REFLECT
    if len(x.shape) > 4 or dtype not in (np.float32, np.int32):
        raise Unsupported(f"rank {len(x.shape)} {dtype} input (v0 Pad takes float32 and int32 up to rank 4)")
    # TF bounds the pads (TFLite's kernel clamps past them, v0 Pad refuses)
    if (pads < 0).any() or (pads.max(axis=1) > np.array(x.shape) - reflect).any():
        bound = "dim - 1" if reflect else "dim"
        raise Unsupported(f"paddings {pads.tolist()} outside 0..{bound} for input {list(x.shape)}")
    o.set(o.op("Pad", [x], shape, dtype, paddings=[int(p) for p in pads.reshape(-1)],
               paddingMode=PaddingMode.REFLECT if reflect else PaddingMode.SYMMETRIC))


def _space_batch(o, op: str, edges_name: str):
    """v0's block ops are 4-D NHWC; TFLite's 3-D form [N, W, C] runs as [N, W, 1, C]."""
    x = o.inp(0)
    shape, dtype = o.out()
    block = const_ints(o, 1, "block_shape")
    edges = const_ints(o, 2, edges_name)
    if len(x.shape) == 3:
        block, edges = block + [1], edges + [0, 0]
        x = _reshaped(o, x, x.shape[:2] + (1,) + x.shape[2:])
    elif len(x.shape) != 4:
        raise Unsupported(f"rank {len(x.shape)} input (TFLite takes 3-D and 4-D)")
    out4 = shape if len(shape) == 4 else shape[:2] + (1,) + shape[2:]
    o.set(_reshaped(o, o.op(op, [x], out4, dtype, blockShape=block, **{edges_name: edges}), shape))


@handles("BATCH_TO_SPACE_ND")
def batch_to_space(o):
    _space_batch(o, "BatchToSpaceND", "crops")


@handles("SPACE_TO_BATCH_ND")
def space_to_batch(o):
    _space_batch(o, "SpaceToBatchND", "paddings")


@handles("CUMSUM")
def cumsum(o):
    x = o.inp(0)
    axis = axis_of(const_ints(o, 1, "axis")[0], len(x.shape))
    opt = o.options("CumsumOptions")
    exclusive, reverse = (bool(opt.Exclusive()), bool(opt.Reverse())) if opt else (False, False)
    o.set(running_sum(o, x, axis, reverse, exclusive))


def _diagonal(o, diag: Val, rows: int, cols: int) -> Val:
    return o.op("MatrixDiag", [diag], diag.shape[:-1] + (rows, cols), diag.dtype, k=0, numRows=rows, numCols=cols,
                paddingValue=0.0)


@handles("MATRIX_DIAG")
def matrix_diag(o):
    diag = o.inp(0)
    n = diag.shape[-1]
    o.set(_diagonal(o, diag, n, n))


@handles("MATRIX_SET_DIAG")
def matrix_set_diag(o):
    """The diagonal written into a zero matrix, then picked by a constant mask (full size: r1.1's
    Where does not broadcast), so inf and NaN off the diagonal stay as they are."""
    x, diag = o.inp(0), o.inp(1)
    rows, cols = x.shape[-2:]
    on = np.ascontiguousarray(np.broadcast_to(np.eye(rows, cols, dtype=np.bool_), x.shape))
    o.set(o.op("Where", [Val.of(on), _diagonal(o, diag, rows, cols), x], x.shape, x.dtype))


@handles("EMBEDDING_LOOKUP")
def embedding_lookup(o):
    """(ids, table) in TFLite, (table, ids) in v0; both fail the run on an id outside the table."""
    ids, table = o.inp(0), o.inp(1)
    shape, dtype = o.out()
    if table.dtype != np.float32:
        raise Unsupported(f"{table.dtype} table (v0 EmbeddingLookup takes float32)")
    o.set(o.op("EmbeddingLookup", [table, ids], shape, dtype, maxNorm=0.0))


@handles("SPARSE_TO_DENSE")
def sparse_to_dense(o):
    """v0 SparseToDense is TFLite's: a repeated index keeps the last value."""
    shape, dtype = o.out()
    o.const(1, "output_shape")
    opt = o.options("SparseToDenseOptions")
    o.set(o.op("SparseToDense", [o.inp(k) for k in range(4)], shape, dtype,
               validateIndices=bool(opt and opt.ValidateIndices())))


def _segment_sum(o, num: int):
    data, ids = o.inp(0), o.inp(1)
    shape = (num,) + data.shape[len(ids.shape):]
    o.set(o.op("UnsortedSegmentSum", [data, ids], shape, data.dtype, numSegments=num))


@handles("SEGMENT_SUM")
def segment_sum(o):
    ids = o.const(1, "segment_ids (the output has max(segment_ids) + 1 rows)")
    _segment_sum(o, int(ids.max()) + 1 if ids.size else 0)


@handles("UNSORTED_SEGMENT_SUM")
def unsorted_segment_sum(o):
    """Ids outside [0, num_segments) are dropped (TFLite skips negative ones and fails the run on
    too large ones)."""
    _segment_sum(o, int(o.const(2, "num_segments").reshape(-1)[0]))


@handles(*SEGMENT_REDUCE)
def unsorted_segment_reduce(o):
    """Each value spread over [n, num_segments] where its id matches the segment, TFLite's start
    value elsewhere, then reduced over n. Ids outside [0, num_segments) match nothing."""
    data, ids = o.inp(0), o.inp(1)
    shape, dtype = o.out()
    mode = SEGMENT_REDUCE[o.code]
    if dtype not in (np.float32, np.int32):
        raise Unsupported(f"{dtype} data (v0 Reduce takes float32 and int32)")
    # TFLite starts each output at numeric_limits lowest(), max() or 1: a segment no id names keeps it
    limits = np.finfo(dtype) if dtype == np.float32 else np.iinfo(dtype)
    start = {ReduceMode.ReduceMax: limits.min, ReduceMode.ReduceMin: limits.max, ReduceMode.ReduceProd: 1}[mode]
    num = int(o.const(2, "num_segments").reshape(-1)[0])
    n, m = _size(ids.shape), _size(data.shape[len(ids.shape):])
    segments = np.arange(num, dtype=ids.dtype).reshape(1, num, 1)
    ids = _reshaped(o, ids, (n, 1, 1))
    if ids.const is not None:
        hit = Val.of(ids.const == segments)
    else:
        hit = o.op("Equal", [ids, Val.of(segments)], (n, num, 1), np.bool_)
    spread = o.op("Select", [hit, _reshaped(o, data, (n, 1, m)), o.scalar(start, dtype)], (n, num, m), dtype)
    y = o.op("Reduce", [spread], (num, m), dtype, axes=[0], keepDims=0, mode=mode)
    o.set(_reshaped(o, y, shape))


@handles("DYNAMIC_UPDATE_SLICE")
def dynamic_update_slice(o):
    """TFLite clamps the start into the operand so that the whole update fits; every update element
    then has a coordinate in range, ScatterND writes the update and a mask into zeros, and Where
    picks between the update and the operand."""
    x, upd, start = o.inp(0), o.inp(1), o.inp(2)
    room = np.array(x.shape, np.int64) - np.array(upd.shape, np.int64)
    grid = np.moveaxis(np.indices(upd.shape, start.dtype), 0, -1)
    if start.const is not None:
        coords = Val.of(grid + np.clip(start.const.reshape(-1), 0, room).astype(start.dtype))
    else:
        low = o.op("Maximum", [start, o.scalar(0, start.dtype)], start.shape, start.dtype)
        start = o.op("Minimum", [low, Val.of(room.astype(start.dtype))], start.shape, start.dtype)
        coords = o.op("Add", [Val.of(grid), start], grid.shape, start.dtype)
    dims = Val.of(np.array(x.shape, np.int32))
    new = o.op("ScatterND", [dims, coords, upd], x.shape, x.dtype)
    hit = o.op("ScatterND", [dims, coords, Val.of(np.ones(upd.shape, np.bool_))], x.shape, np.bool_)
    o.set(o.op("Where", [hit, new, x], x.shape, x.dtype))


@handles("WHERE")
def where(o):
    cond = o.const(0, "the condition (the output has a row per true element)")
    o.set(Val.of(np.argwhere(cond).astype(o.out()[1])))


@handles("UNIQUE")
def unique(o):
    """Values in the order they first appear, as TFLite lists them."""
    x = o.const(0, "the input (the output size is its number of distinct values)")
    values, first, inverse = np.unique(x, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    o.set(Val.of(values[order]), 0)
    o.set(Val.of(rank[inverse.reshape(-1)].astype(o.out(1)[1])), 1)
