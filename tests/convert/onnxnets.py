"""torchvision-style networks written directly as ONNX graphs (no torch), random weights.

The node patterns are the ones torch.onnx.export (opset 13+, eval mode, no constant folding of
BN) writes: Conv (no bias) + BatchNormalization + Relu / Clip(0, 6) / HardSwish, SE blocks as
GlobalAveragePool + 1x1 Conv + Relu + 1x1 Conv + HardSigmoid / Sigmoid + Mul, classifier
Flatten + Gemm(transB=1), channel shuffle as Reshape/Transpose/Reshape, attention heads as
Reshape/Transpose + MatMul, GELU as x·0.5·(1 + Erf(x/√2)).
Weights are He-scaled and BN statistics mild, so activations keep an O(1) range through depth.
"""
from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper, shape_inference

OPSET = 17


class Net:
    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self._n = 0

    def _id(self, tag: str) -> str:
        self._n += 1
        return f"{tag}_{self._n}"

    def const(self, value, tag="c") -> str:
        name = self._id(tag)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op, ins, n_out=1, **attrs):
        outs = [self._id(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, list(ins), outs, name=self._id(op), **attrs))
        return outs[0] if n_out == 1 else outs

    def _w(self, *shape, fan_in, gain=2.0):
        return (self.rng.standard_normal(shape) * math.sqrt(gain / fan_in)).astype(np.float32)

    # ---- blocks -------------------------------------------------------------------------
    def act(self, x, kind):
        if kind == "relu":
            return self.node("Relu", [x])
        if kind == "relu6":
            return self.node("Clip", [x, self.const(np.float32(0)), self.const(np.float32(6))])
        if kind == "hswish":
            return self.node("HardSwish", [x])
        if kind == "swish":  # SiLU as torch exports it
            return self.node("Mul", [x, self.node("Sigmoid", [x])])
        assert kind is None
        return x

    def bn(self, x, c):
        r = self.rng
        return self.node("BatchNormalization", [
            x, self.const(r.uniform(0.5, 1.5, c).astype(np.float32)), self.const(r.uniform(-0.2, 0.2, c).astype(np.float32)),
            self.const(r.uniform(-0.2, 0.2, c).astype(np.float32)), self.const(r.uniform(0.5, 1.5, c).astype(np.float32))],
            epsilon=1e-5)

    def conv(self, x, cin, cout, k, s=1, g=1, act="relu", bn=True, bias=False):
        w = self.const(self._w(cout, cin // g, k, k, fan_in=cin // g * k * k), "w")
        ins = [x, w] + ([self.const(self.rng.uniform(-0.1, 0.1, cout).astype(np.float32), "b")] if bias else [])
        p = (k - 1) // 2
        y = self.node("Conv", ins, kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p], group=g)
        if bn:
            y = self.bn(y, cout)
        return self.act(y, act)

    def se(self, x, c, squeeze, gate="hsigmoid", inner="relu"):
        p = self.node("GlobalAveragePool", [x])
        h = self.conv(p, c, squeeze, 1, act=inner, bn=False, bias=True)
        h = self.conv(h, squeeze, c, 1, act=None, bn=False, bias=True)
        h = self.node("HardSigmoid", [h], alpha=1 / 6, beta=0.5) if gate == "hsigmoid" else self.node("Sigmoid", [h])
        return self.node("Mul", [x, h])

    def head(self, x, c, classes=10):
        p = self.node("GlobalAveragePool", [x])
        f = self.node("Flatten", [p], axis=1)
        w = self.const(self._w(classes, c, fan_in=c, gain=1.0), "fc_w")
        return self.node("Gemm", [f, w, self.const(np.zeros(classes, np.float32), "fc_b")], alpha=1.0, beta=1.0, transB=1)

    def model(self, x_shape, y, name):
        g = helper.make_graph(self.nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="pytorch-style")
        m.ir_version = 8
        # the output with its shape, as an exporter writes it
        m.graph.output[0].CopyFrom(shape_inference.infer_shapes(m).graph.output[0])
        return m


def _make_divisible(v, d=8):
    n = max(d, int(v + d / 2) // d * d)
    return n + d if n < 0.9 * v else n


def mobilenet_v2(res=224, classes=10):
    n = Net(1)
    x = n.conv("input", 3, 32, 3, 2, act="relu6")
    cin = 32
    for t, c, reps, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                          (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(reps):
            stride = s if i == 0 else 1
            h = x if t == 1 else n.conv(x, cin, cin * t, 1, act="relu6")
            h = n.conv(h, cin * t, cin * t, 3, stride, g=cin * t, act="relu6")
            h = n.conv(h, cin * t, c, 1, act=None)
            x = n.node("Add", [x, h]) if stride == 1 and cin == c else h
            cin = c
    x = n.conv(x, cin, 1280, 1, act="relu6")
    return n.model([1, 3, res, res], n.head(x, 1280, classes), "mobilenet_v2")


def mobilenet_v3_small(res=224, classes=10):
    n = Net(2)
    x = n.conv("input", 3, 16, 3, 2, act="hswish")
    cin = 16
    # kernel, expanded, out, SE, activation, stride (torchvision mobilenet_v3_small)
    for k, e, c, use_se, a, s in [(3, 16, 16, 1, "relu", 2), (3, 72, 24, 0, "relu", 2), (3, 88, 24, 0, "relu", 1),
                                  (5, 96, 40, 1, "hswish", 2), (5, 240, 40, 1, "hswish", 1),
                                  (5, 240, 40, 1, "hswish", 1), (5, 120, 48, 1, "hswish", 1),
                                  (5, 144, 48, 1, "hswish", 1), (5, 288, 96, 1, "hswish", 2),
                                  (5, 576, 96, 1, "hswish", 1), (5, 576, 96, 1, "hswish", 1)]:
        h = x if e == cin else n.conv(x, cin, e, 1, act=a)
        h = n.conv(h, e, e, k, s, g=e, act=a)
        if use_se:
            h = n.se(h, e, _make_divisible(e // 4))
        h = n.conv(h, e, c, 1, act=None)
        x = n.node("Add", [x, h]) if s == 1 and cin == c else h
        cin = c
    x = n.conv(x, cin, 576, 1, act="hswish")
    p = n.node("Flatten", [n.node("GlobalAveragePool", [x])], axis=1)
    w1 = n.const(n._w(1024, 576, fan_in=576), "fc1")
    h = n.node("HardSwish", [n.node("Gemm", [p, w1, n.const(np.zeros(1024, np.float32))], transB=1)])
    w2 = n.const(n._w(classes, 1024, fan_in=1024, gain=1.0), "fc2")
    y = n.node("Gemm", [h, w2, n.const(np.zeros(classes, np.float32))], transB=1)
    return n.model([1, 3, res, res], y, "mobilenet_v3_small")


def resnet18(res=224, classes=10):
    n = Net(3)
    x = n.conv("input", 3, 64, 7, 2)
    x = n.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for c, s in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        for i in range(2):
            stride = s if i == 0 else 1
            h = n.conv(x, cin, c, 3, stride)
            h = n.conv(h, c, c, 3, act=None)
            sc = n.conv(x, cin, c, 1, stride, act=None) if stride != 1 or cin != c else x
            x = n.node("Relu", [n.node("Add", [h, sc])])
            cin = c
    return n.model([1, 3, res, res], n.head(x, 512, classes), "resnet18")


def squeezenet1_1(res=224, classes=10):
    n = Net(4)
    x = n.conv("input", 3, 64, 3, 2, bn=False, bias=True)
    cin = 64

    def pool(x):
        return n.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    x = pool(x)
    for i, (sq, ex) in enumerate([(16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192), (64, 256), (64, 256)]):
        s = n.conv(x, cin, sq, 1, bn=False, bias=True)
        a = n.conv(s, sq, ex, 1, bn=False, bias=True)
        b = n.conv(s, sq, ex, 3, bn=False, bias=True)
        x = n.node("Concat", [a, b], axis=1)
        cin = 2 * ex
        if i in (1, 3):
            x = pool(x)
    x = n.conv(x, cin, classes, 1, bn=False, bias=True)  # Dropout is gone in eval export
    y = n.node("Flatten", [n.node("GlobalAveragePool", [x])], axis=1)
    return n.model([1, 3, res, res], y, "squeezenet1_1")


def shufflenet_v2(res=224, classes=10):
    n = Net(5)
    res_now = [res]

    def shuffle(x, c, hw):
        h, w = hw
        r = n.node("Reshape", [x, n.const(np.array([1, 2, c // 2, h, w], np.int64))])
        t = n.node("Transpose", [r], perm=[0, 2, 1, 3, 4])
        return n.node("Reshape", [t, n.const(np.array([1, c, h, w], np.int64))])

    def hw():
        return res_now[0], res_now[0]

    x = n.conv("input", 3, 24, 3, 2)
    x = n.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    res_now[0] = ((res + 1) // 2 + 1) // 2  # stride-2 conv then stride-2 max pool, both padded 1
    cin = 24
    for c, reps in [(116, 4), (232, 8), (464, 4)]:
        for i in range(reps):
            b = c // 2
            if i == 0:
                l = n.conv(x, cin, cin, 3, 2, g=cin, act=None)
                l = n.conv(l, cin, b, 1)
                r = n.conv(x, cin, b, 1)
                r = n.conv(r, b, b, 3, 2, g=b, act=None)
                r = n.conv(r, b, b, 1)
                res_now[0] = (res_now[0] + 1) // 2
            else:
                l, r = n.node("Split", [x, n.const(np.array([b, b], np.int64))], 2, axis=1)
                r = n.conv(r, b, b, 1)
                r = n.conv(r, b, b, 3, 1, g=b, act=None)
                r = n.conv(r, b, b, 1)
            x = shuffle(n.node("Concat", [l, r], axis=1), c, hw())
            cin = c
    x = n.conv(x, cin, 1024, 1)
    p = n.node("ReduceMean", [x], axes=[2, 3], keepdims=0)  # opset 17: axes is an attribute
    w = n.const(n._w(classes, 1024, fan_in=1024, gain=1.0), "fc")
    y = n.node("Gemm", [p, w, n.const(np.zeros(classes, np.float32))], transB=1)
    return n.model([1, 3, res, res], y, "shufflenet_v2")


def efficientnet_b0(res=224, classes=10):
    n = Net(6)
    x = n.conv("input", 3, 32, 3, 2, act="swish")
    cin = 32
    for e, k, s, c, reps in [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
                             (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]:
        for i in range(reps):
            stride = s if i == 0 else 1
            m = cin * e
            h = x if e == 1 else n.conv(x, cin, m, 1, act="swish")
            h = n.conv(h, m, m, k, stride, g=m, act="swish")
            h = n.se(h, m, max(1, cin // 4), gate="sigmoid", inner="swish")
            h = n.conv(h, m, c, 1, act=None)
            x = n.node("Add", [h, x]) if stride == 1 and cin == c else h
            cin = c
    x = n.conv(x, cin, 1280, 1, act="swish")
    return n.model([1, 3, res, res], n.head(x, 1280, classes), "efficientnet_b0")


def transformer_encoder(seq=16, d=64, heads=4, ff=128, layers=2):
    n = Net(7)
    dh = d // heads
    x = "input"

    def linear(x, i, o):
        w = n.const(n._w(i, o, fan_in=i, gain=1.0), "w")
        return n.node("Add", [n.node("MatMul", [x, w]), n.const(n.rng.uniform(-0.1, 0.1, o).astype(np.float32), "b")])

    def heads_of(t):
        r = n.node("Reshape", [t, n.const(np.array([1, seq, heads, dh], np.int64))])
        return n.node("Transpose", [r], perm=[0, 2, 1, 3])

    def layer_norm(t):
        g = n.const(n.rng.uniform(0.8, 1.2, d).astype(np.float32))
        b = n.const(n.rng.uniform(-0.1, 0.1, d).astype(np.float32))
        return n.node("LayerNormalization", [t, g, b], axis=-1, epsilon=1e-5)

    for _ in range(layers):
        q, k, v = (heads_of(linear(x, d, d)) for _ in range(3))
        kt = n.node("Transpose", [k], perm=[0, 1, 3, 2])
        s = n.node("Div", [n.node("MatMul", [q, kt]), n.const(np.float32(math.sqrt(dh)))])
        a = n.node("MatMul", [n.node("Softmax", [s], axis=-1), v])
        a = n.node("Reshape", [n.node("Transpose", [a], perm=[0, 2, 1, 3]), n.const(np.array([1, seq, d], np.int64))])
        x = layer_norm(n.node("Add", [x, linear(a, d, d)]))
        h = linear(x, d, ff)
        erf = n.node("Erf", [n.node("Div", [h, n.const(np.float32(math.sqrt(2)))])])
        h = n.node("Mul", [n.node("Mul", [h, n.node("Add", [erf, n.const(np.float32(1))])]), n.const(np.float32(0.5))])
        x = layer_norm(n.node("Add", [x, linear(h, ff, d)]))
    return n.model([1, seq, d], x, "transformer_encoder")
