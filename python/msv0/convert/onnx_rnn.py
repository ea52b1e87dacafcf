"""ONNX LSTM -> the v0 Lstm primitive; ONNX GRU unrolled over time into v0 ops (format-v0.md §5).

ONNX LSTM and r1.1's Lstm share the gate order (i, o, f, c), the weight layout (W [dirs, 4H, in],
R [dirs, 4H, H], B [dirs, 8H] = input then recurrent bias) and the output layout (Y [seq, dirs,
batch, H]), so weights pass through unchanged. What r1.1's kernel has no field for (peepholes,
clip, input_forget, other activations, per-batch sequence lengths) is refused. GRU has no v0
primitive: it is unrolled step by step (FullConnection, Sigmoid, Tanh, Mul, Add), so its
sequence length must be static and at most MAX_GRU_STEPS.
"""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Unsupported, Val
from msv0.convert.onnx_ctx import Ctx, emit_binary, handles
from msv0.fb.ActivationType import ActivationType

MAX_GRU_STEPS = 128  # an unrolled GRU emits ~10 nodes per step and direction
F32 = np.dtype(np.float32)


def _refusals(c: Ctx, default_acts: list[str], dirs: int, seq: int, batch: int) -> list[str]:
    """What this recurrent node asks for that the v0 form cannot do."""
    why = []
    acts = c.attr("activations")
    if acts is not None and [a.decode() if isinstance(a, bytes) else a for a in acts] != default_acts * dirs:
        why.append(f"activations {list(acts)} (only {default_acts})")
    if c.attr("clip") is not None:
        why.append("clip")
    if c.attr("input_forget", 0):
        why.append("input_forget=1")
    lens = c.inp(4)
    if lens is not None and (lens.const is None or np.any(lens.const != seq) or lens.const.size != batch):
        why.append("sequence_lens shorter than the sequence")
    return why


def _time_major(c: Ctx, k: int, perm: list[int]) -> Val | None:
    """Input k in ONNX layout 0; layout 1 is transposed by perm."""
    v = c.inp(k)
    if v is None or not c.attr("layout", 0):
        return v
    v = c.e.plain(v, c.name)
    shape = tuple(v.shape[p] for p in perm)
    if v.const is not None:
        return Val(shape, v.dtype, const=np.ascontiguousarray(v.const.transpose(perm)))
    return c.op("Transpose", [v], shape, v.dtype, perm=perm)


def _set_output(c: Ctx, k: int, v: Val, layout1_perm: list[int]) -> None:
    if not c.used(k):
        return
    if c.attr("layout", 0):
        v = c.op("Transpose", [v], tuple(v.shape[p] for p in layout1_perm), v.dtype, perm=layout1_perm)
    c.set(k, v)


def _reverse_time(c: Ctx, v: Val) -> Val:
    return c.op("Reverse", [v], v.shape, v.dtype, axis=[0])


def _dirs(c: Ctx) -> tuple[int, str]:
    direction = c.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise Unsupported(f"direction '{direction}'")
    return (2 if direction == "bidirectional" else 1), direction


@handles("LSTM")
def lstm(c: Ctx):
    dirs, direction = _dirs(c)
    x = _time_major(c, 0, [1, 0, 2])
    x = c.e.plain(x, c.name)
    if x.dtype != F32:
        raise Unsupported("Lstm is float32 only")
    seq, batch, _ = x.shape
    w, r = c.inp(1), c.inp(2)
    hid = w.shape[1] // 4
    why = _refusals(c, ["Sigmoid", "Tanh", "Tanh"], dirs, seq, batch)
    p = c.inp(7)
    if p is not None and (p.const is None or np.any(p.const)):
        why.append("peepholes (P)")
    if why:
        raise Unsupported("v0 Lstm has no " + ", ".join(why))
    zeros = Val((dirs, batch, hid), F32, const=np.zeros((dirs, batch, hid), F32))
    b = c.inp(3) or Val((dirs, 8 * hid), F32, const=np.zeros((dirs, 8 * hid), F32))
    h0 = _time_major(c, 5, [1, 0, 2]) or zeros
    c0 = _time_major(c, 6, [1, 0, 2]) or zeros
    if direction == "reverse":
        x = _reverse_time(c, x)
    ins = [c.e.plain(v, c.name) for v in (x, w, r, b, h0, c0)]
    y = Val((seq, dirs, batch, hid), F32)
    hn, cn = Val((dirs, batch, hid), F32), Val((dirs, batch, hid), F32)
    y.index, hn.index, cn.index = c.e.node("Lstm", [c.e.index(v) for v in ins],
                                           [(y.shape, F32), (hn.shape, F32), (cn.shape, F32)], c.sub("Lstm_"),
                                           bidirection=dirs == 2)
    if direction == "reverse":
        y = _reverse_time(c, y)
    _set_output(c, 0, y, [2, 0, 1, 3])
    _set_output(c, 1, hn, [1, 0, 2])
    _set_output(c, 2, cn, [1, 0, 2])
