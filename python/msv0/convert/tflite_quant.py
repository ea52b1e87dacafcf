"""Quantized TFLite -> v0: full-integer int8 and uint8 graphs, written as r1.1's aware-training
path wrote them (format-v0.md §3): int8 tensors carrying the TFLite QuantParams, conv and
fully-connected weights int8 with one QuantParam per tensor or per output channel (dim0 once
in KHWC), int32 biases as stored, QuantDTypeCast where the graph quantizes or dequantizes.

uint8 tensors become int8 with the zero point lowered by 128 and every value shifted by −128,
as r1.1's converter did with TFLite uint8 weights ("q − 128, zeroPoint − 128"); a uint8 graph
input or output stays uint8 and is joined to the int8 graph by a QuantDTypeCast (u8↔i8 is that
same shift). What r1.1's int8 kernels cannot run (int16 activations, per-channel activation
params, a weight quantized along another axis, an op without an int8 kernel) is reported for
every operator at once.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msv0.convert.emit import Emitter, Unsupported, Val
from msv0.convert.tflite_frontend import HANDLERS, Op, _Converter, _fused, _own_act, _pads, convert_tflite as _convert
from msv0.convert.tflite_frontend import emit_fully_connected
from msv0.convert.tflite_frontend import dequantize as _fold_fp16
from msv0.fb.ActivationType import ActivationType
from msv0.fb.Format import Format
from msv0.fb.NodeType import NodeType
from msv0.fb.PadMode import PadMode
from msv0.fb.PrimitiveType import PrimitiveType
from msv0.fb.QuantParam import QuantParamT
from msv0.fb.QuantType import QuantType
from msv0.fb.TypeId import TypeId
from msv0.registry import INT8

TFL_INT32, TFL_UINT8, TFL_INT16, TFL_INT8 = 2, 3, 7, 9
I8, U8, I32 = np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)
# The activation types r1.1's int8 Activation kernel runs (format-v0.md §3.1).
OP_NAMES = {v: k for k, v in vars(PrimitiveType).items() if not k.startswith("_")}
INT8_ACTIVATIONS = {ActivationType.RELU, ActivationType.RELU6, ActivationType.SIGMOID, ActivationType.TANH,
                    ActivationType.HSWISH, ActivationType.LEAKY_RELU, ActivationType.NO_ACTIVATION}


@dataclass
class QVal(Val):
    """A quantized constant: written with its QuantParams when a node first needs it."""

    quant: list | None = None


class _QuantEmitter(Emitter):
    def index(self, v: Val, name: str = "const") -> int:
        if v.index is None and isinstance(v, QVal):
            v.index = self.b.const(self._name(name), np.ascontiguousarray(v.const), quant=v.quant)
        return super().index(v, name)


def _params(scales, zps, shift: int = 0) -> list[dict]:
    return [dict(scale=float(s), zeroPoint=int(z) + shift, inited=True, numBits=8) for s, z in zip(scales, zps)]


def is_quantized(model) -> bool:
    g = model.Subgraphs(0)
    for i in range(g.TensorsLength()):
        t = g.Tensors(i)
        q = t.Quantization()
        if t.Type() in (TFL_INT8, TFL_UINT8, TFL_INT16) and q is not None and q.ScaleLength():
            return True
    return False


class QuantConverter(_Converter):
    def __init__(self, model, tfl, shapes=None):
        super().__init__(model, tfl, shapes=shapes)
        self.e = _QuantEmitter(self.e.b.graph.name)
        self.quant: dict[int, list[dict]] = {}  # tensor -> its v0 QuantParams (uint8 already shifted)
        self.axis: dict[int, int] = {}  # tensor -> TFLite quantized_dimension, when per channel
        self.uint8: set[int] = set()
        self.pending_inputs: set[int] = set()  # quantized graph inputs not yet given their params
        self.ops_done = 0
        for i, why in list(self.bad_dtypes.items()):
            t = self.g.Tensors(i)
            q = t.Quantization()
            if t.Type() not in (TFL_INT8, TFL_UINT8, TFL_INT32) or q is None or not q.ScaleLength():
                if t.Type() == TFL_INT16:
                    self.bad_dtypes[i] = "int16 tensors (r1.1 has no int16 kernels)"
                continue
            scales = q.ScaleAsNumpy().astype(np.float64)
            zps = q.ZeroPointAsNumpy() if q.ZeroPointLength() else np.zeros(len(scales), np.int64)
            if len(zps) != len(scales):
                raise Unsupported(f"tensor {i}: {len(scales)} scales but {len(zps)} zero points")
            buf = model.Buffers(t.Buffer())
            data = buf.DataAsNumpy().tobytes() if buf is not None and buf.DataLength() > 0 else None
            if len(scales) > 1:
                if data is None:
                    self.bad_dtypes[i] = "per-channel quantized activations (r1.1 takes one QuantParam)"
                    continue
                self.axis[i] = q.QuantizedDimension()
            if data is not None and t.Sparsity() is not None:
                self.bad_dtypes[i] = "sparse quantized tensors"
                continue
            if not np.all((scales > 0) & np.isfinite(scales)):
                self.bad_dtypes[i] = f"quant scales {scales.tolist()} (must be positive and finite)"
                continue
            del self.bad_dtypes[i]
            shape = self.tensors[i][0]
            shift = -128 if t.Type() == TFL_UINT8 else 0
            if shift:
                self.uint8.add(i)
            dtype = I32 if t.Type() == TFL_INT32 else I8
            self.tensors[i] = (shape, dtype)
            self.quant[i] = _params(scales, zps, shift)
            if data is not None:
                raw = np.frombuffer(data, {TFL_INT8: I8, TFL_UINT8: U8, TFL_INT32: I32}[t.Type()]).reshape(shape)
                self.consts[i] = (raw.astype(np.int16) + shift).astype(I8) if shift else raw.copy()
        self.pending_inputs = {int(k) for k in self.g.InputsAsNumpy()} & set(self.quant)

    def value(self, i) -> Val:
        if i in self.pending_inputs:
            self.pending_inputs.discard(i)
            self.vals[i] = self._input(i, self.vals[i])
        if i not in self.vals and i in self.consts and i in self.quant:
            a = self.consts[i]
            return QVal(a.shape, a.dtype, const=a, quant=self.quant[i])
        return super().value(i)

    def _input(self, i: int, v: Val) -> Val:
        """A quantized graph input: its QuantParams; a uint8 one is cast to int8 (a shift)."""
        t = self.e.b.graph.allTensors[v.index]
        t.quantParams = _quant_params(self.quant[i], 128 if i in self.uint8 else 0)
        if i not in self.uint8:
            return v
        t.dataType = TypeId.kNumberTypeUInt8
        return self._cast(v, self.tensor_name(i) + "/int8", TypeId.kNumberTypeUInt8, TypeId.kNumberTypeInt8, I8,
                          self.quant[i])

    def _output(self, i: int, v: Val) -> Val:
        """A quantized graph output: a uint8 one is cast back from int8."""
        if i not in self.uint8:
            return v
        return self._cast(v, self.tensor_name(i) + "/uint8", TypeId.kNumberTypeInt8, TypeId.kNumberTypeUInt8, U8,
                          [dict(p, zeroPoint=p["zeroPoint"] + 128) for p in self.quant[i]])

    def _cast(self, v: Val, name: str, src: int, dst: int, dtype, quant) -> Val:
        out = self.e.op("QuantDTypeCast", [v], v.shape, dtype, name, srcT=src, dstT=dst)
        self.e.b.graph.allTensors[out.index].quantParams = _quant_params(quant)
        self.e.b.graph.nodes[-1].quantType = QuantType.AwareTraining
        return out

    def finish_op(self, o: Op, t0: int, n0: int) -> None:
        """QuantParams on the tensors o's handler wrote (an intermediate one takes output 0's),
        and the check that r1.1 has an int8 kernel for each node it wrote."""
        self.ops_done += 1
        g = self.e.b.graph
        for t in o.outputs:
            v = self.vals.get(t)
            if t in self.quant and v is not None and v.index is not None and v.index >= t0:
                g.allTensors[v.index].quantParams = _quant_params(self.quant[t])
        first = self.quant.get(o.outputs[0]) if o.outputs else None  # ASSIGN_VARIABLE, CALL_ONCE: none
        for k in range(t0, len(g.allTensors)):
            t = g.allTensors[k]
            if t.nodeType == NodeType.CNode and t.dataType == TypeId.kNumberTypeInt8 and not t.quantParams:
                t.quantParams = _quant_params(first) if first else None
        for n in g.nodes[n0:]:
            n.quantType = QuantType.AwareTraining
            ins = [g.allTensors[k] for k in n.inputIndex]
            if not ins or ins[0].dataType != TypeId.kNumberTypeInt8:
                continue
            op = OP_NAMES[n.primitive.valueType]
            if op not in INT8:
                raise Unsupported(f"{op} has no int8 kernel in r1.1")
            if op == "Activation" and n.primitive.value.type not in INT8_ACTIVATIONS:
                raise Unsupported(f"activation type {n.primitive.value.type} has no int8 kernel in r1.1")
        if self.ops_done == self.g.OperatorsLength():
            for i in (int(k) for k in self.g.OutputsAsNumpy()):
                if i in self.quant and i in self.vals:
                    self.vals[i] = self._output(i, self.vals[i])


def _quant_params(params, shift: int = 0) -> list[QuantParamT]:
    out = []
    for p in params:
        q = QuantParamT()
        q.scale, q.zeroPoint, q.inited, q.numBits = p["scale"], p["zeroPoint"] + shift, True, 8
        out.append(q)
    return out


def _weight(o: Op, k: int, channel_axis: int, what: str) -> QVal:
    """Input k as an int8 constant; per-channel params must lie along channel_axis."""
    i = o.inputs[k]
    v = o.inp(k)
    if v is None or v.const is None or not isinstance(v, QVal):
        raise Unsupported(f"{what} must be a quantized constant")
    if i in o.conv.axis and o.conv.axis[i] != channel_axis:
        raise Unsupported(f"{what} is quantized per channel along axis {o.conv.axis[i]}; r1.1 takes only the "
                          f"output-channel axis ({channel_axis})")
    return v


def _bias(o: Op, k: int) -> list[Val]:
    v = o.inp(k)
    if v is None:
        return []
    if v.const is None or v.dtype != I32:
        raise Unsupported("an int8 conv or fully-connected bias must be an int32 constant")
    return [v]


def _check_int8_input(o: Op) -> Val:
    x = o.inp(0)
    if x.dtype != I8:
        raise Unsupported(f"input of dtype {x.dtype} next to quantized weights")
    return x


def conv(o: Op):
    x = _check_int8_input(o)
    dw = o.code == "DEPTHWISE_CONV_2D"
    w = _weight(o, 1, 3 if dw else 0, "the weight")
    shape, dtype = o.out()
    opt = o.options("DepthwiseConv2DOptions" if dw else "Conv2DOptions")
    s, d = (opt.StrideH(), opt.StrideW()), (opt.DilationHFactor(), opt.DilationWFactor())
    k = w.shape[1:3]
    up, down, left, right = _pads(opt.Padding(), x.shape[1:3], k, s, d)
    act = opt.FusedActivationFunction()
    attrs = dict(padMode=PadMode.NOTSET, padUp=up, padDown=down, padLeft=left, padRight=right, strideH=s[0],
                 strideW=s[1], kernelH=k[0], kernelW=k[1], dilateH=d[0], dilateW=d[1], activationType=_own_act(act))
    cin = x.shape[3]
    if dw:  # [1, kH, kW, C·m] -> [C·m, kH, kW, 1]: the per-channel params stay in channel order
        wk = np.ascontiguousarray(w.const.transpose(3, 1, 2, 0))
        w = QVal(wk.shape, wk.dtype, const=wk, quant=w.quant)
    wv = Val(w.shape, I8, index=o.e.b.const(f"{o.name}/weight", np.ascontiguousarray(w.const), format=Format.KHWC,
                                             quant=w.quant))
    if dw and w.shape[0] == cin:
        y = o.op("DepthwiseConv2D", [x, wv] + _bias(o, 2), shape, dtype, channelIn=cin, channelMultiplier=1, **attrs)
    else:
        group = cin if dw else cin // w.shape[3]
        y = o.op("Conv2D", [x, wv] + _bias(o, 2), shape, dtype, group=group, channelIn=cin, channelOut=w.shape[0],
                 **attrs)
    o.set(_fused(o, y, act))


def fully_connected(o: Op):
    x = _check_int8_input(o)
    emit_fully_connected(o, x, _weight(o, 1, 0, "the weight"), _bias)


def quantize(o: Op):
    x = o.inp(0)
    shape, dtype = o.out()
    out_q = o.conv.quant.get(o.outputs[0])
    if out_q is None:
        raise Unsupported("QUANTIZE to an unquantized tensor")
    if x.dtype == np.float32:
        y = o.op("QuantDTypeCast", [x], shape, dtype, srcT=TypeId.kNumberTypeFloat32, dstT=TypeId.kNumberTypeInt8)
        o.set(y)
        return
    in_q = o.conv.quant.get(o.inputs[0])
    if in_q != out_q:  # r1.1's int8 -> int8 QuantDTypeCast is broken (format-v0.md §3)
        raise Unsupported("requantizing QUANTIZE (r1.1 has no working int8 -> int8 cast)")
    o.set(x)  # uint8 -> int8 with the same real values: the shift already happened


def dequantize(o: Op):
    x = o.inp(0)
    if x.dtype == np.float16:
        return _fold_fp16(o)
    q = o.conv.quant.get(o.inputs[0])
    if x.dtype != I8 or q is None:
        raise Unsupported(f"DEQUANTIZE of {x.dtype}")
    shape, dtype = o.out()
    if x.const is not None:  # a constant: folded to float
        o.set(Val.of(_dequantized(x.const, q, o.conv.axis.get(o.inputs[0]))))
        return
    o.set(o.op("QuantDTypeCast", [x], shape, dtype, srcT=TypeId.kNumberTypeInt8, dstT=TypeId.kNumberTypeFloat32))


def softmax(o: Op):
    if float(o.options("SoftmaxOptions").Beta()) != 1.0:
        raise Unsupported("int8 SOFTMAX with beta != 1 (r1.1's int8 SoftMax has no beta)")
    HANDLERS["SOFTMAX"](o)


def pad(o: Op):
    if len(o.inputs) > 2 and o.inputs[2] >= 0:
        v = o.inp(2)
        q = o.conv.quant.get(o.inputs[2])
        if v.const is None or q is None or int(v.const.reshape(-1)[0]) != q[0]["zeroPoint"]:
            raise Unsupported("int8 PADV2 with a padding value other than 0.0")
    o.inputs = o.inputs[:2]
    HANDLERS["PAD"](o)


# The ops TFLiteConverter's dynamic-range quantization gives int8 weights that convert here
# (its hybrid LSTMs stay refused, by the recurrent handlers).
HYBRID = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"}


def _hybrid(o: Op) -> bool:
    """Whether o is a float op over quantized constant operands (TFLiteConverter's dynamic-range
    quantization: int8 weights, float activations). If so, those operands become float constants,
    dequantized per channel, and o converts as the float op it is: TFLite's hybrid kernels also
    quantize the activations at run time, so its results differ from these by that rounding."""
    x = o.inp(0) if o.inputs else None
    quantized = [k for k in range(1, len(o.inputs)) if isinstance(o.inp(k), QVal) and o.inp(k).dtype == I8]
    if x is None or x.dtype != np.float32 or not quantized:
        return False
    conv = o.conv
    for k in quantized:
        i = o.inputs[k]
        conv.vals[i] = Val.of(_dequantized(conv.consts[i], conv.quant[i], conv.axis.get(i)))
    return True


def _dequantized(q: np.ndarray, params: list[dict], axis: int | None) -> np.ndarray:
    """Int8 constant q in float32: (q − zp)·scale, per channel along axis where params has several."""
    shape = [1] * q.ndim
    if len(params) > 1:
        shape[axis] = -1
    scale = np.array([p["scale"] for p in params], np.float32).reshape(shape)
    zp = np.array([p["zeroPoint"] for p in params], np.float32).reshape(shape)
    return ((q.astype(np.float32) - zp) * scale).astype(np.float32)


def _quantized(code: str, handler):
    def run(o: Op):
        b = o.e.b
        t0, n0 = len(b.graph.allTensors), len(b.graph.nodes)
        (HANDLERS[code] if code in HYBRID and _hybrid(o) else handler)(o)
        o.conv.finish_op(o, t0, n0)

    return run


QuantConverter.handlers = {code: _quantized(code, fn) for code, fn in {
    **HANDLERS, "CONV_2D": conv, "DEPTHWISE_CONV_2D": conv, "FULLY_CONNECTED": fully_connected,
    "QUANTIZE": quantize, "DEQUANTIZE": dequantize, "SOFTMAX": softmax, "PAD": pad, "PADV2": pad}.items()}


def _converter(model, tfl, shapes):
    return (QuantConverter if is_quantized(model) else _Converter)(model, tfl, shapes=shapes)


def convert_tflite(src, input_shapes=None, batch=None) -> bytes:
    """Convert a float or quantized .tflite (path or bytes) to v0 bytes; input_shapes and batch:
    see tflite_frontend.convert_tflite."""
    return _convert(src, converter=_converter, input_shapes=input_shapes, batch=batch)
