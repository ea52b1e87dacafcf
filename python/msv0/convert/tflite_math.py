"""TFLite math, normalisation and shape builtins, written as v0 ops (format-v0.md §4, §5).

Where r1.1's op means something else than TFLite's builtin, the TFLite meaning is written with
several v0 ops: ROUND rounds half to even (r1.1's Round: half away from zero), FLOOR_DIV and
FLOOR_MOD floor for integers too (r1.1's truncate) and, for floats, start from the exact fmod
(r1.1's floorf(a/b) can step over an integer where TFLite's double quotient does not). GELU is
written as msv0.gelu's node sequences, which Sessions run as one native step. SHAPE, RANK,
BROADCAST_ARGS and RANGE of static values are constants. Each handler names the dtypes it
converts and refuses the others (also the int8 tensors of quantized graphs).
"""
from __future__ import annotations

import numpy as np

from msv0 import dtypes, gelu
from msv0.convert.dft_lowering import dft_matrix
from msv0.convert.emit import Unsupported, Val, handler_table
from msv0.convert.rnn_lowering import dense
from msv0.convert.tflite_array import axis_of
from msv0.fb.ActivationType import ActivationType
from msv0.fb.PadMode import PadMode
from msv0.fb.PoolMode import PoolMode
from msv0.fb.ReduceMode import ReduceMode
from msv0.fb.RoundMode import RoundMode
from msv0.ops.cast import CAST_PAIRS  # on each, TFLite's static_cast agrees

MATH_HANDLERS, handles = handler_table()
F16, F32, I32, I64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64)
U8, BOOL = np.dtype(np.uint8), np.dtype(np.bool_)
COMPARISONS = {"Equal", "NotEqual", "Less", "Greater"}
# TFLite's ActivationFunctionType on L2_POOL_2D -> the clamp after the square root (RELU: none, a
# root is never negative). LiteRT's pooling ignores TANH and SIGN_BIT, so they are refused.
L2_POOL_CLAMP = {0: None, 1: None, 2: (-1.0, 1.0), 3: (0.0, 6.0)}
TFL_SAME = 0  # TFLite's Padding
# The operators that read or write complex64 tensors, held as float32 pairs [..., 2]: filled by
# handles_complex, so that the frontend lets complex64 tensors through to these handlers alone;
# and the frontend's RESHAPE/SQUEEZE handler, which moves the pairs as they are.
COMPLEX_OPS: set[str] = {"RESHAPE", "SQUEEZE"}


def handles_complex(*codes: str):
    """handles(*codes) for handlers of complex64 tensors, which it names in COMPLEX_OPS."""
    COMPLEX_OPS.update(codes)
    return handles(*codes)


def _expect(o, v: Val, *allowed) -> Val:
    if v.dtype not in allowed:
        raise Unsupported(f"{o.code} of {v.dtype} (converted for {', '.join(str(d) for d in allowed)})")
    return v


def _b(o, op: str, a: Val, b: Val) -> Val:
    """Binary op on TFLite's (NumPy's) broadcast shape; comparisons give bool."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    return o.op(op, [a, b], shape, BOOL if op in COMPARISONS else a.dtype)


def _u(o, op: str, x: Val, **attrs) -> Val:
    return o.op(op, [x], x.shape, x.dtype, **attrs)


def _where(o, cond: Val, a: Val, b: Val) -> Val:
    """cond ? a : b; v0's Where takes full-size operands or single values, no broadcasting."""
    big = max((cond, a, b), key=lambda v: int(np.prod(v.shape)))
    return o.op("Where", [cond, a, b], big.shape, a.dtype)


def _full(o, v: Val, shape) -> Val:
    return v if tuple(v.shape) == tuple(shape) else o.op("BroadcastTo", [v], shape, v.dtype, dstShape=list(shape))


def _cast(o, x: Val, dtype) -> Val:
    return o.op("Cast", [x], x.shape, dtype, srcT=dtypes.type_id(x.dtype), dstT=dtypes.type_id(dtype))


@handles_complex("CAST")
def cast(o):
    x, dtype = o.inp(0), o.out()[1]
    if o.conv.bad_dtypes.get(o.inputs[0]) == "complex64":
        if dtype != F32:
            raise Unsupported(f"CAST complex64 -> {dtype}")
        o.set(_part(o, _pairs(o, 0), 0))  # static_cast of std::real, as LiteRT's kernel casts
    elif x.dtype == dtype:
        o.set(x)
    elif dtype == BOOL:  # static_cast<bool>: nonzero (NaN too) is true
        o.set(_b(o, "NotEqual", _expect(o, x, F32, I32, I64, U8), o.scalar(0, x.dtype)))
    elif x.dtype in (BOOL, U8) and dtype in (I32, I64):
        o.set(_cast(o, _cast(o, x, F32), dtype))  # exact: these values are float32 integers
    elif (x.dtype, dtype) in CAST_PAIRS:
        o.set(_cast(o, x, dtype))
    else:
        raise Unsupported(f"CAST {x.dtype} -> {dtype} (v0's Cast has no such pair)")


@handles("ELU")
def elu(o):
    x = _expect(o, o.inp(0), F32)
    o.set(_u(o, "Elu", x, alpha=1.0))


# msv0.gelu's forms name Activations by their kind
FORM_ACTIVATIONS = {"Relu": ActivationType.RELU, "Sigmoid": ActivationType.SIGMOID}


@handles("GELU")
def gelu_(o):
    """msv0.gelu's tanh form for approximate, its erf form (erfc within 1.5e-7) for exact GELU,
    node for node, so that Sessions find and fuse them."""
    x = _expect(o, o.inp(0), F32)
    opt = o.options("GeluOptions")
    form = gelu.TANH_FORM if opt is not None and opt.Approximate() else gelu.ERF_FORM
    outs = []
    for op, *args in form:
        ins = [x if a == "x" else outs[a] if isinstance(a, int) else o.scalar(a) for a in args]
        if op in FORM_ACTIVATIONS:
            outs.append(_u(o, "Activation", ins[0], type=FORM_ACTIVATIONS[op]))
        else:
            outs.append(o.op(op, ins, x.shape, F32))
    o.set(outs[-1])


@handles("POW")
def pow_(o):
    """r1.1's Power picks repeated squaring (exponents truncated to int) or pow for every element
    from the first exponent alone, so a per-element exponent must be constant, and integral
    everywhere or not integral in its first element."""
    x, p, (shape, dtype) = o.inp(0), o.inp(1), o.out()
    if dtype != F32:
        raise Unsupported(f"POW of {dtype} (v0's Power is float32 only)")
    x = _full(o, x, shape)
    e = p.const
    if e is not None and np.all(e == e.reshape(-1)[0]):
        o.set(o.op("Power", [x], shape, F32, power=float(e.reshape(-1)[0]), scale=1.0, shift=0.0))
        return
    if e is None and int(np.prod(p.shape)) != 1:
        raise Unsupported("POW with a computed exponent tensor (r1.1's Power treats every element as its first)")
    if e is not None:
        e = np.ascontiguousarray(np.broadcast_to(e, shape))
        integral = np.isfinite(e) & (np.floor(e) == e)
        if integral.reshape(-1)[0] and not integral.all():
            raise Unsupported("POW whose first exponent is integral but others are not (r1.1's Power would "
                              "truncate them all)")
        p = Val.of(e)
    o.set(o.op("Power", [x, p], shape, F32, scale=1.0, shift=0.0))


@handles("ROUND")
def round_(o):
    """TFLite rounds half to even, v0's Round half away from zero. At a tie x/2 lies a quarter
    past an integer, so 2·round(x/2) is the even neighbour; x − round(x) is exact."""
    x = _expect(o, o.inp(0), F32)
    r = _u(o, "Round", x)
    tie = _b(o, "Equal", _u(o, "Abs", _b(o, "Sub", x, r)), o.scalar(0.5))
    even = _b(o, "Mul", _u(o, "Round", _b(o, "Mul", x, o.scalar(0.5))), o.scalar(2.0))
    o.set(_where(o, tie, even, r))


@handles("FLOOR_DIV", "FLOOR_MOD")
def floor_div_mod(o):
    """From v0's Mod, C's exact fmod / % with the sign of a: where that remainder r is nonzero
    and its sign is not b's, the floor remainder is r + b (no overflow: opposite signs) and the
    floor quotient one less than the truncated one."""
    a, b, dtype = o.inp(0), o.inp(1), o.out()[1]
    _expect(o, a, *((F32, I32) if o.code == "FLOOR_DIV" else (F32, I32, I64)))  # LiteRT's kernels
    zero = o.scalar(0, dtype)
    r = _b(o, "Mod", a, b)
    off = _b(o, "LogicalAnd", _b(o, "NotEqual", r, zero),
             _b(o, "NotEqual", _b(o, "Less", r, zero), _b(o, "Less", b, zero)))
    if o.code == "FLOOR_MOD":
        o.set(_where(o, off, _b(o, "Add", r, b), r))
        return
    if dtype == F32:
        # a − r is a multiple of b: the division lands within an ulp or two of the truncated quotient
        q = _u(o, "Round", _b(o, "Div", _b(o, "Sub", a, r), b))
    else:
        q = _b(o, "FloorDiv", a, b)  # r1.1's integer FloorDiv truncates
    q = _where(o, off, _b(o, "Sub", q, o.scalar(1, dtype)), q)
    if dtype == F32:
        # an infinite operand leaves no finite remainder; TFLite's floor(a/b) is a/b there (±inf, ±0, NaN)
        infinite = _b(o, "Equal", _b(o, "Maximum", _u(o, "Abs", a), _u(o, "Abs", b)), o.scalar(np.inf))
        q = _where(o, infinite, _b(o, "Div", a, b), q)
    o.set(q)


@handles("SIGN")
def sign(o):
    x = _expect(o, o.inp(0), F32, I32)
    zero = o.scalar(0, x.dtype)
    # x itself where neither > 0 nor < 0: NaN stays NaN, as in LiteRT's kernel
    rest = _where(o, _b(o, "Less", x, zero), o.scalar(-1, x.dtype), x)
    o.set(_where(o, _b(o, "Greater", x, zero), o.scalar(1, x.dtype), rest))


def _negative(o, v: Val) -> Val:
    """Whether v's sign bit is set, for v in [-1, 1]: 1/±0 = ±inf keeps a zero's sign."""
    return _b(o, "Less", _u(o, "Reciprocal", v), o.scalar(0.0))


@handles("ATAN2")
def atan2(o):
    """atan(y/x), turned by π towards y's sign where x's sign bit is set: C's atan2 for every IEEE
    input. y/x is NaN for 0/0 and ∞/∞ (and NaN operands): there the ratio is taken as the product
    of the operands clamped to [-1, 1] (±0 and ±1, NaN kept: r1.1's Minimum and Maximum return
    their first and second operand where unordered), whose signs the turn also reads."""
    y, x = (_expect(o, o.inp(k), F32) for k in (0, 1))  # of one shape (LiteRT's kernel checks it)
    uy, ux = (_b(o, "Maximum", o.scalar(-1.0), _b(o, "Minimum", v, o.scalar(1.0))) for v in (y, x))
    r = _b(o, "Div", y, x)
    q = _u(o, "Atan", _where(o, _b(o, "NotEqual", r, r), _b(o, "Mul", uy, ux), r))
    turn = _where(o, _negative(o, uy), o.scalar(-np.pi), o.scalar(np.pi))
    o.set(_where(o, _negative(o, ux), _b(o, "Add", q, turn), q))


@handles("ADD_N")
def add_n(o):
    ins = [_expect(o, o.inp(k), F32, I32) for k in range(len(o.inputs))]
    shape, dtype = o.out()
    o.set(o.op("AddN", ins, shape, dtype))


@handles("ZEROS_LIKE")
def zeros_like(o):
    x = _expect(o, o.inp(0), F32, I32, I64)
    o.set(_u(o, "ZerosLike", x))


@handles("FILL")
def fill(o):
    shape = tuple(int(d) for d in o.const(0, "FILL's dims").reshape(-1))
    value = _expect(o, o.inp(1), F32, I32, I64, BOOL)
    o.set(o.op("Fill", [value], shape, value.dtype, dims=list(shape)))


@handles("SHAPE")
def shape_(o):
    o.set(Val.of(np.array(o.inp(0).shape, o.out()[1])))


@handles("RANK")
def rank(o):
    shape, dtype = o.out()
    o.set(Val.of(np.full(shape, len(o.inp(0).shape), dtype)))


@handles("RANGE")
def range_(o):
    """LiteRT's size and its values by repeated addition, in the output's type."""
    shape, dtype = o.out()
    start, limit, delta = (dtype.type(o.const(k, f"RANGE's {what}").reshape(-1)[0])
                           for k, what in enumerate(("start", "limit", "delta")))
    if delta == 0 or (start < limit and delta < 0) or (start > limit and delta > 0):
        raise Unsupported(f"RANGE from {start} to {limit} by {delta} (LiteRT rejects it)")
    if dtype.kind == "f":
        n = int(np.ceil(np.abs((limit - start) / delta)))
    else:
        n = (abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta))
    steps = np.full(n, delta, dtype)
    steps[:1] = start
    o.set(Val.of(np.add.accumulate(steps, dtype=dtype)))


@handles("BROADCAST_TO")
def broadcast_to(o):
    shape = [int(d) for d in o.const(1, "BROADCAST_TO's shape").reshape(-1)]
    x = _expect(o, o.inp(0), F32, I32, I64, BOOL)
    o.set(o.op("BroadcastTo", [x], shape, x.dtype, dstShape=shape))


@handles("BROADCAST_ARGS")
def broadcast_args(o):
    a, b = (tuple(int(d) for d in o.const(k, "BROADCAST_ARGS's shapes").reshape(-1)) for k in (0, 1))
    o.set(Val.of(np.array(np.broadcast_shapes(a, b), o.out()[1])))


@handles("LOG_SOFTMAX")
def log_softmax(o):
    """(x − max) − log Σ exp(x − max) along the last axis, as LiteRT computes it."""
    x = _expect(o, o.inp(0), F32)
    last, kept = len(x.shape) - 1, tuple(x.shape[:-1]) + (1,)
    top = o.op("Reduce", [x], kept, F32, axes=[last], keepDims=1, mode=ReduceMode.ReduceMax)
    d = _b(o, "Sub", x, top)
    total = o.op("Reduce", [_u(o, "Exp", d)], kept, F32, axes=[last], keepDims=1, mode=ReduceMode.ReduceSum)
    o.set(_b(o, "Sub", d, _u(o, "Log", total)))


@handles("L2_NORMALIZATION")
def l2_normalization(o):
    x = _expect(o, o.inp(0), F32)
    opt = o.options("L2NormOptions")
    if opt is not None and opt.FusedActivationFunction():
        raise Unsupported(f"L2_NORMALIZATION with fused activation {opt.FusedActivationFunction()} (LiteRT's "
                          "kernel rejects it too)")
    # LiteRT divides by max(‖x‖, 1e-6), L2Norm by sqrt(max(Σx², ε)): ε = 1e-6² in float32, whose
    # root is 1e-6 again
    eps = np.float32(1e-6) * np.float32(1e-6)
    o.set(_u(o, "L2Norm", x, axis=[len(x.shape) - 1], epsilon=float(eps)))


@handles("LOCAL_RESPONSE_NORMALIZATION")
def local_response_normalization(o):
    """Both sum x² over the channels within the radius and leave alpha undivided."""
    x = _expect(o, o.inp(0), F32)
    opt = o.options("LocalResponseNormalizationOptions")
    o.set(_u(o, "LocalResponseNormalization", x, depthRadius=opt.Radius(), bias=opt.Bias(), alpha=opt.Alpha(),
             beta=opt.Beta()))


@handles("L2_POOL_2D")
def l2_pool(o):
    """sqrt of the mean of x² over each window's cells inside the image, which is what r1.1's
    mean Pooling divides by; its SAME_UPPER pads split as TensorFlow's SAME does."""
    x = _expect(o, o.inp(0), F32)
    shape, _ = o.out()
    opt = o.options("Pool2DOptions")
    act = opt.FusedActivationFunction()
    if act not in L2_POOL_CLAMP:
        raise Unsupported(f"L2_POOL_2D with fused activation {act} (LiteRT's pooling ignores it)")
    mode = PadMode.SAME_UPPER if opt.Padding() == TFL_SAME else PadMode.VALID
    mean = o.op("Pooling", [_u(o, "Square", x)], shape, F32, poolingMode=PoolMode.MEAN_POOLING,
                windowH=opt.FilterHeight(), windowW=opt.FilterWidth(), strideH=opt.StrideH(), strideW=opt.StrideW(),
                padMode=mode, roundMode=RoundMode.FLOOR)
    y = _u(o, "Sqrt", mean)
    if L2_POOL_CLAMP[act]:
        lo, hi = L2_POOL_CLAMP[act]
        y = _u(o, "Activation", y, type=ActivationType.HARD_TANH, minVal=lo, maxVal=hi)
    o.set(y)


@handles("REDUCE_ANY", "REDUCE_ALL")
def reduce_bool(o):
    """REDUCE_ALL is Reduce's All mode; any(x) = not all(not x)."""
    x = _expect(o, o.inp(0), BOOL)
    shape, dtype = o.out()
    axes = sorted({axis_of(int(a), len(x.shape)) for a in o.const(1, f"{o.code}'s axes").reshape(-1)})
    opt = o.options("ReducerOptions")
    keep = opt is not None and bool(opt.KeepDims())
    flip = o.code == "REDUCE_ANY"
    y = o.op("Reduce", [_u(o, "LogicalNot", x) if flip else x], shape, dtype, axes=axes, keepDims=int(keep),
             mode=ReduceMode.ReduceAll)
    o.set(_u(o, "LogicalNot", y) if flip else y)


def _pairs(o, k: int) -> Val:
    """Input k, a complex64 tensor, as the float32 pairs [..., 2] that RFFT2D wrote for it."""
    v = o.inp(k)
    if v is None or v.dtype != F32 or tuple(v.shape) != (*o.conv.tensors[o.inputs[k]][0], 2):
        raise Unsupported("a complex64 input that no RFFT2D wrote")
    return v


@handles_complex("RFFT2D")
def rfft2d(o):
    """The real 2-D FFT over the last two axes at fft_length (h, w), for h = 1 (an audio front end's
    frames): the first row, truncated or zero-padded to w, by a constant DFT matrix in one
    FullConnection; the complex result is held as float32 pairs [..., 1, w // 2 + 1, 2]."""
    x = _expect(o, o.inp(0), F32)
    fft = o.const(1, "fft_length")
    if len(x.shape) < 2 or fft is None or fft.size != 2:
        raise Unsupported(f"RFFT2D of shape {list(x.shape)} at fft_length {None if fft is None else fft.tolist()}")
    fh, fw = (int(n) for n in fft.reshape(-1))
    if fh != 1 or fw < 1:
        raise Unsupported(f"RFFT2D at fft_length {[fh, fw]} (transforms along the last axis only: [1, n])")
    *lead, hgt, w = x.shape
    if hgt > 1:  # fft_length[0] = 1 keeps the first row
        x = o.op("Slice", [x], (*lead, 1, w), F32, axes=list(range(len(x.shape))), begin=[0] * len(x.shape),
                 size=[*lead, 1, w])
    rows, bins = int(np.prod(lead, dtype=np.int64)), fw // 2 + 1
    matrix = dft_matrix(w, 1, fw, bins, False).reshape(2 * bins, w)
    flat = o.op("Reshape", [x], (rows, w), F32, shape=[rows, w])
    y = dense(o, flat, matrix)
    o.set(o.op("Reshape", [y], (*lead, 1, bins, 2), F32, shape=[*lead, 1, bins, 2]))


@handles_complex("COMPLEX_ABS")
def complex_abs(o):
    v = _pairs(o, 0)
    shape, _ = o.out()
    power = o.op("Reduce", [_b(o, "Mul", v, v)], shape, F32, axes=[len(shape)], keepDims=False,
                 mode=ReduceMode.ReduceSum)
    o.set(_u(o, "Sqrt", power))


@handles_complex("REAL", "IMAG")
def real_imag(o):
    o.set(_part(o, _pairs(o, 0), int(o.code == "IMAG")))


def _part(o, v: Val, k: int) -> Val:
    """Part k of the float32 pairs v (0: real, 1: imaginary), shaped as o's output."""
    shape, _ = o.out()
    part = o.op("Slice", [v], (*shape, 1), F32, axes=list(range(len(v.shape))), begin=[0] * len(shape) + [k],
                size=[*shape, 1])
    return o.op("Reshape", [part], shape, F32, shape=list(shape))
