"""NonMaxSuppression, Unique and one-input Where: data-dependent output shapes."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

import msv0
from oprun import Const, run_op

I32 = np.int32


def ort_run(op, inputs, n_out=1, **attrs):
    """Run a one-node ONNX graph of `op` on onnxruntime."""
    names = [f"i{k}" for k in range(len(inputs))]
    outs = [f"o{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(x).dtype), np.shape(x))
          for n, x in zip(names, inputs)]
    vo = [onnx.ValueInfoProto(name=n) for n in outs]
    model = helper.make_model(helper.make_graph([node], "g", vi, vo), opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {n: np.asarray(x) for n, x in zip(names, inputs)})


def random_boxes(rng, n):
    yx = rng.random((n, 2)).astype(np.float32) * 10
    hw = rng.random((n, 2)).astype(np.float32) * 4 + 0.5
    return np.concatenate([yx, yx + hw], 1)


@pytest.mark.parametrize("n,iou,score", [(1, 0.5, 0.0), (7, 0.3, 0.2), (40, 0.5, 0.1), (40, 0.0, 0.5)])
def test_nms_matches_onnxruntime(rng, n, iou, score):
    boxes = random_boxes(rng, n)[None]
    scores = rng.permutation(n).astype(np.float32)[None, None] / n + 0.01  # distinct, positive
    args = [boxes, scores, np.array([n], np.int64), np.array([iou], np.float32), np.array([score], np.float32)]
    (got,) = run_op("NonMaxSuppression", args, out_dtypes=[I32])
    (want,) = ort_run("NonMaxSuppression", args)
    np.testing.assert_array_equal(got, want.astype(I32))


def test_nms_center_point_box_matches_onnxruntime(rng):
    n = 20
    c = random_boxes(rng, n)
    xywh = np.stack([(c[:, 1] + c[:, 3]) / 2, (c[:, 0] + c[:, 2]) / 2, c[:, 3] - c[:, 1], c[:, 2] - c[:, 0]], 1)
    scores = (rng.permutation(n).astype(np.float32) + 1)[None, None]
    args = [xywh[None], scores, np.array([5], np.int64), np.array([0.4], np.float32)]
    (got,) = run_op("NonMaxSuppression", args, out_dtypes=[I32], centerPointBox=1)
    (want,) = ort_run("NonMaxSuppression", args, center_point_box=1)
    np.testing.assert_array_equal(got, want.astype(I32))


def test_nms_limit_counts_all_classes_like_r11():
    """r1.1 caps the total selection, not each class: class 1 gets what class 0 left."""
    boxes = np.array([[[0, 0, 1, 1], [2, 2, 3, 3], [4, 4, 5, 5]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7], [0.6, 0.95, 0.5]]], np.float32)
    (got,) = run_op("NonMaxSuppression", [boxes, scores, np.array([4], I32)], out_dtypes=[I32])
    np.testing.assert_array_equal(got, [[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 1, 1]])


def test_nms_defaults_and_ties():
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1], [5, 5, 6, 6]]], np.float32)
    scores = np.array([[[0.5, 0.5, 0.0]]], np.float32)
    # no max_output input: 0 boxes; score threshold defaults to 0 (strict >), iou to 0
    (got,) = run_op("NonMaxSuppression", [boxes, scores], out_dtypes=[I32])
    assert got.shape == (0, 3)
    (got,) = run_op("NonMaxSuppression", [boxes, scores, Const(np.array([9], I32))], out_dtypes=[I32])
    np.testing.assert_array_equal(got, [[0, 0, 0]])  # tie -> lower index; box 2 scores 0


def test_nms_bad_inputs():
    with pytest.raises(msv0.ModelError):
        run_op("NonMaxSuppression", [np.zeros((1, 3, 3), np.float32), np.zeros((1, 1, 3), np.float32)],
               out_dtypes=[I32])
    with pytest.raises(msv0.ModelError):
        run_op("NonMaxSuppression", [np.zeros((1, 3, 4), np.float32), np.zeros((1, 1, 2), np.float32)],
               out_dtypes=[I32])
    with pytest.raises(msv0.ModelError):
        run_op("NonMaxSuppression", [np.zeros((1, 3, 4), np.float32), np.zeros((1, 1, 3), np.float32)],
               out_dtypes=[I32], centerPointBox=2)


def test_nms_reruns_with_new_data(rng):
    from msv0.builder import Builder

    b = Builder("nms")
    x = b.input("boxes", (1, 6, 4), np.float32)
    s = b.input("scores", (1, 1, 6), np.float32)
    m = b.const("max", np.array([6], I32))
    out = b.tensor("out", I32)
    b.node("NonMaxSuppression", [x, s, m], outputs=[out])
    b.output(out)
    sess = msv0.Session(b.finish())
    for _ in range(3):
        boxes = random_boxes(rng, 6)[None]
        scores = rng.random((1, 1, 6)).astype(np.float32) + 0.01
        want = ort_run("NonMaxSuppression", [boxes, scores, np.array([6], np.int64)])[0]
        np.testing.assert_array_equal(sess.run([boxes, scores])["out"], want.astype(I32))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_unique_matches_onnxruntime(rng, dtype):
    x = rng.integers(-3, 4, 17).astype(dtype)
    got = run_op("Unique", [x], outputs=2, out_dtypes=[dtype, I32])
    y, _, inverse, _ = ort_run("Unique", [x.astype(np.float32)], n_out=4, sorted=0)  # ORT has no int32 Unique
    np.testing.assert_array_equal(got[0], y.astype(dtype))
    np.testing.assert_array_equal(got[1], inverse.astype(I32))


def test_unique_nan_and_signed_zero():
    x = np.array([np.nan, 0.0, -0.0, np.nan, 1.0], np.float32)
    y, idx = run_op("Unique", [x], outputs=2, out_dtypes=[np.float32, I32])
    np.testing.assert_array_equal(idx, [0, 1, 1, 2, 3])
    assert y.shape == (4,) and np.isnan(y[0]) and np.isnan(y[2])


def test_unique_2d_last_dim():
    y, idx = run_op("Unique", [np.array([[2.0, 2.0, 2.0]], np.float32)], outputs=2, out_dtypes=[np.float32, I32])
    np.testing.assert_array_equal(y, [[2.0]])
    np.testing.assert_array_equal(idx, [[0, 0, 0]])
    with pytest.raises(msv0.ModelError):
        run_op("Unique", [np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)], outputs=2, out_dtypes=[np.float32, I32])


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 1, 3, 2)])
def test_where_one_input_matches_onnx_nonzero(rng, shape):
    c = rng.random(shape) > 0.5
    (got,) = run_op("Where", [c], out_dtypes=[I32])
    (want,) = ort_run("NonZero", [c])
    np.testing.assert_array_equal(got, want.T.astype(I32))
    (got,) = run_op("Where", [Const(c)], out_dtypes=[I32])
    np.testing.assert_array_equal(got, np.argwhere(c))


def test_where_one_input_all_false():
    (got,) = run_op("Where", [np.zeros((2, 3), bool)], out_dtypes=[I32])
    assert got.shape == (0, 2)


def test_where_three_inputs_still_selects(rng):
    c = rng.random((2, 3)) > 0.5
    x = rng.standard_normal((2, 3)).astype(np.float32)
    (y,) = run_op("Where", [c, x, np.array([9.0], np.float32)])
    np.testing.assert_array_equal(y, np.where(c, x, np.float32(9)))
