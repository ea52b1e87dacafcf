"""int8 Reduce, ArgMax and ArgMin as r1.1's int8 kernels compute them (format-v0.md §3.1).

Reduce works one axis at a time in the listed order, in int32: every axis but the last leaves
a value in the input's quantization (sum − zp_in terms, rescaled, + zp_in, unclamped); the
last axis rescales to the output's params and clamps. Multipliers come from the tensors'
double scales. A 4-D mean over H and W takes a separate path with its own rounding.
"""
from __future__ import annotations

import numpy as np

from msv0.errors import InputError
from msv0.fb.ReduceMode import ReduceMode
from msv0.ops.array_s8 import own_build
from msv0.ops.fixed_point_s8 import mbqm
from msv0.ops.shape import int_values
from msv0.quant import I8, f32, input_param, output_param, smaller_than_one
from msv0.registry import Plan, expect_inputs, fail, op

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
MODES = (ReduceMode.ReduceMean, ReduceMode.ReduceSum, ReduceMode.ReduceMax, ReduceMode.ReduceMin,
         ReduceMode.ReduceProd, ReduceMode.ReduceSumSquare)


def _multiplier(node, M: float) -> tuple[int, int, int]:
    """QuantizeMultiplierSmallerThanOne as the Reduce kernel splits it: (m, left, right)."""
    m, rs = smaller_than_one(node, M)
    return m, max(-rs, 0), max(rs, 0)


class _Overflow(Exception):
    """r1.1's isAddOverflow / isMulOverflow fired: the kernel returns an error."""


def _checked(x: np.ndarray) -> np.ndarray:
    if x.size and (x.min() < I32_MIN or x.max() > I32_MAX):
        raise _Overflow
    return x


def _accumulate(v: np.ndarray, axis: int, product: bool) -> np.ndarray:
    """Σ or Π along axis with r1.1's check after every step: some partial result leaves int32
    exactly when r1.1 reports an overflow (the first such step is exact in int64)."""
    steps = np.cumprod(v, axis=axis) if product else np.cumsum(v, axis=axis)
    return np.take(_checked(steps), [-1], axis=axis)


def _reduce_axis(v, axis, mode, zp_in, mult, last):
    """One axis, kept as size 1. `mult` is the axis's own multiplier (Mean, Prod, SumSquare)."""
    if mode == ReduceMode.ReduceMax:
        return v.max(axis=axis, keepdims=True)
    if mode == ReduceMode.ReduceMin:
        return v.min(axis=axis, keepdims=True)
    d = v - zp_in
    if mode == ReduceMode.ReduceSumSquare:
        s = _accumulate(_checked(d * d), axis, False)
    else:
        s = _accumulate(d, axis, mode == ReduceMode.ReduceProd)
    if mode != ReduceMode.ReduceSum:
        s = mbqm(s, *mult)
    return s if last else _checked(s + zp_in)


@op("Reduce", int8=True)
def reduce_s8(node, ins):
    """Mean, Sum, Max, Min, Prod and SumSquare; `coeff` is not used by the int8 kernel."""
    expect_inputs(node, ins, 1, 2)
    plan = own_build(node, ins, np.int32)
    x, a = ins[0], node.attrs
    if a.mode not in MODES:
        raise fail(node, f"int8 Reduce has no mode {a.mode}")
    p_in, p_out = input_param(node, x), output_param(node)
    rank = len(x.shape)
    if rank == 0:
        raise fail(node, "int8 Reduce needs an input of rank >= 1")
    raw = int_values(node, ins[1], "axes") if len(ins) == 2 else list(a.axes or ())
    axes = [ax + rank if ax < 0 else ax for ax in raw]
    if a.reduceToEnd:
        axes = list(range(axes[0], rank))
    elif not axes:
        axes = list(range(rank))
    # r1.1 derives the per-axis multipliers at init from the axes as written, before it
    # normalises them: a count or a negative axis that normalisation changes is read wrongly.
    per_axis = a.mode in (ReduceMode.ReduceMean, ReduceMode.ReduceProd, ReduceMode.ReduceSumSquare)
    if per_axis and (len(raw) != len(axes) or a.mode != ReduceMode.ReduceSumSquare and min(raw) < 0):
        raise fail(node, f"int8 Reduce mode {a.mode} needs its axes listed, non-negative, one per reduced dim "
                         f"(got {raw}{', reduceToEnd' if a.reduceToEnd else ''})")
    out_shape = plan.outputs[0][0]
    s_in, s_out, zp_in, zp_out = p_in.scale, p_out.scale, p_in.zeroPoint, p_out.zeroPoint
    if a.mode == ReduceMode.ReduceMean and rank == 4 and len(raw) == 2 and sum(raw) == 3 and raw[0] != 0:
        return _mean_hw(node, x, raw, out_shape, s_in, s_out, zp_in, zp_out)
    in_out = _multiplier(node, s_in / s_out)
    if a.mode == ReduceMode.ReduceMean:
        mults = [_multiplier(node, 1.0 / x.shape[ax]) for ax in axes]
    elif a.mode == ReduceMode.ReduceProd:
        mults = [_multiplier(node, s_in ** (x.shape[ax] - 1)) for ax in axes]
    elif a.mode == ReduceMode.ReduceSumSquare:
        mults = [_multiplier(node, s_in)] * (len(axes) - 1) + [_multiplier(node, s_in * s_in / s_out)]
    else:
        mults = [None] * len(axes)
    if a.mode == ReduceMode.ReduceMin and (in_out[1] + 20 > 31 or in_out[2] + 20 > 31):
        raise fail(node, "int8 ReduceMin's requantization shift is out of range")
    mode, label = a.mode, node.label

    def run(inputs, outputs):
        v = inputs[0].astype(np.int64)
        try:
            for k, ax in enumerate(axes):
                v = _reduce_axis(v, ax, mode, zp_in, mults[k], k == len(axes) - 1)
            if mode in (ReduceMode.ReduceMax, ReduceMode.ReduceMin):
                # Min offsets both shifts by 20 (exact but for the wrap of the left shift).
                off = 20 if mode == ReduceMode.ReduceMin else 0
                v = mbqm(v - zp_in, in_out[0], in_out[1] + off, in_out[2] + off)
            elif mode != ReduceMode.ReduceSumSquare:
                v = mbqm(v, *in_out)
            v = _checked(v + zp_out)
        except _Overflow:
            raise InputError(f"{label}: the int8 reduction overflows int32 (r1.1 stops with an error)") from None
        outputs[0][...] = np.clip(v, -128, 127).reshape(out_shape)

    return Plan([(out_shape, I8)], run)


def _mean_hw(node, x, raw, out_shape, s_in, s_out, zp_in, zp_out) -> Plan:
    """Mean over H and W of NHWC: round(Σq·s_in/(s_out·H·W)), raw q summed, plus the
    truncated bias zp_out − zp_in·s_in/s_out."""
    n, h, w, c = x.shape
    if sorted(raw) != [1, 2]:
        raise fail(node, f"r1.1 runs int8 mean over axes {raw} as a mean over H and W")
    if n > 1 and c % 4:
        raise fail(node, "r1.1's int8 mean over H and W misreads batches after the first when C % 4 != 0")
    m, left, right = _multiplier(node, s_in / (s_out * (h * w)))
    bias = int(zp_out - zp_in * s_in / s_out)  # a C double-to-int32 conversion truncates

    def run(inputs, outputs):
        total = inputs[0].astype(np.int64).sum(axis=(1, 2))
        outputs[0][...] = np.clip(mbqm(total, m, left, right) + bias, -128, 127).reshape(out_shape)

    return Plan([(out_shape, I8)], run)


def _arg_s8(node, ins, largest: bool) -> Plan:
    """topK 1 only: each q becomes q·s_in + (−zp_in·s_in) in float; the first extreme wins; the
    index (as float) or the value is written as (int8)(r·(1/s_out) + zp_out), a truncation."""
    plan = own_build(node, ins, np.float32)
    a = node.attrs
    if len(plan.outputs) != 1:
        raise fail(node, "int8 ArgMax/ArgMin writes one output")
    if a.topK != 1:
        raise fail(node, f"int8 ArgMax/ArgMin with topK {a.topK} sorts with a comparator that truncates float "
                         "differences, in an order r1.1 leaves unspecified")
    p_in, p_out = input_param(node, ins[0]), output_param(node)
    s_in = f32(p_in.scale)
    real = np.arange(-128, 128, dtype=np.float32) * s_in + np.float32(-p_in.zeroPoint) * s_in
    inv, zp = np.float32(1) / f32(p_out.scale), np.float32(p_out.zeroPoint)
    rank = len(ins[0].shape)
    axis = a.axis + rank if a.axis < 0 else a.axis
    out_shape, label, values = plan.outputs[0][0], node.label, bool(a.outMaxValue)

    def run(inputs, outputs):
        v = real[inputs[0].view(np.uint8) ^ np.uint8(0x80)]
        pick = v.argmax(axis) if largest else v.argmin(axis)
        r = np.take_along_axis(v, np.expand_dims(pick, axis), axis) if values else pick.astype(np.float32)
        y = np.trunc(r * inv + zp)
        if y.size and (y.min() < -128 or y.max() > 127):
            raise InputError(f"{label}: the result does not fit int8 under the output's quant param "
                             "(undefined in r1.1)")
        outputs[0][...] = y.reshape(out_shape)

    return Plan([(out_shape, I8)], run)


@op("ArgMax", int8=True)
def argmax_s8(node, ins):
    return _arg_s8(node, ins, True)


@op("ArgMin", int8=True)
def argmin_s8(node, ins):
    return _arg_s8(node, ins, False)
