"""1-D convolution and pooling (rank-3 NCL input) as the 2-D op on [N, C, 1, L], as r1.1's and
TFLite's converters wrote them: a Reshape adds the unit H axis, another takes it away. A 3-D one
over a unit depth (N, C, 1, H, W; a kernel of depth 1, no depth padding: invisible-watermark's
RivaGAN) runs as the 2-D op on [N, C, H, W] the same way."""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from msv0.convert.emit import Val
from msv0.convert.onnx_ctx import Ctx

# Per-axis attributes and the value they take on the unit H axis; pads are [begins..., ends...].
_UNIT = {"kernel_shape": 1, "strides": 1, "dilations": 1, "output_padding": 0, "output_shape": 1}


def _lift_attrs(attrs: dict) -> dict:
    out = dict(attrs)
    for k, unit in _UNIT.items():
        if k in attrs:
            out[k] = [unit, *attrs[k]]
    if "pads" in attrs:
        begin, end = attrs["pads"]
        out["pads"] = [0, begin, 0, end]
    return out


def _drop_depth(attrs: dict) -> dict | None:
    """A 3-D op's attributes without their depth entries, or None where the depth is not a unit one."""
    out = dict(attrs)
    for k, unit in _UNIT.items():
        if k in attrs:
            if k in ("kernel_shape", "output_padding") and attrs[k][0] != unit:
                return None
            out[k] = list(attrs[k][1:])
    if "pads" in attrs:
        p = list(attrs["pads"])
        if p[0] or p[3]:
            return None
        out["pads"] = [p[1], p[2], p[4], p[5]]
    return out


def one_d(handler):
    """Wrap a 2-D spatial handler so that a rank-3 input runs through it with a unit H axis, and a
    rank-5 one of unit depth without that axis."""
    @functools.wraps(handler)
    def run(c: Ctx):
        x = c.inp(0)
        shape, dtype = c.out()
        w = c.inp(1)
        if len(x.shape) == 3:
            n, ch, length = x.shape
            inner, outer, attrs = (n, ch, 1, length), (shape[0], shape[1], 1, shape[2]), _lift_attrs(c.node.attrs)
            w4 = w.const[:, :, None, :] if w is not None and w.const is not None and w.const.ndim == 3 else None
        elif len(x.shape) == 5 and x.shape[2] == 1 and len(shape) == 5 and shape[2] == 1:
            attrs = _drop_depth(c.node.attrs)
            w5 = w.const if w is not None and w.const is not None and w.const.ndim == 5 else None
            if attrs is None or w5 is not None and w5.shape[2] != 1:
                return handler(c)
            w4 = None if w5 is None else w5[:, :, 0]
            inner, outer = (*x.shape[:2], *x.shape[3:]), (*shape[:2], *shape[3:])
        else:
            return handler(c)
        names = [f"{c.name}/2d:{k}" for k in ("x", "w", "y")]
        c.vals[names[0]] = c.op("Reshape", [c.e.plain(x, c.name)], inner, x.dtype, shape=list(inner))
        inputs = [names[0]] + c.node.inputs[1:]
        if w4 is not None:
            c.vals[names[1]] = Val.of(np.ascontiguousarray(w4))
            inputs[1] = names[1]
        c.graph.shapes[names[2]] = (outer, np.dtype(dtype))
        node = dataclasses.replace(c.node, inputs=inputs, outputs=[names[2], *c.node.outputs[1:]], attrs=attrs)
        handler(Ctx(c.e, c.graph, c.vals, node))
        y = c.e.plain(c.vals[names[2]], c.name)
        c.set(0, c.op("Reshape", [y], shape, dtype, shape=list(shape)))

    return run
