"""int8 kernel parameters as r1.1 derives them from QuantParams (format-v0.md §3.1): the
requantization multipliers, the fused activation's range, and the one-param checks. The
arithmetic itself runs in the kernels; this module only computes their constants."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from msv0.fb.ActivationType import ActivationType
from msv0.model import Node, QuantParam
from msv0.registry import Value, fail

I8 = np.dtype(np.int8)


def f32(x: float) -> np.float32:
    """A scale as nnacl's QuantArg.scale_ holds it: rounded to float."""
    return np.float32(x)


def quantize_multiplier(node: Node, M: float) -> tuple[int, int]:
    """QuantizeMultiplier: M = f·2^e with f in [0.5, 1); m = round(f·2^31) half away from zero
    (exact: f·2^31 has at most 22 fraction bits), 2^31 folding to 2^30 with e + 1."""
    if M == 0:
        return 0, 0
    if not math.isfinite(M):
        raise fail(node, f"requantization multiplier {M} is not finite (a zero or non-finite scale)")
    f, e = math.frexp(M)
    m = int(math.copysign(math.floor(abs(f) * 2.0**31 + 0.5), f))
    if abs(m) == 2**31:
        m, e = m // 2, e + 1
    return m, e


def round_parameter(node: Node, M: float) -> tuple[int, int, int]:
    """QuantizeRoundParameter: (m, left, right) with both shifts as amounts >= 0 (r1.1 stores
    right <= 0). Shifts past 31 are undefined in r1.1's C: a ModelError here."""
    m, e = quantize_multiplier(node, M)
    left, right = max(e, 0), max(-e, 0)
    if left > 31 or right > 31:
        raise fail(node, f"requantization multiplier {M:.6g} needs a shift of {e} (beyond ±31): "
                         "the scales are out of any usable range")
    return m, left, right


def smaller_than_one(node: Node, M: float) -> tuple[int, int]:
    """QuantizeMultiplierSmallerThanOne: (m, rs) with rs = −e (may be negative)."""
    m, e = quantize_multiplier(node, M)
    if not -31 <= e <= 31:
        raise fail(node, f"requantization multiplier {M:.6g} needs a shift of {e} (beyond ±31)")
    return m, -e


def activation_range(node: Node, activation_type: int, scale: float, zp: int) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: RELU and RELU6 in float arithmetic, then C round."""
    lo, hi = -128, 127
    if activation_type in (ActivationType.RELU, ActivationType.RELU6):
        lo = max(lo, zp)
    if activation_type == ActivationType.RELU6:
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            q6 = np.float32(6) / f32(scale) + np.float32(zp)
        if not np.isfinite(q6):  # r1.1 would convert inf to int: undefined
            raise fail(node, f"quant scale {scale} gives no finite RELU6 bound")
        hi = min(hi, int(math.copysign(math.floor(abs(float(q6)) + 0.5), float(q6))))
    return lo, hi


def one_param(node: Node, params: Sequence[QuantParam], what: str) -> QuantParam:
    """The single QuantParam an int8 activation tensor must carry; its scale usable."""
    if len(params) != 1:
        raise fail(node, f"int8 {what} needs exactly one quantParam, has {len(params)}")
    p = params[0]
    if not (math.isfinite(p.scale) and p.scale > 0 and np.isfinite(f32(p.scale)) and f32(p.scale) > 0):
        raise fail(node, f"int8 {what} has quant scale {p.scale} (must be positive and finite in float)")
    if not -128 <= p.zeroPoint <= 127:
        raise fail(node, f"int8 {what} has zero point {p.zeroPoint}, outside [-128, 127]")
    return p


def input_param(node: Node, v: Value, what: str = "input") -> QuantParam:
    if v.dtype != I8:
        raise fail(node, f"{what} must be int8, got {v.dtype}")
    return one_param(node, v.quant, f"{what} {v.tensor.label}")


def output_param(node: Node, k: int = 0) -> QuantParam:
    params = node.output_quant[k] if k < len(node.output_quant) else ()
    return one_param(node, params, f"output {k}")


def weight_params(node: Node, v: Value, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel (scale as float, zero point) of an int8 weight: one param for all,
    or one per channel (dim0). Checked as one_param checks each, over arrays: a model has
    thousands of channels."""
    if v.dtype != I8:
        raise fail(node, f"int8 weight {v.tensor.label} must be int8, got {v.dtype}")
    params = v.quant
    if len(params) not in (1, channels):
        raise fail(node, f"weight {v.tensor.label} has {len(params)} quantParams for {channels} output channels")
    scale = params.column("scale").astype(np.float64)
    zp = params.column("zeroPoint").astype(np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        scale32 = scale.astype(np.float32)
        usable = np.isfinite(scale) & (scale > 0) & np.isfinite(scale32) & (scale32 > 0) & (zp >= -128) & (zp <= 127)
    if not usable.all():
        one_param(node, [params[int(np.argmin(usable))]], f"weight {v.tensor.label}")  # raises
    zp = zp.astype(np.int32)
    if len(params) == 1:
        scale32, zp = np.repeat(scale32, channels), np.repeat(zp, channels)
    return scale32, zp


def conv_requant(node: Node, s_in: float, s_w: np.ndarray, s_out: float) -> list[np.ndarray]:
    """Per channel M_c = (double)(float)(s_in·s_w[c]) / (double)s_out (product in float, divide
    in double) → (mult, left, right) int32 arrays, the operands of _core.GemmS8: round_parameter
    of each, over arrays."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        M = (f32(s_in) * np.asarray(s_w, np.float32)).astype(np.float64) / np.float64(f32(s_out))
    f, e = np.frexp(M)
    m = np.copysign(np.floor(np.abs(f) * 2.0**31 + 0.5), f)
    fold = np.abs(m) == 2.0**31
    m, e = np.where(fold, m / 2, m), np.where(fold, e + 1, e)
    left, right = np.maximum(e, 0), np.maximum(-e, 0)
    usable = np.isfinite(M) & (left <= 31) & (right <= 31)
    if not usable.all():
        round_parameter(node, float(M[np.argmin(usable)]))  # raises
    return [m.astype(np.int32), left.astype(np.int32), right.astype(np.int32)]
