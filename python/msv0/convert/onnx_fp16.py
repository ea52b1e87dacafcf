"""fp16 ONNX models (onnxconverter-common's float16 export) -> the same graph in fp32.

Weights widen exactly; a Cast to fp16 becomes a Cast to fp32 (a no-op the Cast handler drops),
so the model computes in fp32 what it computed in fp16: the result is that of the fp32 model with
the fp16-rounded weights. Graph inputs and outputs keep their declared dtype: an fp16 input is cast
up after it and an fp16 output cast down before it.
"""
from __future__ import annotations

import numpy as np

F16, F32 = 10, 1  # TensorProto.FLOAT16, TensorProto.FLOAT


def _widen(t) -> None:
    from onnx import numpy_helper
    if t.data_type == F16:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))


def _widen_graph(g) -> None:
    for t in g.initializer:
        _widen(t)
    for vi in g.value_info:
        if vi.type.tensor_type.elem_type == F16:
            vi.type.tensor_type.elem_type = F32
    for n in g.node:
        for a in n.attribute:
            if a.HasField("t"):
                _widen(a.t)
            if n.op_type == "Cast" and a.name == "to" and a.i == F16:
                a.i = F32
            for sub in [a.g] if a.HasField("g") else a.graphs:
                _widen_graph(sub)
                for vi in list(sub.input) + list(sub.output):
                    if vi.type.tensor_type.elem_type == F16:
                        vi.type.tensor_type.elem_type = F32


def widen_fp16(model) -> None:
    """Rewrite `model` in place to compute in fp32 when it carries fp16 weights (a graph with fp16
    inputs alone stays as it is: v0 runs those ops in fp16)."""
    from onnx import helper
    g = model.graph
    if not any(t.data_type == F16 for t in g.initializer) and not any(
            a.HasField("t") and a.t.data_type == F16 for n in g.node for a in n.attribute):
        return
    _widen_graph(g)
    init = {t.name for t in g.initializer}
    head, tail = [], []
    for vi in g.input:
        if vi.name not in init and vi.type.tensor_type.elem_type == F16:
            wide = vi.name + "/fp32"
            head.append(helper.make_node("Cast", [vi.name], [wide], name=wide, to=F32))
            for n in g.node:
                n.input[:] = [wide if i == vi.name else i for i in n.input]
    for vi in g.output:
        if vi.type.tensor_type.elem_type == F16:
            wide = vi.name + "/fp32"
            for n in g.node:
                n.output[:] = [wide if o == vi.name else o for o in n.output]
                n.input[:] = [wide if i == vi.name else i for i in n.input]
            tail.append(helper.make_node("Cast", [wide], [vi.name], name=vi.name + "/fp16", to=F16))
    nodes = head + list(g.node) + tail
    del g.node[:]
    g.node.extend(nodes)
