"""An independent minimal v0 writer for tests: it does not use msv0.builder.

It drives the FlatBuffers runtime's low-level Builder through the module-level functions flatc
generated (TensorStart, TensorAddDims, ..., raw StartVector/Prepend for index vectors), and
lays a file out the way r1.1's converter did: "MSL1" identifier, graph inputs as ValueNode
tensors without data, node outputs as CNode tensors, subGraph[0] = main graph. Because the
model is plain data (RawModel), hostile tests can break any part of it before writing, and
`primitive_type` can name a union type the schema does not know.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import flatbuffers
import numpy as np

from msv0.fb import CNode, MetaGraph, Primitive, SubGraph, Tensor
from msv0.fb.Format import Format
from msv0.fb.NodeType import NodeType
from msv0.fb.PrimitiveType import PrimitiveType
from msv0.fb.TypeId import TypeId



@dataclass
class RawTensor:
    name: str
    dims: list[int]
    node_type: int = NodeType.CNode
    type_id: int = TypeId.kNumberTypeFloat32
    format: int = Format.NHWC
    data: bytes | None = None


@dataclass
class RawNode:
    name: str
    op: str
    inputs: list[int]
    outputs: list[int]
    attrs: dict = field(default_factory=dict)  # schema field name -> scalar value
    primitive_type: int | None = None  # overrides the union type byte written for `op`
    quant_type: int = 0


@dataclass
class RawSubGraph:
    name: str
    inputs: list[int]
    outputs: list[int]
    nodes: list[int]
    tensors: list[int]


@dataclass
class RawModel:
    tensors: list[RawTensor] = field(default_factory=list)
    nodes: list[RawNode] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    subgraphs: list[RawSubGraph] | None = None  # None: one main subgraph over everything
    name: str = "raw"

    def tensor(self, t: RawTensor) -> int:
        self.tensors.append(t)
        return len(self.tensors) - 1

    def input(self, name: str, dims) -> int:
        i = self.tensor(RawTensor(name, list(dims), NodeType.ValueNode))
        self.inputs.append(i)
        return i

    def const(self, name: str, value: np.ndarray, fmt: int = Format.NHWC) -> int:
        a = np.ascontiguousarray(value, np.float32)
        return self.tensor(RawTensor(name, list(a.shape), NodeType.ValueNode, TypeId.kNumberTypeFloat32, fmt, a.tobytes()))

    def node(self, op: str, inputs, name: str | None = None, **attrs) -> int:
        out = self.tensor(RawTensor(f"{name or op}_out{len(self.tensors)}", []))
        self.nodes.append(RawNode(name or f"{op}{len(self.nodes)}", op, list(inputs), [out], attrs))
        return out


def _uint_vector(fbb: flatbuffers.Builder, values, signed: bool = False) -> int:
    fbb.StartVector(4, len(values), 4)
    for v in reversed(values):
        (fbb.PrependInt32 if signed else fbb.PrependUint32)(int(v))
    return fbb.EndVector()


def _offset_vector(fbb: flatbuffers.Builder, offsets) -> int:
    fbb.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        fbb.PrependUOffsetTRelative(o)
    return fbb.EndVector()


def _primitive_table(fbb: flatbuffers.Builder, op: str, attrs: dict) -> int:
    mod = importlib.import_module(f"msv0.fb.{op}")
    getattr(mod, f"{op}Start")(fbb)
    for k, v in attrs.items():
        getattr(mod, f"{op}Add{k[0].upper()}{k[1:]}")(fbb, v)
    return getattr(mod, f"{op}End")(fbb)


def _tensor(fbb: flatbuffers.Builder, t: RawTensor) -> int:
    name = fbb.CreateString(t.name)
    dims = _uint_vector(fbb, t.dims, signed=True)
    data = fbb.CreateByteVector(t.data) if t.data else None
    Tensor.TensorStart(fbb)
    Tensor.TensorAddNodeType(fbb, t.node_type)
    Tensor.TensorAddDataType(fbb, t.type_id)
    Tensor.TensorAddDims(fbb, dims)
    Tensor.TensorAddFormat(fbb, t.format)
    if data is not None:
        Tensor.TensorAddData(fbb, data)
    Tensor.TensorAddName(fbb, name)
    return Tensor.TensorEnd(fbb)


def _node(fbb: flatbuffers.Builder, n: RawNode) -> int:
    table = _primitive_table(fbb, n.op, n.attrs)
    Primitive.PrimitiveStart(fbb)
    Primitive.PrimitiveAddValueType(fbb, getattr(PrimitiveType, n.op) if n.primitive_type is None else n.primitive_type)
    Primitive.PrimitiveAddValue(fbb, table)
    prim = Primitive.PrimitiveEnd(fbb)
    name = fbb.CreateString(n.name)
    ins, outs = _uint_vector(fbb, n.inputs), _uint_vector(fbb, n.outputs)
    CNode.CNodeStart(fbb)
    CNode.CNodeAddName(fbb, name)
    CNode.CNodeAddNodeType(fbb, NodeType.CNode)
    CNode.CNodeAddPrimitive(fbb, prim)
    CNode.CNodeAddInputIndex(fbb, ins)
    CNode.CNodeAddOutputIndex(fbb, outs)
    CNode.CNodeAddQuantType(fbb, n.quant_type)
    return CNode.CNodeEnd(fbb)


def _subgraph(fbb: flatbuffers.Builder, s: RawSubGraph) -> int:
    name = fbb.CreateString(s.name)
    vecs = [_uint_vector(fbb, v) for v in (s.inputs, s.outputs, s.nodes, s.tensors)]
    SubGraph.SubGraphStart(fbb)
    SubGraph.SubGraphAddName(fbb, name)
    SubGraph.SubGraphAddInputIndices(fbb, vecs[0])
    SubGraph.SubGraphAddOutputIndices(fbb, vecs[1])
    SubGraph.SubGraphAddNodeIndices(fbb, vecs[2])
    SubGraph.SubGraphAddTensorIndices(fbb, vecs[3])
    return SubGraph.SubGraphEnd(fbb)


def write(m: RawModel, identifier: bytes | None = b"MSL1") -> bytes:
    fbb = flatbuffers.Builder(1 << 16)
    tensors = _offset_vector(fbb, [_tensor(fbb, t) for t in m.tensors])
    nodes = _offset_vector(fbb, [_node(fbb, n) for n in m.nodes])
    subgraphs = m.subgraphs
    if subgraphs is None:
        subgraphs = [RawSubGraph(m.name, m.inputs, m.outputs, list(range(len(m.nodes))), list(range(len(m.tensors))))]
    subs = _offset_vector(fbb, [_subgraph(fbb, s) for s in subgraphs])
    ins, outs = _uint_vector(fbb, m.inputs), _uint_vector(fbb, m.outputs)
    name, version = fbb.CreateString(m.name), fbb.CreateString("MindSpore Lite 1.1.0")
    MetaGraph.MetaGraphStart(fbb)
    MetaGraph.MetaGraphAddName(fbb, name)
    MetaGraph.MetaGraphAddVersion(fbb, version)
    MetaGraph.MetaGraphAddInputIndex(fbb, ins)
    MetaGraph.MetaGraphAddOutputIndex(fbb, outs)
    MetaGraph.MetaGraphAddNodes(fbb, nodes)
    MetaGraph.MetaGraphAddAllTensors(fbb, tensors)
    MetaGraph.MetaGraphAddSubGraph(fbb, subs)
    fbb.Finish(MetaGraph.MetaGraphEnd(fbb), file_identifier=identifier)
    return bytes(fbb.Output())


# ---- zoo networks, written independently of msv0.builder ------------------------------------
def _window_attrs(layer) -> dict:
    up, down, left, right = layer.pads
    return dict(strideH=layer.stride, strideW=layer.stride, padMode=layer.pad_mode,
                padUp=up, padDown=down, padLeft=left, padRight=right)


def from_net(net) -> RawModel:
    """A RawModel of a msv0.zoo.Net (its layer list and weights; none of its writers)."""
    m = RawModel(name=net.name)
    ids = {net.input_name: m.input(net.input_name, net.input_shape)}
    for layer in net.layers:
        x = [ids[i] for i in layer.inputs]
        if layer.kind in ("conv", "dwconv"):
            k = layer.kernel
            x += [m.const(layer.name + ".w", layer.weight, Format.KHWC), m.const(layer.name + ".b", layer.bias)]
            op = "Conv2D" if layer.kind == "conv" else "DepthwiseConv2D"
            attrs = dict(_window_attrs(layer), kernelH=k, kernelW=k, dilateH=1, dilateW=1, activationType=layer.act)
            if op == "Conv2D":
                attrs.update(group=1, channelIn=layer.weight.shape[3], channelOut=layer.weight.shape[0])
            else:
                attrs.update(channelIn=layer.weight.shape[0], channelMultiplier=1)
        elif layer.kind == "maxpool":
            op, attrs = "Pooling", dict(_window_attrs(layer), poolingMode=0, windowH=layer.kernel, windowW=layer.kernel)
        elif layer.kind == "gap":
            op, attrs = "Pooling", dict(poolingMode=1, **{"global": True})  # window left 0: global decides
        elif layer.kind == "fc":
            x += [m.const(layer.name + ".w", layer.weight), m.const(layer.name + ".b", layer.bias)]
            op, attrs = "FullConnection", dict(hasBias=True, activationType=layer.act)
        elif layer.kind == "add":
            op, attrs = "Add", dict(activationType=layer.act)
        else:
            raise ValueError(layer.kind)
        out = m.tensor(RawTensor(layer.output, []))
        m.nodes.append(RawNode(layer.name, op, x, [out], attrs))
        ids[layer.output] = out
    m.outputs.append(ids[net.output])
    return m
