"""TFLite -> v0, the float32 subset r1.1's TFLite parser handled (format-v0.md §2, §5).

TFLite tensors are NHWC already, so activations keep their shapes and conv weights need at
most one permutation: CONV_2D [Cout,kH,kW,Cin] is KHWC as stored, DEPTHWISE_CONV_2D
[1,kH,kW,C·m] becomes [C·m,kH,kW,1] (multiplier > 1 as Conv2D with group = C, as r1.1 did),
TRANSPOSE_CONV [Cout,kH,kW,Cin] becomes DeConv2D's [Cin,kH,kW,Cout]. SAME padding is written
as explicit pads (TF splits floor/ceil like r1.1). fp16 weights behind DEQUANTIZE are folded,
sparse constants made dense (tflite_sparse.py). Array and elementwise builtins are in
tflite_array.py, those written as several v0 ops in tflite_math.py and tflite_index.py, recurrent
layers in tflite_rnn.py, well-known custom ops in tflite_custom.py, resource variables in
tflite_state.py, WHILE/IF over subgraphs in tflite_control.py. Integer operators of constants
become constants (tflite_fold.py) rather than nodes.
Reading needs the optional `tflite` package (generated FlatBuffers accessors).
"""
from __future__ import annotations

import collections
import warnings

import numpy as np

from msv0.convert import tflite_shapes
from msv0.convert.emit import Emitter, Unsupported, Val, handler_table
from msv0.convert.resize_lowering import gather_nearest, r11_nearest_index, resize_bilinear
from msv0.convert.tflite_array import ARRAY_HANDLERS
from msv0.convert.tflite_control import CONTROL_HANDLERS
from msv0.convert.tflite_custom import CUSTOM_HANDLERS, missing_reason, transpose_conv_bias_options
from msv0.convert.tflite_fold import fold
from msv0.convert.tflite_index import INDEX_HANDLERS
from msv0.convert.tflite_math import COMPLEX_OPS, MATH_HANDLERS
from msv0.convert.tflite_rnn import RNN_HANDLERS
from msv0.convert.tflite_sparse import densify
from msv0.convert.tflite_state import STATE_HANDLERS, Variables
from msv0.errors import Error, ModelError, UnsupportedOpError
from msv0.fb.ActivationType import ActivationType
from msv0.fb.Format import Format
from msv0.fb.PadMode import PadMode
from msv0.fb.PaddingMode import PaddingMode
from msv0.fb.PoolMode import PoolMode
from msv0.fb.ReduceMode import ReduceMode
from msv0.fb.ResizeMethod import ResizeMethod
from msv0.fb.RoundMode import RoundMode
from msv0.progress import progress

# TFLite's own schema numbers (ActivationFunctionType, Padding), read from its options tables;
# the tflite package is optional, so they are named here.
TFL_NONE, TFL_RELU, TFL_RELU_N1_TO_1, TFL_RELU6, TFL_TANH = 0, 1, 2, 3, 4
TFL_SAME, TFL_VALID = 0, 1
# The TFLite fused activations that v0 ops fuse themselves.
OWN_ACT = {TFL_RELU: ActivationType.RELU, TFL_RELU6: ActivationType.RELU6}
# TensorType -> numpy; quantized int8/uint8 graphs are refused below
DTYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 9: np.int8}
TFL_COMPLEX64 = 8
HANDLERS, handles = handler_table()
HANDLERS.update(ARRAY_HANDLERS)
HANDLERS.update(CUSTOM_HANDLERS)
HANDLERS.update(STATE_HANDLERS)
HANDLERS.update(CONTROL_HANDLERS)
HANDLERS.update(INDEX_HANDLERS)
HANDLERS.update(MATH_HANDLERS)
HANDLERS.update(RNN_HANDLERS)
TFL_CUSTOM = 32  # BuiltinOperator.CUSTOM: the operator is named by its custom_code


def _tflite():
    try:
        import tflite
    except ImportError:
        raise ImportError("converting TFLite models needs the 'tflite' package (pip install tflite)") from None
    return tflite


class Op:
    """One TFLite operator as the handlers see it."""

    def __init__(self, conv, op, name: str, code: str):
        self.conv, self.e, self.name, self.code = conv, conv.e, name, code
        self.inputs = [int(i) for i in op.InputsAsNumpy()] if op.InputsLength() else []
        self.outputs = [int(i) for i in op.OutputsAsNumpy()]
        self._raw = op
        self._n = 0

    def options(self, cls_name: str):
        import importlib
        table = self._raw.BuiltinOptions()
        if table is None:
            return None
        cls = getattr(importlib.import_module(f"tflite.{cls_name}"), cls_name)
        o = cls()
        o.Init(table.Bytes, table.Pos)
        return o

    def custom_options(self) -> bytes:
        return self._raw.CustomOptionsAsNumpy().tobytes() if self._raw.CustomOptionsLength() else b""

    def inp(self, k) -> Val | None:
        if k >= len(self.inputs) or self.inputs[k] < 0:
            return None
        return self.conv.value(self.inputs[k])

    def const(self, k, what) -> np.ndarray | None:
        v = self.inp(k)
        if v is None:
            return None
        if v.const is None:
            raise Unsupported(f"{what} must be a constant")
        return v.const

    def out(self, k=0):
        t = self.conv.tensors[self.outputs[k]]
        return t[0], t[1]

    def set(self, v: Val, k=0):
        self.conv.vals[self.outputs[k]] = v

    def op(self, op, ins, shape, dtype, /, **attrs) -> Val:
        self._n += 1
        return self.e.op(op, ins, shape, dtype, f"{self.name}/{op}_{self._n}", **attrs)

    def emit_all(self, op, ins: list[Val], /, **attrs) -> list[Val]:
        """One v0 node writing all of this operator's outputs, shaped as TFLite declares them."""
        outs = [self.out(k) for k in range(len(self.outputs))]
        idx = self.e.node(op, [self.e.index(v) for v in ins], outs, f"{self.name}/{op}", **attrs)
        vals = [Val(shape, dtype, index=i) for i, (shape, dtype) in zip(idx, outs)]
        for k, v in enumerate(vals):
            self.set(v, k)
        return vals

    def scalar(self, value, dtype=np.float32) -> Val:
        a = np.array([value], dtype)
        return Val.of(a)


def _fused(o: Op, y: Val, act: int) -> Val:
    """TFLite fused activations beyond what v0 fuses (RELU/RELU6 go into the op itself)."""
    if act == TFL_NONE or act in OWN_ACT:
        return y
    if act == TFL_RELU_N1_TO_1:
        return o.op("Activation", [y], y.shape, y.dtype, type=ActivationType.HARD_TANH, minVal=-1.0, maxVal=1.0)
    if act == TFL_TANH:
        return o.op("Activation", [y], y.shape, y.dtype, type=ActivationType.TANH)
    raise Unsupported(f"fused activation {act}")


def _own_act(act: int) -> int:
    return OWN_ACT.get(act, ActivationType.NO_ACTIVATION)


def _pads(padding, in_hw, k_hw, s_hw, d_hw):
    if padding == TFL_VALID:
        return 0, 0, 0, 0
    pads = []
    for n, k, s, d in zip(in_hw, k_hw, s_hw, d_hw):
        out = -(-n // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
        pads.append((total // 2, total - total // 2))
    return pads[0][0], pads[0][1], pads[1][0], pads[1][1]


def _bias(o: Op, k):
    b = o.const(k, "the bias")
    return [] if b is None else [Val(b.shape, np.dtype(np.float32), const=b.astype(np.float32))]


def _weight(o: Op, w: np.ndarray) -> Val:
    idx = o.e.const(np.ascontiguousarray(w, np.float32), f"{o.name}/weight", fmt=Format.KHWC)
    return Val(w.shape, np.dtype(np.float32), index=idx)


@handles("CONV_2D", "DEPTHWISE_CONV_2D")
def conv(o: Op):
    x, w = o.inp(0), o.const(1, "the weight")
    shape, dtype = o.out()
    dw = o.code == "DEPTHWISE_CONV_2D"
    opt = o.options("DepthwiseConv2DOptions" if dw else "Conv2DOptions")
    s, d = (opt.StrideH(), opt.StrideW()), (opt.DilationHFactor(), opt.DilationWFactor())
    k = w.shape[1:3]
    top, bottom, left, right = o.conv.conv_pads.get(o.inputs[0], (0, 0, 0, 0))  # a zero PAD folded in
    padded = (x.shape[1] + top + bottom, x.shape[2] + left + right)
    pads = _pads(opt.Padding(), padded, k, s, d)
    up, down, left, right = pads[0] + top, pads[1] + bottom, pads[2] + left, pads[3] + right
    attrs = dict(padMode=PadMode.NOTSET, padUp=up, padDown=down, padLeft=left, padRight=right, strideH=s[0], strideW=s[1],
                 kernelH=k[0], kernelW=k[1], dilateH=d[0], dilateW=d[1],
                 activationType=_own_act(opt.FusedActivationFunction()))
    cin = x.shape[3]
    if not dw:
        group = cin // w.shape[3]
        y = o.op("Conv2D", [x, _weight(o, w)] + _bias(o, 2), shape, dtype, group=group, channelIn=cin,
                 channelOut=w.shape[0], **attrs)
    else:
        wk = w.transpose(3, 1, 2, 0)  # [C·m, kH, kW, 1]; output channel c·m + j reads input channel c
        if wk.shape[0] == cin:
            y = o.op("DepthwiseConv2D", [x, _weight(o, wk)] + _bias(o, 2), shape, dtype, channelIn=cin,
                     channelMultiplier=1, **attrs)
        else:
            y = o.op("Conv2D", [x, _weight(o, wk)] + _bias(o, 2), shape, dtype, group=cin, channelIn=cin,
                     channelOut=wk.shape[0], **attrs)
    o.set(_fused(o, y, opt.FusedActivationFunction()))


def _deconv(o: Op, x: Val, w: np.ndarray, bias_k: int, same: bool, s, act: int):
    """DeConv2D for a TFLite transposed conv (weight [Cout,kH,kW,Cin]) whose full result is
    cropped to the output tensor's size, SAME putting the smaller half of the crop first."""
    shape, dtype = o.out()
    k = w.shape[1:3]
    pads = []
    for i in range(2):
        total = (x.shape[1 + i] - 1) * s[i] + k[i] - shape[1 + i]
        if total < 0:
            raise Unsupported(f"{o.code} output larger than the full transposed convolution")
        lo = total // 2 if same else 0
        pads.append((lo, total - lo))
    y = o.op("DeConv2D", [x, _weight(o, w.transpose(3, 1, 2, 0))] + _bias(o, bias_k), shape, dtype, group=1,
             channelIn=x.shape[3], channelOut=w.shape[0], padMode=PadMode.NOTSET, padUp=pads[0][0], padDown=pads[0][1],
             padLeft=pads[1][0], padRight=pads[1][1], strideH=s[0], strideW=s[1], kernelH=k[0], kernelW=k[1],
             dilateH=1, dilateW=1, activationType=_own_act(act))
    o.set(_fused(o, y, act))


@handles("TRANSPOSE_CONV")
def transpose_conv(o: Op):
    opt = o.options("TransposeConvOptions")
    act = opt.FusedActivationFunction() if hasattr(opt, "FusedActivationFunction") else 0
    _deconv(o, o.inp(2), o.const(1, "the weight"), 3, opt.Padding() == TFL_SAME, (opt.StrideH(), opt.StrideW()), act)


@handles("Convolution2DTransposeBias")
def transpose_conv_bias(o: Op):
    """MediaPipe's transposed conv (x, weight, bias); its SAME crop is TRANSPOSE_CONV's."""
    same, stride_h, stride_w = transpose_conv_bias_options(o.custom_options())
    _deconv(o, o.inp(0), o.const(1, "the weight"), 2, same, (stride_h, stride_w), TFL_NONE)


@handles("FULLY_CONNECTED")
def fully_connected(o: Op):
    x, w = o.inp(0), o.inp(1)
    if w.const is not None:
        w = Val(w.shape, np.dtype(np.float32), const=w.const.astype(np.float32))
    emit_fully_connected(o, x, w, _bias)


def emit_fully_connected(o: Op, x: Val, w: Val, bias) -> None:
    """FULLY_CONNECTED of x, flattened to rows of k, by weight w [n, k] (float here, int8 from
    tflite_quant.py, whose bias reader `bias` also differs)."""
    shape, dtype = o.out()
    opt = o.options("FullyConnectedOptions")
    act = opt.FusedActivationFunction() if opt else 0
    if opt and opt.WeightsFormat() != 0:
        raise Unsupported("shuffled FULLY_CONNECTED weights")
    n, kk = w.shape
    flat = (int(np.prod(x.shape)) // kk, n)
    if w.const is None:  # a computed weight [n, k]: MatMul with B transposed, activation after
        if tuple(x.shape) != (flat[0], kk):
            x = o.op("Reshape", [x], (flat[0], kk), x.dtype, shape=[flat[0], kk])
        y = o.op("MatMul", [x, w] + bias(o, 2), flat, dtype, transposeA=False, transposeB=True)
        if act in OWN_ACT:
            y = o.op("Activation", [y], flat, dtype, type=OWN_ACT[act])
    else:
        ins = [x, w] + bias(o, 2)
        y = o.op("FullConnection", ins, flat, dtype, hasBias=len(ins) == 3, useAxis=False,
                 activationType=_own_act(act))
    if tuple(shape) != flat:
        y = o.op("Reshape", [y], shape, dtype, shape=list(shape))
    o.set(_fused(o, y, act))


@handles("AVERAGE_POOL_2D", "MAX_POOL_2D")
def pool(o: Op):
    x = o.inp(0)
    shape, dtype = o.out()
    opt = o.options("Pool2DOptions")
    k, s = (opt.FilterHeight(), opt.FilterWidth()), (opt.StrideH(), opt.StrideW())
    up, down, left, right = _pads(opt.Padding(), x.shape[1:3], k, s, (1, 1))
    # TFLite's average pool divides by the valid cells, like r1.1's fp32 kernel
    mode = PoolMode.MEAN_POOLING if o.code == "AVERAGE_POOL_2D" else PoolMode.MAX_POOLING
    y = o.op("Pooling", [x], shape, dtype, poolingMode=mode, windowH=k[0], windowW=k[1], strideH=s[0], strideW=s[1],
             padMode=PadMode.NOTSET, padUp=up, padDown=down, padLeft=left, padRight=right, roundMode=RoundMode.FLOOR, activationType=_own_act(opt.FusedActivationFunction()))
    o.set(_fused(o, y, opt.FusedActivationFunction()))


BINARY = {"ADD": ("Add", "AddOptions"), "SUB": ("Sub", "SubOptions"), "MUL": ("Mul", "MulOptions"),
          "DIV": ("Div", "DivOptions")}


@handles(*BINARY)
def binary(o: Op):
    op, opts = BINARY[o.code]
    shape, dtype = o.out()
    opt = o.options(opts)
    act = opt.FusedActivationFunction() if opt else 0
    y = o.op(op, [o.inp(0), o.inp(1)], shape, dtype, activationType=_own_act(act))
    o.set(_fused(o, y, act))


OWN_ACT_CODES = ("RELU", "RELU6")  # the activations a v0 op's activationType applies
ACT = {"RELU": ActivationType.RELU, "RELU6": ActivationType.RELU6, "LOGISTIC": ActivationType.SIGMOID,
       "TANH": ActivationType.TANH, "HARD_SWISH": ActivationType.HSWISH}


@handles(*ACT, "LEAKY_RELU")
def activation(o: Op):
    x = o.inp(0)
    # A RELU/RELU6 that is the only reader of a conv's, FC's or ADD's result runs in that op, as
    # TFLite's own fused activations do (LiteRT's delegate fuses such pairs too).
    if (o.code in OWN_ACT_CODES and len(o.conv.readers[o.inputs[0]]) == 1 and x.index is not None
            and o.e.fuse_activation(x, ACT[o.code])):
        o.set(x)
        return
    kw = {"alpha": float(o.options("LeakyReluOptions").Alpha())} if o.code == "LEAKY_RELU" else {}
    o.set(o.op("Activation", [x], x.shape, x.dtype, type=ACT.get(o.code, ActivationType.LEAKY_RELU), **kw))


@handles("PRELU")
def prelu(o: Op):
    x, alpha = o.inp(0), o.const(1, "alpha")
    shape, dtype = o.out()
    full = np.broadcast_to(alpha, shape)
    per_channel = np.all(full == full.reshape(-1, shape[-1])[:1].reshape((1,) * (len(shape) - 1) + (shape[-1],)))
    if not per_channel:
        raise Unsupported("PRELU alpha varying along an axis other than the last")
    vec = np.ascontiguousarray(full.reshape(-1, shape[-1])[0], np.float32)
    shared = bool(np.all(vec == vec[0]))
    slope = vec[:1] if shared else vec
    o.set(o.op("PReLU", [x, Val.of(slope)], shape, dtype, channelShared=shared))


@handles("RESHAPE", "SQUEEZE")
def reshape(o: Op):
    shape, dtype = o.out()
    if o.conv.bad_dtypes.get(o.outputs[0]) == "complex64":  # RFFT2D's float32 pairs [..., 2]
        shape, dtype = (*shape, 2), np.dtype(np.float32)
    o.set(o.op("Reshape", [o.inp(0)], shape, dtype, shape=list(shape)))


@handles("CONCATENATION")
def concat(o: Op):
    shape, dtype = o.out()
    opt = o.options("ConcatenationOptions")
    axis = opt.Axis() + len(shape) if opt.Axis() < 0 else opt.Axis()
    if opt.FusedActivationFunction():
        raise Unsupported("fused activation on CONCATENATION (TFLite's own kernel rejects it)")
    o.set(o.op("Concat", [o.inp(k) for k in range(len(o.inputs))], shape, dtype, axis=axis))


@handles("PAD", "PADV2")
def pad(o: Op):
    shape, dtype = o.out()
    p = o.const(1, "paddings").astype(np.int64)
    value = o.const(2, "constant_values") if len(o.inputs) > 2 else None
    value = 0.0 if value is None else float(value.reshape(-1)[0])
    # Zeros around H and W of what one conv alone reads are that conv's own padding (as in
    # MediaPipe's BlazeFace-style nets: a PAD before each VALID depthwise conv).
    if (value == 0 and p.shape == (4, 2) and (p >= 0).all() and not p[0].any() and not p[3].any()
            and o.inp(0).const is None and o.conv.readers[o.outputs[0]] in (["CONV_2D"], ["DEPTHWISE_CONV_2D"])):
        o.conv.conv_pads[o.outputs[0]] = (int(p[1, 0]), int(p[1, 1]), int(p[2, 0]), int(p[2, 1]))
        o.set(o.inp(0))
        return
    o.set(o.op("Pad", [o.inp(0)], shape, dtype, paddings=[int(v) for v in p.reshape(-1)], paddingMode=PaddingMode.CONSTANT,
               constantValue=value))


@handles("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
def resize(o: Op):
    x = o.inp(0)
    shape, dtype = o.out()
    bilinear = o.code == "RESIZE_BILINEAR"
    opt = o.options("ResizeBilinearOptions" if bilinear else "ResizeNearestNeighborOptions")
    align = bool(opt.AlignCorners()) if opt is not None else False
    if opt is not None and opt.HalfPixelCenters():
        if align:
            raise Unsupported("both align_corners and half_pixel_centers")
        o.set(_half_pixel_resize(o, x, shape, bilinear))
        return
    o.set(o.op("Resize", [x], shape, dtype, format=Format.NHWC, method=ResizeMethod.LINEAR if bilinear else ResizeMethod.NEAREST, newHeight=shape[1],
               newWidth=shape[2], alignCorners=align))


def _half_pixel_resize(o: Op, x: Val, shape, bilinear: bool) -> Val:
    """half_pixel_centers: r1.1's Resize has no half-pixel offset, so write ops that compute it."""
    pairs = list(zip(x.shape[1:3], shape[1:3]))
    scales = [np.float32(n_out) / np.float32(n_in) for n_in, n_out in pairs]
    if bilinear:
        return resize_bilinear(o, x, shape[1:3], scales, "half_pixel")
    # LiteRT: floor((dst + ½)·in/out), which for an integer up-factor is r1.1's floor(dst·in/out)
    half = np.float32(0.5)
    idx = [np.minimum(np.floor((np.arange(n_out, dtype=np.float32) + half) * (np.float32(n_in) / np.float32(n_out))),
                      n_in - 1).astype(np.int64) for n_in, n_out in pairs]
    if all(np.array_equal(t, r11_nearest_index(n_in, n_out)) for t, (n_in, n_out) in zip(idx, pairs)):
        return o.op("Resize", [x], shape, x.dtype, format=Format.NHWC, method=ResizeMethod.NEAREST,
                    newHeight=shape[1], newWidth=shape[2], alignCorners=False)
    return gather_nearest(o, x, *idx)


@handles("SOFTMAX")
def softmax(o: Op):
    x = o.inp(0)
    shape, dtype = o.out()
    beta = float(o.options("SoftmaxOptions").Beta())
    if beta != 1.0:
        x = o.op("Mul", [x, o.scalar(beta)], shape, dtype)
    o.set(o.op("SoftMax", [x], shape, dtype, axis=-1))


REDUCE = {"MEAN": ReduceMode.ReduceMean, "SUM": ReduceMode.ReduceSum, "REDUCE_MAX": ReduceMode.ReduceMax,
          "REDUCE_MIN": ReduceMode.ReduceMin, "REDUCE_PROD": ReduceMode.ReduceProd}


@handles(*REDUCE)
def reduce(o: Op):
    x = o.inp(0)
    shape, dtype = o.out()
    axes = sorted({int(a) + len(x.shape) if a < 0 else int(a) for a in o.const(1, "axes").reshape(-1)})
    if not axes:  # TFLite reduces nothing then; v0 would reduce every axis
        o.set(o.op("Reshape", [x], shape, dtype, shape=list(shape)))
        return
    keep = bool(o.options("ReducerOptions").KeepDims())
    o.set(o.op("Reduce", [x], shape, dtype, axes=axes, keepDims=int(keep), mode=REDUCE[o.code]))


@handles("STRIDED_SLICE")
def strided_slice(o: Op):
    x = o.inp(0)
    shape, dtype = o.out()
    opt = o.options("StridedSliceOptions")
    if opt.EllipsisMask() or opt.NewAxisMask() or (hasattr(opt, "Offset") and opt.Offset()):
        raise Unsupported("ellipsis / new-axis / offset STRIDED_SLICE")
    begin, end, stride = (o.const(k, what).reshape(-1) for k, what in ((1, "begin"), (2, "end"), (3, "strides")))
    rank = len(x.shape)
    b_, e_, s_ = [0] * rank, list(x.shape), [1] * rank
    for i in range(len(begin)):
        n, st = x.shape[i], int(stride[i])
        if opt.ShrinkAxisMask() >> i & 1:
            b = int(begin[i]) + (n if begin[i] < 0 else 0)
            b_[i], e_[i], s_[i] = b, b + 1, 1
            continue
        lo = None if opt.BeginMask() >> i & 1 else int(begin[i])
        hi = None if opt.EndMask() >> i & 1 else int(end[i])
        b_[i], e_[i], s_[i] = slice(lo, hi, st).indices(n)
        if st < 0 and e_[i] < 0:
            raise Unsupported("negative-stride slice through index 0 (r1.1 adds the dim to a negative end)")
    full = tuple(len(range(b, e, s)) for b, e, s in zip(b_, e_, s_))
    y = o.op("StridedSlice", [x], full, dtype, begin=b_, end=e_, stride=s_)
    if tuple(shape) != full:
        y = o.op("Reshape", [y], shape, dtype, shape=list(shape))
    o.set(y)


@handles("DENSIFY")
def densify_op(o: Op):
    o.set(o.inp(0))  # its sparse constant input was made dense when the model was read


@handles("DEQUANTIZE")
def dequantize(o: Op):
    w = o.const(0, "DEQUANTIZE input (only fp16 weights are folded)")
    if w.dtype != np.float16:
        raise Unsupported(f"DEQUANTIZE of {w.dtype} (quantized graphs are not converted)")
    a = w.astype(np.float32)
    o.set(Val.of(a))


class _Converter:
    """Converts TFLite subgraph `index`; the main one (0) writes the model, others (WHILE/IF
    bodies) become v0 subgraphs of their parent's model."""

    handlers = HANDLERS

    def __init__(self, model, tfl, index=0, parent: _Converter | None = None,
                 shapes: dict[int, tuple[int, ...]] | None = None):
        """shapes: the main subgraph's dynamic tensors' shapes (tflite_shapes.resolved), which
        replace the placeholders the file stores."""
        self.tfl = tfl
        self.model = model
        g = model.Subgraphs(index)
        self.g, self.index = g, index
        names = {v: k for k, v in vars(tfl.BuiltinOperator).items() if not k.startswith("_")}
        self.codes = []
        for i in range(model.OperatorCodesLength()):
            c = model.OperatorCodes(i)
            code = max(c.BuiltinCode(), c.DeprecatedBuiltinCode())
            if code == TFL_CUSTOM and c.CustomCode():
                self.codes.append(c.CustomCode().decode())
            else:
                self.codes.append(names.get(code, f"code {code}"))
        self.tensors = []
        self.consts: dict[int, np.ndarray] = {}
        self.bad_dtypes: dict[int, str] = {}
        for i in range(g.TensorsLength()):
            t = g.Tensors(i)
            shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
            shape = shapes.get(i, shape) if shapes and index == 0 else shape
            q = t.Quantization()
            if t.Type() not in DTYPES or (q is not None and q.ScaleLength() > 0):
                self.bad_dtypes[i] = "quantized" if q is not None and q.ScaleLength() else \
                    "complex64" if t.Type() == TFL_COMPLEX64 else f"TensorType {t.Type()}"
                self.tensors.append((shape, np.dtype(np.float32)))
                continue
            dtype = np.dtype(DTYPES[t.Type()])
            self.tensors.append((shape, dtype))
            buf = model.Buffers(t.Buffer())
            if buf is not None and buf.DataLength() > 0:
                data = np.frombuffer(buf.DataAsNumpy().tobytes(), dtype)
                sparse = t.Sparsity()
                self.consts[i] = data.reshape(shape).copy() if sparse is None else densify(data, shape, sparse)
        self.variables = Variables(self, g, main=parent is None)
        for i in self.variables.names:  # VAR_HANDLE resources are handled by name, not as data
            self.bad_dtypes.pop(i, None)
        self.e = parent.e if parent else Emitter(model.Description().decode() if model.Description() else "tflite")
        # v0 subgraph of each TFLite subgraph converted so far, those being converted, their nodes
        self.subgraphs: dict[int, int] = parent.subgraphs if parent else {}
        self.open: set[int] = parent.open if parent else {index}
        self.claimed: set[int] = parent.claimed if parent else set()
        self.vals: dict[int, Val] = {}
        self.bad: list[tuple[str, str, str]] = []  # (operator, op code, reason)
        # tensor -> the op codes of the operators reading it, "output" for an output of the subgraph
        self.readers: dict[int, list[str]] = collections.defaultdict(list)
        for k in range(g.OperatorsLength()):
            op = g.Operators(k)
            for t in op.InputsAsNumpy() if op.InputsLength() else ():
                self.readers[int(t)].append(self.codes[op.OpcodeIndex()])
        for t in g.OutputsAsNumpy() if g.OutputsLength() else ():
            self.readers[int(t)].append("output")
        # a zero PAD's output -> its (top, bottom, left, right), for the conv that alone reads it
        self.conv_pads: dict[int, tuple[int, int, int, int]] = {}

    def constant_in(self, g, i) -> np.ndarray | None:
        """Tensor i of another subgraph g as a constant, if it is a plain one."""
        t = g.Tensors(i)
        buf = self.model.Buffers(t.Buffer())
        if t.Type() not in DTYPES or buf is None or not buf.DataLength() or t.Sparsity() is not None:
            return None
        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        return np.frombuffer(buf.DataAsNumpy().tobytes(), DTYPES[t.Type()]).reshape(shape).copy()

    def value(self, i) -> Val:
        if i in self.vals:
            return self.vals[i]
        if i in self.consts:
            a = self.consts[i]
            return Val.of(a)
        raise Unsupported(f"tensor {i} has no producer")

    def tensor_name(self, i) -> str:
        return self.g.Tensors(i).Name().decode()

    def convert_ops(self, prefix: str) -> None:
        g = self.g
        for k in progress(range(g.OperatorsLength()), g.OperatorsLength(), "converting"):
            raw = g.Operators(k)
            code = self.codes[raw.OpcodeIndex()]
            o = Op(self, raw, f"{prefix}{code}_{k}", code)
            try:
                handler = self.handlers.get(code)
                if handler is None:
                    raise Unsupported(missing_reason(code))
                odd = [self.bad_dtypes[t] for t in o.inputs + o.outputs if t in self.bad_dtypes
                       and not (code in COMPLEX_OPS and self.bad_dtypes[t] == "complex64")]
                if odd:
                    raise Unsupported(f"{odd[0]} tensors")
                if not fold(o):  # all-constant integer ops become constants, for the handlers that need one
                    handler(o)
            except Unsupported as err:
                self.bad.append((o.name, code, str(err)))
                for t in o.outputs:
                    self.vals[t] = Val(self.tensors[t][0], self.tensors[t][1], index=-1)
            except Error:
                raise
            except Exception as err:  # options or tensors of a kind the operator's handler cannot read
                raise ModelError(f"TFLite operator '{o.name}' ({code}): {type(err).__name__}: {err}") from err

    def _inputs(self, make) -> list[int]:
        idx = []
        for i in (int(k) for k in self.g.InputsAsNumpy()):
            name = self.tensor_name(i)
            if i in self.bad_dtypes:
                self.bad.append((name, "graph input", self.bad_dtypes[i]))
                continue
            shape, dtype = self.tensors[i]
            self.vals[i] = Val(shape, dtype, index=make(name, shape, dtype))
            idx.append(self.vals[i].index)
        return idx

    def subgraph(self, k: int) -> int:
        """The v0 subgraph of TFLite subgraph k (converted once; its problems join this graph's)."""
        if not 0 <= k < self.model.SubgraphsLength():
            raise Unsupported(f"subgraph {k} does not exist")
        if k in self.open:
            raise Unsupported(f"subgraph {k} calls itself")
        if k not in self.subgraphs:
            self.open.add(k)
            sub = _Converter(self.model, self.tfl, k, self)
            self.subgraphs[k] = sub.as_subgraph()
            self.open.discard(k)
            self.bad.extend(sub.bad)
        return self.subgraphs[k]

    def as_subgraph(self) -> int:
        b = self.e.b
        name = self.g.Name().decode() if self.g.Name() else f"subgraph{self.index}"
        inputs = self._inputs(lambda n, shape, dtype: b.tensor(f"{name}/{n}", dtype, shape))
        first = len(b.graph.nodes)
        self.convert_ops(f"{name}/")
        outputs = [self.e.index(self.value(i), f"{name}/{self.tensor_name(i)}")
                   for i in map(int, self.g.OutputsAsNumpy())]
        nodes = [n for n in range(first, len(b.graph.nodes)) if n not in self.claimed]
        self.claimed.update(nodes)
        return b.subgraph(name, inputs, outputs, nodes)

    def run(self) -> bytes:
        g = self.g
        self._inputs(self.e.b.input)
        self.convert_ops("")
        self.bad += [(self.tensor_name(i), "graph output", "complex64") for i in map(int, g.OutputsAsNumpy())
                     if self.bad_dtypes.get(i) == "complex64"]
        if self.bad:
            lines = "\n".join(f"  {name}: {op} ({why})" for name, op, why in self.bad)
            raise UnsupportedOpError(f"{len(self.bad)} TFLite operator(s) cannot be converted:\n{lines}", self.bad)
        used = set(self.e.b.inputs)
        outputs = [(self.tensor_name(i), self.value(i)) for i in (int(k) for k in g.OutputsAsNumpy())]
        for name, v in outputs + self.variables.outputs():
            idx = self.e.index(v, name)
            if idx in used:
                idx = self.e.op("Reshape", [v], v.shape, v.dtype, name + "/copy", shape=list(v.shape)).index
            self.e.b.graph.allTensors[idx].name = name
            used.add(idx)
            self.e.b.output(idx)
        return self.e.b.finish()


def convert_tflite(src, converter=_Converter, input_shapes=None, batch=None) -> bytes:
    """`converter(model, tfl, shapes)` makes the graph converter (tflite_quant's for quantized
    graphs); input_shapes ({input name: shape}) resizes inputs, and batch the first dim of the
    others where their signature leaves it dynamic, LiteRT recomputing the shapes that follow
    (tflite_shapes)."""
    tfl = _tflite()
    if isinstance(src, (bytes, bytearray)):
        data = bytes(src)
    else:
        with open(src, "rb") as f:
            data = f.read()
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ModelError("not a TFLite flatbuffer (no 'TFL3' identifier)")
    try:
        model = tfl.Model.GetRootAsModel(data, 0)
        if model.SubgraphsLength() < 1:
            raise ModelError("TFLite model without subgraphs")
        input_shapes = tflite_shapes.with_batch(model.Subgraphs(0), input_shapes, batch)
        shapes = tflite_shapes.resolved(data, model, input_shapes)
        _warn_dynamic_inputs(model.Subgraphs(0), input_shapes, shapes or {})
        return converter(model, tfl, shapes).run()
    except Error:
        raise
    except Exception as err:  # a malformed flatbuffer surfaces as struct/index errors
        raise ModelError(f"cannot read TFLite model: {err}") from err


def _warn_dynamic_inputs(g, input_shapes, shapes) -> None:
    """An input whose signature has a dynamic dim past the batch, left to the shape the file
    stores, converts at that placeholder (openWakeWord's melspectrogram.tflite: [1, 1] for
    [-1, -1], where its package feeds 1280 samples): say so."""
    for i in map(int, g.InputsAsNumpy()):
        t = g.Tensors(i)
        name = t.Name().decode() if t.Name() else f"tensor {i}"
        signature = [int(d) for d in t.ShapeSignatureAsNumpy()] if t.ShapeSignatureLength() else []
        if any(d < 0 for d in signature[1:]) and name not in input_shapes:
            stored = shapes.get(i) or [int(d) for d in t.ShapeAsNumpy()]
            warnings.warn(f"TFLite input '{name}' has dynamic dims {signature}: converted at the shape the file "
                          f"stores, {list(stored)}; pass input_shapes (msv0 convert --shape) to convert another",
                          stacklevel=5)  # at the caller of msv0.convert.convert
