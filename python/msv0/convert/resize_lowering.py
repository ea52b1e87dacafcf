"""Resizes r1.1's Resize cannot mean, written as ops whose r1.1 meaning is that result.

r1.1's Resize reads alignCorners alone (src = dst·in/out, no half-pixel offset: format-v0.md,
Resize), so a half-pixel resize (ONNX's default, TFLite half_pixel_centers) is written instead as:
- bilinear ×2: Pad SYMMETRIC by 1, then DeDepthwiseConv2D with the outer product of
  [¼, ¾, ¾, ¼], stride 2, crop 3 (out[2i] = ¼x[i−1] + ¾x[i], out[2i+1] = ¾x[i] + ¼x[i+1], the
  edge repeated is the coordinate clamp);
- other bilinear sizes, cubic and antialiased downscales: a constant interpolation matrix per
  axis (FullConnection over that axis);
- nearest: a Gather per axis with the source indices, unless they are r1.1's own.
Every function here works on NHWC-stored values; `o` is a frontend's handler context (it has
.op(op, ins, shape, dtype, **attrs), .e and .name).
"""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Unsupported, Val
from msv0.fb.ActivationType import ActivationType
from msv0.fb.Format import Format
from msv0.fb.PaddingMode import PaddingMode
from msv0.fb.PadMode import PadMode

_TAPS_X2 = np.array([0.25, 0.75, 0.75, 0.25], np.float32)
# Bounds on the constant tables a lowering writes (per-axis index lists, interpolation matrices):
# far beyond real images, and what keeps a file's absurd output size from exhausting memory.
MAX_AXIS = 1 << 20
MAX_MATRIX = 1 << 26
CUBIC_A = -0.75  # Keys' kernel, as ONNX (cubic_coeff_a's default) and PyTorch sample


def _positions(n_in: int, n_out: int) -> np.ndarray:
    if not 0 < n_out <= MAX_AXIS or not 0 < n_in <= MAX_AXIS:
        raise Unsupported(f"resizing an axis of {n_in} to {n_out} (each must be in 1..{MAX_AXIS})")
    return np.arange(n_out, dtype=np.float32)


def source_coords(n_in: int, n_out: int, scale: float, mode: str) -> np.ndarray:
    """Where each output position samples the input (float32, as ONNX Runtime and LiteRT compute it);
    scale is out/in."""
    j = _positions(n_in, n_out)
    s = np.float32(scale)
    if mode == "align_corners":
        return j * np.float32((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(1, np.float32)
    if mode == "asymmetric":
        return j / s
    if mode == "pytorch_half_pixel" and n_out == 1:
        return np.zeros(1, np.float32)
    if mode in ("half_pixel", "pytorch_half_pixel"):
        return (j + np.float32(0.5)) / s - np.float32(0.5)
    if mode == "half_pixel_symmetric":  # half_pixel, re-centred when in·scale is not a whole size
        shift = np.float32(n_in) / np.float32(2) * (np.float32(1) - np.float32(n_out) / (np.float32(n_in) * s))
        return shift + (j + np.float32(0.5)) / s - np.float32(0.5)
    raise Unsupported(f"coordinate_transformation_mode={mode}")


def nearest_index(src: np.ndarray, n_in: int, rounding: str) -> np.ndarray:
    """The input index nearest to each source coordinate under ONNX's nearest_mode."""
    fl = np.floor(src)
    half = src - fl == np.float32(0.5)
    pick = {"floor": fl, "ceil": np.ceil(src),
            "round_prefer_floor": np.where(half, fl, np.floor(src + np.float32(0.5))),
            "round_prefer_ceil": np.floor(src + np.float32(0.5))}
    if rounding not in pick:
        raise Unsupported(f"nearest_mode={rounding}")
    return np.clip(pick[rounding], 0, n_in - 1).astype(np.int64)


def r11_nearest_index(n_in: int, n_out: int) -> np.ndarray:
    """r1.1's nearest Resize (alignCorners false): floor(dst·in/out)."""
    s = _positions(n_in, n_out) * (np.float32(n_in) / np.float32(n_out))
    return np.minimum(np.floor(s).astype(np.int64), n_in - 1)


def cubic_weight(d: np.ndarray, a: float = CUBIC_A) -> np.ndarray:
    """Keys' cubic convolution kernel (coefficient a) at distances d >= 0 from the sample point
    (ONNX's reference formulas); 0 from d = 2."""
    return np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1,
                    np.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, 0.0))


def filter_matrix(src: np.ndarray, n_in: int, mode: str, scale: float = 1.0, a: float = CUBIC_A,
                  exclude_outside: bool = False, antialias: bool = False) -> np.ndarray:
    """[n_out, n_in]: row j is ONNX's linear or cubic (coefficient a) filter at src[j], over the
    taps around it, clamped to the input's edge (for linear, the coordinate clamped to the input),
    or, with exclude_outside, dropped and the other weights renormalised. With antialias a
    downscale (scale < 1) stretches the filter by 1/scale, its weights normalised to sum 1 (onnx's
    reference: taps floor(s) + [start, 2 − start))."""
    if len(src) * n_in > MAX_MATRIX:
        raise Unsupported(f"a {len(src)}x{n_in} interpolation matrix (over {MAX_MATRIX} values)")
    stretch = min(float(scale), 1.0) if antialias else 1.0
    x = src.astype(np.float64)
    base = np.floor(x)
    ratio = x - base
    base[ratio == 0] -= 1  # ONNX takes a whole coordinate as ratio 1 from the pixel before it
    ratio[ratio == 0] = 1
    start = int(np.floor((-2 if mode == "cubic" else -1) / stretch) + 1)
    offsets = np.arange(start, 2 - start)
    d = np.abs(stretch * (offsets - ratio[:, None]))
    w = cubic_weight(d, a) if mode == "cubic" else np.clip(1 - d, 0, 1)
    taps = base.astype(np.int64)[:, None] + offsets
    if exclude_outside:
        w = np.where((taps >= 0) & (taps < n_in), w, 0.0)
    if exclude_outside or antialias:
        w /= w.sum(axis=1, keepdims=True)
    m = np.zeros((len(src), n_in), np.float64)
    rows = np.repeat(np.arange(len(src)), len(offsets))
    np.add.at(m, (rows, np.clip(taps, 0, n_in - 1).reshape(-1)), w.reshape(-1))
    return m.astype(np.float32)


def gather_nearest(o, x: Val, ys: np.ndarray, xs: np.ndarray) -> Val:
    """x [N, H, W, C] sampled at rows ys and columns xs."""
    for axis, idx in ((1, ys), (2, xs)):
        if np.array_equal(idx, np.arange(x.shape[axis])):
            continue
        k = idx.astype(np.int32)
        shape = list(x.shape)
        shape[axis] = len(k)
        x = o.op("Gather", [x, Val.of(k)], shape, x.dtype, axis=axis)
    return x


def interpolate(o, x: Val, my: np.ndarray, mx: np.ndarray) -> Val:
    """x [N, H, W, C] -> [N, OH, OW, C] with y = My·x·Mxᵀ per channel."""
    for axis, m in ((2, mx), (1, my)):
        if m.shape[0] == m.shape[1] and np.array_equal(m, np.eye(m.shape[0], dtype=np.float32)):
            continue
        perm = [p for p in range(4) if p != axis] + [axis]  # the axis last, contracted by FullConnection
        t = o.op("Transpose", [x], [x.shape[p] for p in perm], x.dtype, perm=perm)
        y = o.op("FullConnection", [t, Val.of(m)], t.shape[:3] + (m.shape[0],), x.dtype,
                 hasBias=False, useAxis=True, axis=3, activationType=ActivationType.NO_ACTIVATION)
        back = [perm.index(p) for p in range(4)]
        x = o.op("Transpose", [y], [y.shape[p] for p in back], x.dtype, perm=back)
    return x


def bilinear_x2(o, x: Val) -> Val:
    """x [N, H, W, C] -> [N, 2H, 2W, C], half-pixel bilinear."""
    n, h, w, c = x.shape
    p = o.op("Pad", [x], (n, h + 2, w + 2, c), x.dtype, paddings=[0, 0, 1, 1, 1, 1, 0, 0],
             paddingMode=PaddingMode.SYMMETRIC, constantValue=0.0)
    k = np.ascontiguousarray(np.broadcast_to(np.outer(_TAPS_X2, _TAPS_X2)[None, :, :, None], (c, 4, 4, 1)))
    weight = Val(k.shape, k.dtype, index=o.e.const(k, f"{o.name}/bilinear_x2", fmt=Format.KHWC))
    return o.op("DeDepthwiseConv2D", [p, weight], (n, 2 * h, 2 * w, c), x.dtype, channelIn=c, channelMultiplier=1,
                padMode=PadMode.NOTSET, padUp=3, padDown=3, padLeft=3, padRight=3, strideH=2, strideW=2,
                kernelH=4, kernelW=4, dilateH=1, dilateW=1, activationType=ActivationType.NO_ACTIVATION)


def resize_bilinear(o, x: Val, out_hw, scales, mode: str) -> Val:
    """Bilinear resize of x [N, H, W, C] to out_hw, coordinates mapped by `mode` with `scales` (out/in)."""
    (_, h, w, _), (oh, ow) = x.shape, out_hw
    if (oh, ow) == (2 * h, 2 * w) and tuple(scales) == (2, 2) and mode in ("half_pixel", "pytorch_half_pixel"):
        return bilinear_x2(o, x)
    return interpolate(o, x, filter_matrix(source_coords(h, oh, scales[0], mode), h, "linear"),
                       filter_matrix(source_coords(w, ow, scales[1], mode), w, "linear"))
