"""Detection ops (format-v0.md §5): PriorBox, ROIPooling, DetectionPostProcess and
NonMaxSuppression.

PriorBox, ROIPooling and DetectionPostProcess have static output shapes: PriorBox depends
only on shapes and attributes, ROIPooling on the roi count, and DetectionPostProcess writes a
fixed number of slots (unused ones zero) plus the count of valid detections. The output of
NonMaxSuppression has as many rows as boxes survive, so it is registered data_dependent.
"""
from __future__ import annotations

import math

import numpy as np

from msv0.errors import ResourceError
from msv0.registry import Plan, as_float32, check_size, expect_inputs, fail, known_value, op

# ROIPooling runs bin by bin in Python; real detectors pool a few hundred rois of 7x7 or 14x14.
MAX_ROI_BINS = 1 << 20
# Real detectors make a few million IoU tests per NMS (thousands of candidates, hundreds kept).
MAX_IOU_TESTS = 1 << 25
# A step of NMS's Python loops costs about as much as this many vectorised IoU tests.
STEP_COST = 1024

F32 = np.dtype(np.float32)


@op("PriorBox")
def prior_box(node, ins):
    """r1.1 (base/prior_box.cc): for each cell (i, j) of the NHWC feature map, centre
    (j + offset, i + offset); for each min size: the min box, the sqrt(min·max) box when
    max_sizes is given, then one box per aspect ratio other than 1 (distinct ratios, plus
    1/ratio with flip), each as (x1, y1, x2, y2) normalised by the map size. The variances
    follow, once per box. Output [1, 4·boxes, 1, 2]. r1.1's clip loop edits copies, so `clip`
    has no effect; msv0 reproduces that."""
    expect_inputs(node, ins, 2)
    a = node.attrs
    fmap, image = ins
    if len(fmap.shape) != 4 or len(image.shape) != 4:
        raise fail(node, f"feature map {fmap.shape} and image {image.shape} must be 4-D NHWC")
    fh, fw = fmap.shape[1], fmap.shape[2]
    if fh < 1 or fw < 1:
        raise fail(node, f"feature map {fmap.shape} is empty")
    image_w = a.imageSizeW if a.imageSizeW > 0 else image.shape[2]
    image_h = a.imageSizeH if a.imageSizeH > 0 else image.shape[1]
    step_w = np.float32(a.stepW) if a.stepW > 0 else np.float32(image_w) / np.float32(fw)
    step_h = np.float32(a.stepH) if a.stepH > 0 else np.float32(image_h) / np.float32(fh)
    min_sizes = [np.float32(s) for s in a.minSizes or ()]
    max_sizes = [np.float32(s) for s in a.maxSizes or ()]
    variances = [np.float32(v) for v in a.variances or ()]
    if not min_sizes:
        raise fail(node, "min_sizes is empty")
    if max_sizes and len(max_sizes) != len(min_sizes):
        raise fail(node, f"{len(max_sizes)} max_sizes for {len(min_sizes)} min_sizes")
    if len(variances) < 4:
        raise fail(node, f"variances needs 4 values, got {len(variances)}")
    if min(min_sizes) <= 0 or (max_sizes and min(max_sizes) <= 0) or step_w <= 0 or step_h <= 0:
        raise fail(node, "sizes and steps must be positive")
    ratios = [np.float32(1)]
    for ratio in a.aspectRatios or ():
        ratio = np.float32(ratio)
        if ratio <= 1e-5:
            raise fail(node, f"aspect ratio {ratio} must be positive")
        if not any(abs(ratio - v) < 1e-6 for v in ratios):
            ratios.append(ratio)
            if a.flip:
                ratios.append(np.float32(1) / ratio)
    half = np.float32(0.5)
    offset = np.float32(a.offset)
    sizes = []  # (width, height) of each prior of a cell, in r1.1's order
    for k, mn in enumerate(min_sizes):
        sizes.append((mn, mn))
        if max_sizes:
            prime = np.float32(math.sqrt(mn * max_sizes[k]))
            sizes.append((prime, prime))
        for v in ratios:
            if abs(v - 1) < 1e-6:
                continue
            root = np.float32(math.sqrt(v))
            sizes.append((mn * root, mn / root))
    check_size(f"{node.label}: output", (1, fh * fw * len(sizes) * 4, 1, 2), F32)
    # Every cell at once, in float32 with r1.1's order of operations: [fh, fw, prior, corner].
    half_w = np.array([w for w, _ in sizes], F32) / step_w * half
    half_h = np.array([h for _, h in sizes], F32) / step_h * half
    cx = (np.arange(fw, dtype=F32) + offset)[None, :, None]
    cy = (np.arange(fh, dtype=F32) + offset)[:, None, None]
    corners = np.broadcast_arrays((cx - half_w) / np.float32(fw), (cy - half_h) / np.float32(fh),
                                  (cx + half_w) / np.float32(fw), (cy + half_h) / np.float32(fh))
    boxes = np.stack(corners, axis=-1).reshape(-1)
    count = len(boxes)
    data = np.concatenate([boxes, np.tile(np.array(variances[:4], F32), count // 4)])
    shape = (1, count, 1, 2)
    value = data.reshape(shape)

    def run(inputs, outputs):
        np.copyto(outputs[0], value)

    return Plan([(shape, F32)], run)


@op("ROIPooling")
def roi_pooling(node, ins):
    """r1.1 (nnacl roi_pooling_fp32.c): x NHWC, rois [R, 5] = (batch, y1, x1, y2, x2) in image
    coordinates; output [R, pooledH, pooledW, C] = max over each bin, empty bins 0. r1.1 holds
    `scale` in an int, so it is truncated toward zero before use; msv0 reproduces that.
    Corners are roundf(coord · scale); roi size max(end − start + 1, 1); bin [floor(p·size/pooled),
    ceil((p+1)·size/pooled)) offset by the start and clamped to the map."""
    expect_inputs(node, ins, 2)
    x, rois = ins
    as_float32(node, x, "input")
    as_float32(node, rois, "rois")
    if len(x.shape) != 4:
        raise fail(node, f"input must be 4-D NHWC, got {x.shape}")
    if len(rois.shape) != 2 or rois.shape[1] != 5:
        raise fail(node, f"rois must be [R, 5], got {rois.shape}")
    a = node.attrs
    ph_n, pw_n = a.pooledH, a.pooledW
    if ph_n < 1 or pw_n < 1:
        raise fail(node, f"pooled size {ph_n}x{pw_n} must be positive")
    if rois.shape[0] * ph_n * pw_n > MAX_ROI_BINS:  # each bin is a step of the Python loop below
        raise ResourceError(f"{node.label}: {rois.shape[0]} rois of {ph_n}x{pw_n} bins is over the "
                            f"{MAX_ROI_BINS} bins ROIPooling runs")
    if not math.isfinite(a.scale):
        raise fail(node, f"scale {a.scale} is not finite")
    scale = np.float32(int(a.scale))
    n, h, w, c = x.shape
    out_shape = (rois.shape[0], ph_n, pw_n, c)

    def run(inputs, outputs):
        data, boxes = inputs
        out = outputs[0]
        for r, roi in enumerate(boxes):
            b = int(roi[0])
            if not 0 <= b < n:
                raise fail(node, f"roi {r} has batch index {roi[0]} outside [0, {n})")
            y0, x0, y1, x1 = (int(np.copysign(np.floor(np.abs(v * scale) + 0.5), v * scale)) for v in roi[1:])
            bin_h = np.float32(max(y1 - y0 + 1, 1)) / np.float32(ph_n)
            bin_w = np.float32(max(x1 - x0 + 1, 1)) / np.float32(pw_n)
            for py in range(ph_n):
                hs = min(max(math.floor(py * bin_h) + y0, 0), h)
                he = min(max(math.ceil((py + 1) * bin_h) + y0, 0), h)
                for px in range(pw_n):
                    ws = min(max(math.floor(px * bin_w) + x0, 0), w)
                    we = min(max(math.ceil((px + 1) * bin_w) + x0, 0), w)
                    if he <= hs or we <= ws:
                        out[r, py, px] = 0
                    else:
                        out[r, py, px] = data[b, hs:he, ws:we].max(axis=(0, 1))

    return Plan([(out_shape, F32)], run)


class _IouBudget:
    """Greedy NMS tests each kept box against every later candidate, so its work grows as kept x
    candidates: one NMS call may make at most MAX_IOU_TESTS tests (and sorts) before it stops with
    ResourceError, so a feed of a million disjoint boxes cannot run for minutes."""

    def __init__(self, label: str):
        self.label, self.left = label, MAX_IOU_TESTS

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise ResourceError(f"{self.label}: NMS needs more than the {MAX_IOU_TESTS} IoU tests "
                                f"msv0 makes in one run")


def _greedy(corners, overlaps, limit, budget):
    """Greedy NMS over boxes in visiting order, `corners` = (y1, x1, y2, x2, area) arrays in that order:
    keep the first live box, drop the later ones `overlaps(box corners, later corners)` marks,
    repeat until `limit` are kept. Equal to testing each box against every box kept before it.
    Returns the kept positions."""
    n = len(corners[0])
    alive = np.ones(n, bool)
    kept = []
    p = 0
    while len(kept) < limit and p < n:
        budget.spend(n - p + STEP_COST)
        p += int(np.argmax(alive[p:]))
        if not alive[p]:
            break
        kept.append(p)
        alive[p + 1:] &= ~overlaps([c[p] for c in corners], [c[p + 1:] for c in corners])
        p += 1
    return kept


def _intersection(box, later):
    y1, x1, y2, x2, _ = box
    ly1, lx1, ly2, lx2, _ = later
    h = np.maximum(np.minimum(ly2, y2) - np.maximum(ly1, y1), np.float32(0))
    w = np.maximum(np.minimum(lx2, x2) - np.maximum(lx1, x1), np.float32(0))
    return h * w


def _with_area(y1, x1, y2, x2):
    """The corners and each box's area, computed once rather than per kept box."""
    return [y1, x1, y2, x2, (y2 - y1) * (x2 - x1)]


def _nms(boxes, scores, score_thr, iou_thr, limit, budget):
    """DetectionPostProcess's greedy NMS: candidates by descending score (ties to the lower index),
    stop at the first below score_thr (NaN scores are not below it and come last); a candidate is
    dropped unless its IoU with every kept box is <= iou_thr, an IoU being 0 when either area is
    <= 0 (so a NaN IoU drops it). Returns box indices."""
    budget.spend(len(scores) + STEP_COST)
    order = np.argsort(-scores, kind="stable")
    below = scores[order] < score_thr
    cand = order[:int(np.argmax(below))] if below.any() else order
    corners = _with_area(*boxes[cand].T)

    def overlaps(box, later):
        inter = _intersection(box, later)
        area, later_area = box[4], later[4]
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = np.where((later_area <= 0) | (area <= 0), np.float32(0), inter / (later_area + area - inter))
        return ~(iou <= iou_thr)

    return [int(cand[p]) for p in _greedy(corners, overlaps, limit, budget)]


@op("DetectionPostProcess")
def detection_post_process(node, ins):
    """TFLite semantics as r1.1 implements them (format-v0.md §5). Inputs: box encodings
    [1, B, 4] (y, x, h, w), class scores [1, B, classes+bg], anchors [B, 4] (y, x, h, w).
    Outputs: boxes [1, D, 4], classes [1, D], scores [1, D], num [1], D = MaxDetections ·
    MaxClassesPerDetection; unused slots are zero."""
    expect_inputs(node, ins, 3)
    enc, cls, anc = ins
    for v, what in zip(ins, ("box encodings", "class scores", "anchors")):
        as_float32(node, v, what)
    a = node.attrs
    if len(enc.shape) != 3 or enc.shape[0] != 1 or enc.shape[2] < 4:
        raise fail(node, f"box encodings must be [1, B, 4], got {enc.shape}")
    nb = enc.shape[1]
    if len(cls.shape) != 3 or cls.shape[:2] != (1, nb):
        raise fail(node, f"class scores must be [1, {nb}, classes], got {cls.shape}")
    if anc.shape != (nb, 4):
        raise fail(node, f"anchors must be [{nb}, 4], got {anc.shape}")
    num_classes = a.numClasses
    first = cls.shape[2] - num_classes
    if num_classes < 1 or first < 0:
        raise fail(node, f"NumClasses {num_classes} does not fit {cls.shape[2]} score columns")
    max_det, per_det, per_class = a.maxDetections, a.maxClassesPerDetection, a.detectionsPerClass
    if max_det < 1 or per_det < 1 or (a.useRegularNms and per_class < 1):
        raise fail(node, "MaxDetections, MaxClassesPerDetection and DetectionsPerClass must be positive")
    scales = [np.float32(s) for s in (a.yScale, a.xScale, a.hScale, a.wScale)]
    if any(s == 0 for s in scales):
        raise fail(node, "box scales must be non-zero")
    ys, xs, hs, ws = scales
    slots = max_det * per_det
    top = min(per_det, num_classes)
    score_thr, iou_thr = np.float32(a.nmsScoreThreshold), np.float32(a.nmsIouThreshold)

    def decode(e, anchors):
        half = np.float32(0.5)
        yc = e[:, 0] / ys * anchors[:, 2] + anchors[:, 0]
        xc = e[:, 1] / xs * anchors[:, 3] + anchors[:, 1]
        hh = half * np.exp(e[:, 2] / hs) * anchors[:, 2]
        hw = half * np.exp(e[:, 3] / ws) * anchors[:, 3]
        return np.stack([yc - hh, xc - hw, yc + hh, xc + hw], 1).astype(np.float32)

    def run(inputs, outputs):
        boxes = decode(inputs[0][0, :, :4], inputs[2])
        scores = inputs[1][0, :, first:]
        picks = []  # (box index, class, score) in output order
        budget = _IouBudget(node.label)
        if a.useRegularNms:
            for c in range(num_classes):
                for i in _nms(boxes, scores[:, c], score_thr, iou_thr, per_class, budget):
                    picks.append((i, c, scores[i, c]))
            order = sorted(range(len(picks)), key=lambda k: -picks[k][2])  # stable: ties keep order
            picks = [picks[k] for k in order[:max_det]]
        else:
            class_order = np.argsort(-scores, axis=1, kind="stable")[:, :top]
            best = np.take_along_axis(scores, class_order[:, :1], 1)[:, 0]
            for i in _nms(boxes, best, score_thr, iou_thr, max_det, budget):
                for c in class_order[i]:
                    picks.append((i, int(c), scores[i, c]))
        out_boxes, out_cls, out_scores, out_num = outputs
        for o in outputs:
            o.fill(0)
        for k, (i, c, s) in enumerate(picks):
            out_boxes[0, k] = boxes[i]
            out_cls[0, k] = c
            out_scores[0, k] = s
        out_num[0] = len(picks)

    return Plan([((1, slots, 4), F32), ((1, slots), F32), ((1, slots), F32), ((1,), F32)], run)


def _copy(value):
    def run(inputs, outputs):
        np.copyto(outputs[0], value)

    return run


def _first(node, v, what, kind):
    a = known_value(node, v, what).reshape(-1)
    if a.size < 1:
        raise fail(node, f"{what} is empty")
    if kind == "int" and a.dtype.kind not in "iu":
        raise fail(node, f"{what} must be an integer, got {a.dtype}")
    return a[0]


def _corners(boxes, center):
    """(y1, x1, y2, x2) with y1 <= y2, x1 <= x2. With centerPointBox r1.1 reads (yc, xc, h, w);
    ONNX writes (xc, yc, w, h), which only swaps the axes and leaves every IoU unchanged."""
    b = boxes.astype(np.float32)
    if center:
        hh, hw = b[:, 2] / np.float32(2), b[:, 3] / np.float32(2)
        return b[:, 0] - hh, b[:, 1] - hw, b[:, 0] + hh, b[:, 1] + hw
    return (np.minimum(b[:, 0], b[:, 2]), np.minimum(b[:, 1], b[:, 3]),
            np.maximum(b[:, 0], b[:, 2]), np.maximum(b[:, 1], b[:, 3]))


@op("NonMaxSuppression", data_dependent=True)
def non_max_suppression(node, ins):
    """r1.1 fp32 kernel: inputs boxes [batch, n, 4], scores [batch, classes, n], then optional
    max_output_boxes_per_class (int), iou_threshold, score_threshold (float), each 0 when
    absent. Per batch and class: candidates with score > score_threshold, visited by descending
    score (ties: lower box index first); a candidate is dropped when its IoU with an already
    kept box of that class is > iou_threshold (no overlap area never suppresses). Output int32
    [num_selected, 3] rows (batch, class, box). r1.1 stops once the count over ALL batches and
    classes reaches max_output_boxes_per_class (ONNX counts per class); msv0 does the same."""
    expect_inputs(node, ins, 2, 3, 4, 5)
    center = node.attrs.centerPointBox
    if center not in (0, 1):
        raise fail(node, f"centerPointBox must be 0 or 1, got {center}")
    as_float32(node, ins[0], "boxes")
    as_float32(node, ins[1], "scores")
    boxes, scores = known_value(node, ins[0], "boxes"), known_value(node, ins[1], "scores")
    if boxes.ndim != 3 or boxes.shape[2] != 4:
        raise fail(node, f"boxes must be [batch, boxes, 4], got {boxes.shape}")
    if scores.ndim != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise fail(node, f"scores {scores.shape} must be [batch, classes, boxes] for boxes {boxes.shape}")
    limit = int(_first(node, ins[2], "max_output_boxes_per_class", "int")) if len(ins) > 2 else 0
    iou_t = np.float32(_first(node, ins[3], "iou_threshold", "float")) if len(ins) > 3 else np.float32(0)
    score_t = np.float32(_first(node, ins[4], "score_threshold", "float")) if len(ins) > 4 else np.float32(0)
    selected: list[tuple[int, int, int]] = []
    budget = _IouBudget(node.label)
    for b in range(boxes.shape[0]):
        if len(selected) >= limit:
            break
        budget.spend(STEP_COST)
        corners = _with_area(*_corners(boxes[b], center))

        def overlaps(box, later):
            inter = _intersection(box, later)
            with np.errstate(divide="ignore", invalid="ignore"):
                return (inter > 0) & (inter / (later[4] + box[4] - inter) > iou_t)

        for c in range(scores.shape[1]):
            if len(selected) >= limit:
                break
            s = scores[b, c]
            budget.spend(len(s) + STEP_COST)
            order = np.argsort(-s, kind="stable")
            cand = order[s[order] > score_t]
            kept = _greedy([a[cand] for a in corners], overlaps, limit - len(selected), budget)
            selected += [(b, c, int(cand[p])) for p in kept]
    out = np.array(selected, np.int32).reshape(-1, 3)
    return Plan([(out.shape, out.dtype)], _copy(out))
