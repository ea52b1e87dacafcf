"""Output sizes and pads of the windowed ops, one spatial axis at a time (format-v0.md §5).

r1.1 computes them in four places that disagree in small ways, and every difference is kept:

=================  ==========================  ==================================  ============
rule               SAME_UPPER                  otherwise (stored pads p0, p1)      result <= 0
=================  ==========================  ==================================  ============
conv_size          out = ceil(size / s); the   ceil((size + p0 + p1 - dk) / s)     raised to 1
(Conv2D, Adder)    pads are recomputed, even
                   when the total is negative
                   (then both are 0)
depthwise_size     as Conv2D, but a total <= 0 as Conv2D                           a ModelError
(DepthwiseConv2D)  keeps the stored pads
deconv_size        out = size * s; p0 = C      NOTSET/CAFFE: (size-1)s + dk        a ModelError
(DeConv2D,         `total / 2` (truncates,     - p0 - p1; VALID: (size-1)s + k,
DeDepthwiseConv2D) may be negative)            p0 = 0; others unsupported
pool_size          out = ceil(size / s), dk    floor or ceil (roundMode) of        raised to 1
(Pooling)          = k (no dilation)           (size + p0 + p1 - k) / s, plus 1
=================  ==========================  ==================================  ============

where dk = (k - 1)·d + 1 is the dilated kernel. Each returns (output size, leading pad); the
leading pad is where the window starts (conv, pool) or the crop offset (deconv). A global
Pooling (ops/pool.py) takes the input's height and width as its window, which gives 1.
"""
from __future__ import annotations

import numpy as np

from msv0.fb.PadMode import PadMode
from msv0.fb.RoundMode import RoundMode
from msv0.model import Node
from msv0.registry import check_size, fail


def conv_size(size: int, k: int, s: int, d: int, pad_mode: int, p0: int, p1: int) -> tuple[int, int]:
    """Conv2D (and Adder) output size and leading pad along one axis."""
    if pad_mode == PadMode.SAME_UPPER:
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        p0 = total // 2
    else:
        out = -(-(size + p0 + p1 - (k - 1) * d) // s)
    return max(out, 1), p0


def depthwise_size(node: Node, size: int, k: int, s: int, d: int, pad_mode: int, p0: int, p1: int,
                   axis: str) -> tuple[int, int]:
    """DepthwiseConv2D output size and leading pad along one axis."""
    if pad_mode == PadMode.SAME_UPPER:
        out = -(-size // s)
        total = (out - 1) * s + (k - 1) * d + 1 - size
        if total > 0:  # otherwise r1.1 keeps the stored pads (unlike Conv2D, which zeroes them)
            p0 = total // 2
            p1 = total - p0
    else:
        out = -(-(size + p0 + p1 - (k - 1) * d) // s)
    if p0 < 0 or p1 < 0:
        raise fail(node, f"negative pads {p0}, {p1} on {axis}")
    if out <= 0:  # r1.1 does not raise it to 1 for depthwise, so the model cannot run
        raise fail(node, f"output {axis} would be {out} (input {size}, kernel {k}, dilation {d}, stride {s})")
    return out, p0


def _trunc_half(v: int) -> int:
    """C `v / 2` on ints: truncates toward zero."""
    return -((-v) // 2) if v < 0 else v // 2


def deconv_size(node: Node, size: int, k: int, s: int, d: int, pad_mode: int, p0: int, p1: int) -> tuple[int, int]:
    """DeConv2D and DeDepthwiseConv2D output size and leading pad (the crop offset) along one axis."""
    if pad_mode in (PadMode.NOTSET, PadMode.CAFFE):
        if p0 < 0 or p1 < 0:
            raise fail(node, f"negative pads {p0}, {p1}")
        out = (size - 1) * s + (k - 1) * d + 1 - p0 - p1
    elif pad_mode == PadMode.SAME_UPPER:
        out = size * s
        p0 = _trunc_half((size - 1) * s + (k - 1) * d + 1 - out)
    elif pad_mode == PadMode.VALID:
        out, p0 = (size - 1) * s + k, 0
    else:
        raise fail(node, f"unsupported pad mode {pad_mode} for deconv")
    if out <= 0:
        raise fail(node, f"output size {out} <= 0 (input {size}, kernel {k}, stride {s}, pads {p0}, {p1})")
    # The kernels' tap table along this axis: a start per output position, and (tap, source) for
    # each input position and tap at most.
    check_size(f"{node.label}: transposed-window tap table", (out + 1 + 2 * size * k,), np.int64)
    return out, p0


def pool_size(node: Node, size: int, k: int, s: int, pad_mode: int, round_mode: int, p0: int, p1: int,
              axis: str) -> tuple[int, int]:
    """Pooling output size and leading pad along one axis."""
    if pad_mode == PadMode.SAME_UPPER:  # like Conv2D with dilation 1: the stored pads are replaced
        out = -(-size // s)
        p0 = max(0, (out - 1) * s + k - size) // 2
        return out, p0
    if p0 < 0 or p1 < 0:
        raise fail(node, f"negative pads {p0}, {p1} on {axis}")
    span = size + p0 + p1 - k
    out = (span // s if round_mode == RoundMode.FLOOR else -(-span // s)) + 1
    return max(out, 1), p0
