"""TFLite elementwise, comparison and array builtins whose v0 op takes the same data: the
arguments TFLite passes as constant tensors (axes, perms, sizes) become v0 attributes.
TFLite tensors are NHWC already, so shapes and axes carry over unchanged.
"""
from __future__ import annotations

import numpy as np

from msv0 import dtypes
from msv0.convert.emit import Unsupported, Val, handler_table
from msv0.fb.ActivationType import ActivationType

ARRAY_HANDLERS, handles = handler_table()
# Ops without options whose v0 op takes the same inputs.
PLAIN = {"MAXIMUM": "Maximum", "MINIMUM": "Minimum", "SQUARED_DIFFERENCE": "SquaredDifference",
         "LESS": "Less", "LESS_EQUAL": "LessEqual", "GREATER": "Greater", "GREATER_EQUAL": "GreaterEqual",
         "EQUAL": "Equal", "NOT_EQUAL": "NotEqual", "LOGICAL_AND": "LogicalAnd", "LOGICAL_OR": "LogicalOr",
         "LOGICAL_NOT": "LogicalNot", "ABS": "Abs", "NEG": "Neg", "SQUARE": "Square", "SQRT": "Sqrt",
         "RSQRT": "Rsqrt", "EXP": "Exp", "LOG": "Log", "SIN": "Sin", "COS": "Cos", "FLOOR": "Floor", "CEIL": "Ceil",
         "SELECT": "Select", "SELECT_V2": "Select"}
# Clamping activations -> Activation HARD_TANH bounds
CLAMP = {"RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}


def axis_of(a: int, rank: int) -> int:
    if not -rank <= a < rank:
        raise Unsupported(f"axis {a} outside rank {rank}")
    return a + rank if a < 0 else a


def const_ints(o, k: int, what: str) -> list[int]:
    return [int(v) for v in o.const(k, what).reshape(-1)]


@handles(*PLAIN)
def plain(o):
    shape, dtype = o.out()
    o.set(o.op(PLAIN[o.code], [o.inp(k) for k in range(len(o.inputs))], shape, dtype))


@handles(*CLAMP)
def clamp(o):
    x = o.inp(0)
    lo, hi = CLAMP[o.code]
    o.set(o.op("Activation", [x], x.shape, x.dtype, type=ActivationType.HARD_TANH, minVal=lo, maxVal=hi))


@handles("ARG_MAX", "ARG_MIN")
def arg_extreme(o):
    """v0's ArgMax/ArgMin write the first extreme's index as float32; a Cast gives TFLite's int type."""
    x, shape, dtype = o.inp(0), *o.out()
    axis = axis_of(const_ints(o, 1, "axis")[0], len(x.shape))
    op = "ArgMax" if o.code == "ARG_MAX" else "ArgMin"
    idx = o.op(op, [x], shape, np.float32, axis=axis, topK=1, keepDims=False, outMaxValue=False)
    o.set(o.op("Cast", [idx], shape, dtype, srcT=dtypes.type_id(np.float32), dstT=dtypes.type_id(dtype)))


@handles("DEPTH_TO_SPACE", "SPACE_TO_DEPTH")
def depth_space(o):
    """Both in TF's DCR order, as v0's."""
    shape, dtype = o.out()
    to_space = o.code == "DEPTH_TO_SPACE"
    block = o.options("DepthToSpaceOptions" if to_space else "SpaceToDepthOptions").BlockSize()
    o.set(o.op("DepthToSpace" if to_space else "SpaceToDepth", [o.inp(0)], shape, dtype, blockSize=block))


@handles("PACK")
def pack(o):
    shape, dtype = o.out()
    axis = axis_of(o.options("PackOptions").Axis(), len(shape))
    o.set(o.op("Stack", [o.inp(k) for k in range(len(o.inputs))], shape, dtype, axis=axis))


@handles("UNPACK")
def unpack(o):
    x = o.inp(0)
    o.emit_all("Unstack", [x], axis=axis_of(o.options("UnpackOptions").Axis(), len(x.shape)))


@handles("TRANSPOSE")
def transpose(o):
    shape, dtype = o.out()
    perm = [axis_of(p, len(shape)) for p in const_ints(o, 1, "perm")]
    o.set(o.op("Transpose", [o.inp(0)], shape, dtype, perm=perm))


@handles("SLICE")
def slice_(o):
    shape, dtype = o.out()
    begin = const_ints(o, 1, "begin")
    o.set(o.op("Slice", [o.inp(0)], shape, dtype, axes=list(range(len(shape))), begin=begin, size=list(shape)))


@handles("GATHER")
def gather(o):
    x, shape, dtype = o.inp(0), *o.out()
    opt = o.options("GatherOptions")
    if opt.BatchDims():
        raise Unsupported(f"batch_dims {opt.BatchDims()}")
    o.set(o.op("Gather", [x, o.inp(1)], shape, dtype, axis=axis_of(opt.Axis(), len(x.shape)), batchDims=0))


@handles("SPLIT", "SPLIT_V")
def split(o):
    """SPLIT: (axis, x), equal parts; SPLIT_V: (x, size_splits, axis)."""
    if o.code == "SPLIT":
        x, axis = o.inp(1), const_ints(o, 0, "axis")[0]
    else:
        x, axis = o.inp(0), const_ints(o, 2, "axis")[0]
    axis = axis_of(axis, len(x.shape))
    sizes = [o.out(k)[0][axis] for k in range(len(o.outputs))]
    o.emit_all("Split", [x], numberSplit=len(sizes), sizeSplits=sizes, splitDim=axis)


@handles("TILE")
def tile(o):
    shape, dtype = o.out()
    multiples = const_ints(o, 1, "multiples")
    o.set(o.op("Tile", [o.inp(0)], shape, dtype, multiples=multiples, dims=list(range(len(multiples)))))


@handles("EXPAND_DIMS")
def expand_dims(o):
    shape, dtype = o.out()
    o.set(o.op("Reshape", [o.inp(0)], shape, dtype, shape=list(shape)))


@handles("BATCH_MATMUL")
def batch_matmul(o):
    """v0 MatMul does not broadcast batch dims: a constant operand is broadcast here."""
    a, b = o.inp(0), o.inp(1)
    shape, dtype = o.out()
    opt = o.options("BatchMatMulOptions")
    batch = tuple(shape[:-2])
    operands = []
    for v in (a, b):
        if tuple(v.shape[:-2]) != batch:
            if v.const is None:
                raise Unsupported(f"batch dims {list(v.shape[:-2])} broadcast to {list(batch)}")
            c = np.ascontiguousarray(np.broadcast_to(v.const, batch + tuple(v.shape[-2:])))
            v = Val.of(c)
        operands.append(v)
    o.set(o.op("MatMul", operands, shape, dtype, transposeA=bool(opt.AdjX()), transposeB=bool(opt.AdjY())))
