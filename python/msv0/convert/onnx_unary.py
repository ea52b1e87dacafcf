"""ONNX element-wise activations, hyperbolic and inverse trigonometric functions, Round, Sign,
IsInf, CastLike and Hardmax, which v0 has no op for (or, for Round, one that rounds ties the other
way), written as v0 ops (format-v0.md §5).

Each keeps its input's layout. The forms avoid cancellation and intermediate overflow, so results
stay near float32 rounding: Cosh and Sinh within 2e-6 relative at large |x| (the rounding of
|x| − ln 2; they are that sensitive to x there anyway), and within 3e-7 absolute where the result
is near 0 for Asinh and Atanh near 0 and Acosh near 1 (v0 has no log1p). None uses r1.1's TANH,
a Padé approximation."""
from __future__ import annotations

import math

import numpy as np

from msv0.convert.emit import Unsupported, Val
from msv0.convert.onnx_ctx import HANDLERS, Ctx, axis_index, emit_binary, handles
from msv0.fb.TypeId import TypeId

LN2 = math.log(2.0)
F32 = np.dtype(np.float32)
_COMPARE = {"Equal", "Less", "Greater"}


def _float32(c: Ctx) -> Val:
    x = c.inp(0)
    if x.dtype != F32:
        raise Unsupported(f"{c.node.op} on {x.dtype} (the v0 kernels it is written with are float32 only)")
    return x


def unary(c: Ctx, op: str, v: Val, **attrs) -> Val:
    return c.op(op, [v], v.shape, v.dtype, v.nhwc, **attrs)


def _consts(c: Ctx, a: Val | float, b: Val | float) -> tuple[Val, Val, np.dtype]:
    """a and b with a number made a one-element constant of the other's dtype."""
    dtype = (b if isinstance(a, (int, float)) else a).dtype
    a, b = (v if isinstance(v, Val) else c.scalar(v, dtype) for v in (a, b))
    return a, b, dtype


def binary(c: Ctx, op: str, a: Val | float, b: Val | float) -> Val:
    """a op b where one side may be a number."""
    shape = tuple(np.broadcast_shapes(*(v.shape for v in (a, b) if isinstance(v, Val))))
    a, b, dtype = _consts(c, a, b)
    return emit_binary(c, op, a, b, shape, np.bool_ if op in _COMPARE else dtype)


def where(c: Ctx, cond: Val, a: Val | float, b: Val | float) -> Val:
    """cond ? a : b, where a number is a one-element constant, which v0 Where broadcasts."""
    a, b, dtype = _consts(c, a, b)
    return c.op("Where", [cond, a, b], cond.shape, dtype, cond.nhwc)


@handles("Mish")
def mish(c: Ctx):
    x = _float32(c)
    # tanh(softplus(x)) = ((1 + e^x)² − 1) / ((1 + e^x)² + 1) = n / (n + 2) with n = e^x·(e^x + 2):
    # no cancellation for x < 0. The ratio is 1 in float32 from x ≈ 9, so e^x is taken of
    # min(x, 20), which keeps n finite.
    u = unary(c, "Exp", binary(c, "Minimum", x, 20.0))
    n = binary(c, "Mul", u, binary(c, "Add", u, 2.0))
    c.set(0, binary(c, "Mul", x, binary(c, "Div", n, binary(c, "Add", n, 2.0))))


@handles("Selu")
def selu(c: Ctx):
    x = _float32(c)
    y = unary(c, "Elu", x, alpha=float(c.attr("alpha", 1.67326319217681884765625)))
    c.set(0, binary(c, "Mul", y, float(c.attr("gamma", 1.05070102214813232421875))))


@handles("Celu")
def celu(c: Ctx):
    x = _float32(c)
    alpha = float(c.attr("alpha", 1.0))
    # alpha·Elu(x / alpha); for x > 0 that is x to an ulp
    c.set(0, binary(c, "Mul", unary(c, "Elu", binary(c, "Div", x, alpha), alpha=1.0), alpha))


@handles("ThresholdedRelu")
def thresholded_relu(c: Ctx):
    x = _float32(c)
    c.set(0, where(c, binary(c, "Greater", x, float(c.attr("alpha", 1.0))), x, 0.0))


@handles("Shrink")
def shrink(c: Ctx):
    x = c.inp(0)
    lambd, bias = float(c.attr("lambd", 0.5)), float(c.attr("bias", 0.0))
    if x.dtype.kind == "i" and x.dtype.itemsize >= 4:
        # exact integer arithmetic: for integer x, x > lambd iff x > floor(lambd), and
        # x < −lambd iff x < −floor(lambd)
        top = np.iinfo(x.dtype).max
        if not (bias.is_integer() and abs(bias) <= top and abs(lambd) < top):
            raise Unsupported(f"Shrink of {x.dtype} with bias {bias}, lambd {lambd}: exact in integers only for an "
                              "integral bias, both within the dtype's range")
        lambd, bias = math.floor(lambd), int(bias)
    elif x.dtype != F32:
        raise Unsupported(f"Shrink on {x.dtype} (v0's Add and Sub take float32, int32 and int64)")
    inner = where(c, binary(c, "Greater", x, lambd), binary(c, "Sub", x, bias), 0)
    c.set(0, where(c, binary(c, "Less", x, -lambd), binary(c, "Add", x, bias), inner))


@handles("Sign")
def sign(c: Ctx):
    x = c.inp(0)
    if x.dtype != F32 and x.dtype.kind not in "iu":
        raise Unsupported(f"Sign on {x.dtype} (written with Less, Greater and Where, which v0 runs on float32 and "
                          "integers)")
    # x itself where it is neither > 0 nor < 0: ±0 and NaN give themselves, as in ONNX
    y = x if x.dtype.kind == "u" else where(c, binary(c, "Less", x, 0), -1, x)
    c.set(0, where(c, binary(c, "Greater", x, 0), 1, y))


def round_half_even(c: Ctx, x: Val) -> Val:
    """x (float32) rounded half to even, as ONNX's Round and std::nearbyint; r1.1's Round rounds half
    away from zero. At a tie x/2 lies a quarter past an integer, so 2·round(x/2) is the even
    neighbour; x − round(x) is exact."""
    r = unary(c, "Round", x)
    tie = binary(c, "Equal", unary(c, "Abs", binary(c, "Sub", x, r)), 0.5)
    return where(c, tie, binary(c, "Mul", unary(c, "Round", binary(c, "Mul", x, 0.5)), 2.0), r)


@handles("Round")
def round_(c: Ctx):
    c.set(0, round_half_even(c, _float32(c)))


@handles("IsInf")
def is_inf(c: Ctx):
    x = _float32(c)
    pos, neg = bool(c.attr("detect_positive", 1)), bool(c.attr("detect_negative", 1))
    if not (pos or neg):
        shape, dtype = c.out()
        c.set(0, Val(shape, dtype, const=np.zeros(shape, dtype)))
        return
    v = unary(c, "Abs", x) if pos and neg else x
    c.set(0, binary(c, "Equal", v, -math.inf if neg and not pos else math.inf))


def _half_exp_abs(c: Ctx, x: Val) -> Val:
    """e^|x| / 2, as e^(|x| − ln 2): finite wherever cosh and sinh are."""
    return unary(c, "Exp", binary(c, "Add", unary(c, "Abs", x), -LN2))


@handles("Cosh")
def cosh(c: Ctx):
    x = _float32(c)
    p = _half_exp_abs(c, x)
    c.set(0, binary(c, "Add", p, binary(c, "Div", 0.25, p)))  # e^|x|/2 + e^−|x|/2, both terms positive


@handles("Sinh")
def sinh(c: Ctx):
    """sinh(x) = sign(x)·(1 − e^−|x|)·(e^|x| + 1)/2: no difference of close values near 0.
    sign(x)·(1 − e^−|x|) is expm1(x) for x < 0 and −expm1(−x) for x > 0, which Elu gives
    with alpha 1 and −1; each Elu passes the other sign's x through unchanged, and the wanted
    value is the smaller one on both sides."""
    x = _float32(c)
    m = binary(c, "Minimum", unary(c, "Elu", x, alpha=1.0), unary(c, "Elu", unary(c, "Neg", x), alpha=-1.0))
    c.set(0, binary(c, "Mul", m, binary(c, "Add", _half_exp_abs(c, x), 0.5)))


@handles("Acos")
def acos(c: Ctx):
    # 2·atan(sqrt((1 − x) / (1 + x))): π/2 − asin(x) would lose the small results near x = 1,
    # and 1 ∓ x is exact where it matters (Sterbenz)
    x = _float32(c)
    t = unary(c, "Sqrt", binary(c, "Div", binary(c, "Sub", 1.0, x), binary(c, "Add", x, 1.0)))
    c.set(0, binary(c, "Mul", unary(c, "Atan", t), 2.0))


@handles("Acosh")
def acosh(c: Ctx):
    # 2·log(sqrt((x + 1)/2) + sqrt((x − 1)/2)), whose square is x + sqrt(x² − 1): no x² to
    # overflow, and x/2 − 1/2 is exact near x = 1
    x = _float32(c)
    h = binary(c, "Mul", x, 0.5)
    s = binary(c, "Add", unary(c, "Sqrt", binary(c, "Add", h, 0.5)), unary(c, "Sqrt", binary(c, "Sub", h, 0.5)))
    c.set(0, binary(c, "Mul", unary(c, "Log", s), 2.0))


@handles("Asinh")
def asinh(c: Ctx):
    # sign(x)·log(|x| + sqrt(x² + 1)): the odd form has no cancellation for x < 0. From |x| = 2^12
    # that is log(2|x|) to float32 precision, written log|x| + ln 2 because x² and 2|x| overflow.
    x = _float32(c)
    a = unary(c, "Abs", x)
    small = unary(c, "Log", binary(c, "Add", a, unary(c, "Sqrt", binary(c, "Add", binary(c, "Mul", a, a), 1.0))))
    large = binary(c, "Add", unary(c, "Log", a), LN2)
    y = where(c, binary(c, "Greater", a, 4096.0), large, small)
    c.set(0, where(c, binary(c, "Less", x, 0.0), unary(c, "Neg", y), y))


@handles("Atanh")
def atanh(c: Ctx):
    # log((1 + x) / (1 − x)) / 2; 1 ∓ x is exact near ±1, where the result is large
    x = _float32(c)
    r = binary(c, "Div", binary(c, "Add", x, 1.0), binary(c, "Sub", 1.0, x))
    c.set(0, binary(c, "Mul", unary(c, "Log", r), 0.5))


@handles("CastLike")
def cast_like(c: Ctx):
    # Cast to the second input's dtype, which shape inference gave the output
    HANDLERS["Cast"](c)


@handles("Hardmax")
def hardmax(c: Ctx):
    """One-hot of the first maximum along the axis: ArgMax (float indices in r1.1), Cast, OneHot.
    Before opset 13 the input is coerced to 2-D at `axis`, which is the one-axis form (opset 13's)
    when `axis` is the last; that axis is found in the stored layout. ArgMax takes rank <= 4, so
    more dims are merged around the axis."""
    x = _float32(c)
    rank = len(x.shape)
    axis = axis_index(c.attr("axis", -1 if c.graph.opset >= 13 else 1), rank)
    if c.graph.opset < 13 and axis != rank - 1:
        x = c.e.plain(x, c.name)
        work, k = (int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))), 1
    else:
        work, k = x.stored_shape, x.axis(axis)
        if len(work) > 4:
            work, k = (int(np.prod(work[:k])), work[k], int(np.prod(work[k + 1:]))), 1
    direct = work == x.stored_shape
    v = x if direct else c.op("Reshape", [x], work, F32, shape=list(work))
    picked = work[:k] + work[k + 1:]
    idx = c.op("ArgMax", [v], picked, F32, axis=k, topK=1, keepDims=False)
    idx = c.op("Cast", [idx], picked, np.int32, srcT=TypeId.kNumberTypeFloat32, dstT=TypeId.kNumberTypeInt32)
    ins = [idx, c.scalar(work[k], np.int32), c.scalar(1.0, F32), c.scalar(0.0, F32)]
    if direct:
        c.set(0, c.op("OneHot", ins, x.shape, F32, x.nhwc, axis=k))
        return
    hot = c.op("OneHot", ins, work, F32, axis=k)
    c.set(0, c.op("Reshape", [hot], x.shape, F32, x.nhwc, shape=list(x.stored_shape)))
