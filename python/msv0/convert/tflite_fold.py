"""Constant folding for the TFLite frontend: an operator of FOLDS whose inputs are all constants
gets constant outputs computed here with NumPy instead of v0 nodes, so that shape arithmetic
(SHAPE -> STRIDED_SLICE -> PACK -> FILL dims, TILE multiples, ...) reaches the handlers that need
a constant. Only integer (and bool) data movement and arithmetic is folded, where NumPy's result
is exactly LiteRT's; floats stay runtime values so rounding can never differ from the runtime.
SHAPE, RANK and RANGE are constants in their handlers already (tflite_math.py).
"""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Unsupported, Val

I32 = frozenset({np.dtype(np.int32)})
INTS = frozenset({np.dtype(np.int32), np.dtype(np.int64)})
DATA = INTS | {np.dtype(np.bool_)}
CASTS = DATA | {np.dtype(np.float32)}


def _flag(opt, field: str) -> int:
    """An options field, 0 when the operator has no options table."""
    return getattr(opt, field)() if opt is not None else 0


def _strided_slice(o, ins):
    """TFLite's start/stop clamping is Python's slice.indices, so a NumPy slice is its result.
    Ellipsis, new-axis and offset slices are left to the handler, as is a shrunk axis that also
    has a begin/end mask bit or a non-unit stride (LiteRT versions differ on those)."""
    x, begin, end, strides = ins[0], *(a.reshape(-1) for a in ins[1:4])
    opt = o.options("StridedSliceOptions")
    bm, em, sm = (_flag(opt, f) for f in ("BeginMask", "EndMask", "ShrinkAxisMask"))
    offset = hasattr(opt, "Offset") and opt.Offset()  # a field newer tflite packages have
    if _flag(opt, "EllipsisMask") or _flag(opt, "NewAxisMask") or offset or len(begin) > x.ndim:
        return None
    index = []
    for i, n in enumerate(x.shape[:len(begin)]):
        b, e, s = int(begin[i]), int(end[i]), int(strides[i])
        if sm >> i & 1:
            if (bm | em) >> i & 1 or s != 1 or not -n <= b < n:
                return None
            index.append(b)  # an integer index drops the axis, counting from the end when negative
        elif s == 0:
            return None
        else:
            index.append(slice(None if bm >> i & 1 else b, None if em >> i & 1 else e, s))
    return [x[tuple(index)]]


def _slice(o, ins):
    x, begin, size = ins[0], *(a.reshape(-1) for a in ins[1:3])
    stop = [n if s == -1 else b + s for n, b, s in zip(x.shape, begin, size)]
    if len(begin) != x.ndim or any(b < 0 or not b <= e <= n for b, e, n in zip(begin, stop, x.shape)):
        return None  # LiteRT rejects these; NumPy would clip
    return [x[tuple(slice(b, e) for b, e in zip(begin, stop))]]


def _gather(o, ins):
    x, idx = ins
    opt = o.options("GatherOptions")
    axis = _flag(opt, "Axis")
    if _flag(opt, "BatchDims") or not -x.ndim <= axis < x.ndim:
        return None
    n = x.shape[axis]
    if ((idx < 0) | (idx >= n)).any():
        return None  # LiteRT refuses an index out of range; np.take would wrap a negative one
    return [np.take(x, idx, axis=axis)]


def _reshape(o, ins):
    if len(ins) > 1:
        shape = ins[1].reshape(-1)
    else:
        opt = o.options("ReshapeOptions")
        shape = opt.NewShapeAsNumpy() if opt is not None and opt.NewShapeLength() else o.out()[0]
    return [ins[0].reshape([int(d) for d in shape])]


def _squeeze(o, ins):
    opt = o.options("SqueezeOptions")
    dims = tuple(int(d) for d in opt.SqueezeDimsAsNumpy()) if opt is not None and opt.SqueezeDimsLength() else None
    return [np.squeeze(ins[0], axis=dims)]


def _concat(o, ins):
    opt = o.options("ConcatenationOptions")
    if _flag(opt, "FusedActivationFunction"):
        return None
    return [np.concatenate(ins, axis=_flag(opt, "Axis"))]


def _reduce(ufunc):
    def f(o, ins):
        x, axes = ins
        if x.size == 0:
            return None  # LiteRT's max/min of nothing is its own choice
        axes = tuple(sorted({int(a) % x.ndim for a in axes.reshape(-1)})) if x.ndim else ()
        keep = bool(_flag(o.options("ReducerOptions"), "KeepDims"))
        return [ufunc.reduce(x, axis=axes, keepdims=keep, dtype=x.dtype)]
    return f


def _binary(ufunc, options=None):
    """options: the table holding a fused activation, which folding does not apply."""
    def f(o, ins):
        if options and _flag(o.options(options), "FusedActivationFunction"):
            return None
        return [ufunc(*ins)]
    return f


def _floor(ufunc):
    def f(o, ins):
        if not ins[1].all():
            return None  # LiteRT fails on a zero divisor
        return [ufunc(*ins)]
    return f


def _cast(o, ins):
    """Only casts whose every value converts exactly, or truncates as C's static_cast does."""
    x, dtype = ins[0], o.out()[1]
    if dtype == np.float32 and x.dtype.kind == "i" and (np.abs(x) > 2 ** 24).any():
        return None  # float32 would round it
    if dtype.kind == "i" and x.dtype.kind in "fi":
        info = np.iinfo(dtype)
        if x.dtype.kind == "f":  # truncation is defined for finite values that land in range
            ok = (x > info.min - 1.0) & (x < info.max + 1.0)
        else:
            ok = (x >= info.min) & (x <= info.max)
        if not ok.all():
            return None
    return [x.astype(dtype)]


def _split(o, ins):
    """SPLIT (axis, x) into num_splits equal parts; SPLIT_V (x, size_splits, axis), one size -1
    taking what the others leave."""
    if o.code == "SPLIT":
        (axis,), x = ins[0].reshape(-1), ins[1]
        parts = _flag(o.options("SplitOptions"), "NumSplits")
        if not -x.ndim <= axis < x.ndim or parts < 1 or x.shape[axis] % parts:
            return None
        return np.split(x, parts, axis=int(axis))
    x, sizes, (axis,) = ins[0], [int(n) for n in ins[1].reshape(-1)], ins[2].reshape(-1)
    if not -x.ndim <= axis < x.ndim:
        return None
    n = x.shape[axis]
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = n - (sum(sizes) + 1)
    if sum(sizes) != n or min(sizes) < 0:
        return None
    return np.split(x, np.cumsum(sizes)[:-1], axis=int(axis))


def _tile(o, ins):
    x, reps = ins[0], ins[1].reshape(-1)
    if len(reps) != x.ndim or (reps < 0).any():
        return None
    return [np.tile(x, reps)]


# builtin -> (function(o, inputs) -> outputs, or None to leave the operator to its handler;
#             the dtypes every input and output must have)
FOLDS = {
    "STRIDED_SLICE": (_strided_slice, DATA),
    "SLICE": (_slice, DATA),
    "PACK": (lambda o, ins: [np.stack(ins, axis=_flag(o.options("PackOptions"), "Axis"))], DATA),
    "UNPACK": (lambda o, ins: list(np.moveaxis(ins[0], _flag(o.options("UnpackOptions"), "Axis"), 0)), DATA),
    "CONCATENATION": (_concat, DATA),
    "RESHAPE": (_reshape, DATA),
    "SQUEEZE": (_squeeze, DATA),
    "EXPAND_DIMS": (lambda o, ins: [np.expand_dims(ins[0], int(ins[1].reshape(-1)[0]))], DATA),
    "GATHER": (_gather, DATA),
    "TRANSPOSE": (lambda o, ins: [np.transpose(ins[0], [int(p) for p in ins[1].reshape(-1)])], DATA),
    "CAST": (_cast, CASTS),
    "ADD": (_binary(np.add, "AddOptions"), INTS),
    "SUB": (_binary(np.subtract, "SubOptions"), INTS),
    "MUL": (_binary(np.multiply, "MulOptions"), INTS),
    "FLOOR_DIV": (_floor(np.floor_divide), I32),  # LiteRT's FLOOR_DIV has no int64 kernel
    "FLOOR_MOD": (_floor(np.mod), INTS),
    "MAXIMUM": (_binary(np.maximum), INTS),
    "MINIMUM": (_binary(np.minimum), INTS),
    "REDUCE_PROD": (_reduce(np.multiply), INTS),
    "SUM": (_reduce(np.add), INTS),
    "REDUCE_MAX": (_reduce(np.maximum), INTS),
    "REDUCE_MIN": (_reduce(np.minimum), INTS),
    "FILL": (lambda o, ins: [np.full([int(d) for d in ins[0].reshape(-1)], ins[1].reshape(()))], DATA),
    "TILE": (_tile, DATA),
    "SPLIT": (_split, DATA),
    "SPLIT_V": (_split, DATA),
    "BROADCAST_TO": (lambda o, ins: [np.broadcast_to(ins[0], [int(d) for d in ins[1].reshape(-1)])], DATA),
}


def fold(o) -> bool:
    """Sets o's outputs to constants if it is in FOLDS, all its inputs are constants and the
    results are shaped and typed exactly as TFLite declares the outputs; otherwise o is left to
    its handler (which also reports malformed operands NumPy raised on)."""
    entry = FOLDS.get(o.code)
    if entry is None:
        return False
    f, kinds = entry
    vals = []
    for k in range(len(o.inputs)):
        try:
            vals.append(o.inp(k))
        except Unsupported:  # an input nothing produces, which the handler may not read
            if o.code != "RESHAPE" or k != 1:
                return False  # RESHAPE's shape (an empty tensor, BirdNET's) is in its options or output
    if any(v is not None and v.const is None for v in vals):
        return False
    ins = [v.const for v in vals if v is not None]  # none of these ops has an optional input
    outs = [o.out(k) for k in range(len(o.outputs))]
    if any(np.dtype(d) not in kinds for d in [a.dtype for a in ins] + [d for _, d in outs]):
        return False
    try:
        got = f(o, ins)
    except (ValueError, IndexError):
        return False
    if got is None or len(got) != len(outs):
        return False
    got = [np.array(a) for a in got]  # owned, contiguous arrays (NumPy may return views or scalars)
    if any(a.shape != tuple(s) or a.dtype != d for a, (s, d) in zip(got, outs)):
        return False
    for k, a in enumerate(got):
        o.set(Val.of(a), k)
    return True
