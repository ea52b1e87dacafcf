"""Schema ops left over after the main modules: OnesLike, Tan/Atan/Asin, LogicalXor, All,
Permute, UnsortedSegmentSum, LpNormalization, Assert and Adder; the rest of the schema that
cannot be given a meaning is rejected here with the reason (format-v0.md §6, §9)."""
from __future__ import annotations

import numpy as np

from msv0.errors import ModelError
from msv0.ops.conv import conv_geometry
from msv0.ops.elementwise import broadcast_shape
from msv0.registry import (Plan, as_float32, const_input, expect_inputs, fail,
                           normalize_axis, op, reject, same_dtype)

F32 = np.dtype(np.float32)


@op("OnesLike")
def ones_like(node, ins):
    """Ones with the input's shape and dtype (r1.1 builds it only for training; TF semantics)."""
    expect_inputs(node, ins, 1)

    def run(inputs, outputs):
        outputs[0].fill(1)

    return Plan([(ins[0].shape, ins[0].dtype)], run)


def _trig(name, ufunc):
    @op(name)
    def build(node, ins):
        """No r1.1 kernel: the float32 libm function element-wise (NaN outside the domain)."""
        expect_inputs(node, ins, 1)
        as_float32(node, ins[0], "input")

        def run(inputs, outputs):
            with np.errstate(all="ignore"):
                ufunc(inputs[0], out=outputs[0])

        return Plan([(ins[0].shape, F32)], run)

    return build


_trig("Tan", np.tan)
_trig("Atan", np.arctan)
_trig("Asin", np.arcsin)


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


@op("Permute")
def permute(node, ins):
    """Deprecated Transpose: out dim i = in dim order[i]."""
    expect_inputs(node, ins, 1)
    order = [int(v) for v in node.attrs.order]
    rank = len(ins[0].shape)
    if sorted(order) != list(range(rank)):
        raise fail(node, f"order {order} is not a permutation of {rank} dims")
    shape = tuple(ins[0].shape[i] for i in order)

    def run(inputs, outputs):
        np.copyto(outputs[0], np.transpose(inputs[0], order))

    return Plan([(shape, ins[0].dtype)], run)


@op("UnsortedSegmentSum")
def unsorted_segment_sum(node, ins):
    """No r1.1 kernel: TF semantics. (data, segment_ids[, num_segments]): out[s, ...] = sum of
    data[i..., ...] whose segment_ids[i...] == s; out shape = [num] + data.shape[ids.ndim:].
    num comes from input 2 when present, else from `numSegments`. Ids outside [0, num) are
    dropped (TF's CPU kernel rejects them at run time; nothing is read out of bounds here)."""
    expect_inputs(node, ins, 2, 3)
    data, ids = ins[0], ins[1]
    if ids.dtype.kind not in "iu":
        raise fail(node, f"segment_ids must be integers, got {ids.dtype}")
    if tuple(data.shape[:len(ids.shape)]) != tuple(ids.shape):
        raise fail(node, f"segment_ids shape {ids.shape} is not a prefix of data shape {data.shape}")
    if len(ins) == 3:
        n = np.asarray(const_input(node, ins[2], "num_segments")).reshape(-1)
        if n.size != 1 or n.dtype.kind not in "iu":
            raise fail(node, "num_segments must be one integer")
        num = int(n[0])
    else:
        num = node.attrs.numSegments
    if num < 0:
        raise fail(node, f"num_segments {num} is negative")
    inner = tuple(data.shape[len(ids.shape):])

    def run(inputs, outputs):
        seg = inputs[1].reshape(-1).astype(np.int64)
        rows = inputs[0].reshape((seg.size,) + inner)
        ok = (seg >= 0) & (seg < num)
        out = outputs[0]
        out.fill(0)
        np.add.at(out, seg[ok], rows[ok])

    return Plan([((num,) + inner, data.dtype)], run)


@op("LpNormalization")
def lp_normalization(node, ins):
    """No r1.1 kernel: ONNX LpNormalization, x / ||x||_p along `axis` (p 1 or 2); a zero norm
    gives 0 (0/0 is defined as 0, as ONNX Runtime does)."""
    expect_inputs(node, ins, 1)
    as_float32(node, ins[0], "input")
    p = node.attrs.p
    if p not in (1, 2):
        raise fail(node, f"p must be 1 or 2, got {p}")
    axis = normalize_axis(node, node.attrs.axis, len(ins[0].shape))

    def run(inputs, outputs):
        x = inputs[0]
        norm = (np.sum(np.abs(x), axis=axis, keepdims=True) if p == 1
                else np.sqrt(np.sum(x * x, axis=axis, keepdims=True)))
        with np.errstate(all="ignore"):
            np.copyto(outputs[0], np.where(norm == 0, np.float32(0), x / norm))

    return Plan([(ins[0].shape, F32)], run)


@op("Assert")
def assert_(node, ins):
    """r1.1 kernel: (cond, data...) — the run fails unless every element of cond is true;
    it has no outputs (`summarize` only sizes TF's message)."""
    if not ins:
        raise fail(node, "expects a condition input")
    if len(node.outputs):
        raise fail(node, f"Assert has no outputs, the node lists {len(node.outputs)}")
    label = node.label

    def run(inputs, outputs):
        if not np.all(inputs[0]):
            raise ModelError(f"{label}: assertion failed")

    return Plan([], run, foldable=False)


@op("Adder")
def adder(node, ins):
    """r1.1 AdderNet conv (fp32/adder_fp32.cc): Conv2D's geometry and weight layout
    [Cout, kH, kW, Cin/group], but out = -sum |x - w| over the window (+ bias, then the fused
    RELU/RELU6). Padding positions hold 0, so they add -|w| like in r1.1's im2col."""
    g = conv_geometry(node, ins)
    n, h, w, weight, bias, group, oc = g.n, g.h, g.w, g.weight, g.bias, g.group, g.oc
    cg, kh, kw, sh, sw, dh, dw, oh, ow, pt, pl = weight.shape[3], g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.oh, g.ow, g.pt, g.pl
    lo, hi = g.lo, g.hi
    ocg = oc // group
    wg = weight.reshape(group, ocg, kh * kw * cg)

    def run(inputs, outputs):
        x = inputs[0]
        # trailing pad: as much as the last window reaches past the input (at least none)
        pb_ = max((oh - 1) * sh + (kh - 1) * dh + 1 - pt - h, 0)
        pr_ = max((ow - 1) * sw + (kw - 1) * dw + 1 - pl - w, 0)
        xp = np.pad(x, ((0, 0), (pt, pb_), (pl, pr_), (0, 0)))
        cols = np.stack([xp[:, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw, :]
                         for i in range(kh) for j in range(kw)], axis=3)  # [n, oh, ow, kh*kw, c]
        out = np.empty((n, oh, ow, group, ocg), np.float32)
        for g in range(group):
            patch = cols[..., g * cg:(g + 1) * cg].reshape(n, oh, ow, 1, kh * kw * cg)
            out[..., g, :] = -np.abs(patch - wg[g]).sum(-1, dtype=np.float32)
        y = out.reshape(n, oh, ow, oc)
        if bias is not None:
            y = y + bias
        np.copyto(outputs[0], np.clip(y, lo, hi))

    return Plan([((n, oh, ow, oc), F32)], run)


# "under-specified": no r1.1 kernel, and the schema does not say what the op computes.
reject("under-specified: no r1.1 kernel and an empty schema table; the converter emits Reduce(mode "
       "Min) or Minimum instead, and nothing says which a file means", "Min")
reject("under-specified: no r1.1 kernel and an empty schema table (no target shape); the converter "
       "emits BroadcastTo instead", "Broadcast")
reject("under-specified: no r1.1 kernel and an empty schema table (no axis, no update rule); the "
       "converter emits ScatterND instead", "Scatter")
reject("under-specified: no r1.1 kernel; the combiner is commented out of the schema and sparse "
       "ids/weights have no tensor encoding in v0", "EmbeddingLookupSparse")
reject("under-specified: no r1.1 kernel; Caffe's Proposal needs image-info and anchor conventions "
       "the v0 schema does not record", "Proposal")
reject("graph plumbing: constants are stored as tensors; the table is empty and r1.1 has no kernel",
       "Constant")
reject("graph plumbing: a converter-internal layout marker (format conversions become Transpose); "
       "r1.1 has no kernel", "ToFormat")
