"""ONNX LSTM -> the v0 Lstm primitive; ONNX GRU unrolled over time into v0 ops (format-v0.md §5).

ONNX LSTM and r1.1's Lstm share the gate order (i, o, f, c), the weight layout (W [dirs, 4H, in],
R [dirs, 4H, H], B [dirs, 8H] = input then recurrent bias) and the output layout (Y [seq, dirs,
batch, H]), so weights pass through unchanged. What r1.1's kernel has no field for (peepholes,
clip, input_forget, other activations, per-batch sequence lengths) is refused. GRU has no v0
primitive: it is unrolled step by step (FullConnection, Sigmoid, Tanh, Mul, Add), and so is the
simple RNN (FullConnection, Add, Activation); their weights must be constant and their sequence
length static and at most MAX_UNROLLED_STEPS.
"""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Unsupported, Val
from msv0.convert.onnx_ctx import Ctx, emit_binary, handles
from msv0.convert.rnn_lowering import F32, MAX_UNROLLED_STEPS, concat, dense, split, unrolled
from msv0.fb.ActivationType import ActivationType



def _refusals(c: Ctx, default_acts: list[str] | None, dirs: int, seq: int, batch: int) -> list[str]:
    """What this recurrent node asks for that the v0 form cannot do (activations other than
    default_acts unless that is None)."""
    why = []
    acts = c.attr("activations")
    if default_acts is not None and acts is not None and [a.decode() if isinstance(a, bytes) else a for a in acts] != default_acts * dirs:
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
    """Input k (X, initial_h or initial_c, all rank 3) in ONNX layout 0; layout 1 is transposed by perm."""
    v = c.inp(k)
    if v is not None and len(v.shape) != 3:
        raise Unsupported(f"input {k} has shape {list(v.shape)}, not rank 3")
    if v is None or not c.attr("layout", 0):
        return v
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
    _emit_lstm(c, c.inp(1), c.inp(2))


@handles("com.microsoft.DynamicQuantizeLSTM")
def dynamic_quantize_lstm(c: Ctx):
    """onnxruntime's int8-weight LSTM: W [dirs, in, 4H] and R [dirs, H, 4H] with per-direction or
    per-column scales and zero points (inputs 8-11), dequantized here to the fp32 v0 layout."""
    def dequantized(k, k_scale, what):
        q = c.const(k, what).astype(np.float32)
        scale, zp = c.const(k_scale, what + " scale"), c.const(k_scale + 1, what + " zero point")
        shape = (q.shape[0], 1, -1)  # [dirs] or [dirs, 4H]
        if zp is not None:
            q = q - zp.astype(np.float32).reshape(shape)
        w = np.ascontiguousarray((q * scale.astype(np.float32).reshape(shape)).transpose(0, 2, 1))
        return Val(w.shape, F32, const=w)

    _emit_lstm(c, dequantized(1, 8, "W"), dequantized(2, 10, "R"))


def _emit_lstm(c: Ctx, w: Val, r: Val) -> None:
    dirs, direction = _dirs(c)
    x = _time_major(c, 0, [1, 0, 2])  # rank 3, so never stored NHWC: no layout to undo
    if x.dtype != F32:
        raise Unsupported("Lstm is float32 only")
    seq, batch, _ = x.shape
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
    ins = [x, w, r, b, h0, c0]
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


def _act(c: Ctx, v: Val, kind: int) -> Val:
    return c.op("Activation", [v], v.shape, F32, type=kind)


def _gru_step(c: Ctx, gx: Val, h: Val, r_w: np.ndarray, rb_h: np.ndarray, before_reset: bool) -> Val:
    """One GRU step on [1, batch, ...] values; gx holds x·Wᵀ and every bias but the reset-gated Rbh."""
    hid = h.shape[-1]
    gzr, gh = split(c, gx, 2, [2 * hid, hid])
    z, r = split(c, _act(c, emit_binary(c, "Add", gzr, dense(c, h, r_w[:2 * hid], None), gzr.shape, F32),
                         ActivationType.SIGMOID), 2, [hid, hid])
    if before_reset:  # linear_before_reset=1: r ⊙ (h·Rhᵀ + Rbh)
        hh = emit_binary(c, "Mul", r, dense(c, h, r_w[2 * hid:], rb_h), h.shape, F32)
    else:  # r ⊙ h, then ·Rhᵀ (Rbh is folded into gx)
        hh = dense(c, emit_binary(c, "Mul", r, h, h.shape, F32), r_w[2 * hid:], None)
    cand = _act(c, emit_binary(c, "Add", gh, hh, h.shape, F32), ActivationType.TANH)
    # (1 - z) ⊙ cand + z ⊙ h
    keep = emit_binary(c, "Mul", z, emit_binary(c, "Sub", h, cand, h.shape, F32), h.shape, F32)
    return emit_binary(c, "Add", cand, keep, h.shape, F32)


def _recurrence(c: Ctx, default_acts: list[str] | None) -> tuple[int, str, Val, list[str]]:
    """An unrolled recurrent node's direction count and name, its time-major X, and what it asks
    for that the unrolled form cannot do."""
    dirs, direction = _dirs(c)
    x = _time_major(c, 0, [1, 0, 2])
    if x.dtype != F32:
        raise Unsupported(f"{c.node.op} is float32 only")
    seq, batch, _ = x.shape
    why = _refusals(c, default_acts, dirs, seq, batch)
    if seq > MAX_UNROLLED_STEPS:
        why.append(f"{seq} time steps (it is unrolled up to {MAX_UNROLLED_STEPS})")
    return dirs, direction, x, why


@handles("GRU")
def gru(c: Ctx):
    dirs, direction, x, why = _recurrence(c, ["Sigmoid", "Tanh"])
    seq, batch, _ = x.shape
    w, r = c.const(1, "W (v0 has no GRU op; the unrolled form needs constant weights)"), c.const(2, "R")
    if why:
        raise Unsupported("the unrolled v0 GRU cannot take " + ", ".join(why))
    hid = w.shape[1] // 3
    b = c.const(3, "B")
    b = np.zeros((dirs, 6 * hid), F32) if b is None else b.astype(F32)
    before_reset = bool(c.attr("linear_before_reset", 0))
    h0 = _time_major(c, 5, [1, 0, 2])
    h0 = [None] * dirs if h0 is None else split(c, h0, 0, [1] * dirs)
    ys, hs = [], []
    for d in range(dirs):
        bias = b[d, :3 * hid] + np.concatenate([b[d, 3 * hid:5 * hid], np.zeros(hid, F32) if before_reset
                                                else b[d, 5 * hid:]])
        gx = split(c, dense(c, x, w[d], bias), 0, [1] * seq)
        h = h0[d] or Val((1, batch, hid), F32, const=np.zeros((1, batch, hid), F32))
        steps = range(seq - 1, -1, -1) if direction == "reverse" or d == 1 else range(seq)
        out = [None] * seq
        for t in steps:
            h = out[t] = _gru_step(c, gx[t], h, r[d], b[d, 5 * hid:], before_reset)
        ys.append(c.op("Reshape", [concat(c, out, 0)], (seq, 1, batch, hid), F32, shape=[seq, 1, batch, hid]))
        hs.append(h)
    _set_output(c, 0, concat(c, ys, 1), [2, 0, 1, 3])
    _set_output(c, 1, concat(c, hs, 0), [1, 0, 2])


RNN_ACTIVATIONS = {"Tanh": ActivationType.TANH, "Relu": ActivationType.RELU, "Sigmoid": ActivationType.SIGMOID}


@handles("RNN")
def rnn(c: Ctx):
    dirs, direction, x, why = _recurrence(c, None)
    seq, batch, _ = x.shape
    acts = [a.decode() if isinstance(a, bytes) else a for a in c.attr("activations", ["Tanh"] * dirs)]
    if len(acts) != dirs or not set(acts) <= set(RNN_ACTIVATIONS):
        why.append(f"activations {acts} (one of {list(RNN_ACTIVATIONS)} per direction)")
    w, r = c.const(1, "W (v0 has no RNN op; the unrolled form needs constant weights)"), c.const(2, "R")
    if why:
        raise Unsupported("the unrolled v0 RNN cannot take " + ", ".join(why))
    hid = w.shape[1]
    b = c.const(3, "B")
    b = np.zeros((dirs, 2 * hid), F32) if b is None else b.astype(F32)
    h0 = _time_major(c, 5, [1, 0, 2])
    h0 = [None] * dirs if h0 is None else split(c, h0, 0, [1] * dirs)
    ys, hs = [], []
    for d in range(dirs):
        backward = direction == "reverse" or d == 1
        act = RNN_ACTIVATIONS[acts[d]]
        out = unrolled(c, x, w[d], r[d], b[d, :hid] + b[d, hid:], lambda c, g, h, act=act: (_act(c, g, act),),
                       backward, None if h0[d] is None else (h0[d],))
        ys.append(c.op("Reshape", [concat(c, out, 0)], (seq, 1, batch, hid), F32, shape=[seq, 1, batch, hid]))
        hs.append(out[0] if backward else out[-1])
    _set_output(c, 0, concat(c, ys, 1), [2, 0, 1, 3])
    _set_output(c, 1, concat(c, hs, 0), [1, 0, 2])
