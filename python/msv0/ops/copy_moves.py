"""Pad, Concat, Split, Slice, StridedSlice and Transpose on float32 or int8 as one native Copy kernel
object (csrc/kernels/copy.cc): a list of moves, each a box of an input read at any strides (negative
for the mirrored borders of Pad) written to a box of an output, or an output box filled with a value."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from msv0 import _core
from msv0.fb.PaddingMode import PaddingMode

TYPES = {np.dtype(np.float32): "f", np.dtype(np.int8): "b"}  # the kernel's element types
MAX_RANK = 8  # dims of a move in the kernel


def native(dtype, rank: int) -> bool:
    """Whether a tensor of this dtype and rank moves through the Copy kernel (else NumPy)."""
    return dtype in TYPES and rank <= MAX_RANK


def strides(shape: Sequence[int]) -> list[int]:
    """Row-major element strides."""
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= int(d)
    return out[::-1]


def copy_kernel(in_shapes: Sequence[Sequence[int]], out_shapes: Sequence[Sequence[int]], moves: list[tuple], dtype):
    return _core.Copy([list(s) for s in in_shapes], [list(s) for s in out_shapes], moves, TYPES[np.dtype(dtype)])


def gather(x_shape: Sequence[int], out_shape: Sequence[int], box: Sequence[int], axes: Sequence[int],
           starts: Sequence[int], steps: Sequence[int], dtype, view: Sequence[int] | None = None):
    """Element (i_0, …) of the box (the output, or a reshape of it) = element starts[j] + steps[j]·i_j
    on axis axes[j] of the input, or of `view`, a reshape of it: a Slice, StridedSlice or Transpose."""
    ins = strides(x_shape if view is None else view)
    src = sum(b * ins[a] for a, b in zip(axes, starts))
    move = (0, 0, 0.0, src, 0, list(box), [s * ins[a] for a, s in zip(axes, steps)], strides(box))
    return copy_kernel([x_shape], [out_shape], [move], dtype)


def _pieces(shapes: Sequence[Sequence[int]], axis: int, whole: Sequence[int]):
    """(k, offset in `whole`, shape) of pieces of `shapes` laid one after another along axis."""
    step, offset = strides(whole)[axis], 0
    for k, shape in enumerate(shapes):
        yield k, offset * step, list(shape)
        offset += shape[axis]


def concat(in_shapes: Sequence[Sequence[int]], axis: int, out_shape: Sequence[int], dtype):
    outs = strides(out_shape)
    moves = [(k, 0, 0.0, 0, off, shape, strides(shape), outs) for k, off, shape in _pieces(in_shapes, axis, out_shape)]
    return copy_kernel(in_shapes, [out_shape], moves, dtype)


def split(x_shape: Sequence[int], axis: int, out_shapes: Sequence[Sequence[int]], dtype):
    """Output k: the next out_shapes[k][axis] positions of x along axis."""
    ins = strides(x_shape)
    moves = [(0, k, 0.0, off, 0, shape, ins, strides(shape)) for k, off, shape in _pieces(out_shapes, axis, x_shape)]
    return copy_kernel([x_shape], out_shapes, moves, dtype)


def _pad_segments(d: int, before: int, after: int, mode: int) -> list[tuple[int, int, int | None, int]]:
    """(output start, length, source start or None to fill, source step) along one axis."""
    if mode == PaddingMode.CONSTANT:
        edges = (None, None)
    elif mode == PaddingMode.REFLECT:  # the edge element is not repeated
        edges = (before, d - 2)
    else:  # SYMMETRIC: the edge element is repeated
        edges = (before - 1, d - 1)
    return [(0, before, edges[0], -1), (before, d, 0, 1), (before + d, after, edges[1], -1)]


def pad(in_shape: Sequence[int], before: Sequence[int], after: Sequence[int], mode: int, value: float, dtype):
    """One move per box of the 3^rank grid of (before, inside, after) segments that is not empty;
    a box with a constant-mode border on any axis is a fill."""
    out_shape = [d + b + e for d, b, e in zip(in_shape, before, after)]
    ins, outs = strides(in_shape), strides(out_shape)
    boxes = [(0, 0, [], [], False)]  # (src offset, dst offset, shape, src strides, fill)
    for axis, (d, b, e) in enumerate(zip(in_shape, before, after)):
        grown = []
        for start, length, src, step in _pad_segments(d, b, e, mode):
            if length == 0:
                continue
            for s_off, d_off, shape, s_str, fill in boxes:
                src_here = 0 if src is None else src * ins[axis]
                grown.append((s_off + src_here, d_off + start * outs[axis], shape + [length],
                              s_str + [step * ins[axis]], fill or src is None))
        boxes = grown
    moves = [(-1 if fill else 0, 0, float(value), s_off if not fill else 0, d_off, shape,
              [0] * len(shape) if fill else s_str, outs) for s_off, d_off, shape, s_str, fill in boxes]
    return copy_kernel([in_shape], [out_shape], moves, dtype)
