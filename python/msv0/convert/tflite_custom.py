"""Well-known TFLite custom operators (an OperatorCode with builtin CUSTOM and a custom_code
name), found by that name. Their options are the operator's raw custom_options bytes.

TFLite_Detection_PostProcess (TF's object-detection export; LiteRT ships its kernel) keeps its
options in a FlexBuffers map; r1.1's TFLite parser mapped it to DetectionPostProcess.
MediaPipe's Convolution2DTransposeBias reads TfLiteTransposeConvParams from the bytes
(int32 padding: 1 SAME, 2 VALID; int32 stride_w; int32 stride_h).
"""
from __future__ import annotations

import struct

from msv0.convert.emit import Unsupported, Val, handler_table

CUSTOM_HANDLERS, handles = handler_table()
# TfLitePadding in the C API (not the schema's Padding enum)
C_PADDING_SAME, C_PADDING_VALID = 1, 2
# Defaults of TFLite's kernel for keys an exporter may leave out.
DETECTION_DEFAULTS = {"detections_per_class": 100, "use_regular_nms": False}
DETECTION_KEYS = {"max_detections": "maxDetections", "max_classes_per_detection": "maxClassesPerDetection",
                  "detections_per_class": "detectionsPerClass", "use_regular_nms": "useRegularNms",
                  "nms_score_threshold": "nmsScoreThreshold", "nms_iou_threshold": "nmsIouThreshold",
                  "num_classes": "numClasses", "y_scale": "yScale", "x_scale": "xScale", "h_scale": "hScale",
                  "w_scale": "wScale"}


def transpose_conv_bias_options(data: bytes) -> tuple[bool, int, int]:
    """(SAME padding?, stride_h, stride_w) of a Convolution2DTransposeBias."""
    if len(data) < 12:
        raise Unsupported(f"custom options of {len(data)} bytes (TfLiteTransposeConvParams needs 12)")
    padding, stride_w, stride_h = struct.unpack_from("<3i", data)
    if padding not in (C_PADDING_SAME, C_PADDING_VALID) or stride_w < 1 or stride_h < 1:
        raise Unsupported(f"padding {padding}, strides {stride_h}x{stride_w}")
    return padding == C_PADDING_SAME, stride_h, stride_w


@handles("TFLite_Detection_PostProcess")
def detection_post_process(o):
    from flatbuffers import flexbuffers
    opts = {**DETECTION_DEFAULTS, **flexbuffers.Loads(o.custom_options())}
    missing = sorted(set(DETECTION_KEYS) - set(opts))
    if missing:
        raise Unsupported(f"custom options lack {', '.join(missing)}")
    if o.inp(2).const is None:
        raise Unsupported("the anchors must be a constant")
    attrs = {DETECTION_KEYS[k]: opts[k] for k in DETECTION_KEYS}
    per_det = int(opts["max_classes_per_detection"])
    if not opts["use_regular_nms"] and per_det > int(opts["num_classes"]):
        raise Unsupported("max_classes_per_detection above num_classes (TFLite leaves unused slots per box, "
                          "r1.1 packs them)")
    outs = [o.out(k) for k in range(len(o.outputs))]
    idx = o.e.node("DetectionPostProcess", [o.e.index(o.inp(k)) for k in range(3)], outs,
                   f"{o.name}/DetectionPostProcess", **attrs)
    vals = [Val(shape, dtype, index=i) for i, (shape, dtype) in zip(idx, outs)]
    if not opts["use_regular_nms"] and per_det > 1 and len(vals) == 4:
        # r1.1 counts the (box, class) slots it filled, TFLite the boxes: per_det slots each
        vals[3] = o.op("Div", [vals[3], o.scalar(float(per_det))], vals[3].shape, vals[3].dtype)
    for k, v in enumerate(vals):
        o.set(v, k)


@handles("MaxPoolingWithArgmax2D", "MaxUnpooling2D")
def argmax_pooling(o):
    raise Unsupported("v0 has no op that returns or consumes the argmax positions of a max pool")
