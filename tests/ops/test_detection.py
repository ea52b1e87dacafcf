"""PriorBox, ROIPooling, DetectionPostProcess against loop references of the r1.1 rules;
NonMaxSuppression (a data-dependent output shape) against ONNX Runtime."""
import math

import msv0
import numpy as np
import pytest
from oprun import Const, ort_run, run_op


def prior_ref(fh, fw, img_h, img_w, mins, maxs, ratios, flip, offset, var):
    rs = [1.0]
    for r in ratios:
        if all(abs(r - v) >= 1e-6 for v in rs):
            rs.append(r)
            if flip:
                rs.append(1 / r)
    sw, sh = img_w / fw, img_h / fh
    out = []
    for i in range(fh):
        for j in range(fw):
            cx, cy = j + offset, i + offset
            for k, m in enumerate(mins):
                sizes = [(m, m)] + ([(math.sqrt(m * maxs[k]),) * 2] if maxs else [])
                sizes += [(m * math.sqrt(r), m / math.sqrt(r)) for r in rs if abs(r - 1) >= 1e-6]
                for bw, bh in sizes:
                    out += [(cx - bw / sw / 2) / fw, (cy - bh / sh / 2) / fh, (cx + bw / sw / 2) / fw, (cy + bh / sh / 2) / fh]
    return np.array(out + var * (len(out) // 4), np.float32).reshape(1, -1, 1, 2)


@pytest.mark.parametrize("maxs,ratios,flip", [([], [], True), ([60], [2.0], True), ([60], [2.0, 3.0, 0.5], False)])
def test_prior_box(rng, maxs, ratios, flip):
    fmap = np.zeros((1, 3, 4, 2), np.float32)
    img = np.zeros((1, 30, 40, 3), np.float32)
    (y,) = run_op("PriorBox", [fmap, img], minSizes=[20], maxSizes=maxs, aspectRatios=ratios, flip=flip,
                  variances=[0.1, 0.1, 0.2, 0.2], offset=0.5)
    want = prior_ref(3, 4, 30, 40, [20], maxs, ratios, flip, 0.5, [0.1, 0.1, 0.2, 0.2])
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_prior_box_bad():
    f = np.zeros((1, 2, 2, 1), np.float32)
    with pytest.raises(msv0.ModelError):
        run_op("PriorBox", [f, f], minSizes=[4], variances=[0.1])
    with pytest.raises(msv0.ModelError):
        run_op("PriorBox", [f, f], minSizes=[4, 5], maxSizes=[6], variances=[0.1] * 4)


def roi_ref(x, rois, ph, pw, scale):
    s = float(int(scale))
    r_n, c = rois.shape[0], x.shape[3]
    out = np.zeros((r_n, ph, pw, c), np.float32)
    rnd = lambda v: int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)
    for r, (b, y1, x1, y2, x2) in enumerate(rois):
        ys, xs, ye, xe = rnd(y1 * s), rnd(x1 * s), rnd(y2 * s), rnd(x2 * s)
        bh, bw = max(ye - ys + 1, 1) / ph, max(xe - xs + 1, 1) / pw
        for i in range(ph):
            for j in range(pw):
                h0 = min(max(math.floor(i * bh) + ys, 0), x.shape[1])
                h1 = min(max(math.ceil((i + 1) * bh) + ys, 0), x.shape[1])
                w0 = min(max(math.floor(j * bw) + xs, 0), x.shape[2])
                w1 = min(max(math.ceil((j + 1) * bw) + xs, 0), x.shape[2])
                if h1 > h0 and w1 > w0:
                    out[r, i, j] = x[int(b), h0:h1, w0:w1].max((0, 1))
    return out


@pytest.mark.parametrize("scale", [1.0, 2.7])
def test_roi_pooling(rng, scale):
    x = rng.standard_normal((2, 9, 11, 3)).astype(np.float32)
    rois = np.array([[0, 1, 2, 5, 8], [1, 0, 0, 8, 10], [1, 3, 3, 3, 3], [0, 7, 9, 20, 30], [1, 4.4, 1.5, 2, 6]], np.float32)
    (y,) = run_op("ROIPooling", [x, rois], pooledH=3, pooledW=2, scale=scale)
    np.testing.assert_array_equal(y, roi_ref(x, rois, 3, 2, scale))


def test_roi_pooling_bad_batch():
    x = np.zeros((1, 4, 4, 1), np.float32)
    with pytest.raises(msv0.ModelError):
        run_op("ROIPooling", [x, np.array([[1, 0, 0, 1, 1]], np.float32)], pooledH=1, pooledW=1, scale=1.0)
    with pytest.raises(msv0.ModelError):
        run_op("ROIPooling", [x, np.array([[0, 0, 0, 1]], np.float32)], pooledH=1, pooledW=1, scale=1.0)



def test_roi_pooling_bounds_its_python_bins():
    """pooledH x pooledW x rois is the Python loop's length, set by attributes alone."""
    x = np.zeros((1, 4, 4, 1), np.float32)
    with pytest.raises(msv0.ResourceError, match="bins"):
        run_op("ROIPooling", [x, np.zeros((1, 5), np.float32)], pooledH=1100, pooledW=1000, scale=1.0)

def dpp_setup():
    anchors = np.array([[0.5, 0.5, 1, 1], [0.5, 0.5, 1, 1], [0.5, 0.6, 1, 1], [0.2, 0.2, 0.3, 0.3]], np.float32)
    enc = np.zeros((1, 4, 4), np.float32)
    # class scores with background in column 0
    scores = np.array([[[0, 0.9, 0.1], [0, 0.8, 0.7], [0, 0.3, 0.6], [0, 0.05, 0.5]]], np.float32)
    return enc, scores, anchors


ATTRS = dict(yScale=10.0, xScale=10.0, hScale=5.0, wScale=5.0, nmsIouThreshold=0.5, nmsScoreThreshold=0.2,
             maxDetections=3, numClasses=2)


def test_detection_post_process_fast():
    enc, scores, anchors = dpp_setup()
    outs = run_op("DetectionPostProcess", [enc, scores, Const(anchors)], outputs=4, maxClassesPerDetection=1, **ATTRS)
    boxes, cls, sc, num = outs
    # boxes 0,1 overlap fully (IoU 1); box 2 overlaps box 0 with IoU 0.9/1.1 > 0.5; box 3 is apart
    assert num[0] == 2
    np.testing.assert_array_equal(cls[0, :2], [0, 1])
    np.testing.assert_allclose(sc[0, :2], [0.9, 0.5])
    np.testing.assert_allclose(boxes[0, 0], [0, 0, 1, 1], atol=1e-6)
    np.testing.assert_allclose(boxes[0, 1], [0.05, 0.05, 0.35, 0.35], atol=1e-6)
    assert boxes.shape == (1, 3, 4) and not boxes[0, 2:].any() and not sc[0, 2:].any()


def test_detection_post_process_regular():
    enc, scores, anchors = dpp_setup()
    boxes, cls, sc, num = run_op("DetectionPostProcess", [enc, scores, Const(anchors)], outputs=4,
                                 maxClassesPerDetection=1, useRegularNms=True, detectionsPerClass=2, **ATTRS)
    # class 0: box 0 (0.9), box 3 below threshold; class 1: box 1 (0.7), box 3 (0.5)
    assert num[0] == 3
    np.testing.assert_allclose(sc[0], [0.9, 0.7, 0.5])
    np.testing.assert_array_equal(cls[0], [0, 1, 1])


def test_detection_post_process_bad():
    enc, scores, anchors = dpp_setup()
    with pytest.raises(msv0.ModelError):
        run_op("DetectionPostProcess", [enc, scores, Const(anchors)], outputs=4, maxClassesPerDetection=1,
               **{**ATTRS, "numClasses": 4})
    with pytest.raises(msv0.ModelError):
        run_op("DetectionPostProcess", [enc, scores, Const(anchors[:3])], outputs=4, maxClassesPerDetection=1, **ATTRS)


def test_detection_post_process_bounds_its_nms_work():
    """30000 disjoint anchors, each kept: the greedy NMS would make 30000^2 / 2 IoU tests."""
    n = 30000
    anchors = np.stack([np.arange(n) * 2, np.zeros(n), np.ones(n), np.ones(n)], 1).astype(np.float32)
    args = [np.zeros((1, n, 4), np.float32), np.ones((1, n, 2), np.float32), Const(anchors)]
    attrs = {**ATTRS, "maxDetections": n, "numClasses": 1}
    with pytest.raises(msv0.ResourceError, match="IoU tests"):
        run_op("DetectionPostProcess", args, outputs=4, maxClassesPerDetection=1, **attrs)


def random_boxes(rng, n):
    yx = rng.random((n, 2)).astype(np.float32) * 10
    hw = rng.random((n, 2)).astype(np.float32) * 4 + 0.5
    return np.concatenate([yx, yx + hw], 1)


@pytest.mark.parametrize("n,iou,score", [(1, 0.5, 0.0), (7, 0.3, 0.2), (40, 0.5, 0.1), (40, 0.0, 0.5)])
def test_nms_matches_onnxruntime(rng, n, iou, score):
    boxes = random_boxes(rng, n)[None]
    scores = rng.permutation(n).astype(np.float32)[None, None] / n + 0.01  # distinct, positive
    args = [boxes, scores, np.array([n], np.int64), np.array([iou], np.float32), np.array([score], np.float32)]
    (got,) = run_op("NonMaxSuppression", args, out_dtypes=[np.int32])
    (want,) = ort_run("NonMaxSuppression", args)
    np.testing.assert_array_equal(got, want.astype(np.int32))


def test_nms_center_point_box_matches_onnxruntime(rng):
    n = 20
    c = random_boxes(rng, n)
    xywh = np.stack([(c[:, 1] + c[:, 3]) / 2, (c[:, 0] + c[:, 2]) / 2, c[:, 3] - c[:, 1], c[:, 2] - c[:, 0]], 1)
    scores = (rng.permutation(n).astype(np.float32) + 1)[None, None]
    args = [xywh[None], scores, np.array([5], np.int64), np.array([0.4], np.float32)]
    (got,) = run_op("NonMaxSuppression", args, out_dtypes=[np.int32], centerPointBox=1)
    (want,) = ort_run("NonMaxSuppression", args, center_point_box=1)
    np.testing.assert_array_equal(got, want.astype(np.int32))


def test_nms_limit_counts_all_classes_like_r11():
    """r1.1 caps the total selection, not each class: class 1 gets what class 0 left."""
    boxes = np.array([[[0, 0, 1, 1], [2, 2, 3, 3], [4, 4, 5, 5]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7], [0.6, 0.95, 0.5]]], np.float32)
    (got,) = run_op("NonMaxSuppression", [boxes, scores, np.array([4], np.int32)], out_dtypes=[np.int32])
    np.testing.assert_array_equal(got, [[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 1, 1]])


def test_nms_defaults_and_ties():
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1], [5, 5, 6, 6]]], np.float32)
    scores = np.array([[[0.5, 0.5, 0.0]]], np.float32)
    # no max_output input: 0 boxes; score threshold defaults to 0 (strict >), iou to 0
    (got,) = run_op("NonMaxSuppression", [boxes, scores], out_dtypes=[np.int32])
    assert got.shape == (0, 3)
    (got,) = run_op("NonMaxSuppression", [boxes, scores, Const(np.array([9], np.int32))], out_dtypes=[np.int32])
    np.testing.assert_array_equal(got, [[0, 0, 0]])  # tie -> lower index; box 2 scores 0


def test_nms_bad_inputs():
    with pytest.raises(msv0.ModelError):
        run_op("NonMaxSuppression", [np.zeros((1, 3, 3), np.float32), np.zeros((1, 1, 3), np.float32)],
               out_dtypes=[np.int32])
    with pytest.raises(msv0.ModelError):
        run_op("NonMaxSuppression", [np.zeros((1, 3, 4), np.float32), np.zeros((1, 1, 2), np.float32)],
               out_dtypes=[np.int32])
    with pytest.raises(msv0.ModelError):
        run_op("NonMaxSuppression", [np.zeros((1, 3, 4), np.float32), np.zeros((1, 1, 3), np.float32)],
               out_dtypes=[np.int32], centerPointBox=2)


def test_nms_reruns_with_new_data(rng):
    from msv0.builder import Builder

    b = Builder("nms")
    x = b.input("boxes", (1, 6, 4), np.float32)
    s = b.input("scores", (1, 1, 6), np.float32)
    m = b.const("max", np.array([6], np.int32))
    out = b.tensor("out", np.int32)
    b.node("NonMaxSuppression", [x, s, m], outputs=[out])
    b.output(out)
    sess = msv0.Session(b.finish())
    for _ in range(3):
        boxes = random_boxes(rng, 6)[None]
        scores = rng.random((1, 1, 6)).astype(np.float32) + 0.01
        want = ort_run("NonMaxSuppression", [boxes, scores, np.array([6], np.int64)])[0]
        np.testing.assert_array_equal(sess.run([boxes, scores])["out"], want.astype(np.int32))


def nms_pairwise_ref(boxes, scores, limit, iou_t, score_t):
    """NonMaxSuppression as r1.1 loops it: each candidate against each kept box."""
    selected = []
    for b in range(boxes.shape[0]):
        bx = boxes[b]
        y1, x1 = np.minimum(bx[:, 0], bx[:, 2]), np.minimum(bx[:, 1], bx[:, 3])
        y2, x2 = np.maximum(bx[:, 0], bx[:, 2]), np.maximum(bx[:, 1], bx[:, 3])
        area = (y2 - y1) * (x2 - x1)
        for c in range(scores.shape[1]):
            s = scores[b, c]
            kept = []
            for k in [k for k in np.argsort(-s, kind="stable") if s[k] > score_t]:
                if len(selected) >= limit:
                    break
                over = False
                for j in kept:
                    w = max(min(x2[k], x2[j]) - max(x1[k], x1[j]), np.float32(0))
                    h = max(min(y2[k], y2[j]) - max(y1[k], y1[j]), np.float32(0))
                    inter = np.float32(w * h)
                    if inter > 0 and inter / (area[k] + area[j] - inter) > iou_t:
                        over = True
                if not over:
                    kept.append(k)
                    selected.append((b, c, k))
    return np.array(selected, np.int32).reshape(-1, 3)


@pytest.mark.parametrize("iou", [0.5, 0.0, -1.0])
def test_nms_matches_pairwise_loop_on_odd_values(rng, iou):
    """NaN and inverted or empty boxes, tied and NaN scores, several batches and classes: the
    vectorised NMS keeps exactly what the per-pair loop keeps."""
    boxes = np.round(rng.random((2, 60, 4)) * 6).astype(np.float32)
    boxes[0, ::7] = np.nan
    boxes[1, ::5, 2] = boxes[1, ::5, 0]  # zero height
    scores = np.round(rng.random((2, 3, 60)) * 4).astype(np.float32) / 4
    scores[1, 1, ::9] = np.nan
    for limit in (5, 1000):
        args = [boxes, scores, np.array([limit], np.int32), np.array([iou], np.float32), np.array([0.2], np.float32)]
        (got,) = run_op("NonMaxSuppression", args, out_dtypes=[np.int32])
        np.testing.assert_array_equal(got, nms_pairwise_ref(boxes, scores, limit, np.float32(iou), np.float32(0.2)))


def test_nms_bounds_its_work():
    """Disjoint boxes all kept: kept x candidates IoU tests, past the cap for 20000 boxes."""
    n = 20000
    boxes = np.stack([np.arange(n) * 2, np.zeros(n), np.arange(n) * 2 + 1, np.ones(n)], 1).astype(np.float32)
    args = [boxes[None], np.ones((1, 1, n), np.float32), np.array([n], np.int32)]
    with pytest.raises(msv0.ResourceError, match="IoU tests"):
        run_op("NonMaxSuppression", args, out_dtypes=[np.int32])
    (got,) = run_op("NonMaxSuppression", [boxes[None, :3000], np.ones((1, 1, 3000), np.float32), args[2]],
                    out_dtypes=[np.int32])
    np.testing.assert_array_equal(got[:, 2], np.arange(3000))
