"""ONNX GroupNormalization, RMSNormalization, MeanVarianceNormalization, LpNormalization, LpPool,
GlobalLpPool and RNN -> v0 ops (onnx_norm), compared with ONNX Runtime on the same model.

The data are graph inputs (runtime values) of odd shapes; 4-D inputs run both held NHWC, as the
converter keeps them, and NCHW (keep_nchw). Data with a large mean check that the variance is
not E[x²] − mean², which cancels: ONNX's own GroupNormalization and MeanVarianceNormalization
function bodies, which ONNX Runtime runs, are written that way, so those cases are compared with
the formula in float64 instead."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402
from onnxcheck import IR_VERSION, check, run_msv0  # noqa: E402

R = np.random.default_rng(23)
N = h.make_node


def f32(*shape, mean=0.0, scale=1.0):
    return (R.standard_normal(shape) * scale + mean).astype(np.float32)


def model(node, inputs, inits=(), opset=21, outputs=("y",)):
    """One node; inputs [(name, shape)] are graph inputs, inits [(name, array)] initializers."""
    g = h.make_graph([node], "g", [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in inputs],
                     [h.make_tensor_value_info(o, T.FLOAT, None) for o in outputs if o],
                     [nh.from_array(v, k) for k, v in inits])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=IR_VERSION)


def refused(m, *words):
    with pytest.raises(msv0.UnsupportedOpError) as err:
        convert(m.SerializeToString())
    for w in words:
        assert w in str(err.value)


def close_to(m, feeds, want, keep_nchw=False):
    got = run_msv0(m.SerializeToString(), feeds, keep_nchw=keep_nchw)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def group_norm_f64(x, groups, scale, bias, eps=1e-5):
    """Opset 21's definition (scale and bias per channel), in float64."""
    n, ch = x.shape[:2]
    g = x.astype(np.float64).reshape(n, groups, -1)
    y = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)).reshape(n, ch, -1)
    return (y * scale[:, None] + bias[:, None]).reshape(x.shape)


GROUP_SHAPES = {"4d": ((2, 6, 5, 3), False), "4d_nchw": ((2, 6, 5, 3), True), "3d": ((3, 6, 7), False),
                "2d": ((4, 6), False)}


@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("shape", GROUP_SHAPES)
@pytest.mark.parametrize("runtime_affine", [False, True])
def test_group_norm(opset, shape, runtime_affine):
    """Opset 18 scales and shifts per group, 21 per channel."""
    shape, keep_nchw = GROUP_SHAPES[shape]
    size = 3 if opset < 21 else shape[1]
    scale, bias = f32(size), f32(size)
    node = N("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-3)
    if runtime_affine:
        m, feeds = model(node, [("x", shape), ("s", [size]), ("b", [size])], opset=opset), {"s": scale, "b": bias}
    else:
        m, feeds = model(node, [("x", shape)], [("s", scale), ("b", bias)], opset=opset), {}
    feeds["x"] = f32(*shape, scale=2.0)
    check(m, feeds, keep_nchw=keep_nchw)


@pytest.mark.parametrize("keep_nchw", [False, True])
def test_group_norm_large_mean(keep_nchw):
    x = f32(2, 8, 9, 7, mean=1000.0)
    scale, bias = f32(8), f32(8)
    m = model(N("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=4), [("x", x.shape)],
              [("s", scale), ("b", bias)])
    close_to(m, {"x": x}, group_norm_f64(x, 4, scale, bias), keep_nchw)


def test_group_norm_refusals():
    m = model(N("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3), [("x", [1, 6, 4])],
              [("s", f32(6)), ("b", f32(6))], opset=18)
    refused(m, "scale of shape [6]", "opset 18 takes 3 values (one per group)")
    m = model(N("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, stash_type=11), [("x", [1, 6, 4])],
              [("s", f32(6)), ("b", f32(6))])
    refused(m, "stash_type=11")


MVN_CASES = {"4d_default_axes": ((2, 3, 5, 7), None, False), "4d_nchw_default": ((2, 3, 5, 7), None, True),
             "4d_spatial": ((2, 3, 5, 7), [2, 3], False), "4d_channel": ((2, 3, 5, 7), [1], False),
             "4d_nchw_hw_negative": ((2, 3, 5, 7), [-2, -1], True), "3d": ((3, 5, 7), [0, 2], False),
             "3d_last": ((3, 5, 7), [-1], False)}


@pytest.mark.parametrize("case", MVN_CASES)
def test_mean_variance_norm(case):
    shape, axes, keep_nchw = MVN_CASES[case]
    attrs = {} if axes is None else {"axes": axes}
    check(model(N("MeanVarianceNormalization", ["x"], ["y"], **attrs), [("x", shape)], opset=13),
          {"x": f32(*shape, scale=3.0)}, keep_nchw=keep_nchw)


@pytest.mark.parametrize("keep_nchw", [False, True])
def test_mean_variance_norm_large_mean(keep_nchw):
    x = f32(3, 4, 9, 11, mean=1000.0)
    v = x.astype(np.float64)
    m = v.mean((0, 2, 3), keepdims=True)
    want = (v - m) / (np.sqrt(((v - m) ** 2).mean((0, 2, 3), keepdims=True)) + 1e-9)
    close_to(model(N("MeanVarianceNormalization", ["x"], ["y"]), [("x", x.shape)], opset=13), {"x": x}, want,
             keep_nchw)


RMS_CASES = {"4d_last": ((2, 3, 5, 7), -1, (7,), False), "4d_hw": ((2, 3, 5, 7), 2, (5, 7), False),
             "4d_chw_nchw": ((2, 3, 5, 7), 1, (3, 5, 7), True), "4d_all": ((2, 3, 5, 7), 0, (2, 3, 5, 7), False),
             "4d_broadcast_scale": ((2, 3, 5, 7), -3, (3, 1, 1), False), "3d": ((3, 5, 7), -2, (5, 7), False),
             "2d": ((4, 9), 1, (9,), False)}


@pytest.mark.parametrize("case", RMS_CASES)
@pytest.mark.parametrize("runtime_scale", [False, True])
def test_rms_norm(case, runtime_scale):
    shape, axis, scale_shape, keep_nchw = RMS_CASES[case]
    node = N("RMSNormalization", ["x", "s"], ["y"], axis=axis, epsilon=1e-4)
    scale = f32(*scale_shape)
    if runtime_scale:
        m, feeds = model(node, [("x", shape), ("s", scale_shape)], opset=23), {"s": scale}
    else:
        m, feeds = model(node, [("x", shape)], [("s", scale)], opset=23), {}
    feeds["x"] = f32(*shape, mean=5.0)
    check(m, feeds, keep_nchw=keep_nchw)


def test_rms_norm_stash_type_refused():
    refused(model(N("RMSNormalization", ["x", "s"], ["y"], stash_type=11), [("x", [2, 5])], [("s", f32(5))], opset=23),
            "stash_type=11")


LP_NORM_CASES = {"l2_channel": ((2, 3, 5, 7), 2, 1, False), "l1_channel_nchw": ((2, 3, 5, 7), 1, 1, True),
                 "l2_width": ((2, 3, 5, 7), 2, -1, False), "l1_batch": ((2, 3, 5, 7), 1, 0, False),
                 "l2_3d_middle": ((3, 5, 7), 2, 1, False), "l1_2d_last": ((4, 9), 1, -1, False)}


@pytest.mark.parametrize("case", LP_NORM_CASES)
def test_lp_norm(case):
    """A zero vector along the axis gives zeros (ONNX defines 0/0 as 0 here)."""
    shape, p, axis, keep_nchw = LP_NORM_CASES[case]
    x = f32(*shape)
    x[tuple(slice(None) if k == axis % len(shape) else 0 for k in range(len(shape)))] = 0
    check(model(N("LpNormalization", ["x"], ["y"], p=p, axis=axis), [("x", shape)], opset=22), {"x": x},
          keep_nchw=keep_nchw)


def test_lp_norm_p3_refused():
    refused(model(N("LpNormalization", ["x"], ["y"], p=3), [("x", [2, 5])], opset=22), "p=3")


LP_POOL_CASES = {
    "p2_default": ((1, 3, 11, 9), dict(kernel_shape=[3, 2]), False),
    "p1_strides_pads": ((2, 3, 11, 9), dict(p=1, kernel_shape=[3, 3], strides=[2, 3], pads=[1, 0, 2, 1]), False),
    "p3_ceil": ((1, 2, 10, 7), dict(p=3, kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1), False),
    "p2_ceil_pads_nchw": ((1, 2, 10, 7), dict(kernel_shape=[2, 3], strides=[3, 2], pads=[1, 1, 0, 1], ceil_mode=1),
                          True),
    "same_upper": ((1, 3, 9, 8), dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_UPPER"), False),
    "same_lower_p4": ((1, 3, 9, 8), dict(p=4, kernel_shape=[2, 3], auto_pad="SAME_LOWER"), False),
    "valid": ((1, 3, 9, 8), dict(kernel_shape=[2, 3], strides=[2, 1], auto_pad="VALID"), False),
    "1d": ((2, 3, 13), dict(kernel_shape=[3], strides=[2], pads=[1, 2]), False),
}


@pytest.mark.parametrize("case", LP_POOL_CASES)
def test_lp_pool(case):
    shape, attrs, keep_nchw = LP_POOL_CASES[case]
    check(model(N("LpPool", ["x"], ["y"], **attrs), [("x", shape)], opset=22), {"x": f32(*shape)},
          keep_nchw=keep_nchw)


def test_lp_pool_refusals():
    refused(model(N("LpPool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2]), [("x", [1, 1, 6, 6])], opset=22),
            "dilated pooling")
    refused(model(N("LpPool", ["x"], ["y"], kernel_shape=[2, 2, 2]), [("x", [1, 1, 4, 4, 4])], opset=22),
            "only 1-D and 2-D")


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("shape,keep_nchw", [((2, 3, 5, 7), False), ((2, 3, 5, 7), True), ((3, 4, 9), False)])
def test_global_lp_pool(p, shape, keep_nchw):
    # opset 21: ONNX Runtime has no GlobalLpPool-22 kernel
    check(model(N("GlobalLpPool", ["x"], ["y"], p=p), [("x", shape)], opset=21), {"x": f32(*shape)},
          keep_nchw=keep_nchw)
