"""Pooling int8 (format-v0.md §3.1): max or mean over NHWC windows through csrc/kernels/pool_s8.cc,
with r1.1's requantization of the result as a 256-entry table."""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.ops.pool import pool_window
from msv0.quant import f32, input_param, output_param
from msv0.registry import Plan, expect_inputs, fail, op


def requant_table(node, s_in, zp_in, s_out, zp_out) -> np.ndarray:
    """table[v + 128] = (int8)(round((v − zp_in)·r) + zp_out), r = (double)(s_in_f / s_out_f):
    C round (half away from zero) of a double product, then a wrapping cast, no clamp."""
    with np.errstate(over="ignore"):
        r = float(f32(s_in) / f32(s_out))
    if not np.isfinite(r):
        raise fail(node, f"quant scale ratio {s_in} / {s_out} overflows float")
    x = (np.arange(-128, 128, dtype=np.int64) - zp_in) * r  # exact: at most 9 + 24 significant bits
    whole = np.floor(np.abs(x))
    y = np.copysign(whole + (np.abs(x) - whole >= 0.5), x) + zp_out
    if np.abs(y).max() >= 2**31:  # r1.1's double-to-int8 cast goes through int32; past it, undefined
        raise fail(node, f"quant scale ratio {r:.6g} takes pooled values beyond int32")
    return ((y.astype(np.int64) + 128) % 256 - 128).astype(np.int8)


@op("Pooling", int8=True)
def pooling_s8(node, ins):
    expect_inputs(node, ins, 1)
    x = ins[0]
    p_in, p_out = input_param(node, x), output_param(node)
    win = pool_window(node, x)
    table = requant_table(node, p_in.scale, p_in.zeroPoint, p_out.scale, p_out.zeroPoint)
    try:  # the kernel object rejects mean windows with no cell, or more than its int16 sum holds
        kernel = _core.Pool2dS8(win.max, win.kh, win.kw, win.sh, win.sw, win.pt, win.pl, table, x.shape,
                                win.out_shape)
    except ValueError as e:
        raise fail(node, str(e)) from None
    return Plan([(win.out_shape, np.dtype(np.int8))], kernel=kernel)
