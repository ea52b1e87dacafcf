"""Layout ops that move or copy elements without arithmetic (format-v0.md §5): Reshape, Concat,
Split, Slice, StridedSlice, Transpose, Nchw2Nhwc, Nhwc2Nchw, Flatten, Squeeze, Unsqueeze,
ExpandDims, Shape, and Dropout/Identity as pass-through copies."""
from __future__ import annotations

import numpy as np

from msv0 import dtypes
from msv0.fb.TypeId import TypeId
from msv0.ops import copy_moves
from msv0.registry import Plan, Value, const_input, expect_inputs, fail, normalize_axis, op, same_dtype


def int_values(node, v: Value, what: str, allowed=(np.int32, np.int64)) -> list[int]:
    """The flattened values of a constant integer input tensor."""
    data = const_input(node, v, what)
    if data.dtype not in [np.dtype(d) for d in allowed]:
        raise fail(node, f"{what} must be one of {[np.dtype(d).name for d in allowed]}, got {data.dtype}")
    return [int(x) for x in data.reshape(-1)]


def type_id_of(v: Value) -> int:
    """The TypeId r1.1 would see: the file's for file constants, the computed dtype's otherwise."""
    return v.tensor.type_id if v.tensor.is_const else dtypes.type_id(v.dtype)


def copy_run(inputs, outputs):
    outputs[0].reshape(-1)[...] = inputs[0].reshape(-1)


def _same_size(node, in_shape, out_shape):
    if int(np.prod(in_shape, dtype=np.int64)) != int(np.prod(out_shape, dtype=np.int64)):
        raise fail(node, f"cannot reshape {tuple(in_shape)} to {tuple(out_shape)}")


def _view_plan(node, x: Value, out_shape) -> Plan:
    out_shape = tuple(int(d) for d in out_shape)
    _same_size(node, x.shape, out_shape)
    return Plan([(out_shape, x.dtype)], copy_run, views={0: 0})


# Reshape shape tensors r1.1 accepts; Float (not Float32) is read as float.
_RESHAPE_SHAPE_TYPES = (TypeId.kNumberTypeInt8, TypeId.kNumberTypeInt32, TypeId.kNumberTypeInt64,
                        TypeId.kNumberTypeFloat, TypeId.kNumberTypeUInt32)


@op("Reshape")
def reshape(node, ins):
    expect_inputs(node, ins, 1, 2)
    x = ins[0]
    if len(ins) == 2:
        s = ins[1]
        tid = type_id_of(s)
        if tid not in _RESHAPE_SHAPE_TYPES:
            raise fail(node, f"shape tensor {s.tensor.label} has unsupported dataType {tid}")
        data = const_input(node, s, "shape tensor")
        if data.dtype == np.uint32:  # r1.1 casts each value to int: 0xFFFFFFFF is -1
            data = data.view(np.int32)
        spec = [int(v) for v in np.asarray(data).reshape(-1)]  # float values truncate, as a C cast
    else:
        spec = list(node.attrs.shape or ())
    out, infer = [], None
    for i, d in enumerate(spec):
        if d == 0:
            if i >= len(x.shape):
                raise fail(node, f"shape[{i}] = 0 copies an input dim, but the input is {x.shape}")
            d = x.shape[i]
        elif d == -1:
            if infer is not None:
                raise fail(node, f"shape {spec} has more than one -1")
            infer = i
        elif d < 0:
            raise fail(node, f"shape {spec} has a negative dim {d}")
        out.append(d)
    if infer is not None:
        rest = int(np.prod([d for i, d in enumerate(out) if i != infer], dtype=np.int64))
        if rest == 0 or x.size % rest:
            raise fail(node, f"cannot infer the -1 of shape {spec} from input {x.shape}")
        out[infer] = x.size // rest
    return _view_plan(node, x, out)


@op("Flatten")
def flatten(node, ins):
    expect_inputs(node, ins, 1)
    x = ins[0]
    if not x.shape:
        raise fail(node, "cannot flatten a scalar")
    return _view_plan(node, x, (x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64))))


@op("Squeeze")
def squeeze(node, ins):
    expect_inputs(node, ins, 1)
    x = ins[0]
    axes = list(node.attrs.axis or ())
    if not axes:
        return _view_plan(node, x, [d for d in x.shape if d != 1])
    # r1.1 walks the dims with one cursor into the axis list: an axis that is negative or out of
    # order never matches, and neither does any axis after it.
    out, k = [], 0
    for i, d in enumerate(x.shape):
        if k < len(axes) and axes[k] == i:
            if d != 1:
                raise fail(node, f"cannot squeeze dim {i} of size {d}")
            k += 1
        else:
            out.append(d)
    return _view_plan(node, x, out)


@op("Unsqueeze")
def unsqueeze(node, ins):
    expect_inputs(node, ins, 1)
    x = ins[0]
    axes = list(node.attrs.axis or ())
    if not axes:  # r1.1 quirk: an empty axis list squeezes instead
        return _view_plan(node, x, [d for d in x.shape if d != 1])
    rank = len(x.shape) + len(axes)
    out, k, j = [], 0, 0
    for i in range(rank):
        if k < len(axes) and (axes[k] == i or axes[k] + rank == i):
            out.append(1)
            k += 1
        else:
            if j >= len(x.shape):
                raise fail(node, f"axis {axes} does not fit input {x.shape}")
            out.append(x.shape[j])
            j += 1
    return _view_plan(node, x, out)


@op("ExpandDims")
def expand_dims(node, ins):
    expect_inputs(node, ins, 1, 2)
    x = ins[0]
    if len(ins) == 2:
        vals = int_values(node, ins[1], "dim")
        if len(vals) != 1:
            raise fail(node, f"dim tensor must hold one value, got {len(vals)}")
        dim = vals[0]
    else:
        dim = node.attrs.dim
    rank = len(x.shape)
    d = dim + rank + 1 if dim < 0 else dim
    if not 0 <= d <= rank:
        raise fail(node, f"dim {dim} is out of range for rank {rank}")
    return _view_plan(node, x, x.shape[:d] + (1,) + x.shape[d:])


@op("Dropout", "Identity")
def identity(node, ins):
    expect_inputs(node, ins, 1)
    if len(node.outputs) != 1:
        raise fail(node, f"expected 1 output, got {len(node.outputs)}")
    return Plan([(ins[0].shape, ins[0].dtype)], copy_run)


@op("Shape")
def shape_op(node, ins):
    expect_inputs(node, ins, 1)
    value = np.array(ins[0].shape, np.int32)

    def run(inputs, outputs):
        outputs[0][...] = value

    # The shape is known when planning, so Shape -> ... -> Reshape chains fold.
    return Plan([((len(value),), np.dtype(np.int32))], run, known=[value])


@op("Concat")
def concat(node, ins):
    if not ins:
        raise fail(node, "expected at least 1 input")
    dt = same_dtype(node, ins)
    rank = len(ins[0].shape)
    if rank == 0:
        raise fail(node, "cannot concatenate scalars")
    axis = normalize_axis(node, node.attrs.axis, rank)
    for v in ins[1:]:
        if len(v.shape) != rank or any(a != b for i, (a, b) in enumerate(zip(v.shape, ins[0].shape)) if i != axis):
            raise fail(node, f"input shapes {[v.shape for v in ins]} differ off axis {axis}")
    out_shape = list(ins[0].shape)
    out_shape[axis] = sum(v.shape[axis] for v in ins)
    if copy_moves.native(dt, rank):
        return Plan([(tuple(out_shape), dt)], kernel=copy_moves.concat([v.shape for v in ins], axis, out_shape, dt))

    def run(inputs, outputs):
        np.concatenate(inputs, axis=axis, out=outputs[0])

    return Plan([(tuple(out_shape), dt)], run)


@op("Split")
def split(node, ins):
    expect_inputs(node, ins, 1)
    x = ins[0]
    a = node.attrs
    axis = normalize_axis(node, a.splitDim, len(x.shape), "splitDim")
    n, dim = a.numberSplit, x.shape[axis]
    if n <= 0 or n != len(node.outputs):
        raise fail(node, f"numberSplit {n} does not match the {len(node.outputs)} outputs")
    sizes = list(a.sizeSplits or ())
    if sizes:
        if len(sizes) != n:
            raise fail(node, f"sizeSplits {sizes} has {len(sizes)} entries for numberSplit {n}")
        if sizes[-1] == -1:
            sizes[-1] = dim - sum(sizes[:-1])
        if any(s < 0 for s in sizes) or sum(sizes) != dim:
            raise fail(node, f"sizeSplits {list(a.sizeSplits)} do not split dim {axis} of size {dim}")
    else:
        if dim % n:
            raise fail(node, f"dim {axis} of size {dim} does not split into {n} equal parts")
        sizes = [dim // n] * n
    shapes = [x.shape[:axis] + (s,) + x.shape[axis + 1:] for s in sizes]
    if copy_moves.native(x.dtype, len(x.shape)):
        return Plan([(s, x.dtype) for s in shapes], kernel=copy_moves.split(x.shape, axis, shapes, x.dtype))
    starts = np.cumsum([0] + sizes[:-1]).tolist()

    def run(inputs, outputs):
        src = inputs[0]
        for o, b, s in zip(outputs, starts, sizes):
            np.copyto(o, src[(slice(None),) * axis + (slice(b, b + s),)])

    return Plan([(s, x.dtype) for s in shapes], run)


def _slice_plan(x: Value, index: tuple, out_shape) -> Plan:
    rank = len(x.shape)
    if copy_moves.native(x.dtype, rank):
        starts = [s.start for s in index]
        kernel = copy_moves.gather(x.shape, out_shape, out_shape, range(rank), starts, [1] * rank, x.dtype)
        return Plan([(tuple(out_shape), x.dtype)], kernel=kernel)

    def run(inputs, outputs):
        outputs[0].reshape(out_shape)[...] = inputs[0][index]

    return Plan([(tuple(out_shape), x.dtype)], run)


@op("Slice")
def slice_op(node, ins):
    expect_inputs(node, ins, 1, 3)
    x = ins[0]
    rank = len(x.shape)
    if len(ins) == 3:
        begin = int_values(node, ins[1], "begin")
        size = int_values(node, ins[2], "size")
    else:
        begin, size = list(node.attrs.begin or ()), list(node.attrs.size or ())
    axes = list(node.attrs.axes or ()) or list(range(len(begin)))
    if not len(axes) == len(begin) == len(size):
        raise fail(node, f"axes {axes}, begin {begin} and size {size} differ in length")
    starts, sizes = [0] * rank, list(x.shape)
    for ax, b, s in zip(axes, begin, size):
        d = normalize_axis(node, ax, rank)
        if b < 0 or b > x.shape[d]:
            raise fail(node, f"begin {b} is out of range for dim {d} of size {x.shape[d]}")
        if s == -1:
            s = x.shape[d] - b
        if s < 0 or b + s > x.shape[d]:
            raise fail(node, f"size {s} from begin {b} does not fit dim {d} of size {x.shape[d]}")
        starts[d], sizes[d] = b, s
    index = tuple(slice(b, b + s) for b, s in zip(starts, sizes))
    return _slice_plan(x, index, sizes)


def _strided_spec(node, ins):
    """begin/end/stride lists and the number of leading dims they describe, per the input form."""
    x = ins[0]
    rank = len(x.shape)
    a = node.attrs
    if len(ins) == 1:
        begin, end, stride = list(a.begin or ()), list(a.end or ()), list(a.stride or ())
        if not len(begin) == len(end) == len(stride):
            raise fail(node, f"begin {begin}, end {end} and stride {stride} differ in length")
        return begin, end, stride
    # r1.1 reads the tensors as int32 whatever their dtype; only int32 means what it says.
    begin = int_values(node, ins[1], "begin", (np.int32,))
    end = int_values(node, ins[2], "end", (np.int32,))
    if len(ins) == 4:
        stride = int_values(node, ins[3], "stride", (np.int32,))
        if not len(begin) == len(end) == len(stride):
            raise fail(node, f"begin {begin}, end {end} and stride {stride} differ in length")
        return begin, end, stride
    axes = int_values(node, ins[3], "axes", (np.int32,))
    stride = int_values(node, ins[4], "strides", (np.int32,))
    n = len(begin)
    if len(end) != n or (axes and len(axes) != n) or len(stride) != n:
        raise fail(node, f"begin {begin}, end {end}, axes {axes} and strides {stride} differ in length")
    axes = [ax + rank if ax < 0 else ax for ax in axes] if axes else list(range(n))
    # The 5-input form spans every dim and clamps begin/end into range (HandleAxesInputExist).
    b2, e2, s2 = [0] * rank, list(x.shape), [1] * rank
    for i, d in enumerate(x.shape):
        if i in axes:
            k = axes.index(i)
            b2[i] = max(min(begin[k], d - 1), -d)
            e2[i] = max(min(end[k], d), -d - 1)
            s2[i] = stride[k]
    return b2, e2, s2


@op("StridedSlice")
def strided_slice(node, ins):
    expect_inputs(node, ins, 1, 4, 5)
    x = ins[0]
    a = node.attrs
    begin, end, stride = _strided_spec(node, ins)
    n = len(begin)
    in_shape = list(x.shape)
    if n > len(in_shape):
        raise fail(node, f"{n} slice entries for input rank {len(in_shape)}")
    bits = lambda m: [bool((m >> i) & 1) for i in range(n)]  # noqa: E731
    bmask, emask, ellipsis, newaxis, shrink = (bits(m) for m in (a.beginMask, a.endMask, a.ellipsisMask,
                                                                 a.newAxisMask, a.shrinkAxisMask))
    # 1. newAxisMask: a 1 is inserted at i and slot i is overwritten (the user's spec for it is
    # lost); a full-range slot is appended for the dim pushed into the window.
    for i in range(n):
        if newaxis[i]:
            in_shape.insert(i, 1)
            begin[i], end[i], stride[i] = 0, 1, 1
            begin.append(0)
            end.append(in_shape[len(begin) - 1])
            stride.append(1)
            bmask[i] = emask[i] = ellipsis[i] = shrink[i] = False
    m = len(begin)
    pad = [False] * (m - n)  # r1.1 never sized its mask vectors for the appended slots
    bmask, emask, shrink = bmask + pad, emask + pad, shrink + pad
    for i in range(m):  # 2, 3
        if bmask[i]:
            begin[i] = 0
        if emask[i]:
            end[i] = in_shape[i]
    for i in range(n):  # 4: the first ellipsis bit only
        if ellipsis[i]:
            begin[i], end[i] = 0, in_shape[i]
            break
    for i in range(m):  # 5
        if begin[i] < 0:
            begin[i] += in_shape[i]
        if end[i] < 0:
            end[i] += in_shape[i]
    full_shape, index, starts, steps = [], [], [], []
    for i, d in enumerate(in_shape):
        if i >= m:
            full_shape.append(d)
            index.append(np.arange(d))
            starts.append(0)
            steps.append(1)
            continue
        s = stride[i]
        if s == 0:
            raise fail(node, f"stride {i} is 0")
        if shrink[i]:  # 7: one element at begin
            count, s = 1, 1
        else:  # 6, with C division (truncation toward zero)
            num = end[i] - begin[i] + s + (1 if s < 0 else -1)
            count = abs(num) // abs(s) * (1 if (num >= 0) == (s > 0) else -1)
            if count < 0:
                raise fail(node, f"dim {i}: begin {begin[i]}, end {end[i]}, stride {s} give size {count}")
        # The ends checked before any index array exists: a hostile end would size it.
        first, last = begin[i], begin[i] + s * (count - 1)
        if count and (min(first, last) < 0 or max(first, last) >= d):
            # r1.1 does not clamp and would read outside the input here.
            raise fail(node, f"dim {i} of size {d}: begin {begin[i]}, end {end[i]}, stride {stride[i]} "
                             "read out of bounds")
        full_shape.append(count)
        index.append(begin[i] + s * np.arange(count))
        starts.append(begin[i])
        steps.append(s)
    out_shape = [c for i, c in enumerate(full_shape) if not (i < m and shrink[i])]
    if copy_moves.native(x.dtype, len(in_shape)):
        kernel = copy_moves.gather(x.shape, out_shape, full_shape, range(len(in_shape)), starts, steps, x.dtype,
                                   view=in_shape)
        return Plan([(tuple(out_shape), x.dtype)], kernel=kernel)
    grid = np.ix_(*index) if index else ()
    src_shape = tuple(in_shape)

    def run(inputs, outputs):
        outputs[0].reshape(out_shape)[...] = inputs[0].reshape(src_shape)[grid].reshape(out_shape)

    return Plan([(tuple(out_shape), x.dtype)], run)


def _transpose_plan(node, x: Value, perm) -> Plan:
    perm = [int(p) for p in perm]
    if sorted(perm) != list(range(len(x.shape))):
        raise fail(node, f"perm {perm} is not a permutation of the input's {len(x.shape)} dims")
    out_shape = tuple(x.shape[p] for p in perm)
    if copy_moves.native(x.dtype, len(perm)):
        kernel = copy_moves.gather(x.shape, out_shape, out_shape, perm, [0] * len(perm), [1] * len(perm), x.dtype)
        return Plan([(out_shape, x.dtype)], kernel=kernel)

    def run(inputs, outputs):
        np.copyto(outputs[0], inputs[0].transpose(perm))

    return Plan([(out_shape, x.dtype)], run)


@op("Transpose")
def transpose(node, ins):
    expect_inputs(node, ins, 1, 2)
    perm = int_values(node, ins[1], "perm") if len(ins) == 2 else list(node.attrs.perm or ())
    return _transpose_plan(node, ins[0], perm)


@op("Nchw2Nhwc")
def nchw2nhwc(node, ins):
    expect_inputs(node, ins, 1)
    return _transpose_plan(node, ins[0], (0, 2, 3, 1))


@op("Nhwc2Nchw")
def nhwc2nchw(node, ins):
    expect_inputs(node, ins, 1)
    return _transpose_plan(node, ins[0], (0, 3, 1, 2))


@op("Permute")
def permute(node, ins):
    """Deprecated Transpose: out dim i = in dim order[i]."""
    expect_inputs(node, ins, 1)
    return _transpose_plan(node, ins[0], [int(v) for v in node.attrs.order])
