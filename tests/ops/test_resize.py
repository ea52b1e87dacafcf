import math

import numpy as np
import pytest

import msv0
from msv0.builder import Builder
from oprun import Const, assert_program_matches_single_calls, run_op


def loop_resize(x, oh, ow, method, align):
    """Scalar loop model of r1.1's Resize (float32 coordinates, no half-pixel offset)."""
    n, h, w, c = x.shape
    f = np.float32

    def scale(i, o):
        return f(i - 1) / f(o - 1) if align and o > 1 else f(i) / f(o)

    sh, sw = scale(h, oh), scale(w, ow)
    out = np.empty((n, oh, ow, c), np.float32)
    for y in range(oh):
        sy = f(y) * sh
        for xx in range(ow):
            sx = f(xx) * sw
            if method == 1:
                r = (lambda v: math.floor(float(v) + 0.5)) if align else (lambda v: math.floor(float(v)))
                out[:, y, xx] = x[:, min(r(sy), h - 1), min(r(sx), w - 1)]
                continue
            y0, x0 = math.floor(sy), math.floor(sx)
            y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
            wy, wx = f(sy - f(y0)), f(sx - f(x0))
            l0 = x[:, y0, x0] * (f(1) - wx) + x[:, y0, x1] * wx
            l1 = x[:, y1, x0] * (f(1) - wx) + x[:, y1, x1] * wx
            out[:, y, xx] = l0 * (f(1) - wy) + l1 * wy
    return out


@pytest.mark.parametrize("method", [0, 1])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("shape,oh,ow", [((1, 4, 5, 3), 8, 10), ((2, 3, 3, 1), 7, 2), ((1, 6, 9, 7), 4, 3),
                                         ((1, 1, 1, 2), 3, 1), ((1, 5, 4, 16), 5, 4), ((1, 3, 4, 19), 6, 9)])
def test_resize_attr_and_size_tensor(isa, rng, method, align, shape, oh, ow):
    """Bit for bit: the kernel keeps r1.1's unfused order of operations on every tier."""
    x = rng.standard_normal(shape).astype(np.float32)
    want = loop_resize(x, oh, ow, method, align)
    (y,) = run_op("Resize", [x], method=method, newHeight=oh, newWidth=ow, alignCorners=align)
    np.testing.assert_array_equal(y, want)
    (y,) = run_op("Resize", [x, Const(np.array([oh, ow], np.int32))], method=method, alignCorners=align)
    np.testing.assert_array_equal(y, want)


def test_resize_kernel_checks_its_tables():
    with pytest.raises(ValueError, match="x0: index out of range"):
        msv0._core.Resize((1, 2, 3, 4), (1, 2, 2, 4), [0, 1], [0, 3])
    with pytest.raises(ValueError, match="y0: expected one entry"):
        msv0._core.Resize((1, 2, 3, 4), (1, 2, 2, 4), [0], [0, 1])
    with pytest.raises(ValueError, match="wy, wx"):
        msv0._core.Resize((1, 2, 3, 4), (1, 2, 2, 4), [0, 1], [0, 1], [1, 1], [1, 2], [0.5], [0.5, 0.5])


def test_resize_runs_in_the_program(rng):
    b = Builder("resize")
    x = b.input("x", (1, 5, 6, 19), np.float32)
    r, y = b.tensor("r"), b.tensor("y")
    b.node("Resize", [x], outputs=[r], method=0, newHeight=11, newWidth=7)
    b.node("Activation", [r], outputs=[y], type=1)
    b.output(y)
    feeds = [rng.standard_normal((1, 5, 6, 19)).astype(np.float32)]
    for threads in (1, 2):
        assert_program_matches_single_calls(b.finish(), feeds, threads, program_steps=2)


def test_resize_ignores_coordinate_transform_mode(rng):
    x = rng.standard_normal((1, 3, 4, 2)).astype(np.float32)
    (y,) = run_op("Resize", [x], method=0, newHeight=6, newWidth=8, coordinateTransformMode=1)
    np.testing.assert_allclose(y, loop_resize(x, 6, 8, 0, False), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fmt,scales", [(1, [1, 2, 3, 1]), (0, [1, 1, 2, 3])])
def test_resize_nearest_scale_form(rng, fmt, scales):
    x = rng.standard_normal((1, 3, 4, 2)).astype(np.float32)
    (y,) = run_op("Resize", [x, Const(np.array(scales, np.float32), format=fmt)], method=1)
    np.testing.assert_array_equal(y, loop_resize(x, 6, 12, 1, False))


@pytest.mark.parametrize("inputs,attrs", [
    ("scale", dict(method=0)), ("attr", dict(method=2, newHeight=2, newWidth=2)),
    ("attr", dict(method=0, newHeight=2, newWidth=2, preserveAspectRatio=True)),
    ("attr", dict(method=0, newHeight=0, newWidth=2)), ("size64", dict(method=0)),
])
def test_resize_bad(rng, inputs, attrs):
    x = rng.standard_normal((1, 3, 4, 2)).astype(np.float32)
    ins = {"scale": [x, Const(np.array([1, 2, 2, 1], np.float32))], "attr": [x],
           "size64": [x, Const(np.array([2, 2], np.int64))]}[inputs]
    with pytest.raises(msv0.ModelError):
        run_op("Resize", ins, **attrs)
    with pytest.raises(msv0.ModelError):
        run_op("Resize", [x[0]], method=0, newHeight=2, newWidth=2)
