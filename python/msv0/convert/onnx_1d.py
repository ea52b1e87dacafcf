"""1-D convolution and pooling (rank-3 NCL input) as the 2-D op on [N, C, 1, L], as r1.1's and
TFLite's converters wrote them: a Reshape adds the unit H axis, another takes it away."""
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


def one_d(handler):
    """Wrap a 2-D spatial handler so that a rank-3 input runs through it with a unit H axis."""
    @functools.wraps(handler)
    def run(c: Ctx):
        x = c.inp(0)
        if len(x.shape) != 3:
            return handler(c)
        x = c.e.plain(x, c.name)
        n, ch, length = x.shape
        shape, dtype = c.out()
        names = [f"{c.name}/2d:{k}" for k in ("x", "w", "y")]
        c.vals[names[0]] = c.op("Reshape", [x], (n, ch, 1, length), x.dtype, shape=[n, ch, 1, length])
        inputs = [names[0]] + c.node.inputs[1:]
        w = c.inp(1)
        if w is not None and w.const is not None and w.const.ndim == 3:
            w4 = w.const[:, :, None, :]
            c.vals[names[1]] = Val.of(w4)
            inputs[1] = names[1]
        c.graph.shapes[names[2]] = ((shape[0], shape[1], 1, shape[2]), np.dtype(dtype))
        node = dataclasses.replace(c.node, inputs=inputs, outputs=[names[2], *c.node.outputs[1:]],
                                   attrs=_lift_attrs(c.node.attrs))
        handler(Ctx(c.e, c.graph, c.vals, node))
        y = c.e.plain(c.vals[names[2]], c.name)
        c.set(0, c.op("Reshape", [y], shape, dtype, shape=list(shape)))

    return run
