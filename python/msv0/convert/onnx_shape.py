"""ONNX data-movement, reduction and selection ops -> v0, remapping axes of NHWC-stored tensors."""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import NHWC_AXIS, TO_NHWC, Unsupported, Val, dense_order_matches
from msv0.convert.onnx_ctx import Ctx, align_layouts, axis_index, broadcast, emit_binary, handles, table_size
from msv0.fb.PaddingMode import PaddingMode
from msv0.fb.ReduceMode import ReduceMode
from msv0.fb.TypeId import TypeId

# The v0 Reduce mode of each ONNX reduction (L2, LogSum and LogSumExp add element-wise steps).
REDUCE = {"ReduceMean": ReduceMode.ReduceMean, "ReduceMax": ReduceMode.ReduceMax, "ReduceMin": ReduceMode.ReduceMin,
          "ReduceProd": ReduceMode.ReduceProd, "ReduceSum": ReduceMode.ReduceSum,
          "ReduceSumSquare": ReduceMode.ReduceSumSquare, "ReduceL1": ReduceMode.ReduceASum,
          "ReduceL2": ReduceMode.ReduceSumSquare, "ReduceLogSum": ReduceMode.ReduceSum,
          "ReduceLogSumExp": ReduceMode.ReduceSum}


@handles("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def reshape(c: Ctx):
    v = c.inp(0)
    shape, dtype = c.out()
    if not (v.nhwc and dense_order_matches(v.shape, TO_NHWC)):
        v = c.e.plain(v, c.name)  # Reshape reads the data in ONNX order
    c.set(0, c.op("Reshape", [v], shape, dtype, shape=list(shape)))


@handles("Transpose")
def transpose(c: Ctx):
    v = c.inp(0)
    shape, dtype = c.out()
    perm = list(c.attr("perm", list(range(len(v.shape)))[::-1]))
    stored = [v.axis(p) for p in perm]  # the permutation of the stored tensor giving ONNX's result
    # The result stored NHWC, when that moves no data: a Conv after a transpose into NCHW (a 1-D
    # conv over a sequence, magika) then reads v as it is, where storing the result plain would
    # cost a Transpose here and another one back to NHWC for the Conv.
    nhwc = [stored[p] for p in TO_NHWC] if len(shape) == 4 else None
    if stored == sorted(stored):
        c.set(0, Val(shape, dtype, index=c.e.index(v)))
    elif dense_order_matches(v.stored_shape, stored):
        c.set(0, c.op("Reshape", [v], shape, dtype, shape=list(shape)))
    elif nhwc and nhwc == sorted(nhwc):
        c.set(0, Val(shape, dtype, index=c.e.index(v), nhwc=True))
    elif nhwc and dense_order_matches(v.stored_shape, nhwc):
        out = Val(shape, dtype, nhwc=True)
        c.set(0, c.op("Reshape", [v], shape, dtype, True, shape=list(out.stored_shape)))
    else:
        c.set(0, c.op("Transpose", [v], shape, dtype, perm=stored))


@handles("Concat")
def concat(c: Ctx):
    shape, dtype = c.out()
    ins = [c.inp(k) for k in range(len(c.node.inputs)) if c.inp(k) is not None and 0 not in c.inp(k).shape]
    ins, nhwc = align_layouts(c, ins, len(shape))
    axis = axis_index(c.attr("axis"), len(shape))
    if len(ins) == 1:
        c.set(0, ins[0])
        return
    c.set(0, c.op("Concat", ins, shape, dtype, nhwc, axis=NHWC_AXIS[axis] if nhwc else axis))


@handles("Split")
def split(c: Ctx):
    v = c.inp(0)
    axis = axis_index(c.attr("axis", 0), len(v.shape))
    outs = [c.out(k) for k in range(len(c.node.outputs))]
    sizes = [s[0][axis] for s in outs]
    stored = [Val(s, d, nhwc=v.nhwc).stored_shape for s, d in outs]
    idx = c.e.node("Split", [c.e.index(v)], [(s, d) for s, (_, d) in zip(stored, outs)], c.sub("Split_"),
                   numberSplit=len(sizes), sizeSplits=sizes, splitDim=v.axis(axis))
    for k, ((s, d), i) in enumerate(zip(outs, idx)):
        c.set(k, Val(s, d, index=i, nhwc=v.nhwc))


@handles("Slice")
def slice_(c: Ctx):
    v = c.inp(0)
    shape, dtype = c.out()
    rank = len(v.shape)
    if c.graph.opset < 10:
        starts, ends = c.attr("starts"), c.attr("ends")
        axes, steps = c.attr("axes", list(range(len(starts)))), [1] * len(starts)
    else:
        starts, ends = c.const(1, "starts"), c.const(2, "ends")
        axes = c.const(3, "axes")
        axes = list(range(len(starts))) if axes is None else axes
        steps = c.const(4, "steps")
        steps = [1] * len(starts) if steps is None else steps
    begin, end, stride = [0] * rank, list(v.shape), [1] * rank
    flipped = []
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = axis_index(a, rank)
        n = v.shape[a]
        b_, e_, st_ = slice(int(s), int(e), int(st)).indices(n)
        if st_ < 0 and e_ < 0:
            # Down through index 0 (x[::-1], torch.flip): r1.1's StridedSlice reads a negative end
            # as counted from the back, so the axis is reversed and sliced upwards instead.
            flipped.append(a)
            b_, e_, st_ = n - 1 - b_, n, -st_
        begin[a], end[a], stride[a] = b_, e_, st_
    if flipped:
        v = c.op("Reverse", [v], v.shape, v.dtype, v.nhwc, axis=[v.axis(a) for a in flipped])
    order = [p for p in (TO_NHWC if v.nhwc else range(rank))]
    if all(s == 1 for s in stride):
        c.set(0, c.op("Slice", [v], shape, dtype, v.nhwc, axes=list(range(rank)), begin=[begin[p] for p in order],
                      size=[shape[p] for p in order]))
    else:
        c.set(0, c.op("StridedSlice", [v], shape, dtype, v.nhwc, begin=[begin[p] for p in order],
                      end=[end[p] for p in order], stride=[stride[p] for p in order]))


@handles("Pad")
def pad(c: Ctx):
    v = c.inp(0)
    shape, dtype = c.out()
    rank = len(v.shape)
    mode = c.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise Unsupported(f"Pad mode '{mode}'")
    if c.graph.opset < 11:
        pads, value = list(c.attr("pads", c.attr("paddings"))), float(c.attr("value", 0.0))
    else:
        pads = [int(p) for p in c.const(1, "pads")]
        cv = c.const(2, "constant_value")
        value = 0.0 if cv is None or cv.size == 0 else float(cv.reshape(-1)[0])
        axes = c.const(3, "axes")
        if axes is not None:
            full = [0] * (2 * rank)
            for k, a in enumerate(axes):
                a = axis_index(a, rank)
                full[a], full[a + rank] = pads[k], pads[k + len(axes)]
            pads = full
    if any(p < 0 for p in pads):  # a crop there, first (as ONNX Runtime does): a Slice
        begin = [max(0, -pads[a]) for a in range(rank)]
        size = [v.shape[a] - begin[a] - max(0, -pads[a + rank]) for a in range(rank)]
        if min(size) < 1:
            raise Unsupported(f"negative pads {pads} crop all of an axis of {list(v.shape)}")
        order = TO_NHWC if v.nhwc else range(rank)
        v = c.op("Slice", [v], tuple(size), dtype, v.nhwc, axes=list(range(rank)), begin=[begin[p] for p in order],
                 size=[size[p] for p in order])
        pads = [max(0, p) for p in pads]
    if mode in ("edge", "wrap"):
        # r1.1's Pad has no such mode (its SYMMETRIC repeats the edge too): one Gather per padded
        # axis, of the positions each output index copies (clamped, or modulo the axis).
        for a in range(rank):
            before, after, n = pads[a], pads[a + rank], v.shape[a]
            if before == after == 0:
                continue
            if n == 0:
                raise Unsupported(f"Pad mode '{mode}' of an empty axis")
            at = np.arange(-before, table_size(n + before + after, f"Pad mode '{mode}'") - before)
            at = np.clip(at, 0, n - 1) if mode == "edge" else at % n
            grown = tuple(len(at) if k == a else d for k, d in enumerate(v.shape))
            v = c.op("Gather", [v, Val.of(at.astype(np.int32))], grown, dtype, v.nhwc, axis=v.axis(a))
        c.set(0, v)
        return
    order = TO_NHWC if v.nhwc else range(rank)
    paddings = [x for p in order for x in (pads[p], pads[p + rank])]
    c.set(0, c.op("Pad", [v], shape, dtype, v.nhwc, paddings=paddings,
                  paddingMode=PaddingMode.CONSTANT if mode == "constant" else PaddingMode.REFLECT, constantValue=value))


@handles("Gather")
def gather(c: Ctx):
    v, ind = c.inp(0), c.inp(1)
    shape, dtype = c.out()
    axis = axis_index(c.attr("axis", 0), len(v.shape))
    if ind.const is not None:
        k = ind.const.astype(np.int64)
        k = np.where(k < 0, k + v.shape[axis], k).astype(np.int32)
        ind = Val.of(k)
    else:
        ind = c.e.plain(ind, c.name)
        if ind.dtype.kind == "i":  # ONNX wraps negative indices, r1.1 rejects them: wrap first
            neg = emit_binary(c, "Less", ind, c.scalar(0, ind.dtype), ind.shape, np.bool_)
            up = emit_binary(c, "Add", ind, c.scalar(v.shape[axis], ind.dtype), ind.shape, ind.dtype)
            ind = c.op("Where", [neg, up, ind], ind.shape, ind.dtype)
    if not (v.nhwc and len(ind.shape) == 1):
        v = c.e.plain(v, c.name)
    c.set(0, c.op("Gather", [v, ind], shape, dtype, v.nhwc, axis=v.axis(axis)))


def _reduce_input(c: Ctx, v: Val, axes, keep) -> Val:
    """v itself when its storage order already gives ONNX's reduced result, else v in ONNX order."""
    if not v.nhwc or keep:
        return v
    rest = [a for a in range(4) if a not in axes]
    return v if sorted(rest, key=lambda a: NHWC_AXIS[a]) == rest else c.e.plain(v, c.name)


@handles(*REDUCE)
def reduce(c: Ctx):
    v = c.inp(0)
    shape, dtype = c.out()
    rank = len(v.shape)
    axes = c.attr("axes")
    if axes is None and len(c.node.inputs) > 1:
        axes = c.const(1, "axes")
    if axes is None or len(axes) == 0:
        if c.attr("noop_with_empty_axes", 0):
            c.set(0, v)
            return
        axes = range(rank)
    axes = sorted(axis_index(a, rank) for a in axes)
    keep = int(c.attr("keepdims", 1))
    v = _reduce_input(c, v, axes, keep)
    op = c.node.op
    if op == "ReduceLogSumExp":
        v = c.op("Exp", [v], v.shape, dtype, v.nhwc)
    y = c.op("Reduce", [v], shape, dtype, v.nhwc and keep, axes=[v.axis(a) for a in axes], keepDims=keep,
             mode=REDUCE[op])
    if op == "ReduceL2":
        y = c.op("Sqrt", [y], shape, dtype, y.nhwc)
    elif op in ("ReduceLogSum", "ReduceLogSumExp"):
        y = c.op("Log", [y], shape, dtype, y.nhwc)
    c.set(0, y)


@handles("ArgMax", "ArgMin")
def argmax(c: Ctx):
    v = c.inp(0)
    shape, dtype = c.out()
    if v.dtype != np.float32:
        raise Unsupported("ArgMax/ArgMin on non-float input")
    axis = axis_index(c.attr("axis", 0), len(v.shape))
    keep = int(c.attr("keepdims", 1))
    v = _reduce_input(c, v, [axis], keep)
    nhwc = v.nhwc and bool(keep)
    last, n = c.attr("select_last_index", 0), v.shape[axis]
    if last:  # r1.1 returns the first extreme: reversed along the axis, the last one is n − 1 − its index
        back = np.arange(table_size(n, "select_last_index") - 1, -1, -1, dtype=np.int32)
        v = c.op("Gather", [v, Val.of(back)], v.shape, v.dtype, v.nhwc, axis=v.axis(axis))
    # r1.1 writes the indices as float values of the input's dtype; cast them to ONNX's int64
    y = c.op(c.node.op, [v], shape, np.float32, nhwc, axis=v.axis(axis), topK=1, keepDims=bool(keep))
    if last:
        y = emit_binary(c, "Sub", c.scalar(n - 1, np.float32), y, shape, np.float32)
    c.set(0, c.op("Cast", [y], shape, dtype, y.nhwc, srcT=TypeId.kNumberTypeFloat32, dstT=TypeId.kNumberTypeInt64))


@handles("TopK")
def topk(c: Ctx):
    v = c.e.plain(c.inp(0), c.name)
    rank = len(v.shape)
    if axis_index(c.attr("axis", -1), rank) != rank - 1:
        raise Unsupported("TopK along an axis other than the last")
    if not c.attr("sorted", 1):
        raise Unsupported("TopK sorted=0")
    k = int(c.const(1, "K").reshape(-1)[0]) if c.graph.opset >= 10 else int(c.attr("k"))
    (vs, vd), (ishape, idt) = c.out(0), c.out(1)
    # r1.1 sorted=false returns the k smallest ascending: exactly ONNX's largest=0
    vi, ii = c.e.node("TopK", [c.e.index(v)], [(vs, vd), (ishape, np.dtype(np.int32))], c.sub("TopK_"), k=k,
                      sorted=bool(c.attr("largest", 1)))
    c.set(0, Val(vs, vd, index=vi))
    c.set(1, c.op("Cast", [Val(ishape, np.dtype(np.int32), index=ii)], ishape, idt, srcT=TypeId.kNumberTypeInt32, dstT=TypeId.kNumberTypeInt64))


def _full(c: Ctx, v: Val, shape) -> Val:
    """v with exactly `shape` (or one element), as r1.1 Where requires (no general broadcasting)."""
    return v if int(np.prod(v.shape)) == 1 else broadcast(c, v, shape)


@handles("Where")
def where(c: Ctx):
    shape, dtype = c.out()
    ins = [_full(c, c.inp(k), shape) for k in range(3)]
    ins, nhwc = align_layouts(c, ins, len(shape))
    c.set(0, c.op("Where", ins, shape, dtype, nhwc))


@handles("Expand")
def expand(c: Ctx):
    v = c.inp(0)
    shape, dtype = c.out()
    if tuple(v.shape) == tuple(shape):
        c.set(0, v)
        return
    nhwc = v.nhwc and len(shape) == 4
    if not nhwc:
        v = c.e.plain(v, c.name)
    out = Val(shape, dtype, nhwc=nhwc)
    c.set(0, c.op("BroadcastTo", [v], shape, dtype, nhwc, dstShape=list(out.stored_shape)))


@handles("Tile")
def tile(c: Ctx):
    v = c.inp(0)
    shape, dtype = c.out()
    reps = [int(r) for r in c.const(1, "repeats")]
    order = TO_NHWC if v.nhwc else range(len(reps))
    c.set(0, c.op("Tile", [v], shape, dtype, v.nhwc, multiples=[reps[p] for p in order], dims=list(range(len(reps)))))



@handles("CenterCropPad")
def center_crop_pad(c: Ctx):
    """Each named axis cropped or zero-padded to its size about the centre (an odd difference puts
    the extra cell at the end): one Slice, then one Pad, on the stored layout."""
    v = c.inp(0)
    sizes = c.const(1, "shape")
    rank = len(v.shape)
    axes = [axis_index(a, rank) for a in c.attr("axes", range(rank))]
    if sizes is None or sizes.size != len(axes) or any(s < 0 for s in sizes.reshape(-1)):
        raise Unsupported(f"CenterCropPad to {None if sizes is None else sizes.tolist()} on axes {axes}")
    begin, cut = [0] * rank, list(v.shape)
    pads = [0] * (2 * rank)
    for a, size in zip(axes, (int(s) for s in sizes.reshape(-1))):
        d = abs(v.shape[a] - size)
        if size < v.shape[a]:
            begin[a], cut[a] = d // 2, size
        else:
            pads[2 * a], pads[2 * a + 1] = d // 2, d - d // 2
    order = TO_NHWC if v.nhwc else range(rank)
    if cut != list(v.shape):
        v = c.op("Slice", [v], tuple(cut), v.dtype, v.nhwc, axes=list(range(rank)), begin=[begin[p] for p in order],
                 size=[cut[p] for p in order])
    if any(pads):
        grown = tuple(n + pads[2 * a] + pads[2 * a + 1] for a, n in enumerate(v.shape))
        v = c.op("Pad", [v], grown, v.dtype, v.nhwc, paddings=[x for p in order for x in pads[2 * p:2 * p + 2]],
                 paddingMode=PaddingMode.CONSTANT, constantValue=0.0)
    c.set(0, v)
