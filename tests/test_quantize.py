"""msv0.quantize: the PostTraining file it writes, its calibration input, the CLI, and the int8
models' accuracy against fp32."""
import numpy as np
import pytest

import msv0
from msv0 import cli, zoo
from msv0.fb.QuantType import QuantType
from msv0.quantize import _kl_bin, _percentile_bin, activation_param, calibrate, layer_snr, quantize, snr_db


def calib(shape, k=4, seed=1):
    return np.random.default_rng(seed).standard_normal((k,) + tuple(shape)).astype(np.float32)


@pytest.fixture(scope="module")
def tiny():
    net = zoo.mobilenet_tiny_net(resolution=32)
    fp32 = net.to_ms()
    return net, fp32, quantize(fp32, {"input": calib(net.input_shape)})


def test_activation_param_covers_range_and_zero():
    for lo, hi in [(-1.0, 3.0), (0.5, 2.0), (-4.0, -1.0), (0.0, 0.0)]:
        scale, zp = activation_param(lo, hi)
        assert -128 <= zp <= 127 and scale > 0
        q = lambda v: np.round(v / scale) + zp  # noqa: E731
        assert q(min(lo, 0)) >= -128.5 and q(max(hi, 0)) <= 127.5 and q(0) == zp


def test_quantized_file_layout(tiny):
    net, fp32, int8 = tiny
    m, f = msv0.load(int8), msv0.load(fp32)
    assert [(t.name, t.shape, t.dtype) for t in m.inputs] == [(t.name, t.shape, t.dtype) for t in f.inputs]
    assert [(t.name, t.shape, t.dtype) for t in m.outputs] == [(t.name, t.shape, t.dtype) for t in f.outputs]
    ops = [m.nodes[i].op for i in m.main_nodes]
    assert ops[0] == "QuantDTypeCast" and ops[-1] == "QuantDTypeCast"
    assert all(n.quant_type == QuantType.PostTraining for n in m.nodes if n.op in msv0.supported_ops(int8=True))
    for n in m.nodes:
        if n.op == "Conv2D":
            w = m.tensors[n.inputs[1]]
            assert w.dtype == np.int8 and len(w.quant) == w.shape[0] and all(p.zeroPoint == 0 for p in w.quant)
            assert m.tensors[n.inputs[2]].dtype == np.int32
            assert m.tensors[n.inputs[0]].dtype == np.int8 and len(m.tensors[n.outputs[0]].quant) == 1
    # Weights are stored once, as int8: a quarter of the constant bytes (biases stay 4 bytes).
    const_bytes = lambda model: sum(t.raw.size for t in model.tensors if t.is_const)  # noqa: E731
    assert const_bytes(m) < 0.3 * const_bytes(f)


def test_quantized_model_tracks_fp32(tiny):
    net, fp32, int8 = tiny
    x = calib(net.input_shape, k=3, seed=2)
    s32, s8 = msv0.Session(fp32), msv0.Session(int8)
    ref = np.concatenate([s32.run([v])["logits"] for v in x])
    got = np.concatenate([s8.run([v])["logits"] for v in x])
    assert snr_db(ref, got) > 25


def test_calibration_accepts_samples_without_batch_dim_and_iterables(tiny):
    net, fp32, int8 = tiny
    x = calib(net.input_shape)
    assert quantize(fp32, {"input": x[:, 0]}) == int8
    assert quantize(fp32, [{"input": v} for v in x]) == int8


@pytest.mark.parametrize("data,match", [({"other": np.zeros((1, 1, 32, 32, 3), np.float32)}, "no array for input"),
                                        ({"input": np.zeros((2, 5), np.float32)}, "expected \\[K"),
                                        ({"input": np.zeros((0, 1, 32, 32, 3), np.float32)}, "no samples")])
def test_calibration_errors(tiny, data, match):
    with pytest.raises(msv0.InputError, match=match):
        quantize(tiny[1], data)


def test_cli_quantize(tiny, tmp_path, capsys):
    net, fp32, _ = tiny
    (tmp_path / "f.ms").write_bytes(fp32)
    np.savez(tmp_path / "c.npz", input=calib(net.input_shape))
    assert cli.main(["quantize", str(tmp_path / "f.ms"), "--calib", str(tmp_path / "c.npz"), "-o",
                     str(tmp_path / "q.ms")]) == 0
    out = capsys.readouterr().out
    assert "SNR" in out and "logits" in out and "hurt most" in out
    assert msv0.Session(str(tmp_path / "q.ms")).run([calib(net.input_shape, 1)[0]])["logits"].shape == (1, 10)


def test_nodes_r11_cannot_run_in_int8_stay_float():
    # A global mean pool over 16 x 16 = 256 cells: r1.1's int16 window sum would overflow, so
    # the Pooling runs in float between casts while the convolution around it is int8.
    net = zoo.Net("wide_pool", (1, 16, 16, 3))
    net.fc(net.gap(net.conv(net.input_name, 8, 3, act=1)), 4)
    fp32 = net.to_ms()
    x = calib(net.input_shape, k=3)
    int8 = quantize(fp32, {"input": x})
    m = msv0.load(int8)
    dtypes = {m.nodes[i].op: m.tensors[m.nodes[i].inputs[0]].dtype for i in m.main_nodes}
    assert dtypes["Conv2D"] == np.int8 and dtypes["Pooling"] == np.float32 and dtypes["FullConnection"] == np.int8
    ref, got = msv0.Session(fp32).run([x[0]])["logits"], msv0.Session(int8).run([x[0]])["logits"]
    assert snr_db(ref, got) > 25


def test_percentile_bin_matches_numpy():
    a = np.abs(np.random.default_rng(3).standard_normal(100_000))
    hist = np.histogram(a, bins=2048, range=(0, a.max()))[0]
    width = a.max() / 2048
    for p in (99.0, 99.9, 99.99):
        assert abs(_percentile_bin(hist, p) * width - np.percentile(a, p)) <= width


def test_kl_threshold_cuts_outliers_keeps_the_bulk():
    r = np.random.default_rng(4)
    a = np.abs(np.concatenate([r.standard_normal(200_000), [60.0, -80.0]]))  # two far outliers
    hist = np.histogram(a, bins=2048, range=(0, a.max()))[0]
    t = _kl_bin(hist, 128) * a.max() / 2048
    assert np.percentile(a, 99.9) < t < 20


@pytest.mark.parametrize("method", ["kl", "percentile"])
def test_clipping_methods_narrow_the_ranges(tiny, method):
    net, fp32, _ = tiny
    x = calib(net.input_shape)
    x[0, 0, 0, 0, 0] = 40.0  # one outlier pixel
    m = msv0.load(fp32)
    wide, narrow = calibrate(m, {"input": x}), calibrate(m, {"input": x}, method=method, percentile=99.9)
    assert wide.keys() == narrow.keys()
    assert all(w[0] <= n[0] <= n[1] <= w[1] for w, n in zip(wide.values(), narrow.values()))
    k = m.graph_inputs[0]
    assert narrow[k][1] < 10  # the input's outlier is clipped away
    with pytest.raises(msv0.InputError, match="calibration method"):
        calibrate(m, {"input": x}, method="mse")


def test_layer_snr_worst_first_and_last_layer_is_the_output(tiny):
    net, fp32, int8 = tiny
    feeds = [[v] for v in calib(net.input_shape, k=2, seed=5)]
    rows = layer_snr(msv0.load(fp32), int8, feeds)
    m = msv0.load(int8)
    assert len(rows) == sum(1 for i in m.main_nodes if m.nodes[i].op != "QuantDTypeCast")
    assert [r[2] for r in rows] == sorted(r[2] for r in rows)
    # the logits layer's SNR is the SNR of the file's float output, cast from that int8 tensor
    f = msv0.load(fp32)
    last = f.nodes[f.main_nodes[-1]]
    ref = np.concatenate([msv0.Session(fp32).run(v)["logits"].ravel() for v in feeds])
    got = np.concatenate([msv0.Session(int8).run(v)["logits"].ravel() for v in feeds])
    assert dict((n, v) for n, _, v in rows)[last.name] == pytest.approx(snr_db(ref, got), abs=1e-3)


def test_calibration_keeps_an_integer_input():
    """Token ids stay int32 through calibration (they were cast to float32, which the Session
    refused)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from msv0.convert import convert
    r = np.random.default_rng(4)
    inits = [numpy_helper.from_array(r.standard_normal((50, 16)).astype(np.float32), "table"),
             numpy_helper.from_array(r.standard_normal((16, 8)).astype(np.float32), "w")]
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"]), helper.make_node("MatMul", ["e", "w"], ["y"])]
    g = helper.make_graph(nodes, "ids", [helper.make_tensor_value_info("ids", TensorProto.INT32, [1, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    fp32 = convert(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString())
    ids = r.integers(0, 50, (5, 1, 6)).astype(np.int32)
    for data in ({"ids": ids}, [{"ids": x} for x in ids]):
        int8 = quantize(fp32, data)
        assert snr_db(msv0.Session(fp32).run([ids[0]])["y"], msv0.Session(int8).run([ids[0]])["y"]) > 25
