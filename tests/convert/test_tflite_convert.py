"""TFLite -> v0: small .tflite graphs written with tests/convert/tflitewriter.py, converted, run with
msv0.Session and compared with the LiteRT interpreter (ai-edge-litert) when it is installed."""
from __future__ import annotations

import numpy as np
import pytest

# tflite (the reader the converter uses) and ai-edge-litert (the reference) are optional test
# extras that not every platform has wheels for: without them these tests skip.
pytest.importorskip("tflite")
litert = pytest.importorskip("ai_edge_litert.interpreter")

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402
from msv0.fb.ActivationType import ActivationType  # noqa: E402
from tflitewriter import TFLiteWriter  # noqa: E402

SAME, VALID = 0, 1
NONE, RELU, RELU_N1_TO_1, RELU6 = 0, 1, 2, 3
R = np.random.default_rng(0)


def f32(*shape, lo=-1.0, hi=1.0):
    return R.uniform(lo, hi, shape).astype(np.float32)


def run_litert(data, feeds):
    # the builtin kernels, not the XNNPACK delegate (which e.g. ignores a CONCATENATION activation)
    it = litert.Interpreter(model_content=data,
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], feeds[d["name"]])
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}


def check(w: TFLiteWriter, feeds, rtol=1e-5, atol=1e-5):
    data = w.finish()
    want = run_litert(data, feeds)
    model = msv0.load(convert(data))
    got = msv0.Session(model).run(feeds)
    assert set(got) == set(want)
    for k in want:
        assert got[k].shape == want[k].shape, k
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol, err_msg=k)
    return model


def _conv(pad, stride, act, dil=1):
    w = TFLiteWriter()
    x = w.input("x", [1, 9, 8, 3])
    oh = -(-9 // stride) if pad == SAME else (9 - 2 * dil - 1) // stride + 1
    ow = -(-8 // stride) if pad == SAME else (8 - 2 * dil - 1) // stride + 1
    y = w.op("CONV_2D", [x, w.const(f32(5, 3, 3, 3)), w.const(f32(5))], [1, oh, ow, 5], "Conv2DOptions",
             padding=pad, stride_h=stride, stride_w=stride, fused_activation_function=act,
             dilation_h_factor=dil, dilation_w_factor=dil)
    w.output(y)
    return w, {"x": f32(1, 9, 8, 3, lo=-3, hi=3)}


@pytest.mark.parametrize("pad,stride,act,dil", [(SAME, 2, RELU6, 1), (VALID, 1, RELU, 1), (SAME, 1, NONE, 2),
                                                (VALID, 2, RELU_N1_TO_1, 1)])
def test_conv2d(pad, stride, act, dil):
    check(*_conv(pad, stride, act, dil))


@pytest.mark.parametrize("shared", [False, True])
def test_separate_relu_runs_in_its_conv(shared):
    """A RELU/RELU6 operator that alone reads a CONV_2D's, DEPTHWISE_CONV_2D's or ADD's result
    becomes that op's activationType; read by something else too, it stays an Activation."""
    w = TFLiteWriter()
    x = w.input("x", [1, 6, 5, 4])
    c = w.op("CONV_2D", [x, w.const(f32(4, 3, 3, 4)), w.const(f32(4))], [1, 6, 5, 4], "Conv2DOptions",
             padding=SAME, stride_h=1, stride_w=1, fused_activation_function=NONE, dilation_h_factor=1,
             dilation_w_factor=1)
    r = w.op("RELU6", [c], [1, 6, 5, 4])
    d = w.op("DEPTHWISE_CONV_2D", [r, w.const(f32(1, 3, 3, 4)), w.const(f32(4))], [1, 6, 5, 4],
             "DepthwiseConv2DOptions", padding=SAME, stride_h=1, stride_w=1, depth_multiplier=1,
             fused_activation_function=NONE, dilation_h_factor=1, dilation_w_factor=1)
    a = w.op("ADD", [w.op("RELU", [d], [1, 6, 5, 4]), x], [1, 6, 5, 4], "AddOptions", fused_activation_function=NONE)
    y = w.op("RELU", [a], [1, 6, 5, 4])
    w.output(y)
    if shared:
        w.output(w.op("MUL", [c, x], [1, 6, 5, 4], "MulOptions", fused_activation_function=NONE))
    m = check(w, {"x": f32(1, 6, 5, 4, lo=-3, hi=3)})
    ops = [(n.op, int(getattr(n.attrs, "activationType", 0))) for n in m.nodes]
    conv = [("Conv2D", 0), ("Activation", 0)] if shared else [("Conv2D", ActivationType.RELU6)]
    assert ops[:len(conv)] == conv
    assert ops[len(conv):len(conv) + 2] == [("DepthwiseConv2D", ActivationType.RELU), ("Add", ActivationType.RELU)]


@pytest.mark.parametrize("case", ["depthwise", "conv_same", "two_readers", "nonzero"])
def test_zero_pad_before_a_conv_is_its_padding(case):
    """A zero PAD of H and W that one conv alone reads becomes that conv's padding."""
    w = TFLiteWriter()
    x = w.input("x", [1, 7, 6, 4])
    pads = w.const(np.array([[0, 0], [1, 2], [2, 1], [0, 0]], np.int32))
    if case == "nonzero":
        p = w.op("PADV2", [x, pads, w.const(np.array([0.5], np.float32))], [1, 10, 9, 4])
    else:
        p = w.op("PAD", [x, pads], [1, 10, 9, 4])
    geometry = dict(stride_h=2, stride_w=2, fused_activation_function=NONE, dilation_h_factor=1, dilation_w_factor=1)
    if case == "conv_same":
        y = w.op("CONV_2D", [p, w.const(f32(3, 3, 3, 4)), w.const(f32(3))], [1, 5, 5, 3], "Conv2DOptions",
                 padding=SAME, **geometry)
    else:
        y = w.op("DEPTHWISE_CONV_2D", [p, w.const(f32(1, 3, 3, 4)), w.const(f32(4))], [1, 4, 4, 4],
                 "DepthwiseConv2DOptions", padding=VALID, depth_multiplier=1, **geometry)
    w.output(y)
    if case == "two_readers":
        w.output(w.op("RELU", [p], [1, 10, 9, 4]))
    m = check(w, {"x": f32(1, 7, 6, 4, lo=-3, hi=3)})
    assert ("Pad" in [n.op for n in m.nodes]) == (case in ("two_readers", "nonzero"))


@pytest.mark.parametrize("mult", [1, 2])
def test_depthwise(mult):
    w = TFLiteWriter()
    x = w.input("x", [1, 7, 6, 4])
    y = w.op("DEPTHWISE_CONV_2D", [x, w.const(f32(1, 3, 3, 4 * mult)), w.const(f32(4 * mult))], [1, 4, 3, 4 * mult],
             "DepthwiseConv2DOptions", padding=SAME, stride_h=2, stride_w=2, depth_multiplier=mult,
             fused_activation_function=RELU6, dilation_h_factor=1, dilation_w_factor=1)
    w.output(y)
    m = check(w, {"x": f32(1, 7, 6, 4, lo=-3, hi=3)})
    assert [n.op for n in m.nodes] == ["DepthwiseConv2D" if mult == 1 else "Conv2D"]


@pytest.mark.parametrize("pad,out_hw", [(SAME, (16, 14)), (VALID, (17, 15))])
def test_transpose_conv(pad, out_hw):
    w = TFLiteWriter()
    x = w.input("x", [1, 8, 7, 3])
    shape = [1, *out_hw, 4]
    y = w.op("TRANSPOSE_CONV", [w.const(np.array(shape, np.int32)), w.const(f32(4, 3, 3, 3)), x], shape,
             "TransposeConvOptions", padding=pad, stride_h=2, stride_w=2)
    w.output(y)
    check(w, {"x": f32(1, 8, 7, 3)})


def test_fully_connected_and_softmax():
    w = TFLiteWriter()
    x = w.input("x", [2, 2, 2, 3])
    h = w.op("FULLY_CONNECTED", [x, w.const(f32(6, 12)), w.const(f32(6))], [2, 6], "FullyConnectedOptions",
             fused_activation_function=RELU)
    y = w.op("SOFTMAX", [h], [2, 6], "SoftmaxOptions", beta=0.5)
    w.output(y)
    check(w, {"x": f32(2, 2, 2, 3)})


def test_fully_connected_computed_weight():
    # A weight the graph computes (TF-exported If branches do this): MatMul with B transposed.
    w = TFLiteWriter()
    x, wt = w.input("x", [2, 12]), w.input("w", [6, 12])
    h = w.op("FULLY_CONNECTED", [x, wt, w.const(f32(6))], [2, 6], "FullyConnectedOptions",
             fused_activation_function=RELU)
    w.output(h)
    check(w, {"x": f32(2, 12), "w": f32(6, 12)})


@pytest.mark.parametrize("code,pad", [("AVERAGE_POOL_2D", SAME), ("MAX_POOL_2D", SAME), ("AVERAGE_POOL_2D", VALID)])
def test_pool(code, pad):
    w = TFLiteWriter()
    x = w.input("x", [1, 9, 8, 5])
    oh, ow = (5, 4) if pad == SAME else (4, 3)
    y = w.op(code, [x], [1, oh, ow, 5], "Pool2DOptions", padding=pad, stride_h=2, stride_w=2, filter_height=3,
             filter_width=3, fused_activation_function=NONE)
    w.output(y)
    check(w, {"x": f32(1, 9, 8, 5)})


def test_binary_and_activations():
    w = TFLiteWriter()
    x = w.input("x", [1, 4, 5, 6])
    a = w.op("ADD", [x, w.const(f32(6))], [1, 4, 5, 6], "AddOptions", fused_activation_function=RELU)
    s = w.op("SUB", [x, a], [1, 4, 5, 6], "SubOptions", fused_activation_function=NONE)
    m = w.op("MUL", [s, w.const(f32(1, 1, 5, 1))], [1, 4, 5, 6], "MulOptions", fused_activation_function=RELU6)
    d = w.op("DIV", [m, w.const(f32(6, lo=1, hi=2))], [1, 4, 5, 6], "DivOptions", fused_activation_function=NONE)
    h = w.op("HARD_SWISH", [d], [1, 4, 5, 6])
    l = w.op("LEAKY_RELU", [w.op("SUB", [h, x], [1, 4, 5, 6], "SubOptions")], [1, 4, 5, 6], "LeakyReluOptions",
             alpha=0.1)
    p = w.op("PRELU", [l, w.const(f32(1, 1, 6))], [1, 4, 5, 6])
    g = w.op("LOGISTIC", [p], [1, 4, 5, 6])
    t = w.op("TANH", [w.op("RELU6", [w.op("RELU", [x], [1, 4, 5, 6])], [1, 4, 5, 6])], [1, 4, 5, 6])
    w.output(w.op("ADD", [g, t], [1, 4, 5, 6], "AddOptions"))
    # r1.1 TANH is a Padé form (format-v0.md §5): ~1e-5 from libm tanh on [0, 3]
    check(w, {"x": f32(1, 4, 5, 6, lo=-3, hi=3)}, atol=5e-5)


def test_shape_ops():
    w = TFLiteWriter()
    x = w.input("x", [1, 4, 6, 3])
    r = w.op("RESHAPE", [x, w.const(np.array([1, 6, 4, 3], np.int32))], [1, 6, 4, 3], "ReshapeOptions",
             new_shape=[1, 6, 4, 3])
    c = w.op("CONCATENATION", [r, r], [1, 6, 4, 6], "ConcatenationOptions", axis=-1, fused_activation_function=NONE)
    p = w.op("PAD", [w.op("RELU", [c], [1, 6, 4, 6]), w.const(np.array([[0, 0], [1, 2], [0, 1], [0, 0]], np.int32))], [1, 9, 5, 6])
    s = w.op("STRIDED_SLICE", [p, w.const(np.array([0, -8, 4, 1], np.int32)), w.const(np.array([1, 9, 0, 5], np.int32)),
                               w.const(np.array([1, 2, -1, 2], np.int32))], [1, 4, 4, 2], "StridedSliceOptions",
             begin_mask=0, end_mask=2, shrink_axis_mask=0)
    m = w.op("MEAN", [s, w.const(np.array([1, 2], np.int32))], [1, 2], "ReducerOptions", keep_dims=False)
    w.output(m)
    w.output(s)
    check(w, {"x": f32(1, 4, 6, 3)})


@pytest.mark.parametrize("code,align", [("RESIZE_BILINEAR", False), ("RESIZE_BILINEAR", True),
                                        ("RESIZE_NEAREST_NEIGHBOR", False), ("RESIZE_NEAREST_NEIGHBOR", True)])
def test_resize(code, align):
    w = TFLiteWriter()
    x = w.input("x", [1, 5, 4, 3])
    opts = "ResizeBilinearOptions" if code == "RESIZE_BILINEAR" else "ResizeNearestNeighborOptions"
    y = w.op(code, [x, w.const(np.array([9, 7], np.int32))], [1, 9, 7, 3], opts, align_corners=align,
             half_pixel_centers=False)
    w.output(y)
    check(w, {"x": f32(1, 5, 4, 3)})


def test_fp16_weights_are_folded():
    w = TFLiteWriter()
    x = w.input("x", [1, 6, 6, 3])
    wt = w.op("DEQUANTIZE", [w.const(f32(4, 3, 3, 3).astype(np.float16))], [4, 3, 3, 3])
    b = w.op("DEQUANTIZE", [w.const(f32(4).astype(np.float16))], [4])
    y = w.op("CONV_2D", [x, wt, b], [1, 6, 6, 4], "Conv2DOptions", padding=SAME, stride_h=1, stride_w=1,
             fused_activation_function=NONE, dilation_h_factor=1, dilation_w_factor=1)
    w.output(y)
    m = check(w, {"x": f32(1, 6, 6, 3)})
    assert [n.op for n in m.nodes] == ["Conv2D"]


def test_unsupported_operators_are_all_reported():
    w = TFLiteWriter()
    x = w.input("x", [1, 4, 4, 2])
    a = w.op("RESIZE_BILINEAR", [x, w.const(np.array([8, 8], np.int32))], [1, 8, 8, 2], "ResizeBilinearOptions",
             align_corners=True, half_pixel_centers=True)
    y = w.op("RFFT2D", [a, a], [1, 8, 8, 2])
    w.output(y)
    with pytest.raises(msv0.UnsupportedOpError) as err:
        convert(w.finish())
    assert {op for _, op, _ in err.value.nodes} == {"RESIZE_BILINEAR", "RFFT2D"}


def test_not_tflite_is_a_model_error(tmp_path):
    p = tmp_path / "bad.tflite"
    p.write_bytes(b"\0" * 16)
    with pytest.raises(msv0.ModelError):
        convert(p)


def test_cli_bench_against_litert(tmp_path, capsys):
    from msv0 import cli

    w, _ = _conv(SAME, 2, RELU6)
    (tmp_path / "c.tflite").write_bytes(w.finish())
    convert(tmp_path / "c.tflite", tmp_path / "c.ms")
    assert cli.main(["bench", str(tmp_path / "c.ms"), "--threads", "1", "--warmup", "1", "--runs", "2",
                     "--compare-tflite", str(tmp_path / "c.tflite")]) == 0
    assert "msv0 / litert" in capsys.readouterr().out
    # --batch: LiteRT's input resized to the batch
    assert cli.main(["bench", str(tmp_path / "c.ms"), "--threads", "1", "--warmup", "1", "--runs", "2",
                     "--batch", "2", "--compare-tflite", str(tmp_path / "c.tflite")]) == 0
    assert "samples/s" in capsys.readouterr().out
    # a .tflite whose input differs from the .ms model's is refused by name, not run
    w = TFLiteWriter()
    w.output(w.op("RELU", [w.input("x", [1, 4, 4, 3])], [1, 4, 4, 3]))
    (tmp_path / "other.tflite").write_bytes(w.finish())
    assert cli.main(["bench", str(tmp_path / "c.ms"), "--threads", "1", "--compare-tflite",
                     str(tmp_path / "other.tflite")]) == 2
    assert "TFLite input 'x' has shape [1, 4, 4, 3]" in capsys.readouterr().err
