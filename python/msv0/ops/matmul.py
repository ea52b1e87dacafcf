"""FullConnection and MatMul (format-v0.md §5), through the packed SGEMM."""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.registry import Plan, activation_range, as_float32, const_input, expect_inputs, fail, op


@op("FullConnection")
def full_connection(node, ins):
    a = node.attrs
    expect_inputs(node, ins, 2, 3)
    x, w = ins[0], ins[1]
    as_float32(node, x, "input")
    weight = np.ascontiguousarray(const_input(node, w, "weight"), np.float32)
    if weight.ndim != 2:
        raise fail(node, f"weight must be 2-D [N, K], got {weight.shape}")
    n, k = weight.shape
    if a.useAxis:
        axis = a.axis + len(x.shape) if a.axis < 0 else a.axis
        if not 1 <= axis <= len(x.shape):
            raise fail(node, f"axis {a.axis} out of range for input shape {x.shape}")
        if int(np.prod(x.shape[axis:])) != k:
            raise fail(node, f"input {x.shape} from axis {axis} does not match weight K={k}")
        out_shape = tuple(x.shape[:axis]) + (n,)
    else:
        if k == 0 or x.size % k:
            raise fail(node, f"input {x.shape} is not a multiple of weight K={k}")
        out_shape = (x.size // k, n)
    bias = None
    if len(ins) == 3:
        bias = np.ascontiguousarray(const_input(node, ins[2], "bias"), np.float32).reshape(-1)
        if bias.size != n:
            raise fail(node, f"bias has {bias.size} values, weight has N={n}")
    gemm = _core.PackedGemm(weight, True, bias)
    lo, hi = activation_range(a.activationType)
    rows = int(np.prod(out_shape[:-1]))

    def run(inputs, outputs):
        gemm.run(inputs[0].reshape(rows, k), outputs[0].reshape(rows, n), lo, hi)

    return Plan([(out_shape, np.dtype(np.float32))], run)
