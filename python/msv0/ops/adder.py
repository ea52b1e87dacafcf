"""Adder (format-v0.md §5): r1.1's AdderNet convolution, fp32, in NumPy."""
from __future__ import annotations

import numpy as np

from msv0.ops.conv import conv_geometry
from msv0.registry import Plan, check_size, op

F32 = np.dtype(np.float32)


@op("Adder")
def adder(node, ins):
    """r1.1 AdderNet conv (fp32/adder_fp32.cc): Conv2D's geometry and weight layout
    [Cout, kH, kW, Cin/group], but out = -sum |x - w| over the window (+ bias, then the fused
    RELU/RELU6). Padding positions hold 0, so they add -|w| like in r1.1's im2col."""
    g = conv_geometry(node, ins)
    n, h, w, weight, bias, oc, cg = g.n, g.h, g.w, g.weight, g.bias, g.oc, g.weight.shape[3]
    group, kh, kw, sh, sw, dh, dw, oh, ow, pt, pl = g.win
    lo, hi = g.lo, g.hi
    ocg = oc // group
    wg = weight.reshape(group, ocg, kh * kw * cg)
    # trailing pad: as much as the last window reaches past the input (at least none)
    pb_ = max((oh - 1) * sh + (kh - 1) * dh + 1 - pt - h, 0)
    pr_ = max((ow - 1) * sw + (kw - 1) * dw + 1 - pl - w, 0)
    # pads and dilations come from attributes: bound the padded input and the windows before running
    check_size(f"{node.label}: padded input", (n, pt + h + pb_, pl + w + pr_, g.c), F32)
    check_size(f"{node.label}: windows", (n, oh, ow, kh * kw, g.c), F32)

    def run(inputs, outputs):
        x = inputs[0]
        xp = np.pad(x, ((0, 0), (pt, pb_), (pl, pr_), (0, 0)))
        cols = np.stack([xp[:, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw, :]
                         for i in range(kh) for j in range(kw)], axis=3)  # [n, oh, ow, kh*kw, c]
        out = np.empty((n, oh, ow, group, ocg), np.float32)
        for g in range(group):
            patch = cols[..., g * cg:(g + 1) * cg].reshape(n, oh, ow, 1, kh * kw * cg)
            out[..., g, :] = -np.abs(patch - wg[g]).sum(-1, dtype=np.float32)
        y = out.reshape(n, oh, ow, oc)
        if bias is not None:
            y = y + bias
        np.copyto(outputs[0], np.clip(y, lo, hi))

    return Plan([((n, oh, ow, oc), F32)], run)
