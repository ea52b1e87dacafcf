"""Pad (format-v0.md §5): CONSTANT, REFLECT (edge not repeated) and SYMMETRIC (edge repeated)."""
from __future__ import annotations

import numpy as np

from msv0.fb.PaddingMode import PaddingMode
from msv0.ops import copy_moves
from msv0.ops.shape import int_values
from msv0.registry import Plan, expect_inputs, fail, op



def _source_index(n_out: int, before: int, size: int, mode: int) -> np.ndarray:
    """For each output position along one dim, the input position it copies."""
    s = np.arange(n_out) - before
    if mode == PaddingMode.REFLECT:
        s = np.where(s < 0, -s, s)
        return np.where(s >= size, 2 * (size - 1) - s, s)
    s = np.where(s < 0, -s - 1, s)
    return np.where(s >= size, 2 * size - 1 - s, s)


@op("Pad")
def pad(node, ins):
    expect_inputs(node, ins, 1, 2)
    x = ins[0]
    a = node.attrs
    pads = int_values(node, ins[1], "paddings") if len(ins) == 2 else list(a.paddings or ())
    rank = len(x.shape)
    if rank > 4:
        raise fail(node, f"input rank {rank} > 4")
    # r1.1's InferShape indexes the paddings from the front by input dim while the kernel
    # right-aligns them into 4-D; both agree only when there is one pair per input dim.
    if len(pads) != 2 * rank:
        raise fail(node, f"{len(pads)} paddings for an input of rank {rank} (need {2 * rank})")
    if any(p < 0 for p in pads):
        raise fail(node, f"negative paddings {pads}")
    if x.dtype not in (np.float32, np.int32):
        raise fail(node, f"unsupported input dtype {x.dtype}")
    mode = a.paddingMode
    before, after = pads[0::2], pads[1::2]
    out_shape = tuple(d + b + e for d, b, e in zip(x.shape, before, after))
    if mode not in (PaddingMode.CONSTANT, PaddingMode.REFLECT, PaddingMode.SYMMETRIC):
        raise fail(node, f"unsupported paddingMode {mode}")
    limit = {PaddingMode.CONSTANT: None, PaddingMode.REFLECT: 1, PaddingMode.SYMMETRIC: 0}[mode]
    for d, b, e in zip(x.shape, before, after):  # reflect needs pad < dim, symmetric pad <= dim
        if limit is not None and max(b, e) > d - limit:
            raise fail(node, f"paddings {pads} are too large for input {x.shape} in mode {mode}")
    if copy_moves.native(x.dtype, rank):
        kernel = copy_moves.pad(x.shape, before, after, mode, np.float32(a.constantValue), x.dtype)
        return Plan([(out_shape, x.dtype)], kernel=kernel)
    if mode == PaddingMode.CONSTANT:
        value = x.dtype.type(a.constantValue)
        inner = tuple(slice(b, b + d) for b, d in zip(before, x.shape))

        def run(inputs, outputs):
            outputs[0].fill(value)
            outputs[0][inner] = inputs[0]

        return Plan([(out_shape, x.dtype)], run)
    grid = np.ix_(*[_source_index(o, b, d, mode) for o, b, d in zip(out_shape, before, x.shape)])

    def run(inputs, outputs):
        outputs[0][...] = inputs[0][grid]

    return Plan([(out_shape, x.dtype)], run)
