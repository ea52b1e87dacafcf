"""Array ops: shape-making, selection, reordering, scatter/gather, TopK (format-v0.md §5).

These are cold ops, so NumPy does the work. Output shapes must be known at plan time: an op
whose output size depends on tensor values (Range bounds, Tile multiples, a shape input)
needs those inputs constant, which constant folding makes true for shape arithmetic. The
exceptions, one-input Where and Unique, size their outputs from the data: they are registered
data_dependent, so the data-flow executor plans them with every input's value known.
"""
from __future__ import annotations

import math

import numpy as np

from msv0.fb.TypeId import TypeId
from msv0.registry import Plan, check_size, expect_inputs, fail, known_value, normalize_axis, op, same_dtype

INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _data_shaped(node, v, what):
    """The value of an input that decides an output shape; it must be known at plan time."""
    if v.const is None:
        raise fail(node, f"{what} ({v.tensor.label}) is computed at run time, but the output shape "
                         "depends on its runtime data; msv0 plans shapes before running")
    return v.const


def _int_list(node, values, what):
    a = np.asarray(values)
    if a.dtype.kind not in "iu":
        raise fail(node, f"{what} must be integers, got {a.dtype}")
    return [int(x) for x in a.reshape(-1)]


def _dims(node, dims, what):
    dims = _int_list(node, dims, what)
    if any(d < 0 for d in dims):
        raise fail(node, f"{what} {dims} has a negative dimension")
    return tuple(dims)


def _copy(value):
    def run(inputs, outputs):
        np.copyto(outputs[0], value)

    return run


@op("Crop")
def crop(node, ins):
    """out = x[offsets...] with the shape of input[1]. For dims d >= axis the offset is
    offsets[d - axis] (0 past the end of the list), dims before axis use 0; this is the fp32
    kernel's rule, applied to any rank (r1.1's fp32 kernel is 4-D only)."""
    expect_inputs(node, ins, 2)
    x, ref = ins
    rank = len(x.shape)
    if len(ref.shape) != rank:
        raise fail(node, f"reference rank {len(ref.shape)} differs from input rank {rank}")
    axis = normalize_axis(node, node.attrs.axis, rank)
    offsets = list(node.attrs.offsets or ())
    if len(offsets) > rank - axis:
        raise fail(node, f"{len(offsets)} offsets for {rank - axis} dims from axis {axis}")
    begin = [0] * axis + offsets + [0] * (rank - axis - len(offsets))
    out_shape = tuple(ref.shape)
    for d in range(rank):
        if begin[d] < 0 or begin[d] + out_shape[d] > x.shape[d]:
            raise fail(node, f"crop of {out_shape} at offsets {begin} does not fit input {x.shape}")
    index = tuple(slice(b, b + n) for b, n in zip(begin, out_shape))

    def run(inputs, outputs):
        np.copyto(outputs[0], inputs[0][index])

    return Plan([(out_shape, x.dtype)], run)


@op("Range")
def range_(node, ins):
    """3-tensor form (start, limit, delta): dtype of start, n = max(ceil((limit-start)/delta), 0),
    values by repeated addition as r1.1's kernel does. Attribute form: int32 from start/limit/delta."""
    if len(ins) == 3:
        start, limit, delta = (_data_shaped(node, v, what).reshape(-1) for v, what in
                               zip(ins, ("start", "limit", "delta")))
        if start.size < 1 or limit.size < 1 or delta.size < 1:
            raise fail(node, "start, limit and delta must each hold a value")
        dtype = ins[0].dtype
        s, l, d = dtype.type(start[0]), dtype.type(limit[0]), dtype.type(delta[0])
        if d == 0:
            raise fail(node, "delta is 0")
        n = max(math.ceil((float(l) - float(s)) / float(d)), 0)
    elif len(ins) <= 1:
        a = node.attrs
        dtype = np.dtype(np.int32)
        s, l, d = np.int32(a.start), np.int32(a.limit), np.int32(a.delta)
        if d == 0:
            raise fail(node, "delta is 0")
        n = math.ceil((float(l) - float(s)) / float(d))
        if n < 0:
            raise fail(node, f"range start={s} limit={l} delta={d} has a negative length")
    else:
        raise fail(node, f"expected 0, 1 or 3 inputs, got {len(ins)}")
    check_size(f"{node.label}: output", (n,), dtype)
    # r1.1 adds delta to a running value of the output type, rounding (float) or wrapping (int)
    # at each step: add.accumulate does the same, in order, in that type.
    values = np.full(n, d, dtype)
    if n:
        values[0] = s
    with np.errstate(over="ignore"):
        values = np.add.accumulate(values, dtype=dtype)
    return Plan([((n,), dtype)], _copy(values))


@op("Tile")
def tile(node, ins):
    """out.shape[dims[i]] = x.shape[dims[i]] * multiples[i]. 2-input form: multiples from input[1]
    over dims 0..len-1. An empty `dims` attribute is read as 0..len(multiples)-1."""
    expect_inputs(node, ins, 1, 2)
    x = ins[0]
    rank = len(x.shape)
    if len(ins) == 2:
        multiples = _int_list(node, _data_shaped(node, ins[1], "multiples"), "multiples")
        dims = list(range(len(multiples)))
    else:
        multiples = list(node.attrs.multiples or ())
        dims = list(node.attrs.dims or ()) or list(range(len(multiples)))
    if len(dims) != len(multiples):
        raise fail(node, f"{len(multiples)} multiples for {len(dims)} dims")
    reps = [1] * rank
    for d, m in zip(dims, multiples):
        if not 0 <= d < rank:
            raise fail(node, f"tile dim {d} is out of range for rank {rank}")
        if m < 0:
            raise fail(node, f"negative multiple {m}")
        reps[d] = m
    out_shape = tuple(s * r for s, r in zip(x.shape, reps))

    def run(inputs, outputs):
        np.copyto(outputs[0], np.tile(inputs[0], reps))

    return Plan([(out_shape, x.dtype)], run)


@op("Fill")
def fill(node, ins):
    """Every element = input[0]'s first element; shape = `dims` (or a constant input[1])."""
    expect_inputs(node, ins, 1, 2)
    if len(ins) == 2:
        shape = _dims(node, _data_shaped(node, ins[1], "dims"), "dims")
    else:
        shape = _dims(node, node.attrs.dims or (), "dims")
    if ins[0].size < 1:
        raise fail(node, "the fill value tensor is empty")

    def run(inputs, outputs):
        outputs[0][...] = inputs[0].reshape(-1)[0]

    return Plan([(shape, ins[0].dtype)], run)


@op("ConstantOfShape")
def constant_of_shape(node, ins):
    """Shape from the int32/int64 input; every element = value[0] (0 when `value` is empty, as in
    ONNX). dataType is a TypeId: Float/Float32 (and 0, unset) give float32, Int/Int32 give int32."""
    expect_inputs(node, ins, 1)
    if ins[0].dtype not in INDEX_DTYPES:
        raise fail(node, f"shape input must be int32 or int64, got {ins[0].dtype}")
    shape = _dims(node, _data_shaped(node, ins[0], "shape"), "shape")
    tid = node.attrs.dataType
    if tid in (TypeId.kTypeUnknown, TypeId.kNumberTypeFloat, TypeId.kNumberTypeFloat32):
        dtype = np.dtype(np.float32)
    elif tid in (TypeId.kNumberTypeInt, TypeId.kNumberTypeInt32):
        dtype = np.dtype(np.int32)
    else:
        raise fail(node, f"dataType {tid} is not supported (float32 or int32 only)")
    value = (node.attrs.value or (0.0,))[0]
    check_size(f"{node.label}: output", shape, dtype)  # before np.full touches it
    return Plan([(shape, dtype)], _copy(np.full(shape, value, dtype)))


@op("Rank")
def rank(node, ins):
    """r1.1: a [1] tensor of the input's dtype holding the rank."""
    expect_inputs(node, ins, 1)
    value = np.array([len(ins[0].shape)], ins[0].dtype)
    return Plan([((1,), ins[0].dtype)], _copy(value))


@op("ZerosLike")
def zeros_like(node, ins):
    expect_inputs(node, ins, 1)

    def run(inputs, outputs):
        outputs[0].fill(0)

    return Plan([(ins[0].shape, ins[0].dtype)], run)


@op("OneHot")
def one_hot(node, ins):
    """(indices, depth, on, off) or (indices, depth, [off, on]); float32 output. Out-of-range
    indices give all-off; negative indices wrap (+depth) only in the 3-input form."""
    expect_inputs(node, ins, 3, 4)
    idx = ins[0]
    if idx.dtype not in INDEX_DTYPES:
        raise fail(node, f"indices must be int32 or int64, got {idx.dtype}")
    depth_v = _data_shaped(node, ins[1], "depth").reshape(-1)
    if depth_v.size != 1 or depth_v.dtype.kind not in "iu":
        raise fail(node, "depth must be one integer")
    depth = int(depth_v[0])
    if depth < 0:
        raise fail(node, f"negative depth {depth}")
    rank = len(idx.shape)
    axis = node.attrs.axis
    axis = rank if axis == -1 else axis + rank + 1 if axis < 0 else axis
    if not 0 <= axis <= rank:
        raise fail(node, f"axis {node.attrs.axis} is out of range for indices of rank {rank}")
    three = len(ins) == 3
    if three and ins[2].size < 2:
        raise fail(node, "the [off, on] values tensor needs 2 elements")
    if not three and (ins[2].size < 1 or ins[3].size < 1):
        raise fail(node, "on and off values must each hold a value")
    out_shape = idx.shape[:axis] + (depth,) + idx.shape[axis:]

    def run(inputs, outputs):
        if three:
            off, on = inputs[2].reshape(-1)[:2]
        else:
            on, off = inputs[2].reshape(-1)[0], inputs[3].reshape(-1)[0]
        i = inputs[0].astype(np.int64)
        if three:
            i = np.where(i < 0, i + depth, i)
        hot = np.expand_dims(i, axis) == np.arange(depth).reshape((depth,) + (1,) * (rank - axis))
        np.copyto(outputs[0], np.where(hot, np.float32(on), np.float32(off)))

    return Plan([(out_shape, np.dtype(np.float32))], run)


@op("Where", data_dependent=lambda node: len(node.inputs) == 1)
def where(node, ins):
    """(cond, x, y) -> cond ? x : y; each input has the output's element count or exactly one
    element (r1.1 does no general broadcasting). Output: the shape of the first largest input,
    dtype of x. With one input: the coordinates of the true elements, TF-style int32 [n, rank]
    (r1.1's kernel has only the select form); its size depends on the data, so such a node is
    planned on every run with the condition's value known."""
    if len(ins) == 1:
        cond = _data_shaped(node, ins[0], "condition")
        coords = np.argwhere(cond).astype(np.int32)
        return Plan([(coords.shape, coords.dtype)], _copy(coords))
    expect_inputs(node, ins, 1, 3)
    cond, x, y = ins
    if x.dtype != y.dtype:
        raise fail(node, f"x and y dtypes differ: {x.dtype} and {y.dtype}")
    big = max(ins, key=lambda v: v.size)
    for v in ins:
        if v.size not in (1, big.size):
            raise fail(node, f"{v.tensor.label} has {v.size} elements; Where needs {big.size} or 1")
    n = big.size

    def run(inputs, outputs):
        c, a, b = (np.broadcast_to(t.reshape(-1), (n,)) for t in inputs)
        np.copyto(outputs[0].reshape(-1), np.where(c.astype(bool), a, b))

    return Plan([(big.shape, x.dtype)], run)


@op("Select")
def select(node, ins):
    """No r1.1 kernel. TF Select semantics: (cond, x, y) -> cond ? x : y with NumPy broadcasting
    (TF SelectV2), plus TF v1's rank-1 cond that selects whole rows along dim 0."""
    expect_inputs(node, ins, 3)
    cond, x, y = ins
    if x.dtype != y.dtype:
        raise fail(node, f"x and y dtypes differ: {x.dtype} and {y.dtype}")
    row_select = len(cond.shape) == 1 and len(x.shape) > 1 and cond.shape[0] == x.shape[0] \
        and x.shape == y.shape
    if row_select:
        out_shape = x.shape
    else:
        try:
            out_shape = np.broadcast_shapes(cond.shape, x.shape, y.shape)
        except ValueError:
            raise fail(node, f"shapes {cond.shape}, {x.shape}, {y.shape} do not broadcast") from None

    def run(inputs, outputs):
        c = inputs[0].astype(bool)
        if row_select:
            c = c.reshape((-1,) + (1,) * (len(out_shape) - 1))
        np.copyto(outputs[0], np.where(c, inputs[1], inputs[2]))

    return Plan([(tuple(out_shape), x.dtype)], run)


@op("Stack")
def stack(node, ins):
    """All inputs share one shape; `axis` in [-(rank+1), rank]. `n`/`isScale` are ignored."""
    if not ins:
        raise fail(node, "Stack needs at least one input")
    dtype = same_dtype(node, ins)
    shape = ins[0].shape
    for v in ins[1:]:
        if v.shape != shape:
            raise fail(node, f"input shapes differ: {shape} and {v.shape}")
    axis = normalize_axis(node, node.attrs.axis, len(shape) + 1)
    out_shape = shape[:axis] + (len(ins),) + shape[axis:]

    def run(inputs, outputs):
        np.copyto(outputs[0], np.stack(inputs, axis))

    return Plan([(out_shape, dtype)], run)


@op("Unstack")
def unstack(node, ins):
    """shape[axis] outputs with that axis removed. `num` (deprecated) is ignored."""
    expect_inputs(node, ins, 1)
    x = ins[0]
    if not x.shape:
        raise fail(node, "cannot unstack a scalar")
    axis = normalize_axis(node, node.attrs.axis, len(x.shape))
    n = x.shape[axis]
    if n != len(node.outputs):
        raise fail(node, f"unstacking dim {axis} of {x.shape} gives {n} outputs, the node has {len(node.outputs)}")
    out_shape = x.shape[:axis] + x.shape[axis + 1:]

    def run(inputs, outputs):
        for k, out in enumerate(outputs):
            np.copyto(out, np.take(inputs[0], k, axis))

    return Plan([(out_shape, x.dtype)] * n, run)


@op("Reverse")
def reverse(node, ins):
    """Reverses the listed axes (negatives +rank; each at most once)."""
    expect_inputs(node, ins, 1)
    x = ins[0]
    axes = [normalize_axis(node, a, len(x.shape)) for a in node.attrs.axis or ()]
    if len(set(axes)) != len(axes):
        raise fail(node, f"axis list {list(node.attrs.axis)} repeats an axis")

    def run(inputs, outputs):
        np.copyto(outputs[0], np.flip(inputs[0], axes) if axes else inputs[0])

    return Plan([(x.shape, x.dtype)], run)


@op("ReverseSequence")
def reverse_sequence(node, ins):
    """TF: for batch b, the first seq_lengths[b] entries along seqAxis are reversed."""
    expect_inputs(node, ins, 2)
    x, lengths = ins
    rank = len(x.shape)
    seq_axis = normalize_axis(node, node.attrs.seqAxis, rank, "seqAxis")
    batch_axis = normalize_axis(node, node.attrs.batchAxis, rank, "batchAxis")
    if seq_axis == batch_axis:
        raise fail(node, "seqAxis and batchAxis are the same")
    if lengths.dtype not in INDEX_DTYPES:
        raise fail(node, f"seq_lengths must be int32 or int64, got {lengths.dtype}")
    if lengths.shape != (x.shape[batch_axis],):
        raise fail(node, f"seq_lengths shape {lengths.shape} must be ({x.shape[batch_axis]},)")
    seq_len = x.shape[seq_axis]

    def run(inputs, outputs):
        data, lens = inputs
        if np.any(lens < 0) or np.any(lens > seq_len):
            raise fail(node, f"seq_lengths {lens.tolist()} out of range [0, {seq_len}]")
        out = outputs[0]
        np.copyto(out, data)
        for b, n in enumerate(lens.tolist()):
            src = [slice(None)] * rank
            src[batch_axis] = b
            src[seq_axis] = slice(0, n)
            out[tuple(src)] = np.flip(data[tuple(src)], seq_axis - (batch_axis < seq_axis))

    return Plan([(x.shape, x.dtype)], run)


@op("BroadcastTo")
def broadcast_to(node, ins):
    """NumPy/TF broadcasting of x to `dstShape` (or a constant input[1], the r1.2 form)."""
    expect_inputs(node, ins, 1, 2)
    x = ins[0]
    if len(ins) == 2:
        shape = _dims(node, _data_shaped(node, ins[1], "shape"), "shape")
    else:
        shape = _dims(node, node.attrs.dstShape or (), "dstShape")
    try:
        if np.broadcast_shapes(x.shape, shape) != shape:
            raise ValueError
    except ValueError:
        raise fail(node, f"cannot broadcast {x.shape} to {shape}") from None

    def run(inputs, outputs):
        np.copyto(outputs[0], np.broadcast_to(inputs[0], shape))

    return Plan([(shape, x.dtype)], run)


@op("Upsample")
def upsample(node, ins):
    """NHWC x; output H/W = floor(in * scale). Scales come from a constant input[1] (ONNX order
    [N, C, H, W] when 4 values, else [H, W]) or the `scales` attribute (same rule). r1.1's kernel
    uses Resize's asymmetric mapping (src = dst * in / out): mode "linear"/"bilinear" is bilinear,
    anything else nearest (floor)."""
    expect_inputs(node, ins, 1, 2)
    x = ins[0]
    if len(x.shape) != 4:
        raise fail(node, f"input must be 4-D NHWC, got {x.shape}")
    if x.dtype != np.float32:
        raise fail(node, f"input must be float32, got {x.dtype}")
    scales = _data_shaped(node, ins[1], "scales") if len(ins) == 2 else node.attrs.scales or ()
    scales = [float(s) for s in np.asarray(scales, np.float64).reshape(-1)]
    if len(scales) == 4:
        sh, sw = scales[2], scales[3]
    elif len(scales) == 2:
        sh, sw = scales
    else:
        raise fail(node, f"scales must hold 2 or 4 values, got {scales}")
    n, h, w, c = x.shape
    oh, ow = math.floor(h * sh), math.floor(w * sw)
    if oh < 1 or ow < 1 or not (math.isfinite(sh) and math.isfinite(sw)):
        raise fail(node, f"scales {scales} give an empty output from {x.shape}")
    check_size(f"{node.label}: output", (n, oh, ow, c), x.dtype)  # before the axis maps sized by it
    mode = (node.attrs.mode or b"")
    mode = (mode.decode() if isinstance(mode, bytes) else mode).lower()
    linear = mode in ("linear", "bilinear")

    def axis_map(size_in, size_out):
        src = np.arange(size_out, dtype=np.float32) * np.float32(size_in / size_out)
        lo = np.minimum(np.floor(src).astype(np.int64), size_in - 1)
        return lo, np.minimum(lo + 1, size_in - 1), (src - lo).astype(np.float32)

    y0, y1, fy = axis_map(h, oh)
    x0, x1, fx = axis_map(w, ow)
    fy, fx = fy[:, None, None], fx[None, :, None]

    def run(inputs, outputs):
        a = inputs[0]
        if linear:
            top = a[:, y0][:, :, x0] * (1 - fx) + a[:, y0][:, :, x1] * fx
            bottom = a[:, y1][:, :, x0] * (1 - fx) + a[:, y1][:, :, x1] * fx
            np.copyto(outputs[0], top * (1 - fy) + bottom * fy)
        else:
            np.copyto(outputs[0], a[:, y0][:, :, x0])

    return Plan([((n, oh, ow, c), x.dtype)], run)


@op("Clip")
def clip(node, ins):
    """No r1.1 kernel (the converter turns it into Activation). y = min(max(x, min), max) with
    the `min`/`max` attributes, or ONNX-style optional inputs 1 (min) and 2 (max) when present."""
    expect_inputs(node, ins, 1, 2, 3)
    x = ins[0]
    for v in ins[1:]:
        if v.size != 1:
            raise fail(node, f"clip bound {v.tensor.label} must hold one value")
    lo_attr, hi_attr = node.attrs.min, node.attrs.max

    def run(inputs, outputs):
        lo = inputs[1].reshape(-1)[0] if len(inputs) > 1 else lo_attr
        hi = inputs[2].reshape(-1)[0] if len(inputs) > 2 else hi_attr
        np.copyto(outputs[0], np.minimum(np.maximum(inputs[0], lo), hi), casting="unsafe")

    return Plan([(x.shape, x.dtype)], run)


@op("MatrixDiag")
def matrix_diag(node, ins):
    """No r1.1 kernel. TF MatrixDiagV3 with one diagonal: input [..., N] is placed on diagonal k
    of [..., numRows, numCols] matrices filled with paddingValue. numRows/numCols <= 0 are
    inferred as TF does; the diagonal must have exactly N entries."""
    expect_inputs(node, ins, 1)
    x = ins[0]
    if not x.shape:
        raise fail(node, "input must be at least 1-D")
    a = node.attrs
    n, k = x.shape[-1], a.k
    min_rows, min_cols = n + max(-k, 0), n + max(k, 0)
    rows, cols = a.numRows, a.numCols
    if rows <= 0 and cols <= 0:
        rows = cols = max(min_rows, min_cols)
    elif rows <= 0:
        rows = min_rows
    elif cols <= 0:
        cols = min_cols
    if min(rows + min(k, 0), cols - max(k, 0)) != n:
        raise fail(node, f"diagonal {k} of a {rows}x{cols} matrix does not hold {n} values")
    i = np.arange(n) + max(-k, 0)
    j = i + k

    def run(inputs, outputs):
        out = outputs[0]
        out[...] = a.paddingValue
        out[..., i, j] = inputs[0]

    return Plan([(x.shape[:-1] + (rows, cols), x.dtype)], run)


def _check_indices(node, idx, limits, what):
    """Raise when an index is negative or past its dim (r1.1 reads out of bounds there)."""
    bad = (idx < 0) | (idx >= np.asarray(limits, np.int64))
    if np.any(bad):
        raise fail(node, f"{what} {idx[np.any(bad, axis=-1)][0].tolist()} is out of range for dims {list(limits)}")


@op("GatherNd")
def gather_nd(node, ins):
    """TF gather_nd: indices [..., q] pick slices x[i0, ..., iq-1]; output indices.shape[:-1] +
    x.shape[q:]. Float indices are truncated to int like r1.1. Out-of-range indices are errors."""
    expect_inputs(node, ins, 2)
    x, ind = ins
    if ind.dtype.kind not in "iuf":
        raise fail(node, f"indices must be integer or float, got {ind.dtype}")
    if not ind.shape or ind.shape[-1] > len(x.shape):
        raise fail(node, f"indices shape {ind.shape} does not fit input rank {len(x.shape)}")
    q = ind.shape[-1]
    out_shape = ind.shape[:-1] + x.shape[q:]

    def run(inputs, outputs):
        data, idx = inputs
        idx = idx.astype(np.int64).reshape(-1, q)
        _check_indices(node, idx, data.shape[:q], "index")
        np.copyto(outputs[0], data[tuple(idx.T)].reshape(out_shape))

    return Plan([(out_shape, x.dtype)], run)


@op("ScatterND")
def scatter_nd(node, ins):
    """(shape, indices, updates): TF scatter_nd into zeros, but r1.1 *copies* each update (a
    repeated index keeps the last one) instead of adding. r1.1 also leaves untouched elements
    uninitialised; msv0 zeroes them."""
    expect_inputs(node, ins, 3)
    shape_v, ind, upd = ins
    shape = _dims(node, _data_shaped(node, shape_v, "shape"), "shape")
    if ind.dtype not in INDEX_DTYPES:
        raise fail(node, f"indices must be int32 or int64, got {ind.dtype}")
    if len(ind.shape) < 2 or ind.shape[-1] > len(shape):
        raise fail(node, f"indices shape {ind.shape} does not fit output rank {len(shape)}")
    q = ind.shape[-1]
    want = ind.shape[:-1] + shape[q:]
    if upd.shape != want:
        raise fail(node, f"updates shape {upd.shape} must be {want}")

    def run(inputs, outputs):
        _, idx, updates = inputs
        idx = idx.astype(np.int64).reshape(-1, q)
        _check_indices(node, idx, shape[:q], "index")
        out = outputs[0]
        out.fill(0)
        rows = updates.reshape((len(idx),) + shape[q:])
        for k in range(len(idx)):
            out[tuple(idx[k])] = rows[k]

    return Plan([(shape, upd.dtype)], run)


@op("SparseToDense")
def sparse_to_dense(node, ins):
    """TF sparse_to_dense: (indices [n, r] or [n], output_shape, values [n] or scalar,
    default_value). Later duplicates win; out-of-range indices are errors. validateIndices is
    not enforced beyond the range check."""
    expect_inputs(node, ins, 3, 4)
    ind, shape_v, vals = ins[:3]
    shape = _dims(node, _data_shaped(node, shape_v, "output_shape"), "output_shape")
    if ind.dtype not in INDEX_DTYPES:
        raise fail(node, f"indices must be int32 or int64, got {ind.dtype}")
    r = len(shape)
    if len(ind.shape) > 2 or (len(ind.shape) == 2 and ind.shape[1] != r) or (len(ind.shape) < 2 and r != 1):
        raise fail(node, f"indices shape {ind.shape} does not fit output rank {r}")
    n = ind.shape[0] if ind.shape else 1
    if vals.size not in (1, n):
        raise fail(node, f"values hold {vals.size} elements for {n} indices")
    if len(ins) == 4 and ins[3].size != 1:
        raise fail(node, "default_value must hold one value")

    def run(inputs, outputs):
        idx = inputs[0].astype(np.int64).reshape(n, r)
        _check_indices(node, idx, shape, "index")
        out = outputs[0]
        out[...] = inputs[3].reshape(-1)[0] if len(inputs) == 4 else 0
        v = np.broadcast_to(inputs[2].reshape(-1), (n,))
        out[tuple(idx.T)] = v

    return Plan([(shape, vals.dtype)], run)


@op("EmbeddingLookup")
def embedding_lookup(node, ins):
    """(params_0, ..., params_k, ids): the params are joined along dim 0 into one table and
    rows are picked by id. With maxNorm != 0 a row whose L2 norm exceeds maxNorm is scaled by
    maxNorm / norm (r1.1). Ids outside the table are errors."""
    if len(ins) < 2:
        raise fail(node, f"expected params and ids inputs, got {len(ins)} inputs")
    params, ids = ins[:-1], ins[-1]
    dtype = same_dtype(node, params)
    if dtype != np.float32:
        raise fail(node, f"params must be float32, got {dtype}")
    if ids.dtype.kind not in "iu":
        raise fail(node, f"ids must be integers, got {ids.dtype}")
    tail = params[0].shape[1:]
    if not params[0].shape or any(p.shape[1:] != tail for p in params):
        raise fail(node, "params must be at least 1-D and agree on every dim but the first")
    rows = sum(p.shape[0] for p in params)
    max_norm = np.float32(node.attrs.maxNorm)

    def run(inputs, outputs):
        table = np.concatenate([p.reshape(p.shape[0], -1) for p in inputs[:-1]], 0)
        idx = inputs[-1].astype(np.int64).reshape(-1)
        _check_indices(node, idx[:, None], (rows,), "id")
        picked = table[idx]
        if max_norm != 0:
            norm = np.sqrt(np.sum(picked * picked, axis=1, keepdims=True))
            picked = np.where(norm > max_norm, picked * (max_norm / np.maximum(norm, 1e-30)), picked)
        np.copyto(outputs[0], picked.reshape(outputs[0].shape))

    return Plan([(ids.shape + tail, dtype)], run)


@op("TopK")
def top_k(node, ins):
    """Along the last axis; outputs (values, int32 indices). sorted=true: descending, ties to the
    lower index. sorted=false (r1.1): ascending, the k *smallest*, ties to the higher index.
    k comes from input[1][0] when there are 2 inputs."""
    expect_inputs(node, ins, 1, 2)
    x = ins[0]
    if not x.shape:
        raise fail(node, "input must be at least 1-D")
    if x.dtype.kind not in "fi":
        raise fail(node, f"unsupported input dtype {x.dtype}")
    if len(ins) == 2:
        kv = _data_shaped(node, ins[1], "k").reshape(-1)
        if kv.size < 1 or kv.dtype.kind not in "iu":
            raise fail(node, "k input must hold an integer")
        k = int(kv[0])
    else:
        k = node.attrs.k
    n = x.shape[-1]
    if not 0 <= k <= n:
        raise fail(node, f"k={k} is out of range for a last dim of {n}")
    descending = bool(node.attrs.sorted)
    out_shape = x.shape[:-1] + (k,)

    def run(inputs, outputs):
        data = inputs[0]
        # Stable ascending sort of the reversed row: equal values come out higher index first.
        order = n - 1 - np.argsort(data[..., ::-1], axis=-1, kind="stable")
        if descending:
            order = order[..., ::-1]
        order = order[..., :k]
        np.copyto(outputs[0], np.take_along_axis(data, order, -1))
        np.copyto(outputs[1], order, casting="unsafe")

    return Plan([(out_shape, x.dtype), (out_shape, np.dtype(np.int32))], run)


@op("Unique", data_dependent=True)
def unique(node, ins):
    """r1.1: the distinct values in first-occurrence order (compared with ==, so every NaN is
    new and -0 equals 0) and, per input element, the int32 index of its value among them.
    Output 0 is the input's shape with the last dim set to the distinct count; output 1 has
    the input's shape. `outType` is deprecated and ignored."""
    expect_inputs(node, ins, 1)
    x = known_value(node, ins[0], "input")
    if x.ndim < 1:
        raise fail(node, "input must have at least one dimension")
    flat = x.reshape(-1)
    seen: dict = {}
    values, index = [], np.empty(flat.size, np.int32)
    for i, v in enumerate(flat.tolist()):
        key = None if isinstance(v, float) and math.isnan(v) else v
        if key is None or key not in seen:
            if key is not None:
                seen[key] = len(values)
            index[i] = len(values)
            values.append(flat[i])
        else:
            index[i] = seen[key]
    out = np.array(values, x.dtype)
    shape = x.shape[:-1] + (out.size,)
    if int(np.prod(shape)) != out.size:
        raise fail(node, f"{out.size} distinct values do not fit shape {shape} (input {x.shape})")
    out = out.reshape(shape)
    index = index.reshape(x.shape)

    def run(inputs, outputs):
        np.copyto(outputs[0], out)
        np.copyto(outputs[1], index)

    return Plan([(out.shape, out.dtype), (index.shape, index.dtype)], run)


@op("OnesLike")
def ones_like(node, ins):
    """Ones with the input's shape and dtype (r1.1 builds it only for training; TF semantics)."""
    expect_inputs(node, ins, 1)

    def run(inputs, outputs):
        outputs[0].fill(1)

    return Plan([(ins[0].shape, ins[0].dtype)], run)
