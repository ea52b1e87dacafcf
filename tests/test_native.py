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


def test_run_copies_feeds_in_and_results_out(rng):
    """A run copies contiguous and strided feeds alike, and each result is a fresh array: changing
    the feed or a result afterwards changes nothing else."""
    b = Builder("copies")
    x = b.input("x", (3, 5, 4))
    b.output(b.node("Activation", [x], type=1))  # RELU
    session = msv0.Session(b.finish())
    base = rng.standard_normal((5, 3, 4)).astype(np.float32)
    for feed in (np.ascontiguousarray(base.transpose(1, 0, 2)), base.transpose(1, 0, 2)):
        want = np.maximum(feed, 0)
        first = next(iter(session.run({"x": feed}).values()))
        second = next(iter(session.run([feed]).values()))
        np.testing.assert_array_equal(first, want)
        assert first.flags.c_contiguous and first.flags.writeable and not np.shares_memory(first, second)
        first[...] = -1
        feed[...] = 7
        np.testing.assert_array_equal(second, want)


def test_copy_helpers_refuse_what_they_cannot_fill():
    with pytest.raises(ValueError, match="one array per buffer"):
        msv0._core.copy_in([np.zeros(3, np.float32)], [])
    with pytest.raises(ValueError, match="writable"):
        ro = np.zeros(3, np.float32)
        ro.flags.writeable = False
        msv0._core.copy_in([ro], [np.ones(3, np.float32)])
    with pytest.raises(ValueError, match="NumPy"):
        msv0._core.copies([[1.0, 2.0]])
    assert [a.tolist() for a in msv0._core.copies([np.arange(6.0)[::2]])] == [[0.0, 2.0, 4.0]]
