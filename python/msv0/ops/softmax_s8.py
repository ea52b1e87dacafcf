"""int8 SoftMax (format-v0.md §3.1 "Softmax int8"): TFLite's fixed-point softmax as nnacl's
softmax_int8.c runs it, in the native SoftmaxS8 over a table of exp for every difference from
the row's max built here. The output's quant params are ignored: the result is always in scale
1/256, zero point −128.
"""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.ops.fixed_point_s8 import I32_MAX, exp_on_negative_values, srdhm, wrap32
from msv0.quant import I8, f32, input_param, smaller_than_one
from msv0.registry import Plan, expect_inputs, fail, op

# Each exp adds at most 2^19 (2^31 / 2^12) to r1.1's int32 sum: rows up to this length cannot wrap it.
MAX_AXIS = 4095


@op("SoftMax", int8=True)
def softmax_s8(node, ins):
    expect_inputs(node, ins, 1)
    x = ins[0]
    pi = input_param(node, x)
    rank = len(x.shape)
    if not 1 <= rank <= 5:
        raise fail(node, f"input rank must be 1..5, got {rank}")
    axis = rank - 1 if node.attrs.axis == -1 else node.attrs.axis  # r1.1 normalises only −1
    if not 0 <= axis < rank:
        raise fail(node, f"axis {node.attrs.axis} is not supported for rank {rank}")
    if x.shape[axis] > MAX_AXIS:
        raise fail(node, f"axis length {x.shape[axis]} over {MAX_AXIS} overflows r1.1's int32 exp sum")
    M = min(float(f32(pi.scale) * np.float32(2**26)), float(I32_MAX))
    m, rs = smaller_than_one(node, M)
    left = max(-rs, 0)  # r1.1 drops a right shift
    # exp of every difference q − max_row in [−255, 0], indexed by −d
    d = -np.arange(256, dtype=np.int64)
    exp_table = exp_on_negative_values(srdhm(wrap32(d << left), m))

    return Plan([(x.shape, I8)], kernel=_core.SoftmaxS8(exp_table.astype(np.int32), x.shape, axis))
