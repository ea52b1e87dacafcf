"""What both frontends' unrolled recurrent layers (GRU, RNN, LSTMs with other activations) are
built of, on plain-layout float32 values: v0 has no GRU or RNN op, so each time step becomes
FullConnection, Split, Activation and element-wise nodes. `o` is a frontend's handler context
(.op(op, ins, shape, dtype, **attrs), .e and .name)."""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Unsupported, Val
from msv0.fb.ActivationType import ActivationType

F32 = np.dtype(np.float32)
MAX_UNROLLED_STEPS = 128  # an unrolled step is about a dozen nodes per direction


def split(o, v: Val, axis: int, sizes: list[int]) -> list[Val]:
    if len(sizes) == 1:
        return [v]
    shapes = [tuple(s if k == axis else d for k, d in enumerate(v.shape)) for s in sizes]
    return o.e.ops("Split", [v], [(s, v.dtype) for s in shapes], f"{o.name}/Split", numberSplit=len(sizes),
                   sizeSplits=sizes, splitDim=axis)


def concat(o, parts: list[Val], axis: int) -> Val:
    if len(parts) == 1:
        return parts[0]
    shape = list(parts[0].shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    return o.op("Concat", parts, tuple(shape), F32, axis=axis)


def dense(o, x: Val, w: np.ndarray, bias: np.ndarray | None = None) -> Val:
    """x [..., K] · wᵀ (+ bias) with w [N, K]."""
    ins = [x] + [Val.of(np.asarray(a, F32)) for a in (w, bias) if a is not None]
    return o.op("FullConnection", ins, (*x.shape[:-1], w.shape[0]), F32, hasBias=bias is not None, useAxis=True,
                axis=len(x.shape) - 1, activationType=ActivationType.NO_ACTIVATION)


def unrolled(o, x: Val, w: np.ndarray, r: np.ndarray, b: np.ndarray, step, backward: bool,
             state: tuple[Val, ...] | None = None) -> list[Val]:
    """Each time step's h [1, batch, H], in time order, of a recurrence over x [seq, batch, in]
    whose step(o, g, state) maps the pre-activations g = x·Wᵀ + b + h·Rᵀ and the state (h, ...)
    to the next state. Without an initial state (zeros) the first step has no recurrent term."""
    seq = x.shape[0]
    if seq > MAX_UNROLLED_STEPS:
        raise Unsupported(f"{seq} time steps (a recurrence is unrolled up to {MAX_UNROLLED_STEPS})")
    gx = split(o, dense(o, x, w, b), 0, [1] * seq)
    out = [None] * seq
    for t in reversed(range(seq)) if backward else range(seq):
        g = gx[t] if state is None else o.op("Add", [gx[t], dense(o, state[0], r)], gx[t].shape, F32)
        state = step(o, g, state)
        out[t] = state[0]
    return out
