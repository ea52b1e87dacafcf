"""ONNX ops written as several v0 ops (onnx_unary): runtime inputs on odd shapes, 3-D and 4-D (held
NHWC inside), edge values included, each compared with onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper  # noqa: E402

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402
from onnxcheck import IR_VERSION, run_msv0, run_ort  # noqa: E402

R = np.random.default_rng(7)
SHAPES = [(3, 5, 7), (2, 3, 5, 7)]
INF, NAN = np.inf, np.nan


def model(op, inputs, out_elem=T.FLOAT, opset=18, **attrs):
    """One `op` node reading graph inputs [(name, elem type, shape)], output y."""
    g = h.make_graph([h.make_node(op, [n for n, _, _ in inputs], ["y"], **attrs)], "g",
                     [h.make_tensor_value_info(n, e, s) for n, e, s in inputs],
                     [h.make_tensor_value_info("y", out_elem, None)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=IR_VERSION)


def compare(m, feeds, exact=False):
    data = m.SerializeToString()
    want, got = run_ort(data, feeds)["y"], run_msv0(data, feeds)["y"]
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def data(shape, edges, lo=None, hi=None, dtype=np.float32):
    """Normal values (uniform in [lo, hi] when given) with `edges` written over the first ones."""
    x = R.standard_normal(shape) * 3 if lo is None else R.uniform(lo, hi, shape)
    x = x.astype(dtype)
    x.reshape(-1)[:len(edges)] = edges
    return x


SPECIAL = [0.0, -0.0, INF, -INF, NAN, 1e-30, -1e-30]
UNARY = {
    "Mish": ({}, SPECIAL + [9.0, 20.0, 21.0, 100.0, -20.0, -100.0, 3e38, -3e38], {}),
    "Selu": ({}, SPECIAL + [100.0, -100.0], {}),
    "Selu_attrs": ({"alpha": 2.5, "gamma": 0.5}, SPECIAL + [100.0, -100.0], {}),
    "Celu": ({}, SPECIAL + [100.0, -100.0], {}),
    "Celu_alpha": ({"alpha": 2.5}, SPECIAL + [100.0, -100.0], {}),
    "ThresholdedRelu": ({"alpha": 0.5}, SPECIAL + [0.5, 0.50000006], {}),
    "Shrink": ({"lambd": 1.5, "bias": 0.5}, SPECIAL + [1.5, -1.5, 1.5000001], {}),
    "Shrink_default": ({}, SPECIAL + [0.5, -0.5], {}),
    "Sign": ({}, SPECIAL, {}),
    "Round": ({}, SPECIAL + [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 8388607.5, -8388609.0, 3e38], {}),
    "Cosh": ({}, SPECIAL + [1e-5, 50.0, 88.8, -89.4, 89.5, -90.0], {}),
    "Sinh": ({}, SPECIAL + [1e-5, -1e-3, 50.0, 88.8, -89.4, 89.5, -90.0], {}),
    "Acos": ({}, SPECIAL + [1.0, -1.0, 0.99999994, -0.99999994, 1.5, -1.5], {"lo": -1, "hi": 1}),
    "Acosh": ({}, [1.0, 1.0000001, 0.5, 1e20, 3e38, INF, NAN, -INF], {"lo": 1, "hi": 20}),
    "Asinh": ({}, SPECIAL + [4096.0, 4097.0, -5000.0, 1e20, -1e20, 3e38, -3e38], {}),
    "Atanh": ({}, SPECIAL + [1.0, -1.0, 0.99999994, -0.99999994, 2.0], {"lo": -1, "hi": 1}),
}


@pytest.mark.parametrize("shape", SHAPES, ids=["3d", "4d"])
@pytest.mark.parametrize("case", UNARY)
def test_unary(case, shape):
    attrs, edges, rng = UNARY[case]
    op = case.split("_")[0]
    x = data(shape, edges, **rng)
    m = model(op, [("x", T.FLOAT, shape)], **attrs)
    compare(m, {"x": x})
    # element-wise: a 4-D input stays NHWC throughout
    assert "Transpose" not in {n.op for n in msv0.load(convert(m.SerializeToString())).nodes}


@pytest.mark.parametrize("elem,dtype", [(T.INT32, np.int32), (T.INT64, np.int64), (T.INT8, np.int8),
                                        (T.UINT8, np.uint8)])
def test_sign_integers(elem, dtype):
    info = np.iinfo(dtype)
    x = data((3, 5, 7), [0, 1, info.min, info.max, info.max - 1, info.min + 1], lo=info.min, hi=info.max, dtype=dtype)
    compare(model("Sign", [("x", elem, (3, 5, 7))], out_elem=elem), {"x": x}, exact=True)


@pytest.mark.parametrize("elem,dtype", [(T.INT32, np.int32), (T.INT64, np.int64)])
@pytest.mark.parametrize("lambd,bias", [(1.5, 2.0), (-0.5, 1.0), (3.0, -4.0)])
def test_shrink_integers(elem, dtype, lambd, bias):
    x = data((2, 3, 5, 7), [0, 1, -1, 2, -2, 3, -3, 4], lo=-20, hi=20, dtype=dtype)
    compare(model("Shrink", [("x", elem, (2, 3, 5, 7))], out_elem=elem, lambd=lambd, bias=bias), {"x": x},
            exact=True)


@pytest.mark.parametrize("shape", SHAPES, ids=["3d", "4d"])
@pytest.mark.parametrize("pos,neg", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_is_inf(pos, neg, shape):
    x = data(shape, SPECIAL + [3.4028235e38, -3.4028235e38])
    m = model("IsInf", [("x", T.FLOAT, shape)], out_elem=T.BOOL, detect_positive=pos, detect_negative=neg)
    compare(m, {"x": x}, exact=True)


@pytest.mark.parametrize("src,dst", [(T.FLOAT, T.INT32), (T.INT32, T.FLOAT), (T.BOOL, T.FLOAT), (T.FLOAT, T.FLOAT),
                                     (T.FLOAT, T.FLOAT16), (T.FLOAT16, T.FLOAT), (T.INT32, T.INT64)])
def test_cast_like(src, dst):
    shape = (2, 3, 5, 7)
    x = data(shape, [0.0, -0.0, 0.5, -0.5, 2.9, -2.9]) * 10
    x = x.astype(h.tensor_dtype_to_np_dtype(src))
    like = np.zeros((2,), h.tensor_dtype_to_np_dtype(dst))
    m = model("CastLike", [("x", src, shape), ("like", dst, (2,))], out_elem=dst)
    compare(m, {"x": x, "like": like}, exact=True)


HARDMAX = {  # (opset, axis or None for the default, input shape)
    "axis_last": (13, None, (3, 5, 7)),
    "axis_channel_nhwc": (13, 1, (2, 3, 5, 7)),
    "axis_0_nhwc": (13, 0, (2, 3, 5, 7)),
    "axis_neg2": (13, -2, (2, 3, 5, 7)),
    "rank5": (13, 2, (2, 3, 4, 5, 3)),
    "rank1": (13, None, (7,)),
    "coerced_default": (11, None, (2, 3, 5, 7)),
    "coerced_axis2": (11, 2, (3, 5, 7)),
    "coerced_last": (11, 3, (2, 3, 5, 7)),
}


@pytest.mark.parametrize("case", HARDMAX)
def test_hardmax(case):
    opset, axis, shape = HARDMAX[case]
    x = np.round(data(shape, [])).astype(np.float32)  # few distinct values: ties pick the first maximum
    attrs = {} if axis is None else {"axis": axis}
    compare(model("Hardmax", [("x", T.FLOAT, shape)], opset=opset, **attrs), {"x": x}, exact=True)


@pytest.mark.parametrize("op,elem,attrs,why", [
    ("Shrink", T.INT32, {"bias": 0.5}, "integral bias"),
    ("Shrink", T.INT8, {}, "Shrink on int8"),
    ("Mish", T.DOUBLE, {}, "float32 only"),
    ("IsInf", T.FLOAT16, {}, "float32 only"),
])
def test_refused(op, elem, attrs, why):
    m = model(op, [("x", elem, (3, 5))], out_elem=T.BOOL if op == "IsInf" else elem, **attrs)
    with pytest.raises(msv0.UnsupportedOpError, match=why):
        convert(m.SerializeToString())


@pytest.mark.parametrize("x_shape,sizes,axes", [((7, 6, 5), (4, 9, 5), None), ((2, 3, 9, 8), (5, 11), (2, 3)),
                                                ((2, 3, 9, 8), (4, 1), (-1, 1)), ((5, 4), (5, 4), None)])
def test_center_crop_pad(x_shape, sizes, axes):
    """Crop and pad about the centre (odd differences put the extra cell at the end), 4-D inputs
    held NHWC; the target sizes an initializer, as exporters write them."""
    attrs = {} if axes is None else {"axes": list(axes)}
    g = h.make_graph([h.make_node("CenterCropPad", ["x", "shape"], ["y"], **attrs)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, x_shape)], [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [numpy_helper.from_array(np.array(sizes, np.int64), "shape")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)], ir_version=IR_VERSION)
    compare(m, {"x": R.standard_normal(x_shape).astype(np.float32)}, exact=True)


@pytest.mark.parametrize("sizes,axes", [((3, 9, 4), (1, 2, 3)), ((8, 1), (-2, 0))])
def test_center_crop_pad_after_conv(sizes, axes):
    """On a Conv's NHWC result the crop and pad are done in place: no Transpose to ONNX's order."""
    w = R.standard_normal((4, 3, 3, 3)).astype(np.float32)
    g = h.make_graph([h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                      h.make_node("CenterCropPad", ["c", "shape"], ["y"], axes=list(axes))], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, (2, 3, 6, 7))],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(sizes, np.int64), "shape")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)], ir_version=IR_VERSION)
    compare(m, {"x": R.standard_normal((2, 3, 6, 7)).astype(np.float32)})
    assert "Transpose" not in {n.op for n in msv0.load(convert(m.SerializeToString())).nodes}
