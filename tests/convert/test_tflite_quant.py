"""Quantized TFLite -> v0: single ops and MobileNetV2- and ResNet-shaped nets quantized like
TFLiteConverter does (tests/convert/tflitequant.py), converted, run with msv0.Session on every ISA
tier and compared with the LiteRT interpreter's own int8/uint8 kernels.

r1.1's fixed-point arithmetic differs from TFLite's in places (conv multipliers from a float
product of the scales where TFLite uses double, the int8 mean), so each op is held to one
quantization step on at least 99.9 % of its outputs. Through a network those one-step
differences compound (a layer's output moves with the sum over its inputs), so the nets are held
to one step on 98.5 % and four steps everywhere; the rates are printed at the end of the run."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert.interpreter")

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402
from msv0.errors import UnsupportedOpError  # noqa: E402
from tflitequant import interpreter, quantize_graph  # noqa: E402
from tflitewriter import TFLiteWriter  # noqa: E402

SAME, VALID = 0, 1
NONE, RELU, RELU6 = 0, 1, 3
RATES: dict[str, tuple[int, int, int]] = {}  # case -> (outputs, exact, off by more than 1)


def _conv(w, r, x, shape, cout, k, stride, act, dw=False):
    cin = shape[3]
    oh, ow = -(-shape[1] // stride), -(-shape[2] // stride)
    fan = k * k * (1 if dw else cin)
    wt = r.normal(0, np.sqrt(2 / fan), (1, k, k, cin) if dw else (cout, k, k, cin)).astype(np.float32)
    b = r.normal(0, 0.1, cin if dw else cout).astype(np.float32)
    out = [1, oh, ow, cin if dw else cout]
    if dw:
        y = w.op("DEPTHWISE_CONV_2D", [x, w.const(wt), w.const(b)], out, "DepthwiseConv2DOptions", padding=SAME,
                 stride_h=stride, stride_w=stride, depth_multiplier=1, fused_activation_function=act,
                 dilation_h_factor=1, dilation_w_factor=1)
    else:
        y = w.op("CONV_2D", [x, w.const(wt), w.const(b)], out, "Conv2DOptions", padding=SAME, stride_h=stride,
                 stride_w=stride, fused_activation_function=act, dilation_h_factor=1, dilation_w_factor=1)
    return y, out


def _head(w, r, x, shape, classes, softmax):
    n = shape[-1]
    fc = w.op("FULLY_CONNECTED", [x, w.const(r.normal(0, np.sqrt(1 / n), (classes, n)).astype(np.float32)),
                                  w.const(r.normal(0, 0.1, classes).astype(np.float32))], [1, classes],
              "FullyConnectedOptions", fused_activation_function=NONE)
    return w.op("SOFTMAX", [fc], [1, classes], "SoftmaxOptions", beta=1.0) if softmax else fc


def mobilenet_v2(r):
    """Stem conv, an inverted residual with its skip ADD, a strided one, 1x1, average pool, FC, softmax."""
    w = TFLiteWriter()
    x = w.input("image", [1, 19, 17, 3])
    y, s = _conv(w, r, x, [1, 19, 17, 3], 12, 3, 2, RELU6)
    e, es = _conv(w, r, y, s, 36, 1, 1, RELU6)
    d, ds = _conv(w, r, e, es, 0, 3, 1, RELU6, dw=True)
    p, ps = _conv(w, r, d, ds, 12, 1, 1, NONE)
    y = w.op("ADD", [y, p], s, "AddOptions", fused_activation_function=NONE)
    e, es = _conv(w, r, y, s, 36, 1, 1, RELU6)
    d, ds = _conv(w, r, e, es, 0, 3, 2, RELU6, dw=True)
    p, ps = _conv(w, r, d, ds, 20, 1, 1, NONE)
    h, hs = _conv(w, r, p, ps, 40, 1, 1, RELU6)
    w.output(h)
    pool = w.op("AVERAGE_POOL_2D", [h], [1, 1, 1, 40], "Pool2DOptions", padding=VALID, stride_h=1, stride_w=1,
                filter_height=hs[1], filter_width=hs[2], fused_activation_function=NONE)
    flat = w.op("RESHAPE", [pool, w.const(np.array([1, 40], np.int32))], [1, 40], "ReshapeOptions", new_shape=[1, 40])
    w.output(_head(w, r, flat, [1, 40], 10, True))
    return w, [1, 19, 17, 3]


def resnet(r):
    """Stem conv, max pool, a basic block, a strided block with a 1x1 projection, mean, FC."""
    w = TFLiteWriter()
    x = w.input("image", [1, 18, 18, 3])
    y, s = _conv(w, r, x, [1, 18, 18, 3], 16, 3, 1, RELU)
    s = [1, 9, 9, 16]
    y = w.op("MAX_POOL_2D", [y], s, "Pool2DOptions", padding=VALID, stride_h=2, stride_w=2, filter_height=2,
             filter_width=2, fused_activation_function=NONE)
    a, _ = _conv(w, r, y, s, 16, 3, 1, RELU)
    b, _ = _conv(w, r, a, s, 16, 3, 1, NONE)
    y = w.op("ADD", [y, b], s, "AddOptions", fused_activation_function=RELU)
    a, s2 = _conv(w, r, y, s, 24, 3, 2, RELU)
    b, _ = _conv(w, r, a, s2, 24, 3, 1, NONE)
    sc, _ = _conv(w, r, y, s, 24, 1, 2, NONE)
    y = w.op("ADD", [b, sc], s2, "AddOptions", fused_activation_function=RELU)
    w.output(y)
    m = w.op("MEAN", [y, w.const(np.array([1, 2], np.int32))], [1, 24], "ReducerOptions", keep_dims=False)
    w.output(_head(w, r, m, [1, 24], 7, False))
    return w, [1, 18, 18, 3]


def single(kind):
    """One op (a 1x1 conv in front where the op needs two activations) on a [1, 9, 9, 13] input."""
    def build(r):
        w = TFLiteWriter()
        shape = [1, 9, 9, 13]
        x = w.input("image", shape)
        flat = [1, 9 * 9 * 13]
        if kind.startswith("conv") or kind == "depthwise":
            k = 3 if kind in ("conv3x3", "depthwise") else 1
            y, _ = _conv(w, r, x, shape, 0 if kind == "depthwise" else 21, k, 2 if kind == "conv3x3" else 1,
                         RELU6 if k == 3 else NONE, dw=kind == "depthwise")
        elif kind == "add":
            b, _ = _conv(w, r, x, shape, 13, 1, 1, NONE)
            y = w.op("ADD", [x, b], shape, "AddOptions", fused_activation_function=RELU)
        elif kind in ("average_pool", "max_pool"):
            y = w.op(kind.upper() + "_2D", [x], [1, 4, 4, 13], "Pool2DOptions", padding=SAME, stride_h=3, stride_w=3,
                     filter_height=3, filter_width=3, fused_activation_function=NONE)
        elif kind == "mean":
            y = w.op("MEAN", [x, w.const(np.array([1, 2], np.int32))], [1, 13], "ReducerOptions", keep_dims=False)
        else:  # fully_connected, softmax
            y = w.op("RESHAPE", [x, w.const(np.array(flat, np.int32))], flat, "ReshapeOptions", new_shape=flat)
            y = _head(w, r, y, flat, 37, kind == "softmax")
        w.output(y)
        return w, shape
    return build


OPS = ["conv3x3", "conv1x1", "depthwise", "add", "average_pool", "max_pool", "mean", "fully_connected", "softmax"]
NETS = {"mobilenet_v2": mobilenet_v2, "resnet": resnet, **{k: single(k) for k in OPS}}


def _run_litert(data, feeds):
    it = interpreter(data)
    for d in it.get_input_details():
        it.set_tensor(d["index"], feeds[d["name"]])
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}


def _case(net, per_channel, dtype, float_io, n=4):
    r = np.random.default_rng(zlib.crc32(f"{net}{per_channel}{np.dtype(dtype)}{float_io}".encode()))
    w, shape = NETS[net](r)
    samples = [{"image": r.uniform(-1, 1, shape).astype(np.float32)} for _ in range(8)]
    data, edges = quantize_graph(w, samples, per_channel=per_channel, dtype=dtype, float_io=float_io)
    tests = [{"image": r.uniform(-1, 1, shape).astype(np.float32)} for _ in range(n)]
    if not float_io:  # feed the quantized image, as a full-integer model takes it
        s, z = edges["image"]
        z += 128 if np.dtype(dtype) == np.uint8 else 0
        info = np.iinfo(dtype)
        tests = [{"image": np.clip(np.round(t["image"] / s) + z, info.min, info.max).astype(dtype)} for t in tests]
    return data, tests, edges


CASES = [("mobilenet_v2", True, np.int8, False), ("mobilenet_v2", False, np.int8, True),
         ("mobilenet_v2", False, np.uint8, False), ("resnet", True, np.int8, True), ("resnet", False, np.int8, False),
         ("resnet", False, np.uint8, False)]


def _check(net, per_channel, dtype, float_io):
    """(outputs, exact, off by more than one step, largest difference) against LiteRT."""
    data, tests, edges = _case(net, per_channel, dtype, float_io)
    model = msv0.load(convert(data))
    conv_nodes = [n for n in model.nodes if n.op in ("Conv2D", "DepthwiseConv2D", "FullConnection")]
    assert all(model.tensors[n.inputs[1]].type_id == msv0.dtypes.type_id(np.int8) for n in conv_nodes)
    session = msv0.Session(model)
    total = exact = far = worst = 0
    for feeds in tests:
        want = _run_litert(data, feeds)
        got = session.run(feeds)
        for k, ref in want.items():
            assert got[k].dtype == ref.dtype and got[k].shape == ref.shape, k
            if float_io:  # in output quantization steps
                diff = np.abs(got[k].astype(np.float64) - ref) / edges[k][0]
            else:
                diff = np.abs(got[k].astype(np.int32) - ref.astype(np.int32))
            total += diff.size
            exact += int(np.sum(diff < 0.5))
            far += int(np.sum(diff > 1.5))
            worst = max(worst, float(diff.max()))
    RATES[f"{net}-{'channel' if per_channel else 'tensor'}-{np.dtype(dtype).name}{'-float_io' * float_io}"] = (
        total, exact, far)
    return total, far, worst


@pytest.mark.parametrize("kind", OPS)
@pytest.mark.parametrize("per_channel,dtype", [(True, np.int8), (False, np.uint8)], ids=["int8-channel", "uint8"])
def test_quantized_op_matches_litert(kind, per_channel, dtype, isa):
    total, far, worst = _check(kind, per_channel, dtype, False)
    assert far <= total * 0.001, f"{far} of {total} outputs off by more than one step (up to {worst})"


@pytest.mark.parametrize("net,per_channel,dtype,float_io", CASES,
                         ids=[f"{c[0]}-{'channel' if c[1] else 'tensor'}-{np.dtype(c[2]).name}{'-float_io' * c[3]}"
                              for c in CASES])
def test_quantized_net_matches_litert(net, per_channel, dtype, float_io, isa):
    total, far, worst = _check(net, per_channel, dtype, float_io)
    assert far <= total * 0.015 and worst <= 4, f"{far} of {total} outputs off by more than one step (up to {worst})"


def test_uint8_edges_are_casts():
    data, _, _ = _case("resnet", False, np.uint8, False, n=0)
    model = msv0.load(convert(data))
    assert model.nodes[0].op == "QuantDTypeCast" and model.nodes[-1].op == "QuantDTypeCast"
    assert model.inputs[0].dtype == np.uint8 and model.outputs[0].dtype == np.uint8


def _hybrid(dequantized: bool) -> bytes:
    """TFLiteConverter's dynamic-range quantization: CONV_2D, DEPTHWISE_CONV_2D and
    FULLY_CONNECTED with int8 weights (per channel) on float activations; or, dequantized, the
    same net with those weights in float."""
    r = np.random.default_rng(8)
    w = TFLiteWriter()

    def weight(shape, axis):
        q = r.integers(-127, 128, shape).astype(np.int8)
        scales = r.uniform(0.002, 0.02, shape[axis]).astype(np.float32)  # as the file stores them
        if not dequantized:
            return w.const(q, quant=(scales.tolist(), [0] * shape[axis], axis))
        view = [1] * len(shape)
        view[axis] = -1
        return w.const(q.astype(np.float32) * scales.reshape(view))

    x = w.input("x", [1, 9, 7, 3])
    h = w.op("CONV_2D", [x, weight((8, 3, 3, 3), 0), w.const(r.standard_normal(8).astype(np.float32))],
             [1, 9, 7, 8], "Conv2DOptions", padding=SAME, stride_h=1, stride_w=1, fused_activation_function=RELU,
             dilation_h_factor=1, dilation_w_factor=1)
    h = w.op("DEPTHWISE_CONV_2D", [h, weight((1, 3, 3, 8), 3), w.const(np.zeros(8, np.float32))], [1, 5, 4, 8],
             "DepthwiseConv2DOptions", padding=SAME, stride_h=2, stride_w=2, depth_multiplier=1,
             fused_activation_function=NONE, dilation_h_factor=1, dilation_w_factor=1)
    h = w.op("RESHAPE", [h, w.const(np.array([1, 160], np.int32))], [1, 160], "ReshapeOptions", new_shape=[1, 160])
    y = w.op("FULLY_CONNECTED", [h, weight((10, 160), 0), w.const(np.zeros(10, np.float32))], [1, 10],
             "FullyConnectedOptions", fused_activation_function=NONE, weights_format=0)
    w.output(y)
    return w.finish()


def test_hybrid_weights_dequantized_once():
    """A dynamic-range quantized .tflite runs as its float twin with the weights dequantized
    (bit for bit), within LiteRT's own activation rounding of its hybrid kernels."""
    x = np.random.default_rng(2).uniform(-1, 1, (1, 9, 7, 3)).astype(np.float32)
    hybrid = msv0.Session(convert(_hybrid(False)))
    got = next(iter(hybrid.run({"x": x}).values()))
    assert [n.op for n in hybrid.model.nodes] == [n.op for n in msv0.load(convert(_hybrid(True))).nodes]
    np.testing.assert_array_equal(got, next(iter(msv0.Session(convert(_hybrid(True))).run({"x": x}).values())))
    it = interpreter(_hybrid(False))
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    want = it.get_tensor(it.get_output_details()[0]["index"])
    assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()


def _tiny(act_dtype=np.int8, w_axis=0, act_scales=1, fused=RELU):
    """x -> CONV_2D 1x1 -> y with hand-set quantization, for the refusals."""
    w = TFLiteWriter()
    x = w.input("x", [1, 4, 4, 3], act_dtype, quant=([0.05] * act_scales, [0] * act_scales, 3))
    wt = w.const(np.ones((5, 1, 1, 3), np.int8), quant=([0.01] * (5 if w_axis == 0 else 3), [0] * (5 if w_axis == 0 else 3), w_axis))
    b = w.const(np.zeros(5, np.int32), quant=([0.0005] * 5, [0] * 5, 0))
    y = w.op("CONV_2D", [x, wt, b], [1, 4, 4, 5], "Conv2DOptions", out_dtype=act_dtype, quant=([0.1], [0], 0),
             padding=SAME, stride_h=1, stride_w=1, fused_activation_function=fused, dilation_h_factor=1,
             dilation_w_factor=1)
    z = w.op("LOG_SOFTMAX", [y], [1, 4, 4, 5], None, out_dtype=act_dtype, quant=([16 / 256], [127], 0))
    w.output(z)
    return w.finish()


@pytest.mark.parametrize("kw,why", [(dict(act_dtype=np.int16), "int16"),
                                    (dict(w_axis=3), "per channel along axis 3"),
                                    (dict(act_scales=3), "per-channel quantized activations"),
                                    (dict(fused=2), "no int8 kernel")])
def test_unsupported_schemes_all_reported(kw, why):
    with pytest.raises(UnsupportedOpError) as e:
        convert(_tiny(**kw))
    msg = str(e.value)
    assert why in msg and "LOG_SOFTMAX_1" in msg and "CONV_2D_0" in msg, msg


@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_shuffled_fully_connected_refused(dtype):
    """The float and the int8 FULLY_CONNECTED share their option checks."""
    q = ([0.05], [0], 0) if dtype == np.int8 else None
    w = TFLiteWriter()
    x = w.input("x", [2, 8], dtype, quant=q)
    y = w.op("FULLY_CONNECTED", [x, w.const(np.ones((3, 8), dtype), quant=q)], [2, 3], "FullyConnectedOptions",
             out_dtype=dtype, quant=q, fused_activation_function=NONE, weights_format=1)
    w.output(y)
    with pytest.raises(UnsupportedOpError, match="shuffled FULLY_CONNECTED weights"):
        convert(w.finish())


def test_quantized_streaming_model_keeps_its_state_in_inputs_with_defaults():
    """A micro-wakeword-shaped int8 streaming model (pymicro_wakeword's models are such): a
    CALL_ONCE init sets the state variable to its zero point, each call concatenates the state and
    the new frame, keeps the last frames as the next state and runs a depthwise conv over them.
    The first call leaves the state out (its default is the init's value); later calls feed back
    `<name>/next`, against LiteRT, which keeps the variable itself."""
    from tflitewriter import RESOURCE
    q_x, q_y = ([0.1], [-128], 0), ([0.05], [3], 0)
    r = np.random.default_rng(4)
    w = TFLiteWriter()
    init = w.subgraph()
    w.multi_op("ASSIGN_VARIABLE", [w.op("VAR_HANDLE", [], [], "VarHandleOptions", RESOURCE, shared_name="frames"),
                                   w.const(np.full((1, 2, 1, 4), -128, np.int8), quant=q_x)], [])
    w.use(0)
    x = w.input("x", [1, 1, 1, 4], np.int8, quant=q_x)
    w.multi_op("CALL_ONCE", [], [], "CallOnceOptions", init_subgraph_index=init)
    h = w.op("VAR_HANDLE", [], [], "VarHandleOptions", RESOURCE, shared_name="frames")
    state = w.op("READ_VARIABLE", [h], [1, 2, 1, 4], out_dtype=np.int8, quant=q_x)
    cat = w.op("CONCATENATION", [state, x], [1, 3, 1, 4], "ConcatenationOptions", out_dtype=np.int8, quant=q_x,
               axis=1, fused_activation_function=NONE)
    i32 = lambda *v: w.const(np.array(v, np.int32))  # noqa: E731
    keep = w.op("STRIDED_SLICE", [cat, i32(0, 1, 0, 0), i32(1, 3, 1, 4), i32(1, 1, 1, 1)], [1, 2, 1, 4],
                "StridedSliceOptions", out_dtype=np.int8, quant=q_x)
    w.multi_op("ASSIGN_VARIABLE", [h, keep], [])
    scales = r.uniform(0.005, 0.02, 4)
    weight = w.const(r.integers(-127, 128, (1, 3, 1, 4), dtype=np.int8), quant=(scales, np.zeros(4, np.int64), 3))
    bias = w.const(r.integers(-500, 500, 4).astype(np.int32), quant=(scales * 0.1, np.zeros(4, np.int64), 0))
    w.output(w.op("DEPTHWISE_CONV_2D", [cat, weight, bias], [1, 1, 1, 4], "DepthwiseConv2DOptions", out_dtype=np.int8,
                  quant=q_y, padding=VALID, stride_h=1, stride_w=1, depth_multiplier=1,
                  fused_activation_function=NONE, dilation_h_factor=1, dilation_w_factor=1))
    data = w.finish()
    it = interpreter(data)
    model = msv0.load(convert(data))
    np.testing.assert_array_equal(model.input_defaults["frames"], np.full((1, 2, 1, 4), -128, np.int8))
    s = msv0.Session(model)
    y_name = w.tensors[w.outputs[0]][0]
    feeds = {}
    for step in range(5):
        frame = r.integers(-128, 128, (1, 1, 1, 4), dtype=np.int8)
        it.set_tensor(it.get_input_details()[0]["index"], frame)
        it.invoke()
        out = s.run({"x": frame, **feeds})
        want = it.get_tensor(it.get_output_details()[0]["index"]).astype(int)
        assert np.abs(out[y_name].astype(int) - want).max() <= 1, f"step {step}"
        feeds = {"frames": out["frames/next"]}


def convert_report() -> str:
    if not RATES:
        return ""
    lines = ["quantized TFLite vs LiteRT (outputs, exact, off by > 1 step):"]
    for k, (total, exact, far) in sorted(RATES.items()):
        lines.append(f"  {k:42s} {total:6d}  exact {exact / total:7.2%}  >1 step {far / total:7.3%}")
    return "\n".join(lines)
