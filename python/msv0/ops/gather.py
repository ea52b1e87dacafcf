"""Gather (format-v0.md §5): x.shape[:axis] + indices.shape + x.shape[axis+1:]."""
from __future__ import annotations

import numpy as np

from msv0.errors import InputError
from msv0.registry import Plan, expect_inputs, fail, op

_INDEX_TYPES = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32))


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

        def run(inputs, outputs):
            np.take(inputs[0], fixed, axis=axis, out=outputs[0])
    else:
        label = node.label

        def run(inputs, outputs):
            idx = inputs[1].astype(np.int64)
            bad = _bad_indices(idx, size)
            if bad:
                raise InputError(f"{label}: {bad}")
            np.take(inputs[0], idx, axis=axis, out=outputs[0])

    return Plan([(out_shape, x.dtype)], run)
