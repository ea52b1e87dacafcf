"""Ops whose output shape depends on input values: NonMaxSuppression and Unique (one-input
Where is registered in array.py with a per-node data_dependent predicate).

They are registered data_dependent, so the data-flow executor plans them on every run with
every input's value known (Value.const is set) and the build function sizes the output from
the data itself.
"""
from __future__ import annotations

import math

import numpy as np

from msv0.registry import Plan, as_float32, expect_inputs, fail, op


def _known(node, v, what):
    if v.const is None:  # only when built outside the data-flow executor
        raise fail(node, f"{what} ({v.tensor.label}) has no value at plan time")
    return v.const


def _copy(value):
    def run(inputs, outputs):
        np.copyto(outputs[0], value)

    return run


def _first(node, v, what, kind):
    a = _known(node, v, what).reshape(-1)
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
    boxes, scores = _known(node, ins[0], "boxes"), _known(node, ins[1], "scores")
    if boxes.ndim != 3 or boxes.shape[2] != 4:
        raise fail(node, f"boxes must be [batch, boxes, 4], got {boxes.shape}")
    if scores.ndim != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise fail(node, f"scores {scores.shape} must be [batch, classes, boxes] for boxes {boxes.shape}")
    limit = int(_first(node, ins[2], "max_output_boxes_per_class", "int")) if len(ins) > 2 else 0
    iou_t = np.float32(_first(node, ins[3], "iou_threshold", "float")) if len(ins) > 3 else np.float32(0)
    score_t = np.float32(_first(node, ins[4], "score_threshold", "float")) if len(ins) > 4 else np.float32(0)
    selected: list[tuple[int, int, int]] = []
    for b in range(boxes.shape[0]):
        y1, x1, y2, x2 = _corners(boxes[b], center)
        area = (y2 - y1) * (x2 - x1)
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = [k for k in np.argsort(-s, kind="stable") if s[k] > score_t]
            kept: list[int] = []
            for k in order:
                if len(selected) >= limit:
                    break
                if not any(_iou_above(k, j, y1, x1, y2, x2, area, iou_t) for j in kept):
                    kept.append(k)
                    selected.append((b, c, int(k)))
    out = np.array(selected, np.int32).reshape(-1, 3)
    return Plan([(out.shape, out.dtype)], _copy(out))


def _iou_above(k, j, y1, x1, y2, x2, area, threshold):
    w = max(min(x2[k], x2[j]) - max(x1[k], x1[j]), np.float32(0))
    h = max(min(y2[k], y2[j]) - max(y1[k], y1[j]), np.float32(0))
    inter = np.float32(w * h)
    if inter <= 0:
        return False
    return inter / (area[k] + area[j] - inter) > threshold


@op("Unique", data_dependent=True)
def unique(node, ins):
    """r1.1: the distinct values in first-occurrence order (compared with ==, so every NaN is
    new and -0 equals 0) and, per input element, the int32 index of its value among them.
    Output 0 is the input's shape with the last dim set to the distinct count; output 1 has
    the input's shape. `outType` is deprecated and ignored."""
    expect_inputs(node, ins, 1)
    x = _known(node, ins[0], "input")
    if x.ndim < 1:
        raise fail(node, "input must have at least one dimension")
    flat = x.reshape(-1)
    seen: dict = {}
    values, index = [], np.empty(flat.size, np.int32)
    for i, v in enumerate(flat.tolist()):
        key = None if isinstance(v, float) and math.isnan(v) else v
        if key is None or key not in seen:
            if key is not None:
                seen[key] = len(values)
            index[i] = len(values)
            values.append(flat[i])
        else:
            index[i] = seen[key]
    out = np.array(values, x.dtype)
    shape = x.shape[:-1] + (out.size,)
    if int(np.prod(shape)) != out.size:
        raise fail(node, f"{out.size} distinct values do not fit shape {shape} (input {x.shape})")
    out = out.reshape(shape)
    index = index.reshape(x.shape)

    def run(inputs, outputs):
        np.copyto(outputs[0], out)
        np.copyto(outputs[1], index)

    return Plan([(out.shape, out.dtype), (index.shape, index.dtype)], run)
