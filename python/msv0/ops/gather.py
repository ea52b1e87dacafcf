"""Gather (format-v0.md §5): x.shape[:axis] + indices.shape + x.shape[axis+1:]."""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.errors import InputError
from msv0.registry import Plan, const_input, expect_inputs, fail, op

_INDEX_TYPES = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32))
_NATIVE_DATA = (np.dtype(np.float32), np.dtype(np.int32))


def _bad_indices(idx: np.ndarray, size: int) -> str | None:
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        return (f"indices must lie in [0, {size}), got values from {int(idx.min())} to {int(idx.max())} "
                "(r1.1 does not wrap negatives and reads out of bounds past the end)")
    return None


@op("Gather")
def gather(node, ins):
    expect_inputs(node, ins, 2)
    x, ind = ins
    a = node.attrs
    if a.axis < 0:
        raise fail(node, f"negative axis {a.axis} is rejected in r1.1")
    if a.batchDims != 0:
        raise fail(node, f"batchDims {a.batchDims} is not supported")
    if a.axis >= len(x.shape):
        raise fail(node, f"axis {a.axis} is out of range for input {x.shape}")
    if ind.dtype not in _INDEX_TYPES:
        raise fail(node, f"indices must be int32, int64 or float32, got {ind.dtype}")
    axis, size = a.axis, x.shape[a.axis]
    out_shape = x.shape[:axis] + ind.shape + x.shape[axis + 1:]
    if ind.const is not None:
        # float indices are cast to int, truncating, as in r1.1
        fixed = ind.const.astype(np.int64)
        bad = _bad_indices(fixed, size)
        if bad:
            raise fail(node, bad)
        if x.dtype in _NATIVE_DATA:
            return Plan([(out_shape, x.dtype)], kernel=_core.Gather(x.dtype.char, x.shape, axis, ind.shape,
                                                                    fixed.dtype.char, fixed, node.label))

        def run(inputs, outputs):
            np.take(inputs[0], fixed, axis=axis, out=outputs[0])
    elif x.dtype in _NATIVE_DATA and ind.dtype != np.float32:
        return Plan([(out_shape, x.dtype)], kernel=_core.Gather(x.dtype.char, x.shape, axis, ind.shape, ind.dtype.char,
                                                                label=node.label))
    else:
        label = node.label

        def run(inputs, outputs):
            idx = inputs[1].astype(np.int64)
            bad = _bad_indices(idx, size)
            if bad:
                raise InputError(f"{label}: {bad}")
            np.take(inputs[0], idx, axis=axis, out=outputs[0])

    return Plan([(out_shape, x.dtype)], run)


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
