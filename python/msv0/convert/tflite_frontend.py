"""TFLite -> v0, the float32 subset r1.1's TFLite parser handled (format-v0.md §2, §5).

TFLite tensors are NHWC already, so activations keep their shapes and conv weights need at
most one permutation: CONV_2D [Cout,kH,kW,Cin] is KHWC as stored, DEPTHWISE_CONV_2D
[1,kH,kW,C·m] becomes [C·m,kH,kW,1] (multiplier > 1 as Conv2D with group = C, as r1.1 did),
TRANSPOSE_CONV [Cout,kH,kW,Cin] becomes DeConv2D's [Cin,kH,kW,Cout]. SAME padding is written
as explicit pads (TF splits floor/ceil like r1.1). fp16 weights behind DEQUANTIZE are folded.
Reading needs the optional `tflite` package (generated FlatBuffers accessors).
"""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Emitter, Unsupported, Val, handler_table
from msv0.convert.resize_lowering import gather_nearest, r11_nearest_index, resize_bilinear
from msv0.errors import Error, ModelError, UnsupportedOpError
from msv0.fb.ActivationType import ActivationType
from msv0.fb.Format import Format
from msv0.fb.PadMode import PadMode
from msv0.fb.PaddingMode import PaddingMode
from msv0.fb.PoolMode import PoolMode
from msv0.fb.ReduceMode import ReduceMode
from msv0.fb.ResizeMethod import ResizeMethod
from msv0.fb.RoundMode import RoundMode

# TFLite's own schema numbers (ActivationFunctionType, Padding), read from its options tables;
# the tflite package is optional, so they are named here.
TFL_NONE, TFL_RELU, TFL_RELU_N1_TO_1, TFL_RELU6, TFL_TANH = 0, 1, 2, 3, 4
TFL_SAME, TFL_VALID = 0, 1
# The TFLite fused activations that v0 ops fuse themselves.
OWN_ACT = {TFL_RELU: ActivationType.RELU, TFL_RELU6: ActivationType.RELU6}
# TensorType -> numpy; quantized int8/uint8 graphs are refused below
DTYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 9: np.int8}
HANDLERS, handles = handler_table()


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

    def scalar(self, value, dtype=np.float32) -> Val:
        a = np.array([value], dtype)
        return Val(a.shape, a.dtype, const=a)


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
    up, down, left, right = _pads(opt.Padding(), x.shape[1:3], k, s, d)
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


@handles("TRANSPOSE_CONV")
def transpose_conv(o: Op):
    w, x = o.const(1, "the weight"), o.inp(2)
    shape, dtype = o.out()
    opt = o.options("TransposeConvOptions")
    s, k = (opt.StrideH(), opt.StrideW()), w.shape[1:3]
    pads = []
    for i in range(2):
        total = (x.shape[1 + i] - 1) * s[i] + k[i] - shape[1 + i]  # the full result is cropped to the output
        if total < 0:
            raise Unsupported("TRANSPOSE_CONV output larger than the full transposed convolution")
        lo = total // 2 if opt.Padding() == TFL_SAME else 0
        pads.append((lo, total - lo))
    act = opt.FusedActivationFunction() if hasattr(opt, "FusedActivationFunction") else 0
    y = o.op("DeConv2D", [x, _weight(o, w.transpose(3, 1, 2, 0))] + _bias(o, 3), shape, dtype, group=1,
             channelIn=x.shape[3], channelOut=w.shape[0], padMode=PadMode.NOTSET, padUp=pads[0][0], padDown=pads[0][1],
             padLeft=pads[1][0], padRight=pads[1][1], strideH=s[0], strideW=s[1], kernelH=k[0], kernelW=k[1],
             dilateH=1, dilateW=1, activationType=_own_act(act))
    o.set(_fused(o, y, act))


@handles("FULLY_CONNECTED")
def fully_connected(o: Op):
    x, w = o.inp(0), o.const(1, "the weight")
    shape, dtype = o.out()
    opt = o.options("FullyConnectedOptions")
    act = opt.FusedActivationFunction() if opt else 0
    if opt and opt.WeightsFormat() != 0:
        raise Unsupported("shuffled FULLY_CONNECTED weights")
    n, kk = w.shape
    flat = (int(np.prod(x.shape)) // kk, n)
    ins = [x, Val(w.shape, np.dtype(np.float32), const=w.astype(np.float32))] + _bias(o, 2)
    y = o.op("FullConnection", ins, flat, dtype, hasBias=len(ins) == 3, useAxis=False, activationType=_own_act(act))
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


ACT = {"RELU": ActivationType.RELU, "RELU6": ActivationType.RELU6, "LOGISTIC": ActivationType.SIGMOID,
       "TANH": ActivationType.TANH, "HARD_SWISH": ActivationType.HSWISH}


@handles(*ACT, "LEAKY_RELU")
def activation(o: Op):
    x = o.inp(0)
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
    o.set(o.op("PReLU", [x, Val(slope.shape, slope.dtype, const=slope)], shape, dtype, channelShared=shared))


@handles("RESHAPE", "SQUEEZE")
def reshape(o: Op):
    shape, dtype = o.out()
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


@handles("MEAN")
def mean(o: Op):
    x = o.inp(0)
    shape, dtype = o.out()
    axes = sorted({int(a) + len(x.shape) if a < 0 else int(a) for a in o.const(1, "axes").reshape(-1)})
    keep = bool(o.options("ReducerOptions").KeepDims())
    o.set(o.op("Reduce", [x], shape, dtype, axes=axes, keepDims=int(keep), mode=ReduceMode.ReduceMean))


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


@handles("DEQUANTIZE")
def dequantize(o: Op):
    w = o.const(0, "DEQUANTIZE input (only fp16 weights are folded)")
    if w.dtype != np.float16:
        raise Unsupported(f"DEQUANTIZE of {w.dtype} (quantized graphs are not converted)")
    a = w.astype(np.float32)
    o.set(Val(a.shape, a.dtype, const=a))


class _Converter:
    def __init__(self, model, tfl):
        self.tfl = tfl
        self.model = model
        g = model.Subgraphs(0)
        self.g = g
        names = {v: k for k, v in vars(tfl.BuiltinOperator).items() if not k.startswith("_")}
        self.codes = []
        for i in range(model.OperatorCodesLength()):
            c = model.OperatorCodes(i)
            self.codes.append(names.get(max(c.BuiltinCode(), c.DeprecatedBuiltinCode()), f"code {c.BuiltinCode()}"))
        self.tensors = []
        self.consts: dict[int, np.ndarray] = {}
        self.bad_dtypes: dict[int, str] = {}
        for i in range(g.TensorsLength()):
            t = g.Tensors(i)
            shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
            q = t.Quantization()
            if t.Type() not in DTYPES or (q is not None and q.ScaleLength() > 0):
                self.bad_dtypes[i] = "quantized" if q is not None and q.ScaleLength() else f"TensorType {t.Type()}"
                self.tensors.append((shape, np.dtype(np.float32)))
                continue
            dtype = np.dtype(DTYPES[t.Type()])
            self.tensors.append((shape, dtype))
            buf = model.Buffers(t.Buffer())
            if buf is not None and buf.DataLength() > 0:
                data = buf.DataAsNumpy().tobytes()
                self.consts[i] = np.frombuffer(data, dtype).reshape(shape).copy()
        self.e = Emitter(model.Description().decode() if model.Description() else "tflite")
        self.vals: dict[int, Val] = {}

    def value(self, i) -> Val:
        if i in self.vals:
            return self.vals[i]
        if i in self.consts:
            a = self.consts[i]
            return Val(a.shape, a.dtype, const=a)
        raise Unsupported(f"tensor {i} has no producer")

    def tensor_name(self, i) -> str:
        return self.g.Tensors(i).Name().decode()

    def run(self) -> bytes:
        g = self.g
        bad = []
        for i in (int(k) for k in g.InputsAsNumpy()):
            name = self.tensor_name(i)
            if i in self.bad_dtypes:
                bad.append((name, "graph input", self.bad_dtypes[i]))
                continue
            shape, dtype = self.tensors[i]
            self.vals[i] = Val(shape, dtype, index=self.e.b.input(name, shape, dtype))
        for k in range(g.OperatorsLength()):
            raw = g.Operators(k)
            code = self.codes[raw.OpcodeIndex()]
            o = Op(self, raw, f"{code}_{k}", code)
            try:
                handler = HANDLERS.get(code)
                if handler is None:
                    raise Unsupported("no v0 equivalent")
                odd = [self.bad_dtypes[t] for t in o.inputs + o.outputs if t in self.bad_dtypes]
                if odd:
                    raise Unsupported(f"{odd[0]} tensors")
                handler(o)
            except Unsupported as err:
                bad.append((o.name, code, str(err)))
                for t in o.outputs:
                    self.vals[t] = Val(self.tensors[t][0], self.tensors[t][1], index=-1)
            except Error:
                raise
            except Exception as err:  # options or tensors of a kind the operator's handler cannot read
                raise ModelError(f"TFLite operator '{o.name}' ({code}): {type(err).__name__}: {err}") from err
        if bad:
            lines = "\n".join(f"  {name}: {op} ({why})" for name, op, why in bad)
            raise UnsupportedOpError(f"{len(bad)} TFLite operator(s) cannot be converted:\n{lines}", bad)
        used = set(self.e.b.inputs)
        for i in (int(k) for k in g.OutputsAsNumpy()):
            v = self.value(i)
            idx = self.e.index(v, self.tensor_name(i))
            if idx in used:
                idx = self.e.op("Reshape", [v], v.shape, v.dtype, self.tensor_name(i) + "/copy", shape=list(v.shape)).index
            self.e.b.graph.allTensors[idx].name = self.tensor_name(i)
            used.add(idx)
            self.e.b.output(idx)
        return self.e.b.finish()


def convert_tflite(src) -> bytes:
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
        if model.SubgraphsLength() != 1:
            raise UnsupportedOpError(f"{model.SubgraphsLength()} subgraphs (only single-graph models convert)", [])
        return _Converter(model, tfl).run()
    except Error:
        raise
    except Exception as err:  # a malformed flatbuffer surfaces as struct/index errors
        raise ModelError(f"cannot read TFLite model: {err}") from err
