"""Well-known TFLite custom operators (an OperatorCode with builtin CUSTOM and a custom_code
name), found by that name. Their options are the operator's raw custom_options bytes.

TFLite_Detection_PostProcess (TF's object-detection export; LiteRT ships its kernel) keeps its
options in a FlexBuffers map; r1.1's TFLite parser mapped it to DetectionPostProcess.
MediaPipe's Convolution2DTransposeBias reads TfLiteTransposeConvParams from the bytes
(int32 padding: 1 SAME, 2 VALID; int32 stride_w; int32 stride_h); its MaxPoolingWithArgmax2D
and MaxUnpooling2D read TfLitePoolParams (padding, stride_w, stride_h, filter_w, filter_h,
activation).
"""
from __future__ import annotations

import struct

import numpy as np

from msv0.convert.emit import Unsupported, Val, handler_table
from msv0.fb.PadMode import PadMode
from msv0.fb.PoolMode import PoolMode
from msv0.fb.RoundMode import RoundMode

CUSTOM_HANDLERS, handles = handler_table()
# TfLitePadding in the C API (not the schema's Padding enum)
C_PADDING_SAME, C_PADDING_VALID = 1, 2
# Defaults of TFLite's kernel for keys an exporter may leave out.
DETECTION_DEFAULTS = {"detections_per_class": 100, "use_regular_nms": False}
# option key -> (DetectionPostProcess attribute, its type)
DETECTION_KEYS = {"max_detections": ("maxDetections", int),
                  "max_classes_per_detection": ("maxClassesPerDetection", int),
                  "detections_per_class": ("detectionsPerClass", int), "use_regular_nms": ("useRegularNms", bool),
                  "nms_score_threshold": ("nmsScoreThreshold", float), "nms_iou_threshold": ("nmsIouThreshold", float),
                  "num_classes": ("numClasses", int), "y_scale": ("yScale", float), "x_scale": ("xScale", float),
                  "h_scale": ("hScale", float), "w_scale": ("wScale", float)}


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
    attrs = {attr: kind(opts[k]) for k, (attr, kind) in DETECTION_KEYS.items()}
    per_det = attrs["maxClassesPerDetection"]
    if not attrs["useRegularNms"] and per_det > attrs["numClasses"]:
        raise Unsupported("max_classes_per_detection above num_classes (TFLite leaves unused slots per box, "
                          "r1.1 packs them)")
    vals = o.emit_all("DetectionPostProcess", [o.inp(k) for k in range(3)], **attrs)
    if not attrs["useRegularNms"] and per_det > 1 and len(vals) == 4:
        # r1.1 counts the (box, class) slots it filled, TFLite the boxes: per_det slots each
        o.set(o.op("Div", [vals[3], o.scalar(float(per_det))], vals[3].shape, vals[3].dtype), 3)


def pool_params(data: bytes) -> tuple[int, int, int, int, int, int]:
    """TfLitePoolParams: (padding, stride_w, stride_h, filter_w, filter_h, activation)."""
    if len(data) < 24:
        raise Unsupported(f"custom options of {len(data)} bytes (TfLitePoolParams needs 24)")
    return struct.unpack_from("<6i", data)


def _tiling_window(o, hw=(0, 0)) -> int:
    """The window size k of a MediaPipe argmax pool / unpool that v0 can express exactly:
    k x k windows at stride k that tile the pooled map (no padding, no overlap)."""
    _, stride_w, stride_h, filter_w, filter_h, activation = pool_params(o.custom_options())
    if not stride_h == stride_w == filter_h == filter_w or activation:
        raise Unsupported(f"{filter_h}x{filter_w} windows at stride {stride_h}x{stride_w}, activation {activation} "
                          "(only square windows at their own stride, no activation, are converted)")
    k = filter_h
    if hw[0] % k or hw[1] % k:
        raise Unsupported(f"{hw[0]}x{hw[1]} input is not tiled by {k}x{k} windows")
    return k


@handles("MaxPoolingWithArgmax2D")
def max_pool_argmax(o):
    """Outputs: the window maxima and, per element, the offset of the first maximum within its
    window (row · k + column) plus 0.1, as MediaPipe writes it (float32). With tiling windows
    that offset is the ArgMax over SpaceToDepth's k² channel groups."""
    x = o.inp(0)
    n, h, w, c = x.shape
    k = _tiling_window(o, (h, w))
    (shape, dtype), (ishape, _) = o.out(0), o.out(1)
    ho, wo = h // k, w // k
    o.set(o.op("Pooling", [x], shape, dtype, poolingMode=PoolMode.MAX_POOLING, windowH=k, windowW=k, strideH=k,
               strideW=k, padMode=PadMode.VALID, roundMode=RoundMode.FLOOR), 0)
    groups = o.op("SpaceToDepth", [x], (n, ho, wo, k * k * c), dtype, blockSize=k)
    groups = o.op("Reshape", [groups], (n * ho, wo, k * k, c), dtype, shape=[n * ho, wo, k * k, c])
    idx = o.op("ArgMax", [groups], (n * ho, wo, c), dtype, axis=2, topK=1, keepDims=False, outMaxValue=False)
    idx = o.op("Reshape", [idx], ishape, dtype, shape=list(ishape))
    o.set(o.op("Add", [idx, o.scalar(0.1)], ishape, dtype), 1)


@handles("MaxUnpooling2D")
def max_unpooling(o):
    """Each value goes to the cell its window offset names (truncated, as MediaPipe casts it);
    the rest are zero. Per offset j: Select(floor(offset) == j, value, 0), the k² results
    side by side in channels, DepthToSpace k. Offsets outside the window (which MediaPipe
    would write into a neighbouring window) give zeros; an argmax pool never makes them."""
    x, idx = o.inp(0), o.inp(1)
    n, h, w, c = x.shape
    k = _tiling_window(o)
    shape, dtype = o.out()
    wide = (n, h, w, k * k * c)
    whole = o.op("Floor", [idx], idx.shape, dtype)
    values = o.op("Concat", [x] * (k * k), wide, dtype, axis=3)
    offsets = o.op("Concat", [whole] * (k * k), wide, dtype, axis=3)
    slot = np.repeat(np.arange(k * k, dtype=np.float32), c)
    hit = o.op("Equal", [offsets, Val.of(slot)], wide, np.bool_)
    zero = np.zeros(1, np.float32)
    picked = o.op("Select", [hit, values, Val.of(zero)], wide, dtype)
    o.set(o.op("DepthToSpace", [picked], shape, dtype, blockSize=k))


# Customs with no exact v0 form, and why.
REFUSED = dict.fromkeys(("Landmarks2TransformMatrix", "TransformLandmarks", "TransformTensorBilinear"),
                        "MediaPipe attention-mesh op (a landmark-driven affine crop): no v0 equivalent")


@handles(*REFUSED)
def refused(o):
    raise Unsupported(REFUSED[o.code])


def missing_reason(code: str) -> str:
    """Why an operator without a handler is not converted."""
    if code.startswith("Flex"):
        return "a TensorFlow op embedded for the Flex delegate (TFLite itself has no kernel for it)"
    return "no v0 equivalent"
