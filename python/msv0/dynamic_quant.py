"""ONNX Runtime's dynamic quantization (quantize_dynamic), which v0 has no ops for: the float32
steps the converter lowers DynamicQuantizeLinear, MatMulInteger and ConvInteger to
(convert/onnx_dynq.py), and the plan-time passes that run them natively.

The converter computes x's uint8 codes xq, their zero point zp and scale in nineteen float32
steps (QUANTIZE_FORM), then Mul(FullConnection(Sub(xq, zp), W), scale·W_scale) (or Conv2D) with
W's integer values as float32 weights: a float32 GEMM where ONNX Runtime multiplies int8, most
often followed by an Add of a bias.

- fuse_dynamic_quantize puts one _core.DynamicQuantize step (two passes over x) in place of the
  nineteen, computing the same float32 operations in the same order: their scale, zero point and
  codes, bit for bit.
- fuse_integer_ops finds the product's steps where xq and zp are integers in [0, 255] by
  construction (clamps to [0, 255] of values rounded by ROUND_MAGIC) and W's rows fit int8 (with a
  zero point of their own), and puts one _core.GemmS8Dynamic or Conv2dS8Dynamic step in their
  place: int8 products, int32 sums, scaled to float32 and offset by the bias. That is the float
  steps' own result wherever their sums are exact (every partial sum below 2^24) and ONNX
  Runtime's everywhere.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from msv0 import _core, dtypes, forms
from msv0.fb.ActivationType import ActivationType
from msv0.fb.ReduceMode import ReduceMode
from msv0.ops.conv import conv_window
from msv0.registry import Plan, activation_range

# 1.5·2^23: float32 v + M − M is v rounded half to even (|v| < 2^22), an integer for every v.
ROUND_MAGIC = 12582912.0
F32 = np.dtype(np.float32)
# The activations a bias Add may carry into the kernel: its clamp.
_CLAMPS = (ActivationType.NO_ACTIVATION, ActivationType.RELU, ActivationType.RELU6)


# The converter's DynamicQuantizeLinear (onnx_dynq.dynamic_quantize_linear), a form as msv0.forms
# reads it; _is_form_op says what each entry's attributes must be. Outputs: scale (8), zero point
# (13), codes (18).
QUANTIZE_FORM = [
    ("Reduce", "x"), ("Minimum", 0, 0.0), ("Reduce", "x"), ("Maximum", 2, 0.0), ("Sub", 3, 1), ("Div", 4, 255.0),
    ("Equal", 5, 0.0), ("Cast", 6), ("Add", 5, 7), ("Div", 1, 8), ("Sub", 0.0, 9), ("Activation", 10),
    ("Add", 11, ROUND_MAGIC), ("Sub", 12, ROUND_MAGIC), ("Div", "x", 8), ("Add", 14, ROUND_MAGIC),
    ("Sub", 15, ROUND_MAGIC), ("Add", 16, 13), ("Activation", 17),
]
QUANTIZE_OUTPUTS = (8, 13, 18)


def profile_op(ops: str) -> str:
    """A step's op types joined by '+' with QUANTIZE_FORM's run named DynamicQuantizeLinear."""
    return ops.replace("+".join(op for op, *_ in QUANTIZE_FORM), "DynamicQuantizeLinear")


def _is_form_op(node, k: int, op: str) -> bool:
    """Whether node may stand for QUANTIZE_FORM's entry k (op): the attributes it must have."""
    a = node.attrs
    if node.op != op:
        return False
    if op == "Reduce":  # over every axis, checked once x is known
        mode = ReduceMode.ReduceMin if k == 0 else ReduceMode.ReduceMax
        kind = (a.get("mode"), bool(a.get("keepDims")), a.get("coeff"), bool(a.get("reduceToEnd")))
        return kind == (mode, False, 1.0, False)
    if op == "Cast":
        return (a.get("srcT"), a.get("dstT")) == (dtypes.type_id(np.bool_), dtypes.type_id(np.float32))
    if op == "Activation":
        return _code_clamp(node)
    return op in ("Equal", "Minimum", "Maximum") or _plain(node, op)


def _quantize_match(model, values, start: int) -> tuple[int, list[int], list[int]] | None:
    """(x, each entry's output, the nodes) where model.nodes[start:] begin with QUANTIZE_FORM on a
    float32 x, else None."""
    found = forms.match(model, values, start, QUANTIZE_FORM, _is_form_op)
    if found is None:
        return None
    axes = tuple(range(len(values[found[0]].shape)))
    return found if all(tuple(model.nodes[i].attrs.get("axes") or ()) == axes for i in found[2][0:3:2]) else None


def fuse_dynamic_quantize(model, planned: list, uses: dict[int, int], values: dict) -> list:
    """planned and uses as for fuse_integer_ops. Returns the steps with each lowered
    DynamicQuantizeLinear whose intermediates nothing else reads as one DynamicQuantize step in
    the place of its last, where no other step reads its outputs before that."""
    step_of = {n: j for j, (nodes, _, _, _) in enumerate(planned) for n in nodes}
    replaced: dict[int, tuple] = {}
    dropped: set[int] = set()
    start = 0
    while start < len(model.nodes):
        found = _quantize_match(model, values, start)
        start += 1
        if found is None:
            continue
        x, entry_outs, ids = found
        steps = [step_of.get(i, -1) for i in ids]
        if -1 in steps or any(tuple(planned[j][0]) != (i,) for j, i in zip(steps, ids)):
            continue
        outs = [entry_outs[k] for k in QUANTIZE_OUTPUTS]
        inner = {model.nodes[i].outputs[0] for i in ids} - set(outs)
        earlier = {t for j, (_, _, ins, _) in enumerate(planned) if j < steps[-1] and j not in steps for t in ins}
        if any(uses.get(t, 0) != sum(t in planned[j][2] for j in steps) for t in inner) or earlier & set(outs):
            continue
        for t in outs:
            uses[t] -= sum(t in planned[j][2] for j in steps)
        uses[x] -= sum(t == x for j in steps for t in planned[j][2]) - 1  # the fused step reads x once
        kernel = _core.DynamicQuantize(values[x].shape, values[outs[0]].shape, values[outs[1]].shape)
        plan = Plan([(values[t].shape, F32) for t in outs], kernel=kernel)
        replaced[steps[-1]] = (tuple(ids), plan, [x], outs)
        dropped.update(steps[:-1])
        start = ids[-1] + 1
    return [replaced.get(j, step) for j, step in enumerate(planned) if j not in dropped]


def _plain(node, op: str) -> bool:
    act = node.attrs.get("activationType", ActivationType.NO_ACTIVATION)
    return node.op == op and act == ActivationType.NO_ACTIVATION


def _code_clamp(node) -> bool:
    """Whether node is an Activation HARD_TANH to [0, 255]: the converter's clamp of uint8 codes."""
    a = node.attrs
    kind = (a.get("type"), a.get("minVal"), a.get("maxVal"))
    return node.op == "Activation" and kind == (ActivationType.HARD_TANH, 0, 255)


def _scalar(values, t: int, x: float) -> bool:
    v = values.get(t)
    return v is not None and v.const is not None and v.const.size == 1 and v.const.reshape(-1)[0] == np.float32(x)


class _Graph:
    """The planned nodes by the tensor each produces, and the matcher's questions about them. Only
    planned nodes: values knows their tensors, and no other node runs in this plan."""

    def __init__(self, nodes: list, values):
        self.values = values
        self.producer = {t: node for node in nodes for t in node.outputs}
        self.readers: dict[int, list] = {}
        for node in nodes:
            for t in set(node.inputs):
                self.readers.setdefault(t, []).append(node)

    def made_by(self, t: int, op: str):
        node = self.producer.get(t)
        return node if node is not None and _plain(node, op) and len(node.outputs) == 1 else None

    def rounded(self, t: int) -> int | None:
        """v where t = Sub(Add(v, ROUND_MAGIC), ROUND_MAGIC), else None."""
        sub = self.made_by(t, "Sub")
        add = sub and _scalar(self.values, sub.inputs[1], ROUND_MAGIC) and self.made_by(sub.inputs[0], "Add")
        return add.inputs[0] if add and _scalar(self.values, add.inputs[1], ROUND_MAGIC) else None

    def clamped(self, t: int) -> int | None:
        """v where t = Activation HARD_TANH(v) to [0, 255], else None."""
        node = self.producer.get(t)
        return node.inputs[0] if node is not None and _code_clamp(node) and len(node.inputs) == 1 else None

    def zero_point(self, t: int) -> bool:
        """Whether t is one integer in [0, 255]: a rounded clamp to [0, 255] (DynamicQuantizeLinear's
        zero point), reshaped or not."""
        if self.values[t].size != 1:
            return False
        reshape = self.producer.get(t)
        if reshape is not None and reshape.op == "Reshape":
            t = reshape.inputs[0]
        v = self.rounded(t)
        return v is not None and self.clamped(v) is not None

    def codes(self, t: int) -> bool:
        """Whether t holds integers in [0, 255]: a clamp to [0, 255] of a rounded value plus a zero
        point (DynamicQuantizeLinear's output)."""
        v = self.clamped(t)
        add = self.made_by(v, "Add") if v is not None else None
        return add is not None and self.rounded(add.inputs[0]) is not None and self.zero_point(add.inputs[1])


def _int8_weight(w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
    """A constant float32 [n, k] of integers as (int8 B, int32 b_zp) with B − b_zp equal to it:
    b_zp 0 where a row fits int8, else the row shifted into int8 (uint8 weights minus their zero
    point span up to 255). None where the values are not integers or a row fits no shift."""
    if w is None or w.dtype != F32 or w.ndim != 2 or not np.all(np.isfinite(w) & (w == np.round(w))):
        return None
    lo, hi = w.min(axis=1, initial=0), w.max(axis=1, initial=0)
    shift = np.where(hi > 127, hi - 127, np.minimum(lo + 128, 0))
    if np.any(hi - lo > 255) or np.any((shift < -127) | (shift > 128)):  # b_zp = −shift is int8 too
        return None
    return (w - shift[:, None]).astype(np.int8), -shift.astype(np.int32)


def _reader(g: _Graph, t: int, op: str, arity: int):
    """The one node reading t if it is a plain `op` of `arity` inputs reading t once, else None."""
    readers = g.readers.get(t, [])
    r = readers[0] if len(readers) == 1 else None
    ok = r is not None and _plain(r, op) and len(r.inputs) == arity and len(r.outputs) == 1
    return r if ok and list(r.inputs).count(t) == 1 else None


def _cast(g: _Graph, t: int, src, dst):
    """The one reader of t if it is a Cast from src to dst, else None."""
    cast = _reader(g, t, "Cast", 1)
    a = cast.attrs if cast is not None else {}
    return cast if (a.get("srcT"), a.get("dstT")) == (dtypes.type_id(src), dtypes.type_id(dst)) else None


def _per_channel(g: _Graph, t: int, n: int, dtype) -> bool:
    """Whether t is `dtype` with one value, or n along its last axis (broadcasting over the rest)."""
    v = g.values[t]
    return v.dtype == dtype and (v.size == 1 or (v.size == n and v.shape[-1:] == (n,)))


@dataclasses.dataclass
class _Found:
    nodes: list  # the lowered steps' nodes, in order
    inputs: list[int]  # xq, zp, scale, then the run-time int32 bias if any
    output: int
    weight: tuple[np.ndarray, np.ndarray]  # int8 [n, ...] and its int32 zero points
    bias: int | None  # the constant float32 bias added last
    reshape: object = None  # a Reshape of the codes between Sub and Conv2D, kept on xq itself
    clamp: tuple[float, float] = (-np.inf, np.inf)  # the bias Add's ReLU or ReLU6


def _match(g: _Graph, node) -> _Found | None:
    """The lowered quantized FullConnection or Conv2D `node`, else None. After the product:
    Mul(scale), then an optional Add of a constant float32 bias, or (older quantize_dynamic)
    Cast to int32, Add of an int32 bias computed at run time, Cast to float32, Mul(scale)."""
    if node.op not in ("FullConnection", "Conv2D") or not _plain(node, node.op) or len(node.inputs) != 2:
        return None
    x, reshape = node.inputs[0], None
    if node.op == "Conv2D" and g.producer.get(x) is not None and g.producer[x].op == "Reshape":
        reshape, x = g.producer[x], g.producer[x].inputs[0]
        if _reader(g, x, "Reshape", len(reshape.inputs)) is not reshape:
            return None
    sub = g.made_by(x, "Sub")
    if sub is None or not g.codes(sub.inputs[0]) or not g.zero_point(sub.inputs[1]) \
            or g.values[sub.outputs[0]].shape != g.values[sub.inputs[0]].shape:
        return None
    w = g.values[node.inputs[1]]  # read last: a float model's weights are not scanned
    weight = _int8_weight(w.const.reshape(w.shape[0], -1) if w.const is not None and w.const.ndim > 1 else None)
    if weight is None:
        return None
    n, shape = w.shape[0], g.values[node.outputs[0]].shape
    nodes, ins, t = [sub] + ([reshape] if reshape else []) + [node], [sub.inputs[0], sub.inputs[1]], node.outputs[0]
    run_bias = None
    to_int = _cast(g, t, np.float32, np.int32)
    if to_int is not None:
        add = _reader(g, to_int.outputs[0], "Add", 2)
        run_bias = add and next(k for k in add.inputs if k != to_int.outputs[0])
        to_float = add and _cast(g, add.outputs[0], np.int32, np.float32)
        if not to_float or g.values[run_bias].const is not None or not _per_channel(g, run_bias, n, np.int32) \
                or g.values[add.outputs[0]].shape != shape:
            return None
        nodes, t = nodes + [to_int, add, to_float], to_float.outputs[0]
    mul = _reader(g, t, "Mul", 2)
    scale = mul and next(k for k in mul.inputs if k != t)
    if mul is None or g.values[mul.outputs[0]].shape != shape or not _per_channel(g, scale, n, F32):
        return None
    nodes, ins = nodes + [mul], ins + [scale] + ([run_bias] if run_bias is not None else [])
    readers = g.readers.get(mul.outputs[0], [])
    add = readers[0] if len(readers) == 1 and readers[0].op == "Add" and len(readers[0].inputs) == 2 else None
    bias = add and next((k for k in add.inputs if k != mul.outputs[0]), None)
    if (not add or bias is None or add.attrs.get("activationType", 0) not in _CLAMPS or g.values[bias].const is None
            or not _per_channel(g, bias, n, F32) or g.values[bias].size != n or g.values[add.outputs[0]].shape != shape):
        return _Found(nodes, ins, mul.outputs[0], weight, None, reshape)
    clamp = activation_range(add.attrs.get("activationType", ActivationType.NO_ACTIVATION))
    return _Found(nodes + [add], ins, add.outputs[0], weight, bias, reshape, clamp)


def _kernel(node, found: _Found, values) -> object:
    """The native step of a match: GemmS8Dynamic or Conv2dS8Dynamic."""
    (w, w_zp), shapes = found.weight, [values[t].shape for t in found.inputs]
    bias = values[found.bias].const.reshape(-1) if found.bias is not None else None
    if node.op == "FullConnection":
        return _core.GemmS8Dynamic(w, w_zp, bias, *shapes[:3], values[found.output].shape, *found.clamp)
    x_shape = values[node.inputs[0]].shape
    weight = w.reshape(values[node.inputs[1]].shape)
    win = conv_window(node, x_shape, weight.shape)
    return _core.Conv2dS8Dynamic(weight, w_zp, bias, win.group, win.sh, win.sw, win.dh, win.dw, win.pt, win.pl,
                                 x_shape, shapes[1], shapes[2], shapes[3] if len(shapes) > 3 else None,
                                 values[found.output].shape, *found.clamp)


def fuse_integer_ops(model, planned: list, uses: dict[int, int], values: dict) -> list:
    """planned: the (nodes, Plan, inputs, outputs) steps; uses: reads of each tensor, graph
    outputs counted (updated here). Returns the steps with each lowered quantized FullConnection
    or Conv2D, whose intermediates nothing else reads, as one native step in the place of its last;
    a Reshape between the codes' Sub and the Conv2D stays, reading the codes."""
    step_of = {n: j for j, (nodes, _, _, _) in enumerate(planned) for n in nodes}
    nodes = [model.nodes[n] for n in sorted(step_of)]
    g = _Graph(nodes, values)
    replaced: dict[int, tuple] = {}
    dropped: set[int] = set()
    for node in nodes:
        found = _match(g, node)
        if found is None:
            continue
        ids = [n.index for n in found.nodes]
        steps = [step_of.get(i, -1) for i in ids]
        if -1 in steps or any(tuple(planned[j][0]) != (i,) for j, i in zip(steps, ids)) \
                or any(uses.get(n.outputs[0], 0) != 1 for n in found.nodes[:-1]):
            continue
        for t in [node.inputs[1]] + ([found.bias] if found.bias is not None else []):
            uses[t] -= 1  # W and the float bias, now in the kernel
        ins = list(found.inputs)
        if found.reshape is not None:  # the Reshape now reads the codes, and the kernel its output
            j = step_of[found.reshape.index]
            replaced[j] = (planned[j][0], planned[j][1], [ins[0]], planned[j][3])
            ins[0] = found.reshape.outputs[0]
            steps.remove(j)
            ids.remove(found.reshape.index)
        plan = Plan([(values[found.output].shape, F32)], kernel=_kernel(node, found, values))
        replaced[steps[-1]] = (tuple(ids), plan, ins, [found.output])
        dropped.update(steps[:-1])
    return [replaced.get(j, step) for j, step in enumerate(planned) if j not in dropped]
