"""C++ Programs (runs of native steps) compute exactly what calling each kernel object alone does."""
import numpy as np
import pytest

import msv0
from msv0.builder import Builder
from msv0.fb.Format import Format
from oprun import assert_program_matches_single_calls


def small_cnn(rng) -> bytes:
    b = Builder("native")
    x = b.input("x", (1, 13, 11, 5))
    w = b.const("w", rng.standard_normal((8, 3, 3, 5)).astype(np.float32), format=Format.KHWC)
    y = b.node("Conv2D", [x, w], kernelH=3, kernelW=3, strideH=1, strideW=1, dilateH=1, dilateW=1, group=1, padMode=1,
               activationType=3)
    dw = b.const("dw", rng.standard_normal((8, 3, 3, 1)).astype(np.float32), format=Format.KHWC)
    y = b.node("DepthwiseConv2D", [y, dw, b.const("db", rng.standard_normal(8).astype(np.float32))],
               kernelH=3, kernelW=3, strideH=2, strideW=2, dilateH=1, dilateW=1, padMode=1, channelMultiplier=1,
               activationType=1)
    y = b.node("Pooling", [y], poolingMode=0, windowH=2, windowW=2, strideH=1, strideW=1, padMode=2)
    y = b.node("Pooling", [y], poolingMode=1, global_=True)
    y = b.node("Reshape", [y], shape=[1, 8])
    fc = b.const("fc", rng.standard_normal((6, 8)).astype(np.float32))
    y = b.node("FullConnection", [y, fc])
    b.output(y)
    return b.finish()


@pytest.mark.parametrize("threads", [1, 2])
def test_program_matches_single_calls(isa, rng, threads):
    x = rng.standard_normal((1, 13, 11, 5)).astype(np.float32)
    assert_program_matches_single_calls(msv0.load(small_cnn(rng)), [x], threads)
