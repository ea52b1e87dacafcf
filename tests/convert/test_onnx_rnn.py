"""ONNX LSTM (and onnxruntime's DynamicQuantizeLSTM) -> v0 Lstm and GRU -> unrolled v0 ops, compared
with ONNX Runtime on the same model.
Tolerance: 1e-4 of the output's largest magnitude. r1.1's fp32 tanh is a Padé form that drifts from
tanh by up to 1.0e-4 as |x| nears 5 (1.5e-5 at 4), so the weights are scaled to keep gates below ~4."""
from __future__ import annotations

import platform

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402
from onnxcheck import IR_VERSION, run_msv0, run_ort  # noqa: E402

R = np.random.default_rng(3)


def f32(*shape, scale=0.3):
    return (R.standard_normal(shape) * scale).astype(np.float32)


def rnn_model(op, seq, batch, inp, hid, direction="forward", layout=0, bias=True, states=False, const_states=True,
              outputs=("y", "yh", "yc"), **attrs):
    dirs = 2 if direction == "bidirectional" else 1
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    x_shape = [batch, seq, inp] if layout else [seq, batch, inp]
    s_shape = [batch, dirs, hid] if layout else [dirs, batch, hid]
    inits = [nh.from_array(f32(dirs, gates * hid, inp), "W"), nh.from_array(f32(dirs, gates * hid, hid), "R")]
    names = ["x", "W", "R", "B" if bias else ""]
    if bias:
        inits.append(nh.from_array(f32(dirs, 2 * gates * hid), "B"))
    inputs = [h.make_tensor_value_info("x", T.FLOAT, x_shape)]
    feeds = {"x": f32(*x_shape, scale=1.0)}
    if states:
        names += ["", "h0"] + (["c0"] if op == "LSTM" else [])
        for s in names[5:]:
            if const_states:
                inits.append(nh.from_array(f32(*s_shape), s))
            else:
                inputs.append(h.make_tensor_value_info(s, T.FLOAT, s_shape))
                feeds[s] = f32(*s_shape)
    outs = list(outputs if op == "LSTM" else outputs[:2])
    node = h.make_node(op, names, outs, hidden_size=hid, direction=direction, layout=layout, **attrs)
    g = h.make_graph([node], "rnn", inputs, [h.make_tensor_value_info(o, T.FLOAT, None) for o in outs if o], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 14)], ir_version=IR_VERSION), feeds


def as_layout0(model):
    """The same network with layout 0 and Transposes around it: ONNX Runtime runs layout 0 only."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    node = m.graph.node[0]
    for a in node.attribute:
        if a.name == "layout":
            a.i = 0
    pre = []
    for k in [0, 5, 6]:
        if k < len(node.input) and node.input[k]:
            pre.append(h.make_node("Transpose", [node.input[k]], [node.input[k] + "_t"], perm=[1, 0, 2]))
            node.input[k] += "_t"
    post = []
    for k, o in enumerate(node.output):
        if o:
            post.append(h.make_node("Transpose", [o + "_t"], [o], perm=[2, 0, 1, 3] if k == 0 else [1, 0, 2]))
            node.output[k] = o + "_t"
    nodes = pre + [node] + post
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def check_close(model, feeds, want=None):
    data = model.SerializeToString()
    layout1 = any(a.name == "layout" and a.i for a in model.graph.node[0].attribute)
    if want is None:
        want = run_ort((as_layout0(model) if layout1 else model).SerializeToString(), feeds)
    got = run_msv0(data, feeds)
    assert set(got) == set(want)
    for k, w in want.items():
        assert got[k].shape == w.shape, k
        err = np.abs(got[k].astype(np.float64) - w).max()
        assert err <= 1e-4 * np.abs(w).max(), (k, err)


LSTM_CASES = {
    "forward": dict(seq=5, batch=3, inp=7, hid=4),
    "reverse_states": dict(seq=4, batch=2, inp=3, hid=9, direction="reverse", states=True),
    "bidi_runtime_states": dict(seq=6, batch=2, inp=5, hid=3, direction="bidirectional", states=True,
                                const_states=False),
    "bidi_no_bias": dict(seq=1, batch=1, inp=1, hid=1, direction="bidirectional", bias=False),
    "layout1_bidi_states": dict(seq=3, batch=4, inp=6, hid=5, direction="bidirectional", layout=1, states=True,
                                const_states=False),
    "layout1_reverse_only_h": dict(seq=7, batch=1, inp=2, hid=8, direction="reverse", layout=1,
                                   outputs=("", "yh", "")),
}


@pytest.mark.parametrize("case", LSTM_CASES)
def test_lstm(case):  # no isa fixture: Lstm runs in NumPy, and around it only Transpose/Reverse copies
    check_close(*rnn_model("LSTM", **LSTM_CASES[case]))


GRU_CASES = {
    "forward": dict(seq=5, batch=3, inp=7, hid=4),
    "reverse_states_linear_before_reset": dict(seq=4, batch=2, inp=3, hid=9, direction="reverse", states=True,
                                               linear_before_reset=1),
    "bidi_runtime_states": dict(seq=6, batch=2, inp=5, hid=3, direction="bidirectional", states=True,
                                const_states=False),
    "bidi_one_step_no_bias": dict(seq=1, batch=1, inp=1, hid=1, direction="bidirectional", bias=False),
    "layout1_bidi_linear_before_reset": dict(seq=3, batch=4, inp=6, hid=5, direction="bidirectional", layout=1,
                                             states=True, const_states=False, linear_before_reset=1),
}


@pytest.mark.parametrize("case", GRU_CASES)
def test_gru_unrolled(case, isa):
    check_close(*rnn_model("GRU", **GRU_CASES[case]))


def test_gru_refusals_named():
    model, _ = rnn_model("GRU", 129, 1, 2, 3, activations=["Sigmoid", "Relu"])
    model.graph.node[0].name = "dec_gru"
    with pytest.raises(msv0.UnsupportedOpError) as err:
        convert(model.SerializeToString())
    assert "dec_gru" in str(err.value) and "129 time steps" in str(err.value) and "Relu" in str(err.value)


RNN_CASES = {
    "forward": dict(seq=5, batch=3, inp=7, hid=4),
    "reverse_const_h0": dict(seq=4, batch=2, inp=3, hid=9, direction="reverse", states=True),
    "bidi_relu_sigmoid": dict(seq=6, batch=2, inp=5, hid=3, direction="bidirectional", states=True,
                              const_states=False, activations=["Relu", "Sigmoid"]),
    "bidi_one_step_no_bias": dict(seq=1, batch=1, inp=1, hid=1, direction="bidirectional", bias=False),
    "layout1_bidi": dict(seq=3, batch=4, inp=6, hid=5, direction="bidirectional", layout=1, states=True,
                         const_states=False),
    "layout1_only_h": dict(seq=7, batch=1, inp=2, hid=8, direction="reverse", layout=1, outputs=("", "yh"),
                           activations=["Relu"]),
}


@pytest.mark.parametrize("case", RNN_CASES)
def test_rnn_unrolled(case, isa):
    check_close(*rnn_model("RNN", **RNN_CASES[case]))


def test_rnn_full_sequence_lens_is_ignored():
    model, feeds = rnn_model("RNN", 4, 3, 2, 3, activations=["Sigmoid"])
    model.graph.initializer.append(nh.from_array(np.full(3, 4, np.int32), "lens"))
    model.graph.node[0].input.extend(["lens"])
    check_close(model, feeds)


def test_rnn_refusals_named():
    model, _ = rnn_model("RNN", 4, 2, 2, 3, clip=1.0, activations=["LeakyRelu"])
    model.graph.node[0].name = "enc_rnn"
    model.graph.initializer.append(nh.from_array(np.array([4, 2], np.int32), "lens"))
    model.graph.node[0].input.extend(["lens"])
    with pytest.raises(msv0.UnsupportedOpError) as err:
        convert(model.SerializeToString())
    assert all(w in str(err.value) for w in ("enc_rnn", "LeakyRelu", "clip", "sequence_lens"))
    model, _ = rnn_model("RNN", 4, 2, 2, 3)
    w = model.graph.initializer[0]
    model.graph.input.append(h.make_tensor_value_info("W", T.FLOAT, list(w.dims)))
    model.graph.initializer.remove(w)
    with pytest.raises(msv0.UnsupportedOpError, match="W .* must be a constant"):
        convert(model.SerializeToString())


def test_lstm_full_sequence_lens_is_ignored():
    model, feeds = rnn_model("LSTM", 4, 3, 2, 3)
    lens = nh.from_array(np.full(3, 4, np.int32), "lens")
    model.graph.initializer.append(lens)
    model.graph.node[0].input.extend(["lens"])
    check_close(model, feeds)


def test_lstm_unsupported_variants_named():
    model, _ = rnn_model("LSTM", 4, 3, 2, 3, clip=2.0, activations=["Sigmoid", "Relu", "Tanh"])
    model.graph.node[0].name = "enc_lstm"
    p = nh.from_array(f32(1, 9), "P")
    model.graph.initializer.append(p)
    model.graph.node[0].input.extend(["", "", "", "P"])
    with pytest.raises(msv0.UnsupportedOpError) as err:
        convert(model.SerializeToString())
    msg = str(err.value)
    assert "enc_lstm" in msg and "clip" in msg and "Relu" in msg and "peepholes" in msg


def test_lstm_partial_sequence_lens_refused():
    model, _ = rnn_model("LSTM", 4, 2, 2, 3)
    lens = nh.from_array(np.array([4, 2], np.int32), "lens")
    model.graph.initializer.append(lens)
    model.graph.node[0].input.extend(["lens"])
    with pytest.raises(msv0.UnsupportedOpError, match="sequence_lens"):
        convert(model.SerializeToString())


@pytest.mark.parametrize("per_channel", [False, True])
def test_dynamic_quantize_lstm(tmp_path, per_channel):
    """quantize_dynamic's com.microsoft.DynamicQuantizeLSTM runs as Lstm on dequantized weights: equal
    (1e-4) to ONNX Runtime's float LSTM on those weights; ONNX Runtime's own kernel also quantizes x and
    h at every step, which puts it ~1e-2 of the output's max away (README, converter)."""
    quant = pytest.importorskip("onnxruntime.quantization")
    model, feeds = rnn_model("LSTM", seq=6, batch=2, inp=5, hid=7, direction="bidirectional", states=True)
    onnx.save(model, tmp_path / "f.onnx")
    quant.quantize_dynamic(tmp_path / "f.onnx", tmp_path / "q.onnx", per_channel=per_channel)
    q = onnx.load(tmp_path / "q.onnx")
    node = q.graph.node[0]
    assert node.op_type == "DynamicQuantizeLSTM"
    init = {t.name: nh.to_array(t) for t in q.graph.initializer}
    for name, k, k_scale in (("W", 1, 8), ("R", 2, 10)):  # the float model gets the weights msv0 should use
        wq, scale, zp = (init[node.input[i]].astype(np.float64) for i in (k, k_scale, k_scale + 1))
        w = (wq - zp.reshape(len(wq), 1, -1)) * scale.reshape(len(wq), 1, -1)
        model.graph.initializer.remove(next(t for t in model.graph.initializer if t.name == name))
        model.graph.initializer.append(nh.from_array(w.transpose(0, 2, 1).astype(np.float32), name))
    check_close(q, feeds, want=run_ort(model.SerializeToString(), feeds))
    if platform.machine() == "x86_64" and "avx512vnni" not in msv0.available_isas():
        return  # ONNX Runtime's u8s8 kernels saturate int16 pair sums here (vpmaddubsw)
    want, got = run_ort(q.SerializeToString(), feeds), run_msv0(q.SerializeToString(), feeds)
    for k, w in want.items():
        assert np.abs(got[k] - w).max() <= 3e-2 * np.abs(w).max(), k


def test_dynamic_quantize_lstm_output_feeds_other_nodes(tmp_path):
    """onnx's shape inference knows no com.microsoft op: the converter gives DynamicQuantizeLSTM's
    outputs an LSTM's shapes, so that the nodes after it convert (ddddocr's OCR model transposes and
    reshapes Y)."""
    quant = pytest.importorskip("onnxruntime.quantization")
    model, feeds = rnn_model("LSTM", seq=6, batch=2, inp=5, hid=7, direction="bidirectional", outputs=("y", "", ""))
    onnx.save(model, tmp_path / "f.onnx")
    quant.quantize_dynamic(tmp_path / "f.onnx", tmp_path / "q.onnx")
    q = onnx.load(tmp_path / "q.onnx")
    assert q.graph.node[0].op_type == "DynamicQuantizeLSTM"
    q.graph.initializer.append(nh.from_array(np.array([0, 0, -1], np.int64), "flat"))
    q.graph.node.extend([h.make_node("Transpose", ["y"], ["t"], perm=[0, 2, 1, 3]), h.make_node("Reshape", ["t", "flat"], ["r"])])
    del q.graph.output[:]
    q.graph.output.append(h.make_tensor_value_info("r", T.FLOAT, None))
    got = run_msv0(q.SerializeToString(), feeds)["r"]
    assert got.shape == (6, 2, 14)
    if platform.machine() == "x86_64" and "avx512vnni" not in msv0.available_isas():
        return  # ONNX Runtime's u8s8 kernels saturate int16 pair sums here (vpmaddubsw)
    want = run_ort(q.SerializeToString(), feeds)["r"]
    assert np.abs(got - want).max() <= 3e-2 * np.abs(want).max()


def test_rnn_input_of_another_rank_is_reported():
    """silero-vad's 8 kHz branch, given the 16 kHz input size, reaches its LSTM with a 5-D X."""
    model, _ = rnn_model("LSTM", seq=6, batch=2, inp=5, hid=7)
    model.graph.input[0].type.tensor_type.shape.dim.add().dim_value = 1
    with pytest.raises(msv0.UnsupportedOpError, match=r"input 0 has shape \[6, 2, 5, 1\], not rank 3"):
        convert(model.SerializeToString())
