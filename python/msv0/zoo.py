"""Reference networks with random weights, as v0 .ms files and as equivalent ONNX graphs.

    msv0.zoo.mobilenet_v2()                  # .ms bytes, NHWC input [1, 224, 224, 3]
    msv0.zoo.to_onnx("mobilenet_v2")         # the same network (same weights) as an onnx.ModelProto

A network is first described as a `Net`: a list of `Layer`s holding their weights in the v0
layouts (KHWC conv weights, [N, K] FC weights). That description is then written either as a
v0 file with msv0.builder, following r1.1's conventions (NHWC input, explicit pads with padMode
NOTSET or SAME_UPPER, fused RELU/RELU6, bias inputs), or as ONNX (NCHW input, OIHW weights),
so the two files compute the same function. Weights are He-scaled, and the last layer of each
residual branch is scaled down further, so activations stay O(1) through 50 layers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from msv0.fb.ActivationType import ActivationType
from msv0.fb.Format import Format
from msv0.fb.PadMode import PadMode
from msv0.fb.PoolMode import PoolMode
from msv0.fb.RoundMode import RoundMode

RESIDUAL_SCALE = 0.2  # keeps each residual add from doubling the activation variance


@dataclass
class Layer:
    """One operation. kind: conv, dwconv, maxpool, gap (global average pool), fc, add."""

    kind: str
    name: str
    inputs: list[str]
    output: str
    out_shape: tuple[int, ...]  # NHWC (or [1, N] after fc)
    weight: np.ndarray | None = None  # conv: [Cout, kH, kW, Cin]; dwconv: [C, kH, kW, 1]; fc: [N, K]
    bias: np.ndarray | None = None
    kernel: int = 1
    stride: int = 1
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)  # up, down, left, right
    pad_mode: int = PadMode.NOTSET
    act: int = ActivationType.NO_ACTIVATION


@dataclass
class Net:
    """A feed-forward network over one NHWC float32 input."""

    name: str
    input_shape: tuple[int, int, int, int]  # NHWC
    layers: list[Layer] = field(default_factory=list)
    input_name: str = "input"
    output_name: str = "logits"
    same_upper: bool = False  # strided convs use padMode SAME_UPPER instead of explicit pads
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0), repr=False)

    def __post_init__(self):
        self._shapes = {self.input_name: tuple(self.input_shape)}

    @property
    def output(self) -> str:
        return self.layers[-1].output

    def shape(self, value: str) -> tuple[int, ...]:
        return self._shapes[value]

    def _add(self, layer: Layer) -> str:
        self.layers.append(layer)
        self._shapes[layer.output] = layer.out_shape
        return layer.output

    def _name(self, kind: str) -> str:
        return f"{kind}{len(self.layers)}"

    def _window(self, x: str, kernel: int, stride: int) -> tuple[int, int, tuple[int, int, int, int], int]:
        """Output H, W, pads and pad mode of a kernel x kernel window (square, dilation 1)."""
        _, h, w, _ = self.shape(x)
        if self.same_upper and stride > 1:
            oh, ow = -(-h // stride), -(-w // stride)
            th = max(0, (oh - 1) * stride + kernel - h)
            tw = max(0, (ow - 1) * stride + kernel - w)
            return oh, ow, (th // 2, th - th // 2, tw // 2, tw - tw // 2), PadMode.SAME_UPPER
        p = (kernel - 1) // 2
        oh = (h + 2 * p - kernel) // stride + 1
        ow = (w + 2 * p - kernel) // stride + 1
        return oh, ow, (p, p, p, p), PadMode.NOTSET

    def conv(self, x: str, cout: int, kernel: int = 1, stride: int = 1, act: int = ActivationType.NO_ACTIVATION,
             gain: float = 1.0) -> str:
        n, _, _, cin = self.shape(x)
        oh, ow, pads, mode = self._window(x, kernel, stride)
        fan_in = cin * kernel * kernel
        w = self.rng.standard_normal((cout, kernel, kernel, cin), np.float32) * np.float32(gain * np.sqrt(2.0 / fan_in))
        b = self.rng.uniform(-0.1, 0.1, cout).astype(np.float32)
        name = self._name("conv")
        return self._add(Layer("conv", name, [x], name, (n, oh, ow, cout), w, b,
                               kernel, stride, pads, mode, act))

    def dwconv(self, x: str, kernel: int = 3, stride: int = 1, act: int = ActivationType.NO_ACTIVATION) -> str:
        n, _, _, c = self.shape(x)
        oh, ow, pads, mode = self._window(x, kernel, stride)
        w = self.rng.standard_normal((c, kernel, kernel, 1), np.float32) * np.float32(np.sqrt(2.0 / (kernel * kernel)))
        b = self.rng.uniform(-0.1, 0.1, c).astype(np.float32)
        name = self._name("dwconv")
        return self._add(Layer("dwconv", name, [x], name, (n, oh, ow, c), w, b,
                               kernel, stride, pads, mode, act))

    def maxpool(self, x: str, kernel: int = 3, stride: int = 2) -> str:
        n, _, _, c = self.shape(x)
        oh, ow, pads, mode = self._window(x, kernel, stride)
        name = self._name("maxpool")
        return self._add(Layer("maxpool", name, [x], name, (n, oh, ow, c), kernel=kernel, stride=stride,
                               pads=pads, pad_mode=mode))

    def gap(self, x: str) -> str:
        n, _, _, c = self.shape(x)
        name = self._name("gap")
        return self._add(Layer("gap", name, [x], name, (n, 1, 1, c)))

    def fc(self, x: str, nout: int) -> str:
        k = self.shape(x)[-1]
        w = self.rng.standard_normal((nout, k), np.float32) * np.float32(np.sqrt(1.0 / k))
        b = self.rng.uniform(-0.1, 0.1, nout).astype(np.float32)
        return self._add(Layer("fc", self.output_name, [x], self.output_name, (self.shape(x)[0], nout), w, b))

    def add(self, a: str, b: str, act: int = ActivationType.NO_ACTIVATION) -> str:
        if self.shape(a) != self.shape(b):
            raise ValueError(f"add of {self.shape(a)} and {self.shape(b)}")
        name = self._name("add")
        return self._add(Layer("add", name, [a, b], name, self.shape(a), act=act))

    # ---- writers -------------------------------------------------------------------------
    def to_ms(self) -> bytes:
        """The network as a v0 .ms file (msv0.builder)."""
        from msv0.builder import Builder

        b = Builder(self.name)
        ids = {self.input_name: b.input(self.input_name, self.input_shape)}
        for layer in self.layers:
            x = [ids[i] for i in layer.inputs]
            out = [b.tensor(layer.output, shape=layer.out_shape)]
            if layer.weight is not None:
                fmt = Format.KHWC if layer.kind in ("conv", "dwconv") else Format.NHWC  # format-v0.md §2
                x += [b.const(f"{layer.name}/weight", layer.weight, format=fmt), b.const(f"{layer.name}/bias", layer.bias)]
            op, attrs = ms_primitive(layer, self.shape(layer.inputs[0]))
            b.node(op, x, outputs=out, name=layer.name, **attrs)
            ids[layer.output] = out[0]
        b.output(ids[self.output])
        return b.finish()

    def to_onnx(self, opset: int = 13, dynamic_batch: bool = False):
        """The same network as an onnx.ModelProto: NCHW input, OIHW weights; with dynamic_batch
        the input's and output's first dim is the symbol "batch" (for batched peers)."""
        try:
            import onnx
            from onnx import TensorProto, helper, numpy_helper
        except ImportError:
            raise ImportError("msv0.zoo.to_onnx needs the onnx package: pip install 'msv0[convert]'") from None

        nodes, inits = [], []

        def init(name: str, value: np.ndarray) -> str:
            inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
            return name

        def activation(x: str, act: int, out: str) -> None:
            if act == ActivationType.RELU:
                nodes.append(helper.make_node("Relu", [x], [out]))
            elif act == ActivationType.RELU6:
                lo, hi = init(f"{out}/min", np.float32(0)), init(f"{out}/max", np.float32(6))
                nodes.append(helper.make_node("Clip", [x, lo, hi], [out]))

        for layer in self.layers:
            raw = layer.output + "/pre" if layer.act else layer.output
            up, down, left, right = layer.pads
            k = layer.kernel
            if layer.kind in ("conv", "dwconv"):
                w = init(f"{layer.name}/weight", layer.weight.transpose(0, 3, 1, 2))  # OHWI -> OIHW
                group = layer.weight.shape[0] if layer.kind == "dwconv" else 1
                nodes.append(helper.make_node("Conv", [layer.inputs[0], w, init(f"{layer.name}/bias", layer.bias)],
                                              [raw], kernel_shape=[k, k], strides=[layer.stride] * 2,
                                              pads=[up, left, down, right], group=group))
            elif layer.kind == "maxpool":
                nodes.append(helper.make_node("MaxPool", layer.inputs, [raw], kernel_shape=[k, k],
                                              strides=[layer.stride] * 2, pads=[up, left, down, right]))
            elif layer.kind == "gap":
                nodes.append(helper.make_node("GlobalAveragePool", layer.inputs, [raw]))
            elif layer.kind == "fc":
                flat = layer.name + "/flat"
                nodes.append(helper.make_node("Flatten", layer.inputs, [flat], axis=1))
                nodes.append(helper.make_node("Gemm", [flat, init(f"{layer.name}/weight", layer.weight),
                                                       init(f"{layer.name}/bias", layer.bias)], [raw], transB=1))
            elif layer.kind == "add":
                nodes.append(helper.make_node("Add", layer.inputs, [raw]))
            activation(raw, layer.act, layer.output)
        n, h, w, c = self.input_shape
        batch = "batch" if dynamic_batch else n
        graph = helper.make_graph(
            nodes, self.name,
            [helper.make_tensor_value_info(self.input_name, TensorProto.FLOAT, [batch, c, h, w])],
            [helper.make_tensor_value_info(self.output, TensorProto.FLOAT,
                                           [batch, *self.layers[-1].out_shape[1:]])],
            inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def ms_primitive(layer: Layer, in_shape: tuple[int, ...]) -> tuple[str, dict]:
    """The v0 primitive name and attributes of a layer (r1.1 converter conventions)."""
    up, down, left, right = layer.pads
    window = dict(strideH=layer.stride, strideW=layer.stride, padMode=layer.pad_mode,
                  padUp=up, padDown=down, padLeft=left, padRight=right)
    if layer.kind == "conv":
        cout, k, _, cin = layer.weight.shape
        return "Conv2D", dict(window, format=Format.NHWC, group=1, channelIn=cin, channelOut=cout, kernelH=k,
                              kernelW=k, dilateH=1, dilateW=1, hasBias=True, activationType=layer.act)
    if layer.kind == "dwconv":
        c, k = layer.weight.shape[:2]
        return "DepthwiseConv2D", dict(window, format=Format.NHWC, channelIn=c, channelMultiplier=1, kernelH=k,
                                       kernelW=k, dilateH=1, dilateW=1, hasBias=True, activationType=layer.act)
    if layer.kind == "maxpool":
        return "Pooling", dict(window, format=Format.NHWC, poolingMode=PoolMode.MAX_POOLING, windowH=layer.kernel,
                               windowW=layer.kernel, roundMode=RoundMode.FLOOR)
    if layer.kind == "gap":
        return "Pooling", dict(format=Format.NHWC, poolingMode=PoolMode.MEAN_POOLING, windowH=in_shape[1],
                               windowW=in_shape[2], strideH=1, strideW=1, padMode=PadMode.NOTSET,
                               roundMode=RoundMode.FLOOR, global_=True)
    if layer.kind == "fc":
        return "FullConnection", dict(hasBias=True, useAxis=False, activationType=layer.act)
    if layer.kind == "add":
        return "Add", dict(activationType=layer.act)
    raise ValueError(f"unknown layer kind {layer.kind!r}")


# ---- the networks ----------------------------------------------------------------------------
def _divisible(v: float, divisor: int = 8) -> int:
    """MobileNetV2's channel rounding: to a multiple of 8, never below 90% of v."""
    out = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * v else out


def _inverted_residuals(net: Net, x: str, settings, width: float, cin: int) -> tuple[str, int]:
    for t, c, n, s in settings:
        cout = _divisible(c * width)
        for i in range(n):
            stride = s if i == 0 else 1
            h = x
            if t != 1:
                h = net.conv(h, cin * t, 1, act=ActivationType.RELU6)
            h = net.dwconv(h, 3, stride, act=ActivationType.RELU6)
            residual = stride == 1 and cin == cout
            h = net.conv(h, cout, 1, gain=RESIDUAL_SCALE if residual else 0.7)
            x = net.add(x, h) if residual else h
            cin = cout
    return x, cin


MOBILENET_V2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1)]


def mobilenet_v2_net(width: float = 1.0, resolution: int = 224, seed: int = 0, classes: int = 1000) -> Net:
    net = Net("mobilenet_v2", (1, resolution, resolution, 3), rng=np.random.default_rng(seed))
    stem = _divisible(32 * width)
    x = net.conv(net.input_name, stem, 3, 2, act=ActivationType.RELU6)
    x, c = _inverted_residuals(net, x, MOBILENET_V2, width, stem)
    x = net.conv(x, _divisible(1280 * max(1.0, width)), 1, act=ActivationType.RELU6)
    net.fc(net.gap(x), classes)
    return net


def mobilenet_tiny_net(resolution: int = 64, seed: int = 0, classes: int = 10) -> Net:
    """A small MobileNetV2-like network (SAME_UPPER strided convs) for the demo and tests."""
    net = Net("mobilenet_tiny", (1, resolution, resolution, 3), same_upper=True, rng=np.random.default_rng(seed))
    x = net.conv(net.input_name, 16, 3, 2, act=ActivationType.RELU6)
    x, _ = _inverted_residuals(net, x, [(1, 8, 1, 1), (6, 16, 2, 2), (6, 24, 2, 2)], 1.0, 16)
    x = net.conv(x, 64, 1, act=ActivationType.RELU6)
    net.fc(net.gap(x), classes)
    return net


def _basic_block(net: Net, x: str, cout: int, stride: int) -> str:
    h = net.conv(x, cout, 3, stride, act=ActivationType.RELU)
    h = net.conv(h, cout, 3, 1, gain=RESIDUAL_SCALE)
    shortcut = x if stride == 1 and net.shape(x)[-1] == cout else net.conv(x, cout, 1, stride)
    return net.add(shortcut, h, act=ActivationType.RELU)


def _bottleneck(net: Net, x: str, cout: int, stride: int) -> str:
    mid = cout // 4
    h = net.conv(x, mid, 1, act=ActivationType.RELU)
    h = net.conv(h, mid, 3, stride, act=ActivationType.RELU)  # stride on the 3x3 (ResNet v1.5)
    h = net.conv(h, cout, 1, gain=RESIDUAL_SCALE)
    shortcut = x if stride == 1 and net.shape(x)[-1] == cout else net.conv(x, cout, 1, stride)
    return net.add(shortcut, h, act=ActivationType.RELU)


def _resnet(name: str, block: Callable, depths: list[int], expansion: int, resolution: int, seed: int,
            classes: int) -> Net:
    net = Net(name, (1, resolution, resolution, 3), rng=np.random.default_rng(seed))
    x = net.conv(net.input_name, 64, 7, 2, act=ActivationType.RELU)
    x = net.maxpool(x, 3, 2)
    for stage, depth in enumerate(depths):
        for i in range(depth):
            x = block(net, x, 64 * 2**stage * expansion, 2 if i == 0 and stage > 0 else 1)
    net.fc(net.gap(x), classes)
    return net


def resnet18_net(resolution: int = 224, seed: int = 0, classes: int = 1000) -> Net:
    return _resnet("resnet18", _basic_block, [2, 2, 2, 2], 1, resolution, seed, classes)


def resnet50_net(resolution: int = 224, seed: int = 0, classes: int = 1000) -> Net:
    return _resnet("resnet50", _bottleneck, [3, 4, 6, 3], 4, resolution, seed, classes)


NETS: dict[str, Callable[..., Net]] = {
    "mobilenet_v2": mobilenet_v2_net,
    "mobilenet_tiny": mobilenet_tiny_net,
    "resnet18": resnet18_net,
    "resnet50": resnet50_net,
}


def mobilenet_v2(width: float = 1.0, resolution: int = 224, seed: int = 0) -> bytes:
    return mobilenet_v2_net(width, resolution, seed).to_ms()


def mobilenet_tiny(resolution: int = 64, seed: int = 0) -> bytes:
    return mobilenet_tiny_net(resolution, seed).to_ms()


def resnet18(resolution: int = 224, seed: int = 0) -> bytes:
    return resnet18_net(resolution, seed).to_ms()


def resnet50(resolution: int = 224, seed: int = 0) -> bytes:
    return resnet50_net(resolution, seed).to_ms()


def to_onnx(name: str, **kwargs):
    """The ONNX twin of zoo network `name` built with the same arguments (same weights)."""
    if name not in NETS:
        raise ValueError(f"unknown network {name!r}; known: {sorted(NETS)}")
    return NETS[name](**kwargs).to_onnx()
