"""Conv2D / DeConv2D layer timings (pytest-benchmark), one Session per layer, batch 1.

Run: python -m pytest bench/bench_conv.py --benchmark-enable [-k resnet]
The extra_info column `gflops` is the layer's 2·m·n·k over the median time.
"""
import numpy as np
import pytest

import msv0
from msv0.builder import Builder

CAFFE = 4

# name: (h, w, c, oc, k, stride, pad, group)
LAYERS = {
    "resnet50_3x3_56x64x64": (56, 56, 64, 64, 3, 1, 1, 1),
    "resnet50_1x1_56x64x256": (56, 56, 64, 256, 1, 1, 0, 1),
    "resnet50_1x1_56x256x64": (56, 56, 256, 64, 1, 1, 0, 1),
    "resnet50_3x3_28x128x128": (28, 28, 128, 128, 3, 1, 1, 1),
    "resnet50_1x1s2_56x256x512": (56, 56, 256, 512, 1, 2, 0, 1),
    "resnet50_7x7s2_224x3x64": (224, 224, 3, 64, 7, 2, 3, 1),
    "mobilenetv2_3x3s2_224x3x32": (224, 224, 3, 32, 3, 2, 1, 1),
    "mobilenetv2_1x1_112x32x16": (112, 112, 32, 16, 1, 1, 0, 1),
    "mobilenetv2_1x1_56x24x144": (56, 56, 24, 144, 1, 1, 0, 1),
    "mobilenetv2_1x1_7x960x320": (7, 7, 960, 320, 1, 1, 0, 1),
}


def conv_session(h, w, c, oc, k, stride, pad, group, threads, op="Conv2D"):
    rng = np.random.default_rng(0)
    wshape = (oc, k, k, c // group) if op == "Conv2D" else (c, k, k, oc)
    b = Builder(op)
    x = b.input("x", (1, h, w, c))
    wt = b.const("w", rng.standard_normal(wshape).astype(np.float32), format=7)
    bias = b.const("b", rng.standard_normal(oc).astype(np.float32))
    y = b.tensor("y")
    b.node(op, [x, wt, bias], outputs=[y], group=group, kernelH=k, kernelW=k, strideH=stride, strideW=stride,
           dilateH=1, dilateW=1, padMode=CAFFE, padUp=pad, padDown=pad, padLeft=pad, padRight=pad, activationType=1)
    b.output(y)
    return msv0.Session(b.finish(), num_threads=threads), rng.standard_normal((1, h, w, c)).astype(np.float32)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layer", LAYERS)
def test_conv2d(benchmark, layer, threads):
    h, w, c, oc, k, stride, pad, group = LAYERS[layer]
    session, x = conv_session(h, w, c, oc, k, stride, pad, group, threads)
    benchmark(session.run, [x])
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    if benchmark.stats:
        benchmark.extra_info["gflops"] = 2 * oh * ow * oc * k * k * c / group / benchmark.stats["median"] / 1e9


@pytest.mark.parametrize("threads", [1, 2])
def test_deconv2d_k2s2_14x256x128(benchmark, threads):
    session, x = conv_session(14, 14, 256, 128, 2, 2, 0, 1, threads, op="DeConv2D")
    benchmark(session.run, [x])
