"""ONNX Runtime's dynamic quantization (quantize_dynamic), which v0 has no ops for: the float32
steps the converter lowers DynamicQuantizeLinear + MatMulInteger to (convert/onnx_dynq.py), and
the plan-time pass that runs each quantized FullConnection as an int8 GEMM.

The converter computes x's uint8 codes xq, their zero point zp and scale in float32 steps, then
Mul(FullConnection(Sub(xq, zp), W), scale·W_scale) with W's int8 values as float32 weights: a
float32 GEMM where ONNX Runtime multiplies int8, then most often an Add of a bias. fuse_dynamic_fc
finds those steps where xq and zp are integers in [0, 255] by construction (clamps to [0, 255] of
values rounded by ROUND_MAGIC) and W's values are int8, and puts one _core.GemmS8Dynamic step in
their place: int8 products, int32 sums, scaled to float32 and offset by the bias. That is the
float steps' own result wherever their sums are exact (every partial sum below 2^24) and ONNX
Runtime's everywhere.
"""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.fb.ActivationType import ActivationType
from msv0.registry import Plan

# 1.5·2^23: float32 v + M − M is v rounded half to even (|v| < 2^22), an integer for every v.
ROUND_MAGIC = 12582912.0
F32 = np.dtype(np.float32)


def _plain(node, op: str) -> bool:
    return node.op == op and node.attrs.get("activationType", ActivationType.NO_ACTIVATION) == ActivationType.NO_ACTIVATION


def _scalar(values, t: int, x: float) -> bool:
    v = values.get(t)
    return v is not None and v.const is not None and v.const.size == 1 and v.const.reshape(-1)[0] == np.float32(x)


class _Graph:
    """The model's nodes by the tensor each produces, and the matcher's questions about them."""

    def __init__(self, model, values):
        self.nodes, self.values = model.nodes, values
        self.producer = {t: node for node in model.nodes for t in node.outputs}

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
        if node is None or node.op != "Activation" or len(node.inputs) != 1:
            return None
        a = node.attrs
        return node.inputs[0] if (a.get("type"), a.get("minVal"), a.get("maxVal")) == (ActivationType.HARD_TANH, 0, 255) else None

    def zero_point(self, t: int) -> bool:
        """Whether t is an integer in [0, 255]: a rounded clamp to [0, 255] (DynamicQuantizeLinear's
        zero point), reshaped or not."""
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


def _int8_weight(values, t: int) -> np.ndarray | None:
    v = values.get(t)
    w = v.const if v is not None else None
    if w is None or w.dtype != F32 or w.ndim != 2 or not np.all((w >= -128) & (w <= 127) & (w == np.round(w))):
        return None
    return w.astype(np.int8)


def _only_reader(g: _Graph, t: int, op: str):
    """The one node reading t if it is a plain binary `op` with t as one operand, else None."""
    readers = [n for n in g.nodes if t in n.inputs]
    ok = len(readers) == 1 and _plain(readers[0], op) and len(readers[0].inputs) == 2 and len(readers[0].outputs) == 1
    return readers[0] if ok and list(readers[0].inputs).count(t) == 1 else None


def _bias(g: _Graph, add, t: int, n: int) -> np.ndarray | None:
    """The constant float32 [n] that Add node `add` adds to t, else None."""
    other = g.values[next(k for k in add.inputs if k != t)]
    return other.const.reshape(-1) if other.const is not None and other.dtype == F32 and other.shape in ((n,), (1, n)) else None


def _match(g: _Graph, fc) -> tuple[list, list[int], int, np.ndarray, np.ndarray | None] | None:
    """(nodes, inputs [xq, zp, scale], output, W as int8, bias or None) of the lowered quantized
    FullConnection `fc`, else None."""
    if not _plain(fc, "FullConnection") or len(fc.inputs) != 2 or len(fc.outputs) != 1:
        return None
    sub = g.made_by(fc.inputs[0], "Sub")
    w = _int8_weight(g.values, fc.inputs[1])
    if sub is None or w is None or not g.codes(sub.inputs[0]) or not g.zero_point(sub.inputs[1]):
        return None
    mul = _only_reader(g, fc.outputs[0], "Mul")
    if mul is None:
        return None
    shape, n = g.values[fc.outputs[0]].shape, w.shape[0]
    scale = next(t for t in mul.inputs if t != fc.outputs[0])
    if (g.values[mul.outputs[0]].shape != shape or g.values[scale].dtype != F32
            or g.values[scale].shape not in ((), (1,), (n,)) or g.values[sub.outputs[0]].shape != g.values[sub.inputs[0]].shape):
        return None
    nodes, ins = [sub, fc, mul], [sub.inputs[0], sub.inputs[1], scale]
    add = _only_reader(g, mul.outputs[0], "Add")
    bias = _bias(g, add, mul.outputs[0], n) if add is not None else None
    if bias is None or g.values[add.outputs[0]].shape != shape:
        return nodes, ins, mul.outputs[0], w, None
    return nodes + [add], ins, add.outputs[0], w, bias


def fuse_dynamic_fc(model, planned: list, uses: dict[int, int], values: dict) -> list:
    """planned: the (nodes, Plan, inputs, outputs) steps; uses: reads of each tensor, graph
    outputs counted (updated here). Returns the steps with each lowered quantized FullConnection,
    whose intermediates nothing else reads, as one GemmS8Dynamic step in the place of its Mul."""
    g = _Graph(model, values)
    step_of = {n: j for j, (nodes, _, _, _) in enumerate(planned) for n in nodes}
    replaced: dict[int, tuple] = {}
    dropped: set[int] = set()
    for fc in model.nodes:
        found = _match(g, fc) if fc.op == "FullConnection" else None
        if found is None:
            continue
        nodes, ins, out, w, bias = found
        ids = [n.index for n in nodes]
        steps = [step_of.get(i, -1) for i in ids]
        if -1 in steps or any(tuple(planned[j][0]) != (i,) for j, i in zip(steps, ids)) \
                or any(uses.get(n.outputs[0], 0) != 1 for n in nodes[:-1]):
            continue
        for t in [fc.inputs[1]] + [t for t in nodes[-1].inputs if bias is not None and values[t].const is not None]:
            uses[t] -= 1  # W and the bias, now in the kernel
        kernel = _core.GemmS8Dynamic(w, bias, values[ins[0]].shape, values[ins[1]].shape, values[ins[2]].shape,
                                     values[out].shape)
        replaced[steps[-1]] = (tuple(ids), Plan([(values[out].shape, F32)], kernel=kernel), ins, [out])
        dropped.update(steps[:-1])
    return [replaced.get(j, step) for j, step in enumerate(planned) if j not in dropped]
