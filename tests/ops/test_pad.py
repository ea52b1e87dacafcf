import numpy as np
import pytest

import msv0
from oprun import Const, run_op


def loop_pad(x, pads, mode, value):
    """Per-element reference: each output index maps back to one input index (or the constant)."""
    before = pads[0::2]
    out_shape = [d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(x.shape)]
    out = np.empty(out_shape, x.dtype)
    for o in np.ndindex(*out_shape):
        src = []
        for j, b, d in zip(o, before, x.shape):
            s = j - b
            if mode == 1:
                s = -s if s < 0 else (2 * d - 2 - s if s >= d else s)
            elif mode == 2:
                s = -s - 1 if s < 0 else (2 * d - 1 - s if s >= d else s)
            src.append(s)
        inside = all(0 <= s < d for s, d in zip(src, x.shape))
        out[o] = x[tuple(src)] if inside else value
    return out


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("shape,pads", [((1, 3, 4, 3), [0, 0, 1, 2, 2, 1, 0, 0]), ((5,), [2, 4]),
                                        ((2, 3), [1, 0, 0, 2]), ((1, 4, 4, 7), [1, 1, 3, 0, 0, 3, 2, 1])])
def test_pad_modes(rng, mode, shape, pads):
    x = rng.standard_normal(shape).astype(np.float32)
    if mode == 1 and any(max(pads[2 * i], pads[2 * i + 1]) >= d for i, d in enumerate(shape)):
        pytest.skip("too large for REFLECT")
    (y,) = run_op("Pad", [x], paddings=pads, paddingMode=mode, constantValue=1.5)
    np.testing.assert_array_equal(y, loop_pad(x, pads, mode, 1.5))
    (y,) = run_op("Pad", [x, Const(np.array(pads, np.int32).reshape(-1, 2))], paddingMode=mode, constantValue=1.5)
    np.testing.assert_array_equal(y, loop_pad(x, pads, mode, 1.5))


@pytest.mark.parametrize("pads,mode", [([1, 1], 0), ([0, 0, -1, 0], 0), ([0, 0, 3, 0], 1), ([0, 0, 0, 4], 2),
                                       ([0, 0, 0, 0], 3)])
def test_pad_bad(rng, pads, mode):
    with pytest.raises(msv0.ModelError):
        run_op("Pad", [rng.standard_normal((2, 3)).astype(np.float32)], paddings=pads, paddingMode=mode)


def test_pad_edge_fits(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    (y,) = run_op("Pad", [x], paddings=[0, 0, 2, 2], paddingMode=1)
    np.testing.assert_array_equal(y, np.pad(x, [(0, 0), (2, 2)], mode="reflect"))
    (y,) = run_op("Pad", [x], paddings=[2, 2, 3, 3], paddingMode=2)
    np.testing.assert_array_equal(y, np.pad(x, [(2, 2), (3, 3)], mode="symmetric"))
