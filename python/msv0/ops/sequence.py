"""Lstm (format-v0.md §5): r1.1's fp32 ONNX-like LSTM with iofc gate order.

Inputs x [seq, batch, in], W [dirs, 4H, in], R [dirs, 4H, H], B [dirs, 8H] (input and recurrent
halves summed), h0 [dirs, batch, H], c0 [dirs, batch, H]. Outputs y [seq, dirs, batch, H],
h_n and c_n (layout of h0/c0). Gates i, o, f use the fp32 Activation sigmoid, the cell
candidate and the output squash the fp32 Activation (Padé) tanh. With W, R and B constant (as
converters write them) the native kernel (csrc/kernels/lstm_f32.cc) runs it, the initial states
read at run time (streaming models feed them); otherwise the NumPy steps below.
"""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.registry import Plan, as_float32, expect_inputs, fail, op


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """fp32 Activation SIGMOID: 1 above 16.619047, exp(x) below -9, else 1/(1+exp(-x))."""
    with np.errstate(over="ignore"):  # exp of the branches np.where discards may overflow
        mid = np.float32(1) / (np.float32(1) + np.exp(-x))
        return np.where(x > np.float32(16.619047), np.float32(1), np.where(x < np.float32(-9), np.exp(x), mid))


def _tanh(x: np.ndarray) -> np.ndarray:
    """fp32 Activation TANH: the Padé form, clamped to ±1 beyond |x| > 5."""
    x2 = x * x
    x4 = x2 * x2
    x6 = x4 * x2
    num = x * (x6 + np.float32(378) * x4 + np.float32(17325) * x2 + np.float32(135135))
    den = np.float32(28) * x6 + np.float32(3150) * x4 + np.float32(62370) * x2 + np.float32(135135)
    return np.where(x > 5, np.float32(1), np.where(x < -5, np.float32(-1), num / den)).astype(np.float32)


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
    if all(v.const is not None for v in ins[1:4]):  # weights in the file: packed once, native
        weights = [np.ascontiguousarray(v.const, np.float32) for v in ins[1:4]]
        return Plan(outputs, kernel=_core.Lstm(*weights, seq, batch))

    def run(inputs, outputs):
        xs, W, R, B, H0, C0 = inputs
        y, hn, cn = outputs
        for d in range(dirs):
            bias = B[d, :4 * hid] + B[d, 4 * hid:]
            gx = xs.reshape(seq * batch, size_in) @ W[d].T  # input projection for every step
            gx = gx.reshape(seq, batch, 4 * hid) + bias
            h, c = H0[d].copy(), C0[d].copy()
            steps = range(seq - 1, -1, -1) if d == 1 else range(seq)
            for t in steps:
                g = gx[t] + h @ R[d].T
                i = _sigmoid(g[:, :hid])
                o = _sigmoid(g[:, hid:2 * hid])
                f = _sigmoid(g[:, 2 * hid:3 * hid])
                cand = _tanh(g[:, 3 * hid:])
                c = f * c + i * cand
                h = o * _tanh(c)
                y[t, d] = h
            hn[d] = h
            cn[d] = c

    return Plan(outputs, run)
