"""msv0.load: a verified v0 model as read-only Python records.

Verification and every index check happen in C++ (msv0._core.Model), which only checks. The
model is then read once, here, by the flatc-generated msv0.fb readers: tensors, nodes and
subgraphs become frozen records, constant data are NumPy arrays aliasing the model bytes, and
each node's attributes come from its primitive table, so every field of the schema table is
present, with its schema default when the file omits it.
"""
from __future__ import annotations

import collections
import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple

import numpy as np

from msv0 import _core, dtypes
from msv0.errors import ModelError
from msv0.fb.MetaGraph import MetaGraph
from msv0.fb.NodeType import NodeType
from msv0.fb.PrimitiveType import PrimitiveType
from msv0.fb.QuantParam import QuantParamT


def _record_of(table_type: type, name: str) -> type:
    """A named tuple with the fields, in schema order, and the defaults of a generated object-API
    class, so a schema table's field list is written in the schema alone. (A tuple, not a frozen
    dataclass: a per-channel int8 model makes tens of thousands of them at load.)"""
    defaults = vars(table_type())
    return collections.namedtuple(name, defaults, defaults=defaults.values())


# A tensor's quantParams entry (format-v0.md §3).
QuantParam = _record_of(QuantParamT, "QuantParam")

# PrimitiveType number -> the schema name of the op.
PRIMITIVE_NAMES = {v: k for k, v in vars(PrimitiveType).items() if not k.startswith("_")}


class TensorInfo(NamedTuple):
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    format: int


@dataclass(frozen=True)
class Tensor:
    index: int
    name: str
    type_id: int
    shape: tuple[int, ...]
    format: int
    node_type: int
    raw: np.ndarray | None  # the data bytes (uint8, read-only), None when empty
    quant: tuple[QuantParam, ...]
    clusters: tuple[float, ...]

    @property
    def is_const(self) -> bool:
        return self.node_type == NodeType.ValueNode and self.raw is not None

    @property
    def dtype(self) -> np.dtype:
        return dtypes.to_numpy(self.type_id, self.label)

    @property
    def label(self) -> str:
        return f"tensor {self.index} '{self.name}'"

    @property
    def data(self) -> np.ndarray | None:
        """Typed, shaped, read-only view of the constant data (None for non-constants).

        Bit-packed weights (format-v0.md §3) and strings stay 1-D, as stored."""
        if self.raw is None:
            return None
        dt = self.dtype
        if self.type_id in dtypes.OBJECT_TYPES or self.raw.size % dt.itemsize:
            return self.raw if dt.itemsize == 1 else self.raw[: self.raw.size // dt.itemsize * dt.itemsize].view(dt)
        flat = self.raw.view(dt)
        count = int(np.prod(self.shape, dtype=np.int64))
        return flat.reshape(self.shape) if flat.size == count else flat


class Attrs(Mapping):
    """A node's attributes: a read-only mapping that also allows attrs.windowH."""

    __slots__ = ("_d",)

    def __init__(self, d: dict):
        object.__setattr__(self, "_d", d)

    def __getitem__(self, k: str) -> Any:
        return self._d[k]

    def __iter__(self):
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._d[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        raise AttributeError("attributes are read-only")

    def __repr__(self) -> str:
        return f"Attrs({self._d!r})"


@dataclass(frozen=True)
class Node:
    index: int
    name: str
    op: str
    attrs: Attrs
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    quant_type: int
    # The quantParams of each output tensor (QuantDTypeCast prefers the output's, format-v0.md §3).
    output_quant: tuple[tuple[QuantParam, ...], ...] = ()

    @property
    def label(self) -> str:
        return f"node {self.index} '{self.name}' ({self.op})"


@dataclass(frozen=True)
class SubGraph:
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    nodes: tuple[int, ...]
    tensors: tuple[int, ...]


def _attr_value(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return tuple(v.tolist())
    if isinstance(v, list):
        return tuple(_attr_value(x) for x in v)
    if hasattr(v, "__dict__"):  # a nested table (object API class)
        return Attrs({k: _attr_value(x) for k, x in vars(v).items()})
    return v


def _read_attrs(op: str, buf: np.ndarray, pos: int) -> Attrs:
    cls = getattr(importlib.import_module(f"msv0.fb.{op}"), f"{op}T")
    return Attrs({k: _attr_value(v) for k, v in vars(cls.InitFromBuf(buf, pos)).items()})


@dataclass(frozen=True)
class Model:
    """A loaded v0 model. Use msv0.load() to make one."""

    name: str
    version: str
    tensors: tuple[Tensor, ...]
    nodes: tuple[Node, ...]
    subgraphs: tuple[SubGraph, ...]
    graph_inputs: tuple[int, ...]
    graph_outputs: tuple[int, ...]
    main_nodes: tuple[int, ...]  # execution order of the main graph
    _core_model: Any = field(repr=False)

    @property
    def inputs(self) -> list[TensorInfo]:
        return [self._info(i) for i in self.graph_inputs]

    @property
    def outputs(self) -> list[TensorInfo]:
        return [self._info(i) for i in self.graph_outputs]

    def _info(self, index: int) -> TensorInfo:
        t = self.tensors[index]
        return TensorInfo(t.name, t.shape, t.dtype, t.format)

    def __reduce__(self):
        # The file's bytes travel; the receiver verifies and reads them again.
        return load, (self._core_model.buffer.tobytes(),)


def _text(s: bytes | None) -> str:
    # Names are labels: bytes that are not UTF-8 must not stop a model from loading.
    return (s or b"").decode("utf-8", "replace")


def _vector(table, field: str) -> tuple:
    """A vector field of a generated reader as a tuple; () when the file omits it."""
    a = getattr(table, field + "AsNumpy")()
    return () if isinstance(a, int) else tuple(a.tolist())


def _tensor(i: int, t, quant: tuple[QuantParam, ...]) -> Tensor:
    data = t.DataAsNumpy()  # a read-only view of the model bytes, 0 when absent
    return Tensor(
        index=i,
        name=_text(t.Name()),
        type_id=t.DataType(),
        shape=_vector(t, "Dims"),
        format=t.Format(),
        node_type=t.NodeType(),
        raw=None if isinstance(data, int) or data.size == 0 else data,
        quant=quant,
        clusters=_vector(t, "QuantClusters"),
    )


def load(source: str | os.PathLike | bytes | bytearray | memoryview) -> Model:
    """Load and verify a v0 .ms model from a path or from bytes; raises ModelError if invalid."""
    core = _core.Model(source)  # verified: every offset, index and union below is known good
    buf = core.buffer
    g = MetaGraph.GetRootAs(buf, 0)
    offsets, columns = core.quant_params()
    params = [QuantParam(*row) for row in zip(*(columns[f].tolist() for f in QuantParam._fields))]
    offsets = offsets.tolist()
    tensors = tuple(_tensor(i, g.AllTensors(i), tuple(params[offsets[i]:offsets[i + 1]]))
                    for i in range(g.AllTensorsLength()))
    nodes = []
    for i in range(g.NodesLength()):
        n = g.Nodes(i)
        name, p = _text(n.Name()), n.Primitive()
        op = PRIMITIVE_NAMES[p.ValueType()]
        try:
            attrs = _read_attrs(op, buf, p.Value().Pos)
        except Exception as e:  # the verifier passed, so this is a schema-level oddity
            raise ModelError(f"node {i} '{name}': cannot read {op} attributes: {e}") from None
        outs = _vector(n, "OutputIndex")
        nodes.append(Node(i, name, op, attrs, _vector(n, "InputIndex"), outs, n.QuantType(),
                          tuple(tensors[k].quant for k in outs)))
    subgraphs = []
    for j in range(g.SubGraphLength()):
        s = g.SubGraph(j)
        subgraphs.append(SubGraph(_text(s.Name()), _vector(s, "InputIndices"), _vector(s, "OutputIndices"),
                                  _vector(s, "NodeIndices"), _vector(s, "TensorIndices")))
    if subgraphs:  # subGraph[0] is the main graph (format-v0.md §1)
        main = subgraphs[0]
        graph_inputs, graph_outputs, order = main.inputs, main.outputs, main.nodes
    else:
        graph_inputs, graph_outputs = _vector(g, "InputIndex"), _vector(g, "OutputIndex")
        order = tuple(range(len(nodes)))
    for i in graph_inputs + graph_outputs:
        tensors[i].dtype  # an input or output of unknown dtype is a ModelError now, not at run
    return Model(_text(g.Name()), _text(g.Version()), tensors, tuple(nodes), tuple(subgraphs), graph_inputs,
                 graph_outputs, order, core)
