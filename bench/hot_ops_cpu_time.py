"""Single-thread Session.run time of two networks whose hot paths are the ops real pretrained
models have between their convolutions, in thread CPU time (medians): a face-mesh-shaped net
(192x192, 23 PReLU, channel Pad on the residuals, a DeDepthwiseConv2D ×2 upsample) and a
MobileNetV3-Small-shaped net (HSWISH, squeeze-excite HSIGMOID and broadcast Mul). Also prints
how many of the plan's steps run outside native Programs (NumPy, with Python between layers).

    python bench/hot_ops_cpu_time.py [runs, default 200]
"""
import sys

import numpy as np

import msv0
from msv0.builder import Builder
from msv0.fb.ActivationType import ActivationType as Act
from msv0.fb.Format import Format
from msv0.fb.PaddingMode import PaddingMode
from msv0.fb.PoolMode import PoolMode
from msv0.fb.RoundMode import RoundMode

from cpu_time import cpu_time


class Net:
    """A builder that tracks the NHWC shape of one running tensor."""

    def __init__(self, name, shape, seed=0):
        self.b, self.rng = Builder(name), np.random.default_rng(seed)
        self.x, self.shape = self.b.input("x", shape), list(shape)
        self.feed = self.rng.standard_normal(shape).astype(np.float32)

    def _out(self, op, inputs, shape, **attrs):
        y = self.b.tensor(f"t{len(self.b.graph.nodes)}")
        self.b.node(op, inputs, outputs=[y], **attrs)
        return y, list(shape)

    def conv(self, x, shape, cout, k=1, s=1, act=Act.NO_ACTIVATION, depthwise=False):
        n, h, w, cin = shape
        p = k // 2
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        wshape = (cin, k, k, 1) if depthwise else (cout, k, k, cin)
        fan_in = k * k * (1 if depthwise else cin)
        wt = (self.rng.standard_normal(wshape) * np.sqrt(2 / fan_in)).astype(np.float32)
        c = cin if depthwise else cout
        ins = [x, self.b.const(f"w{len(self.b.graph.allTensors)}", wt, format=Format.KHWC),
               self.b.const(f"b{len(self.b.graph.allTensors)}", np.zeros(c, np.float32))]
        window = dict(format=Format.NHWC, kernelH=k, kernelW=k, strideH=s, strideW=s, dilateH=1, dilateW=1,
                      padUp=p, padDown=p, padLeft=p, padRight=p, hasBias=True, activationType=act)
        if depthwise:
            return self._out("DepthwiseConv2D", ins, (n, oh, ow, c), channelIn=cin, channelMultiplier=1, **window)
        return self._out("Conv2D", ins, (n, oh, ow, c), group=1, channelIn=cin, channelOut=cout, **window)

    def act(self, x, shape, kind):
        return self._out("Activation", [x], shape, type=kind)

    def prelu(self, x, shape):
        slope = (0.1 + 0.2 * self.rng.random(shape[-1])).astype(np.float32)
        return self._out("PReLU", [x, self.b.const(f"s{len(self.b.graph.allTensors)}", slope)], shape)

    def finish(self, y):
        self.b.output(y)
        return self.b.finish()


def face_mesh():
    """BlazeFace/FaceMesh-style residual blocks: dw 3x3 → 1x1 conv, + residual (max-pooled
    when strided, zero-padded on channels when widening), PReLU."""
    net = Net("face_mesh_like", (1, 192, 192, 3))
    x, s = net.conv(net.x, net.shape, 16, 3, 2)
    x, s = net.prelu(x, s)
    for cout, stride in [(16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (128, 1), (128, 2),
                         (128, 1), (128, 1), (128, 2), (128, 1), (128, 1), (128, 1), (128, 1), (128, 1), (128, 1),
                         (128, 1), (128, 1), (128, 1)]:
        y, ys = net.conv(x, s, s[3], 3, stride, depthwise=True)
        y, ys = net.conv(y, ys, cout, 1)
        r, rs = x, s
        if stride == 2:
            r, rs = net._out("Pooling", [r], (1, ys[1], ys[2], s[3]), format=Format.NHWC,
                             poolingMode=PoolMode.MAX_POOLING, windowH=2, windowW=2, strideH=2, strideW=2,
                             roundMode=RoundMode.FLOOR)
        if cout != s[3]:
            r, rs = net._out("Pad", [r], ys, paddings=[0, 0, 0, 0, 0, 0, 0, cout - s[3]],
                             paddingMode=PaddingMode.CONSTANT)
        x, s = net._out("Add", [y, r], ys)
        x, s = net.prelu(x, s)
    # A ×2 bilinear-style upsample (DeDepthwiseConv2D, stride 2) into a 1x1 head.
    wt = np.tile(np.outer([0.25, 0.75, 0.75, 0.25], [0.25, 0.75, 0.75, 0.25]), (s[3], 1, 1))[..., None]
    up, us = net._out("DeDepthwiseConv2D", [x, net.b.const("up", wt.astype(np.float32), format=Format.KHWC)],
                      (1, 2 * s[1], 2 * s[2], s[3]), format=Format.NHWC, channelIn=s[3], channelMultiplier=1,
                      kernelH=4, kernelW=4, strideH=2, strideW=2, dilateH=1, dilateW=1, padUp=1, padDown=1,
                      padLeft=1, padRight=1)
    y, _ = net.conv(up, us, 32, 1)
    return net.finish(y), net.feed


def mobilenet_v3_small():
    net = Net("mobilenet_v3_small_like", (1, 224, 224, 3))
    x, s = net.conv(net.x, net.shape, 16, 3, 2)
    x, s = net.act(x, s, Act.HSWISH)
    # (expand, out, kernel, squeeze-excite, hswish, stride)
    for e, cout, k, se, hs, stride in [(16, 16, 3, True, False, 2), (72, 24, 3, False, False, 2),
                                       (88, 24, 3, False, False, 1), (96, 40, 5, True, True, 2),
                                       (240, 40, 5, True, True, 1), (240, 40, 5, True, True, 1),
                                       (120, 48, 5, True, True, 1), (144, 48, 5, True, True, 1),
                                       (288, 96, 5, True, True, 2), (576, 96, 5, True, True, 1),
                                       (576, 96, 5, True, True, 1)]:
        fused = Act.NO_ACTIVATION if hs else Act.RELU
        y, ys = (x, s) if e == s[3] else net.conv(x, s, e, 1, act=fused)
        if hs and e != s[3]:
            y, ys = net.act(y, ys, Act.HSWISH)
        y, ys = net.conv(y, ys, e, k, stride, act=fused, depthwise=True)
        if hs:
            y, ys = net.act(y, ys, Act.HSWISH)
        if se:
            g, gs = net._out("Pooling", [y], (1, 1, 1, e), format=Format.NHWC, poolingMode=PoolMode.MEAN_POOLING,
                             windowH=ys[1], windowW=ys[2], strideH=1, strideW=1, roundMode=RoundMode.FLOOR,
                             global_=True)
            g, gs = net.conv(g, gs, max(8, e // 4), 1, act=Act.RELU)
            g, gs = net.conv(g, gs, e, 1)
            g, gs = net.act(g, gs, Act.HSIGMOID)
            y, ys = net._out("Mul", [y, g], ys)
        y, ys = net.conv(y, ys, cout, 1)
        if stride == 1 and cout == s[3]:
            y, ys = net._out("Add", [y, x], ys)
        x, s = y, ys
    x, s = net.conv(x, s, 576, 1)
    x, s = net.act(x, s, Act.HSWISH)
    return net.finish(x), net.feed


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    for build in (face_mesh, mobilenet_v3_small):
        model, feed = build()
        session = msv0.Session(model, num_threads=1)
        (plan,) = session._idle[0].plans.values()
        numpy_steps = sum(s.label != "native program" for s in plan.steps)
        programs = len(plan.steps) - numpy_steps
        ms = cpu_time(lambda: session.run([feed]), runs, warmup=5) * 1e3
        print(f"{build.__name__} [{msv0.isa()}, 1 thread]: {ms:.3f} ms median thread CPU time over {runs} runs; "
              f"{programs} native Program(s), {numpy_steps} NumPy step(s)", flush=True)


if __name__ == "__main__":
    main()
