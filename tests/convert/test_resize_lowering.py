"""Resizes r1.1's Resize cannot mean (half-pixel, fractional scales, other nearest roundings), converted
to ops whose r1.1 meaning is that result, compared with ONNX Runtime and the LiteRT interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import msv0

R = np.random.default_rng(7)


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())


ONNX_CASES = [  # mode, coordinate_transformation_mode, nearest_mode, input [N, C, H, W], sizes or scales
    ("linear", "half_pixel", None, (1, 3, 5, 7), ("sizes", (10, 14))),
    ("linear", "pytorch_half_pixel", None, (2, 4, 1, 6), ("scales", (2.0, 2.0))),
    ("linear", "half_pixel", None, (1, 2, 6, 9), ("sizes", (9, 4))),
    ("linear", "pytorch_half_pixel", None, (1, 2, 6, 5), ("sizes", (1, 15))),
    ("linear", "asymmetric", None, (1, 2, 4, 5), ("scales", (1.5, 2.5))),
    ("linear", "half_pixel_symmetric", None, (1, 2, 5, 7), ("scales", (1.7, 0.6))),
    ("nearest", "half_pixel_symmetric", "round_prefer_floor", (1, 2, 5, 7), ("scales", (2.3, 0.45))),
    ("linear", "align_corners", None, (1, 3, 5, 4), ("sizes", (9, 7))),
    ("nearest", "half_pixel", "round_prefer_floor", (1, 3, 4, 5), ("scales", (3.0, 2.0))),
    ("nearest", "half_pixel", "round_prefer_ceil", (1, 3, 6, 9), ("sizes", (4, 4))),
    ("nearest", "asymmetric", "ceil", (1, 2, 5, 5), ("sizes", (8, 11))),
    ("nearest", "align_corners", "round_prefer_floor", (1, 2, 4, 6), ("sizes", (7, 9))),
    ("nearest", "asymmetric", "floor", (1, 2, 4, 6), ("scales", (2.0, 3.0))),
]


def _onnx_resize(mode, coord, nearest, shape, target, **extra):
    """A Resize of x [N, C, H, W] to target ("sizes" or "scales" of H and W; of those alone when
    extra has axes)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as T, helper as h, numpy_helper as nh
    from onnxcheck import IR_VERSION
    attrs = dict(mode=mode, coordinate_transformation_mode=coord, **extra)
    if nearest:
        attrs["nearest_mode"] = nearest
    kind, vals = target
    if kind == "sizes":
        inits = [nh.from_array(np.array(vals if "axes" in extra else shape[:2] + vals, np.int64), "sz")]
        node = h.make_node("Resize", ["x", "", "", "sz"], ["y"], **attrs)
    else:
        inits = [nh.from_array(np.array(vals if "axes" in extra else (1, 1) + vals, np.float32), "sc")]
        node = h.make_node("Resize", ["x", "", "sc"], ["y"], **attrs)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 19)], ir_version=IR_VERSION)


# What r1.1's Resize has no form for, written as interpolation matrices: cubic (its coefficient,
# exclude_outside), antialiased downscales, and the scale keep_aspect_ratio_policy picks.
FILTER_CASES = [
    ("cubic", "half_pixel", (1, 2, 5, 7), ("scales", (2.0, 1.5)), {}),
    ("cubic", "asymmetric", (1, 3, 6, 5), ("sizes", (4, 9)), dict(cubic_coeff_a=-0.5, exclude_outside=1)),
    ("cubic", "align_corners", (2, 2, 4, 6), ("sizes", (7, 3)), {}),
    ("cubic", "half_pixel", (1, 2, 16, 12), ("sizes", (5, 7)), dict(antialias=1)),
    ("linear", "half_pixel", (1, 2, 15, 11), ("scales", (0.3, 0.6)), dict(antialias=1)),
    ("linear", "pytorch_half_pixel", (1, 3, 9, 8), ("sizes", (4, 16)), dict(antialias=1)),  # down and up
    ("linear", "half_pixel", (1, 2, 9, 6), ("sizes", (4, 5)), dict(antialias=1, exclude_outside=1)),
    ("linear", "half_pixel", (1, 2, 6, 8), ("sizes", (12, 10)), dict(axes=[2, 3], keep_aspect_ratio_policy="not_larger")),
    ("nearest", "asymmetric", (1, 2, 6, 8), ("sizes", (12, 10)), dict(axes=[2, 3], keep_aspect_ratio_policy="not_smaller")),
    ("cubic", "half_pixel", (1, 2, 6, 8), ("scales", (0.5, 1.25)), dict(axes=[-2, -1])),
]


@pytest.mark.parametrize("mode,coord,shape,target,extra", FILTER_CASES, ids=str)
def test_onnx_resize_filters(mode, coord, shape, target, extra):
    from onnxcheck import run_msv0, run_ort
    m = _onnx_resize(mode, coord, "floor" if mode == "nearest" else None, shape, target, **extra)
    x = R.standard_normal(shape).astype(np.float32)
    want = run_ort(m.SerializeToString(), {"x": x})["y"]
    got = run_msv0(m.SerializeToString(), {"x": x})["y"]
    assert got.shape == want.shape
    _close(got, want)


@pytest.mark.parametrize("mode,coord,nearest,shape,target", ONNX_CASES)
def test_onnx_resize(mode, coord, nearest, shape, target):
    from onnxcheck import run_msv0, run_ort
    m = _onnx_resize(mode, coord, nearest, shape, target).SerializeToString()
    x = R.standard_normal(shape).astype(np.float32)
    want = run_ort(m, {"x": x})["y"]
    got = run_msv0(m, {"x": x})["y"]
    assert got.shape == want.shape
    _close(got, want)


def _ops(data):
    return [n.op for n in msv0.load(data).nodes]


@pytest.mark.parametrize("mode,coord,nearest,target,ops", [
    ("linear", "half_pixel", None, ("scales", (2.0, 2.0)), ["Pad", "DeDepthwiseConv2D"]),
    ("nearest", "half_pixel", "round_prefer_floor", ("scales", (2.0, 2.0)), ["Resize"]),
    ("linear", "asymmetric", None, ("scales", (2.0, 2.0)), ["Resize"]),
])
def test_onnx_resize_written_as(mode, coord, nearest, target, ops):
    """Bilinear ×2 half-pixel is r1.1's Pad + DeDepthwiseConv2D; integer nearest and asymmetric stay Resize."""
    from msv0.convert import convert
    m = _onnx_resize(mode, coord, nearest, (1, 3, 4, 5), target)
    assert _ops(convert(m.SerializeToString())) == ops


@pytest.mark.parametrize("mode,nearest,sizes", [("linear", None, (3, 2**32)), ("nearest", "floor", (2**22, 4)),
                                                 ("linear", None, (30000, 4))])
def test_absurd_resize_sizes_are_reported(mode, nearest, sizes):
    """A half-pixel resize to sizes no image has (the converter fuzzer's memory blow-up) is reported
    with the node, its tables never built."""
    from msv0.convert import convert
    m = _onnx_resize(mode, "half_pixel", nearest, (1, 2, 3000, 4), ("sizes", sizes))
    with pytest.raises(msv0.UnsupportedOpError, match="Resize.*(resizing an axis|interpolation matrix)"):
        convert(m.SerializeToString())


@pytest.mark.parametrize("bilinear", [True, False])
@pytest.mark.parametrize("in_hw,out_hw", [((5, 7), (10, 14)), ((4, 6), (7, 3)), ((3, 4), (9, 8))])
def test_tflite_half_pixel_centers(bilinear, in_hw, out_hw):
    pytest.importorskip("tflite")
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    from msv0.convert import convert
    from tflitewriter import TFLiteWriter
    w = TFLiteWriter()
    x = w.input("x", [2, *in_hw, 3])
    code, opts = ("RESIZE_BILINEAR", "ResizeBilinearOptions") if bilinear else \
        ("RESIZE_NEAREST_NEIGHBOR", "ResizeNearestNeighborOptions")
    w.output(w.op(code, [x, w.const(np.array(out_hw, np.int32))], [2, *out_hw, 3], opts, align_corners=False,
                  half_pixel_centers=True))
    data = w.finish()
    feed = R.standard_normal((2, *in_hw, 3)).astype(np.float32)
    it = litert.Interpreter(model_content=data,
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], feed)
    it.invoke()
    want = it.get_tensor(it.get_output_details()[0]["index"])
    got = msv0.Session(msv0.load(convert(data))).run({"x": feed})
    _close(next(iter(got.values())), want)
