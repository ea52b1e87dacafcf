"""ONNX arithmetic, activation and cast ops -> v0 primitives (format-v0.md §5).

Layout rule: conv/pool/resize/norm ops work on NHWC storage; element-wise ops follow their
inputs; ops with an axis remap it when their input is stored NHWC; ops that reshape data
(Reshape, Flatten, MatMul, ...) first bring the tensor back to its ONNX order.
"""
from __future__ import annotations

import numpy as np

from msv0 import dtypes
from msv0.convert.emit import Unsupported, Val
from msv0.convert.onnx_ctx import Ctx, align_layouts, broadcast, emit_binary, handles
from msv0.fb.ActivationType import ActivationType
from msv0.gelu import ERFC_A, ERFC_P, INV_SQRT2, TANH_C1, TANH_C2
from msv0.ops.cast import CAST_PAIRS

FLT_MAX = 3.4028234663852886e38
BINARY = {"Add": "Add", "Sub": "Sub", "Mul": "Mul", "Div": "Div", "Max": "Maximum", "Min": "Minimum",
          "Equal": "Equal", "Less": "Less", "Greater": "Greater", "LessOrEqual": "LessEqual",
          "GreaterOrEqual": "GreaterEqual", "And": "LogicalAnd", "Or": "LogicalOr", "Xor": "LogicalXor",
          "Sum": "Add", "Mean": "Add"}
@handles(*BINARY)
def binary(c: Ctx):
    shape, dtype = c.out()
    ins = [c.inp(k) for k in range(len(c.node.inputs))]
    op = BINARY[c.node.op]
    if len(ins) == 1:
        c.set(0, ins[0])
        return
    acc = ins[0]
    for k, v in enumerate(ins[1:]):
        last = k == len(ins) - 2
        step_shape = shape if last else tuple(np.broadcast_shapes(acc.shape, v.shape))
        acc = emit_binary(c, op, acc, v, step_shape, dtype, c.node.fused_act if last else 0)
    if c.node.op == "Mean":
        acc = emit_binary(c, "Mul", acc, c.scalar(1.0 / len(ins), dtype), shape, dtype)
    c.set(0, acc)


@handles("Mod")
def mod(c: Ctx):
    shape, dtype = c.out()
    a, b = c.inp(0), c.inp(1)
    if c.attr("fmod", 0) or np.dtype(dtype).kind == "f":
        c.set(0, emit_binary(c, "Mod" if c.attr("fmod", 0) else "FloorMod", a, b, shape, dtype))
        return
    # r1.1 integer FloorMod truncates (= fmod). Floor mod from two truncating ones:
    # t = fmod(a, b) has |t| < |b|, so fmod(t + b, b) is t when t and b agree in sign, else t + b.
    t = emit_binary(c, "FloorMod", a, b, shape, dtype)
    if np.dtype(dtype).kind == "i":
        t = emit_binary(c, "FloorMod", emit_binary(c, "Add", t, b, shape, dtype), b, shape, dtype)
    c.set(0, t)


@handles("Pow")
def power(c: Ctx):
    shape, dtype = c.out()
    x, p = c.inp(0), c.inp(1)
    if p.const is not None and p.const.size == 1:
        c.set(0, c.op("Power", [x], shape, dtype, x.nhwc, power=float(p.const.reshape(-1)[0]), scale=1.0, shift=0.0))
        return
    # r1.1's Power takes an exponent tensor of x's shape only.
    (x, p), nhwc = align_layouts(c, [broadcast(c, x, shape), broadcast(c, p, shape)], len(shape))
    c.set(0, c.op("Power", [x, p], shape, dtype, nhwc, scale=1.0, shift=0.0))


UNARY = {"Sqrt": "Sqrt", "Exp": "Exp", "Log": "Log", "Abs": "Abs", "Neg": "Neg", "Floor": "Floor", "Ceil": "Ceil",
         "Sin": "Sin", "Cos": "Cos", "Tan": "Tan", "Atan": "Atan", "Asin": "Asin",
         "Reciprocal": "Reciprocal", "Not": "LogicalNot"}


@handles(*UNARY)
def unary(c: Ctx):
    shape, dtype = c.out()
    x = c.inp(0)
    c.set(0, c.op(UNARY[c.node.op], [x], shape, dtype, x.nhwc))


def _act(c: Ctx, x: Val, type_, **kw) -> Val:
    return c.op("Activation", [x], x.shape, x.dtype, x.nhwc, type=type_, **kw)


@handles("Relu", "Sigmoid", "Tanh", "HardSwish", "LeakyRelu", "Swish")
def activation(c: Ctx):
    t = {"Relu": ActivationType.RELU, "Sigmoid": ActivationType.SIGMOID, "Tanh": ActivationType.TANH, "HardSwish": ActivationType.HSWISH, "LeakyRelu": ActivationType.LEAKY_RELU, "Swish": ActivationType.SWISH}[c.node.op]
    if c.inp(0).dtype != np.float32:
        raise Unsupported("activations are float32 only")
    if c.node.op == "Swish" and float(c.attr("alpha", 1.0)) != 1.0:  # opset 24: x·sigmoid(alpha·x)
        raise Unsupported("Swish with alpha other than 1")
    kw = {"alpha": float(c.attr("alpha", 0.01))} if t == ActivationType.LEAKY_RELU else {}
    c.set(0, _act(c, c.inp(0), t, **kw))


@handles("HardSigmoid")
def hard_sigmoid(c: Ctx):
    x = c.inp(0)
    alpha, beta = float(c.attr("alpha", 0.2)), float(c.attr("beta", 0.5))
    if abs(alpha - 1 / 6) < 1e-7 and beta == 0.5:
        c.set(0, _act(c, x, ActivationType.HSIGMOID))
        return
    y = emit_binary(c, "Mul", x, c.scalar(alpha, x.dtype), x.shape, x.dtype)
    y = emit_binary(c, "Add", y, c.scalar(beta, x.dtype), x.shape, x.dtype)
    c.set(0, _act(c, y, ActivationType.HARD_TANH, minVal=0.0, maxVal=1.0))


@handles("Clip")
def clip(c: Ctx):
    x = c.inp(0)
    bounds = [c.inp(1), c.inp(2)] if c.graph.opset >= 11 else []
    if any(b is not None and b.const is None for b in bounds):
        # A computed bound: Maximum then Minimum, which also gives max everywhere when min > max.
        y = x
        for b, op in zip(bounds, ("Maximum", "Minimum")):
            if b is not None:
                y = emit_binary(c, op, y, b, x.shape, x.dtype)
        c.set(0, y)
        return
    if c.graph.opset < 11:
        lo, hi = c.attr("min", -FLT_MAX), c.attr("max", FLT_MAX)
    else:
        lo_v, hi_v = c.const(1, "min"), c.const(2, "max")
        lo = -FLT_MAX if lo_v is None else lo_v.reshape(-1)[0]
        hi = FLT_MAX if hi_v is None else hi_v.reshape(-1)[0]
    lo = min(lo, hi)  # ONNX: min > max gives max everywhere, which clamp(x, max, max) is
    if x.dtype != np.float32:
        info = np.iinfo(x.dtype) if x.dtype.kind in "iu" else np.finfo(x.dtype)
        y = x
        if lo > info.min:
            y = emit_binary(c, "Maximum", y, c.scalar(lo, x.dtype), x.shape, x.dtype)
        if hi < info.max:
            y = emit_binary(c, "Minimum", y, c.scalar(hi, x.dtype), x.shape, x.dtype)
        c.set(0, y)
    elif lo == 0 and hi == 6:
        c.set(0, _act(c, x, ActivationType.RELU6))
    elif lo == 0 and hi >= FLT_MAX:
        c.set(0, _act(c, x, ActivationType.RELU))
    else:
        c.set(0, _act(c, x, ActivationType.HARD_TANH, minVal=float(max(lo, -FLT_MAX)), maxVal=float(min(hi, FLT_MAX))))


@handles("Elu")
def elu(c: Ctx):
    x = c.inp(0)
    c.set(0, c.op("Elu", [x], x.shape, x.dtype, x.nhwc, alpha=float(c.attr("alpha", 1.0))))


@handles("PRelu")
def prelu(c: Ctx):
    x, s = c.inp(0), c.inp(1)
    shape, dtype = c.out()
    slope = c.const(1, "slope")
    full = np.broadcast_to(slope, shape)
    chan = 1 if x.nhwc else len(shape) - 1  # the logical axis PReLU's slope runs along (stored last)
    other = tuple(a for a in range(len(shape)) if a != chan)
    vary_only_chan = all(np.all(full == np.take(full, [0], axis=a)) for a in other)
    if slope.size == 1:
        c.set(0, c.op("PReLU", [x, Val((1,), dtype, const=slope.reshape(1).astype(dtype))], shape, dtype, x.nhwc,
                      channelShared=True))
    elif vary_only_chan and (x.nhwc or len(shape) != 4):
        vec = np.ascontiguousarray(np.moveaxis(full, chan, -1).reshape(-1, shape[chan])[0])
        c.set(0, c.op("PReLU", [x, Val(vec.shape, dtype, const=vec)], shape, dtype, x.nhwc))
    else:  # max(x,0) + slope·min(x,0)
        pos = _act(c, x, ActivationType.RELU)
        neg = emit_binary(c, "Minimum", x, c.scalar(0, dtype), shape, dtype)
        neg = emit_binary(c, "Mul", neg, s, shape, dtype)
        c.set(0, emit_binary(c, "Add", pos, neg, shape, dtype))


def _erfc_half(c: Ctx, ax: Val) -> Val:
    """0.5·erfc-like tail t·poly(t)·exp(-a²) for a = |x| ≥ 0 (Abramowitz-Stegun 7.1.26, |err| < 1.5e-7).
    Within Gelu, msv0.gelu.ERF_FORM matches what this writes."""
    dt, shape = ax.dtype, ax.shape
    t = emit_binary(c, "Mul", ax, c.scalar(ERFC_P, dt), shape, dt)
    t = emit_binary(c, "Add", t, c.scalar(1.0, dt), shape, dt)
    t = c.op("Reciprocal", [t], shape, dt, t.nhwc)
    poly = None
    for coef in ERFC_A:
        poly = c.scalar(coef, dt) if poly is None else emit_binary(c, "Add", poly, c.scalar(coef, dt), shape, dt)
        poly = emit_binary(c, "Mul", poly, t, shape, dt)
    sq = emit_binary(c, "Mul", ax, ax, shape, dt)
    ex = c.op("Exp", [emit_binary(c, "Mul", sq, c.scalar(-1.0, dt), shape, dt)], shape, dt, ax.nhwc)
    return emit_binary(c, "Mul", poly, ex, shape, dt)  # = erfc(a) for a ≥ 0


@handles("Erf")
def erf(c: Ctx):
    x = c.inp(0)
    shape, dt = x.shape, x.dtype
    ax = c.op("Abs", [x], shape, dt, x.nhwc)
    one_minus = emit_binary(c, "Sub", c.scalar(1.0, dt), _erfc_half(c, ax), shape, dt)  # erf(|x|)
    # sign(x)·erf(|x|) = erf(|x|)·x/|x|, written as Where(x < 0, -e, e) to stay finite at 0
    neg = emit_binary(c, "Less", x, c.scalar(0.0, dt), shape, np.bool_)
    minus = emit_binary(c, "Mul", one_minus, c.scalar(-1.0, dt), shape, dt)
    c.set(0, c.op("Where", [neg, minus, one_minus], shape, dt, x.nhwc))


@handles("Gelu")
def gelu(c: Ctx):
    x = c.inp(0)
    shape, dt = x.shape, x.dtype
    # msv0.gelu's TANH_FORM and ERF_FORM are these node sequences: Sessions run them as one pass.
    if c.attr("approximate", "none") == "tanh":
        # 0.5·(1 + tanh(u)) = sigmoid(2u): x·sigmoid(x·(a + b·x²)), 6 passes where the tanh form takes 8
        u = emit_binary(c, "Mul", emit_binary(c, "Mul", x, x, shape, dt), c.scalar(TANH_C1, dt), shape, dt)
        u = emit_binary(c, "Mul", emit_binary(c, "Add", u, c.scalar(TANH_C2, dt), shape, dt), x, shape, dt)
        c.set(0, emit_binary(c, "Mul", x, _act(c, u, ActivationType.SIGMOID), shape, dt))
        return
    # x·Φ(x) = relu(x) − |x|·q with q = 0.5·erfc(|x|/√2)
    ax = c.op("Abs", [x], shape, dt, x.nhwc)
    q = _erfc_half(c, emit_binary(c, "Mul", ax, c.scalar(INV_SQRT2, dt), shape, dt))
    q = emit_binary(c, "Mul", q, c.scalar(0.5, dt), shape, dt)
    c.set(0, emit_binary(c, "Sub", _act(c, x, ActivationType.RELU), emit_binary(c, "Mul", ax, q, shape, dt), shape, dt))


@handles("Softplus")
def softplus(c: Ctx):
    x = c.inp(0)
    e = c.op("Exp", [x], x.shape, x.dtype, x.nhwc)
    c.set(0, c.op("Log", [emit_binary(c, "Add", e, c.scalar(1.0, x.dtype), x.shape, x.dtype)], x.shape, x.dtype, x.nhwc))


@handles("Softsign")
def softsign(c: Ctx):
    x = c.inp(0)
    d = emit_binary(c, "Add", c.op("Abs", [x], x.shape, x.dtype, x.nhwc), c.scalar(1.0, x.dtype), x.shape, x.dtype)
    c.set(0, emit_binary(c, "Div", x, d, x.shape, x.dtype))


@handles("Identity", "Dropout")
def identity(c: Ctx):
    if c.used(1):
        raise Unsupported("the Dropout mask output is used")
    training = c.inp(2)
    if training is not None and (training.const is None or training.const.any()):
        raise Unsupported("training-mode Dropout (v0 has no inference kernel for random masks)")
    c.set(0, c.inp(0))


F32 = np.dtype(np.float32)
INT64_TABLE = 1 << 16  # int64 values a Cast to float32 or int32 takes (a 256 KiB table)


@handles("Cast")
def cast(c: Ctx):
    """A pair v0's Cast lacks goes through float32 where that is exact (bool, uint8 and float16
    values are float32 values: Keras masks' bool -> int32); to bool, as x != 0."""
    x = c.inp(0)
    shape, dtype = c.out()
    if x.dtype not in dtypes.FROM_NUMPY or dtype not in dtypes.FROM_NUMPY or np.float64 in (x.dtype, dtype):
        raise Unsupported(f"cast {x.dtype} -> {dtype}")
    if x.dtype == dtype:
        c.set(0, x)
    elif dtype == np.bool_ and x.dtype in (F32, np.int32, np.int64):
        c.set(0, emit_binary(c, "NotEqual", x, c.scalar(0, x.dtype), shape, dtype))
    elif (x.dtype, dtype) in CAST_PAIRS:
        c.set(0, _cast(c, x, dtype))
    elif (x.dtype, F32) in CAST_PAIRS and (F32, dtype) in CAST_PAIRS and x.dtype in (np.bool_, np.uint8, np.float16):
        c.set(0, _cast(c, _cast(c, x, F32), dtype))
    elif x.dtype == np.int64 and dtype in (F32, np.int32):
        # r1.1's Cast reads no int64 (an attention mask, position ids): a lookup in a table of
        # 0 .. INT64_TABLE - 1, exact there; Gather raises at run time on any other value.
        table = Val.of(np.arange(INT64_TABLE).astype(dtype))
        c.set(0, c.op("Gather", [table, x], shape, dtype, x.nhwc, axis=0))
    else:
        raise Unsupported(f"Cast {x.dtype} -> {dtype} of a run-time tensor: r1.1's Cast has no such pair, nor an "
                          "exact path through float32")


def _cast(c: Ctx, x: Val, dtype) -> Val:
    return c.op("Cast", [x], x.shape, dtype, x.nhwc, srcT=dtypes.type_id(x.dtype), dstT=dtypes.type_id(dtype))

