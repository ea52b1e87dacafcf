"""Whole int8 networks, exact: a ResNet-style and a MobileNetV2-style zoo network with random
weights, quantized by msv0.quantize into PostTraining files, run by msv0 (on every tier, 1 and
2 threads) and by a NumPy interpreter of the same file built from tests/int8_ref.py's per-op
references: equal to the last bit. Every int8 step runs inside the native Program."""
import functools

import numpy as np
import pytest

import msv0
from msv0 import zoo
from msv0.fb.PadMode import PadMode
from msv0.fb.PoolMode import PoolMode
from msv0.quantize import quantize

import int8_ref as ref


def _param(model, k):
    p = model.tensors[k].quant[0]
    return p.scale, p.zeroPoint


def _window(a, h, w, kh, kw):
    """(sh, sw, pt, pl, oh, ow) of a conv-like node on an h x w input."""
    same = a.padMode == PadMode.SAME_UPPER
    oh, pt = ref.conv_out_size(h, kh, a.strideH, getattr(a, "dilateH", 1), same, a.padUp, a.padDown)
    ow, pl = ref.conv_out_size(w, kw, a.strideW, getattr(a, "dilateW", 1), same, a.padLeft, a.padRight)
    return a.strideH, a.strideW, pt, pl, oh, ow


def _weights(model, node):
    t = model.tensors[node.inputs[1]]
    s_w = np.array([p.scale for p in t.quant])
    zp_w = np.array([p.zeroPoint for p in t.quant])
    bias = model.tensors[node.inputs[2]].data.reshape(-1) if len(node.inputs) > 2 else None
    return t.data, bias, s_w, zp_w


def conv2d(model, node, x):
    a = node.attrs
    w, bias, s_w, zp_w = _weights(model, node)
    (s_in, zp_in), (s_out, zp_out) = _param(model, node.inputs[0]), _param(model, node.outputs[0])
    return ref.ref_conv2d_s8(x, w, bias, s_in, zp_in, s_w, zp_w, s_out, zp_out, a.activationType, group=a.group,
                             stride=(a.strideH, a.strideW), dilation=(a.dilateH, a.dilateW),
                             pads=(a.padUp, a.padDown, a.padLeft, a.padRight),
                             same_upper=a.padMode == PadMode.SAME_UPPER)


def depthwise(model, node, x):
    a = node.attrs
    w, bias, s_w, zp_w = _weights(model, node)
    c = w.shape[0]
    (s_in, zp_in), (s_out, zp_out) = _param(model, node.inputs[0]), _param(model, node.outputs[0])
    s_w, zp_w = np.resize(s_w, c), np.resize(zp_w, c)
    requant = list(zip(*[ref.quantize_round_parameter(ref.conv_multiplier(s_in, s, s_out)) for s in s_w]))
    sh, sw, pt, pl, oh, ow = _window(a, x.shape[1], x.shape[2], w.shape[1], w.shape[2])
    lo, hi = ref.act_range(a.activationType, s_out, zp_out)
    return ref.dwconv_s8(x, w[..., 0], zp_w, np.zeros(c, np.int64) if bias is None else bias, zp_in, zp_out, requant,
                         lo, hi, sh, sw, a.dilateH, a.dilateW, pt, pl, oh, ow)


def pooling(model, node, x):
    a = node.attrs
    kh, kw = (x.shape[1], x.shape[2]) if a.global_ else (a.windowH, a.windowW)
    if a.global_:
        sh = sw = 1
        pt = pl = 0
        oh = ow = 1
    else:
        sh, sw, pt, pl, oh, ow = _window(a, x.shape[1], x.shape[2], kh, kw)
    return ref.pool_s8(x, a.poolingMode == PoolMode.MAX_POOLING, kh, kw, sh, sw, pt, pl, oh, ow,
                       *_param(model, node.inputs[0]), *_param(model, node.outputs[0]))


def full_connection(model, node, x):
    w, bias, s_w, zp_w = _weights(model, node)
    (s_in, zp_in), (s_out, zp_out) = _param(model, node.inputs[0]), _param(model, node.outputs[0])
    return ref.ref_fc_s8(x.reshape(-1, w.shape[1]), w, bias, s_in, zp_in, s_w, zp_w, s_out, zp_out,
                         node.attrs.activationType)


def quant_cast(model, node, x):
    if x.dtype == np.float32:
        return ref.quantize(x, *_param(model, node.outputs[0]))
    return ref.dequantize(x, *_param(model, node.inputs[0]))


def add(model, node, a, b):
    return ref.add_s8(a, b, *_param(model, node.inputs[0]), *_param(model, node.inputs[1]),
                      *_param(model, node.outputs[0]), node.attrs.activationType)


REFERENCE = {"Conv2D": conv2d, "DepthwiseConv2D": depthwise, "Pooling": pooling, "FullConnection": full_connection,
             "QuantDTypeCast": quant_cast, "Add": add}


def interpret(model, x):
    values = {model.graph_inputs[0]: x}
    for i in model.main_nodes:
        node = model.nodes[i]
        args = [values[k] if k in values else model.tensors[k].data for k in node.inputs]
        (out,) = node.outputs
        values[out] = REFERENCE[node.op](model, node, *args[: 2 if node.op == "Add" else 1])
    return values[model.graph_outputs[0]]


@functools.lru_cache(maxsize=None)
def network(name):
    net = {"resnet": lambda: zoo.resnet18_net(resolution=24, classes=10),
           "mobilenet": lambda: zoo.mobilenet_tiny_net(resolution=32)}[name]()
    rng = np.random.default_rng(3)
    calib = rng.standard_normal((4,) + net.input_shape).astype(np.float32)
    model = quantize(net.to_ms(), {"input": calib})
    x = rng.standard_normal(net.input_shape).astype(np.float32)
    return model, x, interpret(msv0.load(model), x)


@pytest.mark.parametrize("name", ["resnet", "mobilenet"])
def test_int8_network_exact(isa, name):
    model, x, want = network(name)
    loaded = msv0.load(model)
    assert {loaded.nodes[i].op for i in loaded.main_nodes} <= set(REFERENCE)
    assert all(loaded.tensors[loaded.nodes[i].inputs[0]].dtype == np.int8
               for i in loaded.main_nodes if loaded.nodes[i].op != "QuantDTypeCast")
    for threads in (1, 2):
        got = msv0.Session(model, num_threads=threads).run([x])["logits"]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["resnet", "mobilenet"])
def test_int8_network_is_one_program(name):
    model, _, _ = network(name)
    session = msv0.Session(model)
    (plan,) = session._idle[0].plans.values()
    assert [s.label for s in plan.steps] == ["native program"]
