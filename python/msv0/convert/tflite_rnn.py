"""TFLite recurrent builtins -> v0 (format-v0.md §5): the LSTMs onto r1.1's Lstm, the RNNs unrolled.

UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM and the single-step LSTM (FULL kernel)
keep one weight tensor per gate, in the order i, f, c, o; stacked in Lstm's order i, o, f, c
they are its W and R, and the gate biases the input half of its B. A CIFG LSTM has no input
gate (i = 1 − f, which is sigmoid(−z_f)): its forget weights, negated, serve as the input gate's.
Lstm squashes the cell candidate and the cell with tanh where TFLite takes the fused activation,
so an LSTM with another one is unrolled over time instead (FullConnection, Split, Activation,
Mul, Add per step), as the RNNs always are (v0 has no RNN op); unrolling needs constant weights
and at most rnn_lowering.MAX_UNROLLED_STEPS steps.

TFLite keeps the state in variable tensors (an LSTM's inputs 18 and 19) that LiteRT fills with
zeros and the op overwrites with its final state, for the next invocation to start from. A v0
graph keeps nothing between runs: each run starts from zero state, as LiteRT's first invocation
(or the first after reset_all_variables) does, and as a Keras layer that is not `stateful`
means to. A state that is not such a zero variable is refused, as are peepholes, projection,
layer normalization, clipping, an auxiliary input, quantized (hybrid int8) weights and an LSTM
whose fused activation is NONE (LiteRT's kernel then skips writing act(c), see _lstm).
"""
from __future__ import annotations

import functools

import numpy as np

from msv0.convert.emit import Unsupported, Val, dense_order_matches, handler_table
from msv0.convert.rnn_lowering import F32, concat, split, unrolled
from msv0.fb.ActivationType import ActivationType

RNN_HANDLERS, handles = handler_table()
TFL_NONE, TFL_TANH, TFL_LSTM_FULL = 0, 4, 0
# TFLite's fused activations (schema ActivationFunctionType) as v0 Activation attributes
ACTS = {1: dict(type=ActivationType.RELU), 2: dict(type=ActivationType.HARD_TANH, minVal=-1.0, maxVal=1.0),
        3: dict(type=ActivationType.RELU6), TFL_TANH: dict(type=ActivationType.TANH)}
RNN_OPTIONS = {"RNN": "RNNOptions", "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
               "BIDIRECTIONAL_SEQUENCE_RNN": "BidirectionalSequenceRNNOptions"}


def _given(o, k: int) -> bool:
    return k < len(o.inputs) and o.inputs[k] >= 0


def _refuse_given(o, ks, what: str) -> None:
    if any(_given(o, k) for k in ks):
        raise Unsupported(f"v0 has no {what}")


def _weight(o, k: int, what: str) -> np.ndarray:
    v = o.inp(k)
    if v is None:
        raise Unsupported(f"{what} missing")
    if v.const is None:
        raise Unsupported(f"{what} must be constant (they are written into the v0 ops)")
    if v.dtype != F32:
        raise Unsupported(f"{v.dtype} {what} (hybrid quantized recurrent ops are not converted)")
    return v.const


def _zero_state(o, k: int, what: str) -> None:
    """Input k must be a variable tensor LiteRT starts from zero: v0 has nothing to carry state in."""
    t = o.inputs[k] if k < len(o.inputs) else -1
    data = o.conv.consts.get(t)
    if t < 0 or t in o.conv.vals or not o.conv.g.Tensors(t).IsVariable() or (data is not None and data.any()):
        raise Unsupported(f"{what} is not a zero-initialised variable (v0 carries no state between runs)")


def _activation(opt) -> int:
    act = opt.FusedActivationFunction()
    if act != TFL_NONE and act not in ACTS:
        raise Unsupported(f"fused activation {act}")
    return act


def _no_clip(opt) -> None:
    if opt.CellClip() > 0 or opt.ProjClip() > 0:
        raise Unsupported("v0 has no LSTM clipping")


# ---- layout: every sequence is time-major [seq, batch, features] in between ----------------
def _reshape(o, v: Val, shape) -> Val:
    return o.op("Reshape", [v], tuple(shape), v.dtype, shape=list(shape))


def _swap_seq_batch(o, v: Val) -> Val:
    shape = (v.shape[1], v.shape[0], v.shape[2])
    if dense_order_matches(v.shape, (1, 0, 2)):  # batch or seq 1
        return _reshape(o, v, shape)
    return o.op("Transpose", [v], shape, v.dtype, perm=[1, 0, 2])


def _layout(o, opt) -> str:
    return "step" if o.code in ("LSTM", "RNN") else "time" if opt.TimeMajor() else "batch"


def _sequence(o, layout: str) -> Val:
    """Input 0 as [seq, batch, in]; a single-step op's [batch, in] is one step."""
    x = o.inp(0)
    if x.dtype != F32:
        raise Unsupported(f"{x.dtype} input (recurrent ops are converted in float32 only)")
    if len(x.shape) != (2 if layout == "step" else 3):
        raise Unsupported(f"input of shape {list(x.shape)}")
    if layout == "step":
        return _reshape(o, x, (1, *x.shape))
    return x if layout == "time" else _swap_seq_batch(o, x)


def _set_outputs(o, ys: list[Val], layout: str, merge: bool = False) -> None:
    """ys: each direction's [seq, batch, H]; merged, they are one output concatenated on H."""
    for k, y in enumerate([concat(o, ys, 2)] if merge else ys):
        if layout == "step":
            y = _reshape(o, y, y.shape[1:])
        elif layout == "batch":
            y = _swap_seq_batch(o, y)
        o.set(y, k)


# ---- unrolled steps -------------------------------------------------------------------------
def _act(o, v: Val, act: int) -> Val:
    return v if act == TFL_NONE else o.op("Activation", [v], v.shape, F32, **ACTS[act])


def _binary(o, op: str, a: Val, b: Val) -> Val:
    return o.op(op, [a, b], a.shape, F32)


def _rnn_step(o, g: Val, state, act: int):
    return (_act(o, g, act),)


def _lstm_step(o, g: Val, state, act: int):
    """g [1, batch, 4H] in Lstm's gate order i, o, f, c; state (h, c)."""
    hid = g.shape[-1] // 4
    gates, cand = split(o, g, 2, [3 * hid, hid])
    i, out, f = split(o, o.op("Activation", [gates], gates.shape, F32, type=ActivationType.SIGMOID), 2, [hid] * 3)
    c = _binary(o, "Mul", i, _act(o, cand, act))
    if state is not None:
        c = _binary(o, "Add", _binary(o, "Mul", f, state[1]), c)
    return _binary(o, "Mul", out, _act(o, c, act)), c


# ---- LSTM -------------------------------------------------------------------------------------
def _lstm_weights(o, base: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One direction's W [4H, in], R [4H, H] and bias [4H] in Lstm's gate order i, o, f, c, from
    TFLite's input weights at base, recurrent weights at base + 4, peepholes at base + 8, biases
    at base + 11 and projection at base + 15 (each in the order i, f, c, o)."""
    _refuse_given(o, range(base + 8, base + 11), "LSTM peepholes")
    _refuse_given(o, (base + 15, base + 16), "LSTM projection")

    def gate(g):
        return (_weight(o, base + g, "input weights"), _weight(o, base + 4 + g, "recurrent weights"),
                _weight(o, base + 11 + g, "gate biases"))

    f, c, out = gate(1), gate(2), gate(3)
    i = gate(0) if _given(o, base) else tuple(-a for a in f)  # CIFG: 1 − sigmoid(z) = sigmoid(−z)
    return tuple(np.concatenate([i[k], out[k], f[k], c[k]]).astype(F32) for k in range(3))


def _lstm(o, x: Val, cells: list[tuple[np.ndarray, np.ndarray, np.ndarray]], act: int) -> list[Val]:
    """Each direction's outputs [seq, batch, H] over x [seq, batch, in]; the second runs backwards."""
    if act == TFL_NONE:  # LiteRT's kernel then leaves its act(c) buffer as it was: h = o·z_c, not o·c
        raise Unsupported("LSTM fused activation NONE (LiteRT's kernel multiplies by the cell gate's input then)")
    if act != TFL_TANH:
        step = functools.partial(_lstm_step, act=act)
        return [concat(o, unrolled(o, x, *cell, step, backward=d == 1), 0) for d, cell in enumerate(cells)]
    seq, batch, _ = x.shape
    dirs, hid = len(cells), cells[0][1].shape[1]
    w, r = (np.stack([cell[k] for cell in cells]) for k in (0, 1))
    b = np.stack([np.concatenate([cell[2], np.zeros_like(cell[2])]) for cell in cells])  # recurrent half 0
    zeros = Val((dirs, batch, hid), F32, const=np.zeros((dirs, batch, hid), F32))
    state = ((dirs, batch, hid), F32)
    y = o.e.ops("Lstm", [x] + [Val.of(a) for a in (w, r, b)] + [zeros, zeros],
                [((seq, dirs, batch, hid), F32), state, state], f"{o.name}/Lstm", bidirection=dirs == 2)[0]
    return [_reshape(o, part, (seq, batch, hid)) for part in split(o, y, 1, [1] * dirs)]


@handles("UNIDIRECTIONAL_SEQUENCE_LSTM", "LSTM")
def lstm(o):
    opt = o.options("LSTMOptions" if o.code == "LSTM" else "UnidirectionalSequenceLSTMOptions")
    if o.code == "LSTM" and opt.KernelType() != TFL_LSTM_FULL:
        raise Unsupported("the BASIC LSTM kernel")
    if hasattr(opt, "DiagonalRecurrentTensors") and opt.DiagonalRecurrentTensors():
        raise Unsupported("diagonal recurrent weights")
    _refuse_given(o, range(20, 24), "LSTM layer normalization")
    _no_clip(opt)
    _zero_state(o, 18, "the output state")
    _zero_state(o, 19, "the cell state")
    layout = _layout(o, opt)
    _set_outputs(o, _lstm(o, _sequence(o, layout), [_lstm_weights(o, 1)], _activation(opt)), layout)


@handles("BIDIRECTIONAL_SEQUENCE_LSTM")
def bidirectional_lstm(o):
    """Forward weights from input 1, backward ones from 18, states 35-38, auxiliary input 39-47."""
    opt = o.options("BidirectionalSequenceLSTMOptions")
    _refuse_given(o, range(39, 48), "auxiliary input")
    _no_clip(opt)
    for k, what in zip(range(35, 39), ("forward output", "forward cell", "backward output", "backward cell")):
        _zero_state(o, k, f"the {what} state")
    layout = _layout(o, opt)
    ys = _lstm(o, _sequence(o, layout), [_lstm_weights(o, 1), _lstm_weights(o, 18)], _activation(opt))
    _set_outputs(o, ys, layout, opt.MergeOutputs())


# ---- RNN ----------------------------------------------------------------------------------------
@handles(*RNN_OPTIONS)
def rnn(o):
    """h = act(x·Wᵀ + h·Rᵀ + b): W, R, bias and hidden state at inputs 1-4, a backward direction's
    at 5-8, then an auxiliary input and its weights (9-11)."""
    opt = o.options(RNN_OPTIONS[o.code])
    bidirectional = o.code == "BIDIRECTIONAL_SEQUENCE_RNN"
    _refuse_given(o, (9, 10, 11) if bidirectional else (), "auxiliary input")
    step = functools.partial(_rnn_step, act=_activation(opt))
    layout = _layout(o, opt)
    x = _sequence(o, layout)
    ys = []
    for d, base in enumerate((1, 5) if bidirectional else (1,)):
        _zero_state(o, base + 3, "the hidden state")
        w, r, b = (_weight(o, base + k, what) for k, what in enumerate(("weights", "recurrent weights", "bias")))
        ys.append(concat(o, unrolled(o, x, w, r, b, step, backward=d == 1), 0))
    _set_outputs(o, ys, layout, bidirectional and opt.MergeOutputs())
