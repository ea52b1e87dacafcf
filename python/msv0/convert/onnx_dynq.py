"""Dynamically quantized ONNX (onnxruntime's quantize_dynamic) -> fp32 v0 ops that give ONNX
Runtime's numbers.

DynamicQuantizeLinear becomes Reduce min/max, Div and a clamp in fp32, rounding half to even with
the 1.5·2^23 add-subtract (v0's Round rounds half away from zero). Its uint8 result stays an fp32
tensor of integers where only ConvInteger/MatMulInteger read it (else a QuantDTypeCast makes it
uint8: v0's Cast has no float -> uint8). Those two run as fp32 Conv/MatMul on the
zero-point-shifted integers, exact while every sum stays below 2^24 (a Winograd 3x3 convolution
rounds its transforms, ~1e-7 relative). Their int32 result stays fp32 when only float Casts read it.
DequantizeLinear on constant weights becomes an fp32 constant (onnx's reference evaluator, which
load_graph folds with, has no DequantizeLinear before opset 19).
com.microsoft.DynamicQuantizeLSTM runs as the v0 Lstm with dequantized weights, so its inputs and
hidden states are not requantized as ONNX Runtime does (README, converter: the error that gives).
A DequantizeLinear of a Gather from a constant table (quantize_dynamic's embedding lookups) reads
a table dequantized once instead (dequantized_tables).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from msv0 import dtypes
from msv0.convert.emit import Unsupported, Val
from msv0.convert.onnx_ctx import HANDLERS, Ctx, axis_index, emit_binary, handles
from msv0.dynamic_quant import ROUND_MAGIC
from msv0.errors import ModelError
from msv0.fb.ActivationType import ActivationType
from msv0.fb.ReduceMode import ReduceMode

F32 = np.dtype(np.float32)
INTEGER_OPS = {"ConvInteger": "Conv", "MatMulInteger": "MatMul"}


# Ops that move data without reading it: a per-tensor DequantizeLinear after them equals one before.
MOVES = {"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"}


def dequantized_tables(g) -> None:
    """In the onnx GraphProto g: a Gather from a constant integer table whose every reader, through
    MOVES, is a per-tensor DequantizeLinear with the same params reads the table dequantized once,
    and those DequantizeLinears become Identities. Exact (the dequantization is elementwise,
    (q − zp)·scale in float32 either way); v0's Gather takes no uint8 data, and the
    DequantizeLinear no run-time input."""
    from onnx import numpy_helper
    inits = {t.name: t for t in g.initializer}
    readers: dict[str, list] = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    outputs = {o.name for o in g.output}

    def _array(t):  # an initializer whose data does not fill its dims is the model's error
        try:
            return numpy_helper.to_array(t)
        except ValueError as err:
            raise ModelError(f"initializer '{t.name}': {err}") from err

    def params(n):
        if n.op_type != "DequantizeLinear" or n.domain not in ("", "ai.onnx") or len(n.input) < 2:
            return None
        scale, zp = n.input[1], n.input[2] if len(n.input) > 2 else ""
        if scale not in inits or zp and zp not in inits:
            return None
        s = _array(inits[scale])
        z = _array(inits[zp]) if zp else np.zeros(1, np.int64)
        return (float(s.reshape(-1)[0]), int(z.reshape(-1)[0])) if s.size == 1 and z.size == 1 else None

    for p in g.node:
        if p.op_type != "Gather" or p.input[0] not in inits:
            continue
        table = _array(inits[p.input[0]])
        if table.dtype.kind not in "iu":
            continue
        dqs, todo, ok = [], [p.output[0]], True
        while todo and ok:
            t = todo.pop()
            ok = t not in outputs
            for r in readers.get(t, []):
                if r.op_type in MOVES and r.input[0] == t:
                    todo.append(r.output[0])
                elif r.input[0] == t and params(r) is not None:
                    dqs.append(r)
                else:
                    ok = False
        if not ok or not dqs or len({params(n) for n in dqs}) != 1:
            continue
        scale, zp = params(dqs[0])
        name = p.input[0] + "/dequantized"
        f = (table.astype(F32) - F32.type(zp)) * F32.type(scale)
        g.initializer.append(numpy_helper.from_array(f.astype(F32), name))
        p.input[0] = name
        for n in dqs:
            n.op_type = "Identity"
            del n.input[1:]
            del n.attribute[:]


def _readers(c: Ctx, k: int) -> list[str]:
    """What reads output k: the ops of its consumer nodes, 'graph output' if it is one."""
    name = c.node.outputs[k] if k < len(c.node.outputs) else ""
    if not name:
        return []
    ops = [n.op for n in c.graph.nodes if name in n.inputs]
    return ops + (["graph output"] if name in c.graph.outputs else [])


def _scalar(value: float) -> Val:
    return Val((1,), F32, const=np.array([value], F32))


def _round_half_even(c: Ctx, v: Val) -> Val:
    # Not onnx_unary.round_half_even (8 ops, any float): exact on these |v| <= 255 in 2 ops, and the
    # steps dynamic_quant.QUANTIZE_FORM matches to run the int8 kernels.
    v = emit_binary(c, "Add", v, _scalar(ROUND_MAGIC), v.shape, F32)
    return emit_binary(c, "Sub", v, _scalar(ROUND_MAGIC), v.shape, F32)


def _clamp(c: Ctx, v: Val, lo: float, hi: float) -> Val:
    return c.op("Activation", [v], v.shape, F32, v.nhwc, type=ActivationType.HARD_TANH, minVal=lo, maxVal=hi)


@handles("DynamicQuantizeLinear")
def dynamic_quantize_linear(c: Ctx):
    x = c.inp(0)
    if x.dtype != F32:
        raise Unsupported("DynamicQuantizeLinear on non-float32 input")
    zero = _scalar(0.0)

    def whole(mode, bound):  # min or max over the whole tensor, with 0 included as ONNX asks
        r = c.op("Reduce", [x], (), F32, axes=list(range(len(x.shape))), keepDims=False, mode=mode)
        return emit_binary(c, bound, r, zero, (1,), F32)

    lo, hi = whole(ReduceMode.ReduceMin, "Minimum"), whole(ReduceMode.ReduceMax, "Maximum")
    scale = emit_binary(c, "Div", emit_binary(c, "Sub", hi, lo, (1,), F32), _scalar(255.0), (1,), F32)
    # An all-zero tensor has range 0: ONNX Runtime then uses scale 1 (every value quantizes to 0).
    empty = c.op("Cast", [emit_binary(c, "Equal", scale, zero, (1,), np.bool_)], (1,), F32,
                 srcT=dtypes.type_id(np.bool_), dstT=dtypes.type_id(F32))
    scale = emit_binary(c, "Add", scale, empty, (1,), F32)
    zp = emit_binary(c, "Sub", zero, emit_binary(c, "Div", lo, scale, (1,), F32), (1,), F32)
    zp = _round_half_even(c, _clamp(c, zp, 0.0, 255.0))
    y = _round_half_even(c, emit_binary(c, "Div", x, scale, x.shape, F32))
    y = _clamp(c, emit_binary(c, "Add", y, zp, x.shape, F32), 0.0, 255.0)
    c.set(0, _uint8_if_read(c, 0, y))
    c.set(1, c.op("Reshape", [scale], (), F32, shape=[]))  # ONNX's scale is rank 0
    c.set(2, _uint8_if_read(c, 2, c.op("Reshape", [zp], (), F32, shape=[])))


def _uint8_if_read(c: Ctx, k: int, v: Val) -> Val:
    """v (fp32 integers in [0, 255]) as uint8 when something other than ConvInteger/MatMulInteger
    reads output k: QuantDTypeCast with scale 1 and zero point 0 is exact on such values."""
    if all(r in INTEGER_OPS for r in _readers(c, k)):
        return v
    out = Val(v.shape, np.dtype(np.uint8), nhwc=v.nhwc)
    out.index = c.e.b.tensor(c.sub("uint8_"), np.uint8, v.stored_shape,
                             quant=[dict(scale=1.0, zeroPoint=0, inited=True)])
    c.e.b.node("QuantDTypeCast", [c.e.index(v)], outputs=[out.index], name=c.sub("QuantDTypeCast_"),
               srcT=dtypes.type_id(F32), dstT=dtypes.type_id(np.uint8))
    return out


def _as_float(c: Ctx, v: Val) -> Val:
    if v.dtype == np.uint8:
        return c.op("Cast", [v], v.shape, F32, v.nhwc, srcT=dtypes.type_id(v.dtype), dstT=dtypes.type_id(F32))
    if v.dtype != F32:  # int8 computed at run time: r1.1's Cast cannot widen it
        raise Unsupported(f"a run-time {v.dtype} operand (v0 Cast has no {v.dtype} -> float)")
    return v


def _shifted(c: Ctx, k: int, zp_k: int) -> Val:
    """Input k minus its zero point (input zp_k), in fp32."""
    v, zp = c.inp(k), c.inp(zp_k)
    if v.const is not None and (zp is None or zp.const is not None):
        q = v.const.astype(np.float32)
        if zp is not None:
            # per channel: Conv's output channels (axis 0), MatMul's rows of A or columns of B
            shape = (-1,) + (1,) * (q.ndim - 1) if c.node.op == "ConvInteger" else (-1, 1) if k == 0 else (-1,)
            q = q - zp.const.astype(np.float32).reshape(shape if zp.const.size > 1 else ())
        return Val(q.shape, F32, const=q)
    v = _as_float(c, v)
    if zp is None:
        return v
    if zp.const is not None:
        if zp.const.size > 1:
            raise Unsupported("a per-channel zero point on the run-time operand")
        zp = _scalar(float(zp.const.reshape(-1)[0]))
    return emit_binary(c, "Sub", v, _as_float(c, zp), v.shape, F32)


@handles(*INTEGER_OPS)
def integer_op(c: Ctx):
    """The float op on shifted operands, run through that op's own handler."""
    a, b = _shifted(c, 0, 2), _shifted(c, 1, 3)
    out = c.node.outputs[0]
    names = [f"{c.name}/a_shifted", f"{c.name}/b_shifted", f"{out}/as_float"]
    c.vals[names[0]], c.vals[names[1]] = a, b
    shape, _ = c.out()
    c.graph.shapes[names[2]] = (shape, F32)
    float_node = dataclasses.replace(c.node, op=INTEGER_OPS[c.node.op], inputs=names[:2], outputs=names[2:])
    HANDLERS[float_node.op](Ctx(c.e, c.graph, c.vals, float_node))
    y = c.vals[names[2]]
    readers = [n for n in c.graph.nodes if out in n.inputs]
    read_as_float = out not in c.graph.outputs and readers and all(
        n.op == "Cast" and n.attrs.get("to") == 1 for n in readers)  # 1: TensorProto.FLOAT
    if not read_as_float:
        y = c.op("Cast", [y], shape, np.int32, y.nhwc, srcT=dtypes.type_id(F32), dstT=dtypes.type_id(np.int32))
    c.set(0, y)


@handles("DequantizeLinear")
def dequantize_constant(c: Ctx):
    q = c.const(0, "the quantized tensor (only constant weights are dequantized)")
    scale, zp = c.const(1, "the scale"), c.const(2, "the zero point")
    if c.attr("block_size", 0):
        raise Unsupported("blocked dequantization (block_size)")
    shape = (1,) * q.ndim
    if scale.size > 1:  # per-axis
        axis = axis_index(c.attr("axis", 1), q.ndim)
        shape = tuple(-1 if k == axis else 1 for k in range(q.ndim))
    w = q.astype(np.float32)
    if zp is not None:
        w = w - zp.astype(np.float32).reshape(shape)
    w = (w * scale.astype(np.float32).reshape(shape)).astype(c.out()[1])
    c.set(0, Val.of(w))
