"""TFLite recurrent builtins (python/msv0/convert/tflite_rnn.py): LSTMs with tanh onto v0's Lstm, other
LSTMs and the RNNs unrolled, compared with the LiteRT interpreter's first invocation (its state
variables zero, as the converted graph's state is on every run)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert.interpreter")

import test_tflite_convert  # noqa: E402
from msv0.convert import convert  # noqa: E402
from msv0.convert.tflite_rnn import RNN_OPTIONS  # noqa: E402
from msv0.errors import UnsupportedOpError  # noqa: E402
from test_tflite_convert import check, f32  # noqa: E402
from tflitewriter import TFLiteWriter  # noqa: E402

SEQ, BATCH, IN, HID = 5, 3, 7, 4
NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT = 0, 1, 2, 3, 4, 5
# r1.1's tanh is a Padé approximation, 1e-4 off near ±5 (format-v0.md §5), and a recurrence
# carries each step's error into the next (one input in CI's runs drew 1.1e-4).
TOL = dict(rtol=1e-4, atol=2e-4)


@pytest.fixture(autouse=True)
def _own_draws():
    """Each test draws its weights and inputs from the same seed, not from wherever the shared
    generator stood after the tests that ran before it in this worker."""
    test_tflite_convert.R = np.random.default_rng(0)


def _x(w, layout, seq=SEQ, batch=BATCH):
    shape = {"time": [seq, batch, IN], "batch": [batch, seq, IN], "step": [batch, IN]}[layout]
    return w.input("x", shape), {"x": f32(*shape, lo=-2, hi=2)}


def _out_shape(layout, hid, seq=SEQ, batch=BATCH):
    return {"time": [seq, batch, hid], "batch": [batch, seq, hid], "step": [batch, hid]}[layout]


def _lstm_direction(w, cifg=False) -> list[int]:
    """One direction's 17 LSTM inputs: input weights (i, f, c, o), recurrent weights, peepholes,
    biases, projection weight and bias; CIFG leaves out the input gate's."""
    def gates(shape):
        return [-1 if cifg and g == 0 else w.const(f32(*shape)) for g in range(4)]

    return gates((HID, IN)) + gates((HID, HID)) + [-1] * 3 + gates((HID,)) + [-1, -1]


def _states(w, n, batch=BATCH):
    return [w.variable(f"state{k}", [batch, HID]) for k in range(n)]


def _lstm(layout="time", act=TANH, batch=BATCH, cifg=False, seq=SEQ, replace=None, **options):
    """UNIDIRECTIONAL_SEQUENCE_LSTM (LSTM for layout "step"); replace: {input: lambda w: tensor}."""
    w = TFLiteWriter()
    x, feeds = _x(w, layout, seq, batch)
    ins = [x] + _lstm_direction(w, cifg) + _states(w, 2, batch) + [-1] * 4
    for k, make in (replace or {}).items():
        ins[k] = make(w)
    if layout == "step":
        options.setdefault("kernel_type", 0)
        y = w.op("LSTM", ins, _out_shape(layout, HID, seq, batch), "LSTMOptions", fused_activation_function=act,
                 **options)
    else:
        y = w.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, _out_shape(layout, HID, seq, batch),
                 "UnidirectionalSequenceLSTMOptions", fused_activation_function=act, time_major=layout == "time",
                 **options)
    w.output(y)
    return w, feeds


def _ops(model):
    return [n.op for n in model.nodes]


@pytest.mark.parametrize("layout,batch", [("time", BATCH), ("batch", BATCH), ("batch", 1), ("step", BATCH)])
def test_lstm_becomes_v0_lstm(layout, batch):
    ops = _ops(check(*_lstm(layout, batch=batch), **TOL))
    assert ops.count("Lstm") == 1 and "FullConnection" not in ops
    assert ("Transpose" in ops) == (layout == "batch" and batch > 1)  # [1, seq, in] is reshaped


def test_cifg_lstm_takes_the_negated_forget_gate_as_input_gate():
    assert "Lstm" in _ops(check(*_lstm("batch", cifg=True), **TOL))


@pytest.mark.parametrize("act,cifg", [(RELU, False), (RELU_N1_TO_1, False), (RELU6, True)])
def test_lstm_with_another_activation_is_unrolled(act, cifg):
    ops = _ops(check(*_lstm("batch", act=act, cifg=cifg), **TOL))
    assert "Lstm" not in ops and ops.count("Mul") == 3 * SEQ - 1  # i·c̃, o·act(c) per step, f·c after the first


def _aux(w, aux):
    return w.input("aux", [SEQ, BATCH, IN]) if aux else -1


def _bidirectional_lstm(layout, merge, batch=BATCH, aux=False):
    w = TFLiteWriter()
    x, feeds = _x(w, layout, batch=batch)
    ins = [x] + _lstm_direction(w) + _lstm_direction(w) + _states(w, 4, batch) + [_aux(w, aux)] + [-1] * 8
    shapes = [_out_shape(layout, (2 if merge else 1) * HID, batch=batch)] * (1 if merge else 2)
    for y in w.multi_op("BIDIRECTIONAL_SEQUENCE_LSTM", ins, shapes, "BidirectionalSequenceLSTMOptions",
                        fused_activation_function=TANH, merge_outputs=merge, time_major=layout == "time"):
        w.output(y)
    return w, feeds


# Batch-major and merged, LiteRT's kernel (lstm_eval.cc) keeps batch b's state at b·2H of a [batch, H]
# tensor, past its end for the later batches, whose results are then wrong: that case has batch 1.
@pytest.mark.parametrize("layout,merge,batch", [("time", True, BATCH), ("batch", False, BATCH), ("batch", True, 1)])
def test_bidirectional_lstm(layout, merge, batch):
    ops = _ops(check(*_bidirectional_lstm(layout, merge, batch), **TOL))
    assert ops.count("Lstm") == 1


def _rnn(code, layout, act=TANH, merge=False, seq=SEQ, aux=False):
    w = TFLiteWriter()
    x, feeds = _x(w, layout, seq)
    bidirectional = code == "BIDIRECTIONAL_SEQUENCE_RNN"
    ins = [x]
    for k in range(2 if bidirectional else 1):
        ins += [w.const(f32(HID, IN)), w.const(f32(HID, HID)), w.const(f32(HID)), w.variable(f"h{k}", [BATCH, HID])]
    options = dict(fused_activation_function=act)
    if code != "RNN":
        options["time_major"] = layout == "time"
    if bidirectional:
        ins += [_aux(w, aux), -1, -1]
        options["merge_outputs"] = merge
    shapes = [_out_shape(layout, 2 * HID, seq)] if merge else [_out_shape(layout, HID, seq)] * (1 + bidirectional)
    outs = w.multi_op(code, ins, shapes, RNN_OPTIONS[code], **options)
    for y in outs:
        w.output(y)
    return w, feeds


@pytest.mark.parametrize("code,layout,act,merge", [
    ("UNIDIRECTIONAL_SEQUENCE_RNN", "time", TANH, False), ("UNIDIRECTIONAL_SEQUENCE_RNN", "batch", RELU, False),
    ("BIDIRECTIONAL_SEQUENCE_RNN", "time", TANH, True), ("BIDIRECTIONAL_SEQUENCE_RNN", "batch", RELU6, False),
    ("BIDIRECTIONAL_SEQUENCE_RNN", "batch", TANH, True),
    ("RNN", "step", TANH, False), ("RNN", "step", NONE, False)])
def test_rnn_is_unrolled(code, layout, act, merge):
    ops = _ops(check(*_rnn(code, layout, act, merge), **TOL))
    steps = 1 if code == "RNN" else SEQ
    assert ops.count("FullConnection") == steps * (2 if code.startswith("BI") else 1)  # x·Wᵀ once, h·Rᵀ per step


def _int8_weight(w):
    return w.const(np.ones((HID, IN), np.int8), quant=(0.01, 0, 0))


@pytest.mark.parametrize("model,reason", [
    (lambda: _lstm(replace={9: lambda w: w.const(f32(HID))}), "peepholes"),
    (lambda: _lstm(replace={16: lambda w: w.const(f32(HID, HID))}), "projection"),
    (lambda: _lstm(replace={21: lambda w: w.const(f32(HID))}), "layer normalization"),
    (lambda: _lstm(cell_clip=3.0), "clipping"),
    (lambda: _lstm("step", proj_clip=3.0), "clipping"),
    (lambda: _lstm("step", kernel_type=1), "BASIC"),
    (lambda: _lstm(replace={2: lambda w: w.input("w_f", [HID, IN])}), "must be constant"),
    (lambda: _lstm(replace={3: _int8_weight}), "hybrid"),
    (lambda: _lstm(replace={18: lambda w: w.variable("h", [BATCH, HID], value=np.ones((BATCH, HID)))}),
     "zero-initialised variable"),
    (lambda: _lstm(replace={19: lambda w: w.input("c0", [BATCH, HID])}), "zero-initialised variable"),
    (lambda: _lstm(act=SIGN_BIT), "fused activation 5"),
    (lambda: _lstm(act=NONE), "activation NONE"),
    (lambda: _lstm(act=RELU, seq=129), "129 time steps"),
    (lambda: _rnn("UNIDIRECTIONAL_SEQUENCE_RNN", "time", seq=129), "129 time steps"),
    (lambda: _bidirectional_lstm("time", True, aux=True), "auxiliary input"),
    (lambda: _rnn("BIDIRECTIONAL_SEQUENCE_RNN", "time", aux=True), "auxiliary input"),
])
def test_refusals(model, reason):
    w, _ = model()
    with pytest.raises(UnsupportedOpError, match=reason):
        convert(w.finish())

