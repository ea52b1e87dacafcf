"""Writing v0 .ms files from Python, through the flatc-generated msv0.fb object API.

    b = Builder("tiny")
    x = b.input("x", (1, 8, 8, 3))
    w = b.const("w", np.ones((4, 3, 3, 3), np.float32), format=Format.KHWC)
    y = b.node("Conv2D", [x, w], kernelH=3, kernelW=3, strideH=1, strideW=1, padMode=PadMode.SAME_UPPER)
    b.output(y)
    b.save("tiny.ms")

Files follow r1.1's conventions (format-v0.md): graph inputs are ValueNode tensors with no
data, node outputs are CNode tensors, subGraph[0] is the main graph, "MSL1" identifies the
file unless file_identifier=False.
"""
from __future__ import annotations

import importlib
import os
import struct
from typing import Any, Sequence

import flatbuffers
import numpy as np

from msv0 import dtypes
from msv0.fb.CNode import CNodeT
from msv0.fb.Format import Format
from msv0.fb.MetaGraph import MetaGraphT
from msv0.fb.NodeType import NodeType
from msv0.fb.Primitive import PrimitiveT
from msv0.fb.PrimitiveType import PrimitiveType
from msv0.fb.QuantParam import QuantParamT
from msv0.fb.QuantType import QuantType
from msv0.fb.SubGraph import SubGraphT
from msv0.fb.Tensor import TensorT



def _quant_params(quant: Sequence[dict] | None) -> list[QuantParamT] | None:
    if not quant:
        return None
    out = []
    for q in quant:
        p = QuantParamT()
        for k, v in q.items():
            if not hasattr(p, k):
                raise ValueError(f"QuantParam has no field {k!r}")
            setattr(p, k, v)
        out.append(p)
    return out


class Builder:
    def __init__(self, name: str = "", version: str = "MindSpore Lite 1.1.0"):
        self.graph = MetaGraphT()
        self.graph.name = name
        self.graph.version = version
        self.graph.allTensors = []
        self.graph.nodes = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.main_nodes: list[int] | None = None  # nodes of subGraph[0]; None: those no other subgraph lists

    def _tensor(self, name: str, node_type: int, type_id: int, dims: Sequence[int], fmt: int,
                data: bytes | None = None, quant=None, clusters=None) -> int:
        t = TensorT()
        t.name = name
        t.nodeType = node_type
        t.dataType = type_id
        t.dims = [int(d) for d in dims]
        t.format = fmt
        if data is not None:
            t.data = np.frombuffer(data, np.uint8)
        t.quantParams = _quant_params(quant)
        if clusters is not None:
            t.quantClusters = [float(c) for c in clusters]
        self.graph.allTensors.append(t)
        return len(self.graph.allTensors) - 1

    def input(self, name: str, shape: Sequence[int], dtype=np.float32, format: int = Format.NHWC,
              quant=None, default=None) -> int:
        """A graph input (ValueNode without data, as r1.1 wrote them; with `default`, its data is
        the value a run takes when the input is not fed: a streaming model's initial state).
        Returns its tensor index."""
        data = None if default is None else np.ascontiguousarray(default, dtype).reshape(shape).tobytes()
        i = self._tensor(name, NodeType.ValueNode, dtypes.type_id(dtype), shape, format, data=data, quant=quant)
        self.inputs.append(i)
        return i

    def const(self, name: str, value, format: int = Format.NHWC, quant=None, type_id: int | None = None,
              clusters=None, dims: Sequence[int] | None = None) -> int:
        """A constant tensor holding `value` (any array-like). Returns its tensor index."""
        a = np.asarray(value)
        a = np.ascontiguousarray(a).reshape(a.shape)  # ascontiguousarray alone makes a scalar 1-D
        tid = dtypes.type_id(a.dtype) if type_id is None else type_id
        shape = a.shape if dims is None else dims
        return self._tensor(name, NodeType.ValueNode, tid, shape, format, a.tobytes(), quant, clusters)

    def tensor(self, name: str, dtype=np.float32, shape: Sequence[int] = (), format: int = Format.NHWC,
               quant=None) -> int:
        """An activation tensor (nodeType CNode), for nodes that name their outputs explicitly."""
        return self._tensor(name, NodeType.CNode, dtypes.type_id(dtype), shape, format, quant=quant)

    def node(self, op: str, inputs: Sequence[int], outputs: int | Sequence[int] = 1, name: str | None = None,
             quant_type: int = QuantType.QUANT_NONE, out_dtype=np.float32, out_quant=None, **attrs: Any):
        """Append a node running `op` (a PrimitiveType name) with schema attributes `attrs`.

        `outputs` is a count of new output tensors, or the tensor indices to write. Returns the
        output index, or a list of them when there are several."""
        if not hasattr(PrimitiveType, op) or op == "NONE":
            raise ValueError(f"unknown op {op!r}")
        table = getattr(importlib.import_module(f"msv0.fb.{op}"), f"{op}T")()
        for k, v in attrs.items():
            if not hasattr(table, k):
                raise ValueError(f"{op} has no attribute {k!r}")
            setattr(table, k, list(v) if isinstance(v, (tuple, np.ndarray)) else v)
        n = CNodeT()
        n.name = name or f"{op}_{len(self.graph.nodes)}"
        try:  # the generated packer checks every value's type and range: fail now, naming the node
            table.Pack(flatbuffers.Builder(256))
        except (TypeError, ValueError, struct.error) as e:
            raise ValueError(f"node '{n.name}' ({op}): {e}") from None
        n.nodeType = NodeType.CNode
        n.primitive = PrimitiveT()
        n.primitive.valueType = getattr(PrimitiveType, op)
        n.primitive.value = table
        n.inputIndex = [int(i) for i in inputs]
        if isinstance(outputs, int):
            outs = [self.tensor(f"{n.name}:{k}", out_dtype, quant=out_quant) for k in range(outputs)]
        else:
            outs = [int(i) for i in outputs]
        n.outputIndex = outs
        n.quantType = quant_type
        self.graph.nodes.append(n)
        return outs[0] if len(outs) == 1 else outs

    def output(self, *indices: int) -> None:
        self.outputs.extend(indices)

    def subgraph(self, name: str, inputs: Sequence[int], outputs: Sequence[int], nodes: Sequence[int],
                 tensors: Sequence[int] = ()) -> int:
        """Add an extra subgraph (a control-flow body); returns its index (main graph is 0)."""
        self._main_subgraph()
        s = SubGraphT()
        s.name, s.inputIndices, s.outputIndices = name, list(inputs), list(outputs)
        s.nodeIndices, s.tensorIndices = list(nodes), list(tensors)
        self.graph.subGraph.append(s)
        return len(self.graph.subGraph) - 1

    def _main_subgraph(self) -> None:
        if not self.graph.subGraph:
            self.graph.subGraph = [SubGraphT()]

    def finish(self, file_identifier: bool = True, subgraph: bool = True) -> bytes:
        """The model as bytes. subgraph=False writes no subGraph (the r1.0 layout)."""
        g = self.graph
        g.inputIndex, g.outputIndex = list(self.inputs), list(self.outputs)
        if subgraph:
            self._main_subgraph()
            main = g.subGraph[0]
            main.name = g.name
            main.inputIndices, main.outputIndices = list(self.inputs), list(self.outputs)
            if self.main_nodes is None:
                claimed = {n for sub in g.subGraph[1:] for n in sub.nodeIndices}
                main.nodeIndices = [n for n in range(len(g.nodes)) if n not in claimed]
            else:
                main.nodeIndices = list(self.main_nodes)
            main.tensorIndices = list(range(len(g.allTensors)))
        else:
            g.subGraph = None
        fbb = flatbuffers.Builder(1024)
        fbb.Finish(g.Pack(fbb), file_identifier=b"MSL1" if file_identifier else None)
        return bytes(fbb.Output())

    def save(self, path: str | os.PathLike, **kwargs) -> None:
        with open(path, "wb") as f:
            f.write(self.finish(**kwargs))
