"""Lstm (format-v0.md §5): r1.1's fp32 ONNX-like LSTM with iofc gate order.

Inputs x [seq, batch, in], W [dirs, 4H, in], R [dirs, 4H, H], B [dirs, 8H] (input and recurrent
halves summed), h0 [dirs, batch, H], c0 [dirs, batch, H]. Outputs y [seq, dirs, batch, H],
h_n and c_n (layout of h0/c0). Gates i, o, f use the fp32 Activation sigmoid, the cell
candidate and the output squash the fp32 Activation (Padé) tanh. The native kernel
(csrc/kernels/lstm_f32.cc) runs it, the initial states read at run time (streaming models feed
them); W, R and B are packed once when constant (as converters write them), else on every run.
"""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.registry import Plan, as_float32, expect_inputs, fail, op


@op("Lstm")
def lstm(node, ins):
    expect_inputs(node, ins, 6)
    for v, what in zip(ins, ("x", "W", "R", "B", "h0", "c0")):
        as_float32(node, v, what)
    x, w, r, b, h0, c0 = (v.shape for v in ins)
    dirs = 2 if node.attrs.bidirection else 1
    if len(x) != 3:
        raise fail(node, f"x must be [seq, batch, input], got {x}")
    seq, batch, size_in = x
    if len(w) != 3 or w[0] != dirs or w[1] % 4 or w[1] == 0 or w[2] != size_in:
        raise fail(node, f"W {w} must be [{dirs}, 4H, {size_in}]")
    hid = w[1] // 4
    checks = ((r, (dirs, 4 * hid, hid), "R"), (b, (dirs, 8 * hid), "B"),
              (h0, (dirs, batch, hid), "h0"), (c0, (dirs, batch, hid), "c0"))
    for got, want, what in checks:
        if tuple(got) != want:
            raise fail(node, f"{what} shape {got} must be {want}")
    if len(node.outputs) != 3:
        raise fail(node, f"Lstm has 3 outputs (y, h_n, c_n), the node has {len(node.outputs)}")
    f32 = np.dtype(np.float32)
    outputs = [((seq, dirs, batch, hid), f32), ((dirs, batch, hid), f32), ((dirs, batch, hid), f32)]
    if all(v.const is not None for v in ins[1:4]):  # weights in the file: packed once
        weights = [np.ascontiguousarray(v.const, np.float32) for v in ins[1:4]]
        return Plan(outputs, kernel=_core.Lstm(*weights, seq, batch))

    def run(inputs, outputs):  # fed weights: packed on every run, then the same kernel
        weights = [np.ascontiguousarray(v) for v in inputs[1:4]]
        _core.Lstm(*weights, seq, batch)(list(inputs), list(outputs))

    return Plan(outputs, run)
