"""Plan-time recognition of the half-pixel bilinear ×2 that the converters write for r1.1
(msv0.convert.resize_lowering): Pad SYMMETRIC by 1 on H and W, then a DeDepthwiseConv2D with the
outer product of [¼, ¾, ¾, ¼] per channel, stride 2, crop 3. The pair runs as one native Resize
step with half-pixel source tables: one pass over the output instead of a padded copy and a
16-tap gather. The same products, summed as the Resize kernel orders them, so the result is the
pair's up to float rounding (the taps ¼ and ¾ and their complements are exact)."""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.fb.ActivationType import ActivationType
from msv0.fb.PaddingMode import PaddingMode
from msv0.fb.PadMode import PadMode
from msv0.model import Model
from msv0.ops.resize import linear_taps
from msv0.registry import Plan, Value

_TAPS = np.array([0.25, 0.75, 0.75, 0.25], np.float32)
_KERNEL = np.outer(_TAPS, _TAPS)
_PADDINGS = [0, 0, 1, 1, 1, 1, 0, 0]  # NHWC: H and W by one on each side


def fuse_resizes(model: Model, planned: list, values: dict[int, Value], uses: dict[int, int]) -> list:
    """planned: the (nodes, Plan, inputs, outputs) steps; uses: reads of each tensor, graph
    outputs counted. Returns the steps with each Pad + DeDepthwiseConv2D ×2 pair as one Resize."""
    out = []
    i = 0
    while i < len(planned):
        step = _resize_x2(model, planned, i, values, uses)
        out.append(planned[i] if step is None else step)
        i += 1 if step is None else 2
    return out


def _half_pixel(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source index pairs and weights of output positions [0, 2n), half-pixel, edges clamped."""
    return linear_taps(np.maximum((np.arange(2 * n) + 0.5) / 2 - 0.5, 0.0), n)  # exact in float64


def _resize_x2(model: Model, planned: list, i: int, values: dict[int, Value], uses: dict[int, int]):
    if i + 1 >= len(planned):
        return None
    (pad_nodes, _, pad_ins, pad_outs), (dw_nodes, _, dw_ins, dw_outs) = planned[i], planned[i + 1]
    if len(pad_nodes) != 1 or len(dw_nodes) != 1 or len(pad_ins) != 1 or len(pad_outs) != 1:
        return None
    pad, dw = model.nodes[pad_nodes[0]], model.nodes[dw_nodes[0]]
    if (pad.op != "Pad" or dw.op != "DeDepthwiseConv2D" or dw_ins[0] != pad_outs[0]
            or pad_outs[0] in dw_ins[1:] or uses.get(pad_outs[0]) != 1):
        return None
    p, d = pad.attrs, dw.attrs
    if p.paddingMode != PaddingMode.SYMMETRIC or list(p.paddings or ()) != _PADDINGS:
        return None
    geometry = (d.padMode, d.strideH, d.strideW, d.kernelH, d.kernelW, d.dilateH, d.dilateW,
                d.padUp, d.padDown, d.padLeft, d.padRight, d.activationType)
    if geometry != (PadMode.NOTSET, 2, 2, 4, 4, 1, 1, 3, 3, 3, 3, ActivationType.NO_ACTIVATION):
        return None
    x, y = values[pad_ins[0]], values[dw_outs[0]]
    if x.dtype != np.float32 or len(x.shape) != 4:
        return None
    n, h, w, c = x.shape
    weight = values[dw_ins[1]].const
    bias = values[dw_ins[2]].const if len(dw_ins) > 2 else np.zeros(c, np.float32)
    if (y.shape != (n, 2 * h, 2 * w, c) or weight is None or weight.shape != (c, 4, 4, 1)
            or not (weight == _KERNEL[None, :, :, None]).all() or bias is None or bias.any()):
        return None
    y0, y1, wy = _half_pixel(h)
    x0, x1, wx = _half_pixel(w)
    kernel = _core.Resize(x.shape, y.shape, y0, x0, y1, x1, wy, wx)
    return pad_nodes + dw_nodes, Plan([(y.shape, y.dtype)], kernel=kernel), [pad_ins[0]], dw_outs
