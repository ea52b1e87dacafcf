"""Dynamically quantized ONNX (DynamicQuantizeLinear, ConvInteger, MatMulInteger, DequantizeLinear on
constants) converted to fp32 v0 ops, compared with ONNX's reference evaluator on the same model: exact lowerings,
so the tolerance is 1e-6 of the output's largest magnitude (Winograd convolution rounds)."""
from __future__ import annotations

import numpy as np
import pytest

import msv0

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

from onnxcheck import IR_VERSION, run_msv0, run_ort, run_reference  # noqa: E402

R = np.random.default_rng(5)
N = h.make_node


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in inputs],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in outputs],
                     [nh.from_array(np.asarray(v), k) for k, v in inits])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=IR_VERSION)


def check_close(m, feeds, tol=1e-6, reference=run_reference):
    data = m.SerializeToString() if hasattr(m, "SerializeToString") else m
    want, got = reference(data, feeds), run_msv0(data, feeds)
    assert set(got) == set(want)
    for k, w in want.items():
        assert got[k].shape == w.shape, k
        err = np.abs(got[k].astype(np.float64) - w).max()
        assert err <= tol * max(np.abs(w).max(), 1e-30), (k, err)


def dql_probe(n):
    """y - y_zero_point of DynamicQuantizeLinear through an identity MatMulInteger, y_scale and y_zero_point."""
    nodes = [N("DynamicQuantizeLinear", ["x"], ["q", "s", "zp"]), N("MatMulInteger", ["q", "eye", "zp"], ["i"]),
             N("Cast", ["i"], ["y"], to=T.FLOAT), N("Cast", ["zp"], ["z"], to=T.FLOAT)]
    return model(nodes, [("x", [2, n])], ["y", "s", "z"], [("eye", np.eye(n, dtype=np.uint8))])


@pytest.mark.parametrize("x", [
    # scale 1, zero point 100: ties at .5 round to even
    np.array([[-100, -0.5, 0.5, 1.5, 2.5], [3.5, 100.5, 101.5, 154.5, 155]], np.float32),
    # zero point 100.5 rounds to 100
    np.array([[-100.5, 0, 1, 2, 3], [4, 5, 6, 7, 154.5]], np.float32),
    np.zeros((2, 5), np.float32),  # range 0: ONNX Runtime's scale is 1
    np.abs(R.standard_normal((2, 5))).astype(np.float32) + 1,  # all positive: zero point 0
    -np.abs(R.standard_normal((2, 5))).astype(np.float32),  # all negative: zero point 255
], ids=["ties", "zp_tie", "zeros", "positive", "negative"])
def test_dynamic_quantize_linear_exact(x, isa):
    # ONNX Runtime's DynamicQuantizeLinear, whose scale for an all-zero input (1) msv0 follows; its
    # u8 x u8 MatMulInteger is exact on every CPU.
    check_close(dql_probe(5), {"x": x}, tol=0, reference=run_ort)


def float_models():
    w_mm, w_conv = R.standard_normal((37, 9)).astype(np.float32), R.standard_normal((5, 3, 3, 3)).astype(np.float32)
    return {
        "matmul": (model([N("MatMul", ["x", "w"], ["m"]), N("Add", ["m", "b"], ["y"])], [("x", [4, 37])], ["y"],
                         [("w", w_mm), ("b", R.standard_normal(9).astype(np.float32))]), [4, 37]),
        "matmul_3d": (model([N("MatMul", ["x", "w"], ["y"])], [("x", [2, 3, 37])], ["y"], [("w", w_mm)]), [2, 3, 37]),
        "conv": (model([N("Conv", ["x", "w", "b"], ["c"], pads=[1, 0, 1, 2], strides=[2, 1]), N("Relu", ["c"], ["y"])],
                       [("x", [1, 3, 9, 7])], ["y"], [("w", w_conv), ("b", R.standard_normal(5).astype(np.float32))]),
                 [1, 3, 9, 7]),
        "conv3x3_winograd": (model([N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [("x", [1, 3, 12, 12])], ["y"],
                                   [("w", w_conv)]), [1, 3, 12, 12]),
    }


@pytest.mark.parametrize("name,weight_type", [("matmul", "QInt8"), ("matmul_3d", "QUInt8"), ("conv", "QUInt8"),
                                              ("conv3x3_winograd", "QInt8")])
def test_quantize_dynamic_models(tmp_path, name, weight_type, isa):
    quant = pytest.importorskip("onnxruntime.quantization")
    src, shape = float_models()[name]
    onnx.save(src, tmp_path / "f.onnx")
    quant.quantize_dynamic(tmp_path / "f.onnx", tmp_path / "q.onnx", weight_type=getattr(quant.QuantType, weight_type),
                           per_channel=name == "conv")
    ops = {n.op_type for n in onnx.load(tmp_path / "q.onnx").graph.node}
    assert "DynamicQuantizeLinear" in ops and ops & {"MatMulInteger", "ConvInteger"}
    check_close((tmp_path / "q.onnx").read_bytes(), {"x": R.standard_normal(shape).astype(np.float32)})


def test_dequantized_embedding_lookup():
    """quantize_dynamic's Gather (text2tashkeel, pyfrspell): a uint8 table, and a DequantizeLinear on
    each reader of the lookup, here one direct and one through a Transpose: msv0 gathers from the
    table dequantized once (v0's Gather takes no uint8 data)."""
    nodes = [N("Gather", ["table", "ids"], ["e_q"]), N("DequantizeLinear", ["e_q", "s", "zp"], ["e"]),
             N("Transpose", ["e_q"], ["t_q"], perm=[1, 0, 2]), N("DequantizeLinear", ["t_q", "s", "zp"], ["t"]),
             N("Relu", ["e"], ["y"]), N("MatMul", ["t", "w"], ["z"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("ids", T.INT64, [2, 5])],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in ("y", "z")],
                     [nh.from_array(R.integers(0, 256, (11, 8)).astype(np.uint8), "table"),
                      nh.from_array(np.float32(0.037), "s"), nh.from_array(np.uint8(131), "zp"),
                      nh.from_array(R.standard_normal((8, 3)).astype(np.float32), "w")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 19)], ir_version=IR_VERSION)
    check_close(m, {"ids": R.integers(0, 11, (2, 5))}, tol=1e-6)


def test_integer_output_read_as_int32():
    """A MatMulInteger result read by something other than a float Cast stays int32."""
    nodes = [N("DynamicQuantizeLinear", ["x"], ["q", "s", "zp"]), N("MatMulInteger", ["q", "w"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [3, 4])],
                     [h.make_tensor_value_info("y", T.INT32, None)],
                     [nh.from_array(R.integers(-128, 127, (4, 6)).astype(np.int8), "w")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=IR_VERSION)
    x = R.standard_normal((3, 4)).astype(np.float32)
    want, got = run_reference(m.SerializeToString(), {"x": x}), run_msv0(m.SerializeToString(), {"x": x})
    assert got["y"].dtype == np.int32
    np.testing.assert_array_equal(got["y"], want["y"])


def test_dequantize_linear_constant_weights():
    """ONNX Runtime runs unoptimised here: its optimiser turns DequantizeLinear+MatMul into a dynamically
    quantized MatMul, which is not what the graph says."""
    ort = pytest.importorskip("onnxruntime")
    wq = R.integers(-128, 127, (6, 4)).astype(np.int8)
    nodes = [N("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=1), N("MatMul", ["x", "w"], ["y"])]
    m = model(nodes, [("x", [3, 6])], ["y"], [("wq", wq), ("ws", np.float32([0.5, 0.25, 0.1, 2])),
                                               ("wz", np.int8([0, 3, -4, 1]))])
    x = R.standard_normal((3, 6)).astype(np.float32)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(run_msv0(m.SerializeToString(), {"x": x})["y"], want, rtol=1e-5, atol=1e-5)


def test_dynamic_quantize_linear_uint8_outputs():
    """y and y_zero_point read by something other than ConvInteger/MatMulInteger are real uint8 tensors."""
    nodes = [N("DynamicQuantizeLinear", ["x"], ["q", "s", "zp"]), N("Cast", ["q"], ["qf"], to=T.FLOAT)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [3, 4])],
                     [h.make_tensor_value_info("q", T.UINT8, None), h.make_tensor_value_info("zp", T.UINT8, None),
                      h.make_tensor_value_info("qf", T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=IR_VERSION).SerializeToString()
    x = R.standard_normal((3, 4)).astype(np.float32)
    want, got = run_ort(m, {"x": x}), run_msv0(m, {"x": x})
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def _steps(data: bytes, feeds, fused=True):
    """(outputs, op names of the planned steps) of msv0 on a converted model, with or without the
    plan-time passes of msv0.dynamic_quant."""
    import msv0.straight_line as straight_line

    passes = straight_line.fuse_integer_ops, straight_line.fuse_dynamic_quantize
    if not fused:
        straight_line.fuse_integer_ops = straight_line.fuse_dynamic_quantize = lambda model, planned, uses, values: planned
    try:
        out, steps = msv0.Session(data).profile(feeds)
    finally:
        straight_line.fuse_integer_ops, straight_line.fuse_dynamic_quantize = passes
    return out, [s.op for s in steps]


@pytest.mark.parametrize("per_channel,weight_type", [(False, "QInt8"), (True, "QInt8"), (False, "QUInt8")])
def test_quantize_dynamic_fc_runs_int8(tmp_path, per_channel, weight_type, isa):
    """quantize_dynamic's MatMul (+ bias) runs as one int8 GEMM step: two projections of one
    quantized input, one with a bias and one without, a 3-D input with odd sizes; uint8 weights
    minus their zero point span up to 255 and go in shifted, with a zero point of their own.
    Equal to ONNX's evaluator and to the float32 steps it replaces (their sums stay exact here),
    bit for bit."""
    quant = pytest.importorskip("onnxruntime.quantization")
    from msv0.convert import convert

    w1, w2 = R.standard_normal((37, 19)).astype(np.float32), R.standard_normal((37, 33)).astype(np.float32)
    src = model([N("MatMul", ["x", "w1"], ["m1"]), N("Add", ["m1", "b"], ["y1"]), N("MatMul", ["x", "w2"], ["y2"])],
                [("x", [2, 5, 37])], ["y1", "y2"], [("w1", w1), ("w2", w2), ("b", R.standard_normal(19).astype(np.float32))])
    onnx.save(src, tmp_path / "f.onnx")
    quant.quantize_dynamic(tmp_path / "f.onnx", tmp_path / "q.onnx", weight_type=getattr(quant.QuantType, weight_type),
                           per_channel=per_channel)
    q = (tmp_path / "q.onnx").read_bytes()
    feeds = {"x": R.standard_normal((2, 5, 37)).astype(np.float32)}
    data = convert(q)
    got, ops = _steps(data, feeds)
    assert ops.count("Sub+FullConnection+Mul+Add") == 1 and ops.count("Sub+FullConnection+Mul") == 1, ops
    unfused, unfused_ops = _steps(data, feeds, fused=False)
    assert "FullConnection" in unfused_ops
    want = run_reference(q, feeds)
    for k in ("y1", "y2"):
        np.testing.assert_array_equal(got[k], want[k])
        np.testing.assert_array_equal(got[k], unfused[k])



@pytest.mark.parametrize("per_channel,weight_type", [(False, "QInt8"), (True, "QUInt8")])
def test_quantize_dynamic_conv_runs_int8(tmp_path, per_channel, weight_type, isa):
    """quantize_dynamic's Conv (+ bias): one int8 convolution step, exact against ONNX's evaluator
    (the float32 steps it replaces may round: Winograd)."""
    quant = pytest.importorskip("onnxruntime.quantization")
    from msv0.convert import convert

    src, shape = float_models()["conv"]
    onnx.save(src, tmp_path / "f.onnx")
    quant.quantize_dynamic(tmp_path / "f.onnx", tmp_path / "q.onnx", weight_type=getattr(quant.QuantType, weight_type),
                           per_channel=per_channel)
    q = (tmp_path / "q.onnx").read_bytes()
    x = R.standard_normal(shape).astype(np.float32)
    got, ops = _steps(convert(q), {"x": x.transpose(0, 2, 3, 1)})
    assert any(op.startswith("Sub+Conv2D+Mul+Add") for op in ops), ops
    np.testing.assert_array_equal(got["y"].transpose(0, 3, 1, 2), run_reference(q, {"x": x})["y"])


def test_dynamic_conv_with_run_time_int32_bias(isa):
    """Older quantize_dynamic graphs (ddddocr's common_old.onnx) add the bias in int32, quantized at
    run time by the input's scale, then Cast and Mul: one int8 convolution step too, also after the
    Reshape that brings a one-channel NCHW input to NHWC."""
    from msv0.convert import convert

    wq = R.integers(-128, 128, (6, 1, 3, 3)).astype(np.int8)
    nodes = [N("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]), N("Mul", ["s", "ws"], ["sw"]),
             N("Div", ["b", "sw"], ["bd"]), N("Round", ["bd"], ["br"]), N("Cast", ["br"], ["bi"], to=T.INT32),
             N("Reshape", ["bi", "bshape"], ["bq"]), N("ConvInteger", ["q", "wq", "z"], ["ci"], pads=[1, 1, 1, 1]),
             N("Add", ["ci", "bq"], ["cb"]), N("Cast", ["cb"], ["cf"], to=T.FLOAT), N("Mul", ["cf", "sw"], ["y"])]
    m = model(nodes, [("x", [1, 1, 7, 9])], ["y"], [("wq", wq), ("ws", np.float32(0.02)),
                                                    ("b", R.standard_normal(6).astype(np.float32)),
                                                    ("bshape", np.int64([1, 6, 1, 1]))]).SerializeToString()
    x = R.standard_normal((1, 1, 7, 9)).astype(np.float32)
    got, ops = _steps(convert(m, keep_nchw_input=True), {"x": x})  # DynamicQuantizeLinear on NCHW
    assert "Sub+Conv2D+Cast+Add+Cast+Mul" in ops, ops  # the Reshape, a view of the codes now, takes no time
    np.testing.assert_array_equal(got["y"].transpose(0, 3, 1, 2), run_reference(m, {"x": x})["y"])


@pytest.mark.parametrize("x", [
    np.array([[-100, -0.5, 0.5, 1.5, 2.5], [3.5, 100.5, 101.5, 154.5, 155]], np.float32),
    np.zeros((2, 5), np.float32),
    np.abs(R.standard_normal((2, 5))).astype(np.float32) + 1,
    -np.abs(R.standard_normal((2, 5))).astype(np.float32),
    R.standard_normal((2, 5)).astype(np.float32) * 1e-30,
], ids=["ties", "zeros", "positive", "negative", "tiny"])
def test_dynamic_quantize_linear_runs_as_one_step(x, isa):
    """The nineteen float32 steps of DynamicQuantizeLinear run as one native step, bit for bit
    theirs (scale, zero point and codes, read here through ONNX outputs)."""
    from msv0.convert import convert

    data = convert(dql_probe(5).SerializeToString())
    got, ops = _steps(data, {"x": x})
    unfused, unfused_ops = _steps(data, {"x": x}, fused=False)
    assert "DynamicQuantizeLinear" in ops and "DynamicQuantizeLinear" not in unfused_ops, ops
    for k in got:
        np.testing.assert_array_equal(got[k], unfused[k])


@pytest.mark.parametrize("n", [1, 15, 16, 17, 40000])
def test_dynamic_quantize_kernel(isa, n):
    """_core.DynamicQuantize against NumPy's float32 transcription of the steps: vector tails, and
    more values than one thread chunk takes (their min and max combined)."""
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 3 + 0.7).astype(np.float32)
    f = np.float32
    lo, hi = min(f(x.min()), f(0)), max(f(x.max()), f(0))
    scale = (hi - lo) / f(255)
    scale = scale + f(scale == 0)
    m = f(12582912.0)
    zp = np.clip(f(0) - lo / scale, f(0), f(255)) + m - m
    codes = np.clip((x / scale + m - m) + zp, f(0), f(255))
    got = [np.empty(1, np.float32), np.empty(1, np.float32), np.empty(n, np.float32)]
    msv0._core.DynamicQuantize([n], [1], [1])([x], got)
    np.testing.assert_array_equal(got[0], [scale])
    np.testing.assert_array_equal(got[1], [zp])
    np.testing.assert_array_equal(got[2], codes)
