"""CumSum, which v0 has no op for, written as Slice, Concat and Add for both frontends.

Hillis-Steele: after adding the copies shifted by 1, 2, 4, ... places, each element holds the sum
of all before it: log2(n) Adds of O(n), exact for integers. A triangular MatMul would cost O(n²)
and an n×n constant, and turn an inf into inf·0 = NaN. Float sums round in another order than a
running sum. `o` is a frontend's handler context (.op(op, ins, shape, dtype, **attrs)); values
are taken as stored.
"""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Val


def _shifted(o, v: Val, axis: int, d: int, reverse: bool) -> Val:
    """v moved d places along axis towards its end (its start when reverse), zeros coming in."""
    n = v.shape[axis]
    zeros = Val.of(np.zeros(v.shape[:axis] + (min(d, n),) + v.shape[axis + 1:], v.dtype))
    if d >= n:
        return zeros
    begin, size = [0] * len(v.shape), list(v.shape)
    begin[axis], size[axis] = d if reverse else 0, n - d
    kept = o.op("Slice", [v], size, v.dtype, axes=list(range(len(v.shape))), begin=begin, size=size)
    return o.op("Concat", [kept, zeros] if reverse else [zeros, kept], v.shape, v.dtype, axis=axis)


def running_sum(o, x: Val, axis: int, reverse: bool, exclusive: bool) -> Val:
    """x's sums along axis, from its start (from its end when reverse), each element's own
    included unless exclusive. A constant (zeros) when exclusive over an axis of one."""
    y, step = x, 1
    while step < x.shape[axis]:
        y = o.op("Add", [y, _shifted(o, y, axis, step, reverse)], x.shape, x.dtype)
        step *= 2
    return _shifted(o, y, axis, 1, reverse) if exclusive else y
