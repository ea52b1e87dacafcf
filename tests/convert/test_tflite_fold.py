"""TFLite constant folding (msv0/convert/tflite_fold.py): integer operators of constants become
constants at conversion time, so SHAPE arithmetic reaches the handlers that need a constant.
Each fold is compared with LiteRT through an ADD with a graph input, and the converted model
is checked to hold no node for the folded operator."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert.interpreter")

from test_tflite_convert import NONE, check, f32  # noqa: E402
from test_tflite_math import Writer  # noqa: E402

I32, I64 = np.int32, np.int64
# (case, dtype) that LiteRT's kernels refuse, so it cannot give the reference
NO_KERNEL = {("floor_div", I64), ("unpack", I64)}


def ops(model) -> list[str]:
    return [n.op for n in model.nodes]


def test_shape_chain_reaches_its_consumers():
    """SHAPE -> STRIDED_SLICE (dim 0, shrunk) -> PACK: the batch size as FILL dims, TILE multiples,
    BROADCAST_TO shape and RESHAPE shape, which their handlers need as constants."""
    w = Writer()
    x, y = w.input("x", [2, 3, 5]), w.input("y", [1, 4])
    shape = w.op("SHAPE", [x], [3], "ShapeOptions", out_dtype=I32, out_type=2)
    one = w.const(np.array([1], I32))
    batch = w.op("STRIDED_SLICE", [shape, w.const(np.array([0], I32)), one, one], [], "StridedSliceOptions",
                 out_dtype=I32, shrink_axis_mask=1)

    def pack(*rest):
        return w.op("PACK", [batch, *(w.scalar(v, I32) for v in rest)], [1 + len(rest)], "PackOptions",
                    out_dtype=I32, values_count=1 + len(rest), axis=0)

    w.output(w.op("FILL", [pack(4), w.scalar(1.5, np.float32)], [2, 4]))
    w.output(w.op("TILE", [y, pack(1)], [2, 4]))
    w.output(w.op("BROADCAST_TO", [y, pack(4)], [2, 4]))
    w.output(w.op("RESHAPE", [x, pack(-1)], [2, 15]))
    m = check(w, {"x": f32(2, 3, 5), "y": f32(1, 4)}, rtol=0, atol=0)
    assert not {"StridedSlice", "Stack"} & set(ops(m))  # the chain became constants


def _x(shape, dtype, lo=-9):
    return np.arange(lo, lo + int(np.prod(shape))).reshape(shape).astype(dtype)


def _strided(w, x, begin, end, strides, out, dt, **masks):
    b, e, s = (w.const(np.array(v, I32)) for v in (begin, end, strides))
    return w.op("STRIDED_SLICE", [w.const(x), b, e, s], out, "StridedSliceOptions", out_dtype=dt, **masks)


def _reduce(code, axes, keep):
    def case(w, dt):
        out = [1, 3, 1] if keep else [3]
        x = w.const(_x([2, 3, 4], dt, lo=-12) % 5 - 2)  # small values: the product stays in range
        return w.op(code, [x, w.const(np.array(axes, I32))], out, "ReducerOptions", out_dtype=dt, keep_dims=keep)
    return case


def _binary(code, a, b, out, options=None, **opts):
    return lambda w, dt: w.op(code, [w.const(np.array(a, dt)), w.const(np.array(b, dt))], out, options,
                              out_dtype=dt, **opts)


# name -> function(writer, dtype) -> a tensor of dtype computed from constants only
CASES = {
    "strided_slice_masks": lambda w, dt: _strided(w, _x([4, 5], dt), [1, 0], [0, 3], [1, 2], [3, 2], dt,
                                                  begin_mask=0b10, end_mask=0b01),
    "strided_slice_negative": lambda w, dt: _strided(w, _x([2, 3, 4], dt), [-1, -3, -1], [-3, 3, 0], [-1, 1, -2],
                                                     [2, 3, 2], dt),
    "strided_slice_shrink": lambda w, dt: _strided(w, _x([3, 4], dt), [-2, 1], [0, 4], [1, 1], [3], dt,
                                                   shrink_axis_mask=1),
    "slice": lambda w, dt: w.op("SLICE", [w.const(_x([3, 4], dt)), w.const(np.array([1, 0], I32)),
                                          w.const(np.array([2, -1], I32))], [2, 4], out_dtype=dt),
    "pack": lambda w, dt: w.op("PACK", [w.const(_x([3], dt)), w.const(_x([3], dt, lo=4))], [3, 2], "PackOptions",
                               out_dtype=dt, values_count=2, axis=-1),
    "unpack": lambda w, dt: w.multi_op("UNPACK", [w.const(_x([2, 3], dt))], [[2]] * 3, "UnpackOptions",
                                       out_dtype=dt, num=3, axis=1)[1],
    "concatenation": lambda w, dt: w.op("CONCATENATION", [w.const(_x([2, 3], dt)), w.const(_x([2, 1], dt))], [2, 4],
                                        "ConcatenationOptions", out_dtype=dt, axis=-1,
                                        fused_activation_function=NONE),
    "reshape": lambda w, dt: w.op("RESHAPE", [w.const(_x([2, 6], dt)), w.const(np.array([3, -1], I32))], [3, 4],
                                  out_dtype=dt),
    "squeeze": lambda w, dt: w.op("SQUEEZE", [w.const(_x([1, 3, 1, 2], dt))], [3, 2], "SqueezeOptions",
                                  out_dtype=dt, squeeze_dims=[0, 2]),
    "expand_dims": lambda w, dt: w.op("EXPAND_DIMS", [w.const(_x([3, 2], dt)), w.scalar(-1, I32)], [3, 2, 1],
                                      out_dtype=dt),
    "gather_axis0": lambda w, dt: w.op("GATHER", [w.const(_x([4, 3], dt)), w.const(np.array([[3, 0], [1, 1]], I32))],
                                       [2, 2, 3], "GatherOptions", out_dtype=dt, axis=0),
    "gather_axis_last": lambda w, dt: w.op("GATHER", [w.const(_x([4, 3], dt)), w.const(np.array([2, 0], dt))],
                                           [4, 2], "GatherOptions", out_dtype=dt, axis=-1),
    "transpose": lambda w, dt: w.op("TRANSPOSE", [w.const(_x([2, 3, 4], dt)), w.const(np.array([2, 0, 1], I32))],
                                    [4, 2, 3], out_dtype=dt),
    "cast_int": lambda w, dt: w.op("CAST", [w.const(_x([2, 3], I64 if dt == I32 else I32))], [2, 3], out_dtype=dt),
    "cast_float": lambda w, dt: w.op("CAST", [w.const(np.array([1.0, -2.5, 3.75, -0.5, 7e5], np.float32))], [5],
                                     out_dtype=dt),
    "add": _binary("ADD", [[1, -2, 3], [4, 5, -6]], [10, 20, 30], [2, 3], "AddOptions", fused_activation_function=NONE),
    "sub": _binary("SUB", [[1, -2, 3], [4, 5, -6]], [10, 20, 30], [2, 3], "SubOptions", fused_activation_function=NONE),
    "mul": _binary("MUL", [[1, -2, 3], [4, 5, -6]], [10, -20, 30], [2, 3], "MulOptions", fused_activation_function=NONE),
    "floor_div": _binary("FLOOR_DIV", [7, -7, 7, -7, 6], [2, 2, -2, -2, 3], [5]),
    "floor_mod": _binary("FLOOR_MOD", [7, -7, 7, -7, 6], [2, 2, -2, -2, 3], [5]),
    "maximum": _binary("MAXIMUM", [[1, -2, 3], [4, 5, -6]], [2, 0, 3], [2, 3]),
    "minimum": _binary("MINIMUM", [[1, -2, 3], [4, 5, -6]], [2], [2, 3]),
    "reduce_prod": _reduce("REDUCE_PROD", [-1, 0], True),
    "sum": _reduce("SUM", [0, 2], False),
    "reduce_max": _reduce("REDUCE_MAX", [2, -3, 2], False),
    "reduce_min": _reduce("REDUCE_MIN", [0, -1], True),
    "fill": lambda w, dt: w.op("FILL", [w.const(np.array([2, 3], dt)), w.scalar(-7, dt)], [2, 3], out_dtype=dt),
    "tile": lambda w, dt: w.op("TILE", [w.const(_x([1, 3], dt)), w.const(np.array([2, 2], dt))], [2, 6], out_dtype=dt),
    "split": lambda w, dt: w.multi_op("SPLIT", [w.scalar(-1, I32), w.const(_x([2, 6], dt))], [[2, 2]] * 3,
                                      "SplitOptions", out_dtype=dt, num_splits=3)[1],
    "split_v": lambda w, dt: w.multi_op("SPLIT_V", [w.const(_x([5, 2], dt)), w.const(np.array([1, -1, 2], I32)),
                                                    w.scalar(0, I32)], [[1, 2], [2, 2], [2, 2]], "SplitVOptions",
                                        out_dtype=dt, num_splits=3)[1],
    # BirdNET's RESHAPE to a scalar reads its shape from an empty tensor nothing writes
    "reshape_empty_shape": lambda w, dt: w.op("RESHAPE", [w.const(_x([1], dt)), w._tensor("shape", [0], I32)], [],
                                              out_dtype=dt),
    "broadcast_to": lambda w, dt: w.op("BROADCAST_TO", [w.const(_x([3], dt)), w.const(np.array([2, 3], dt))], [2, 3],
                                       out_dtype=dt),
}


@pytest.mark.parametrize("dt", [I32, I64])
@pytest.mark.parametrize("name", CASES)
def test_fold_matches_litert(name, dt):
    if (name, dt) in NO_KERNEL:
        pytest.skip(f"LiteRT has no {np.dtype(dt)} kernel for it")
    w = Writer()
    folded = CASES[name](w, dt)
    shape = w.tensors[folded][1]
    r = w.input("r", shape, dt)
    w.output(w.op("ADD", [folded, r], shape, "AddOptions", out_dtype=dt, fused_activation_function=NONE))
    m = check(w, {"r": _x(shape, dt, lo=100)}, rtol=0, atol=0)
    assert ops(m) == ["Add"]  # only the ADD reading the graph input is a node


def test_float_ops_of_constants_stay_nodes():
    """EXP is not folded (nor float arithmetic, whose rounding is the runtime's)."""
    w = Writer()
    e = w.op("EXP", [w.const(f32(2, 3))], [2, 3])
    s = w.op("ADD", [e, w.const(f32(2, 3))], [2, 3], "AddOptions", fused_activation_function=NONE)
    r = w.input("r", [2, 3])
    w.output(w.op("ADD", [s, r], [2, 3], "AddOptions", fused_activation_function=NONE))
    m = check(w, {"r": f32(2, 3)})
    assert ops(m) == ["Exp", "Add", "Add"]
