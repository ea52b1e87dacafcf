"""msv0.load: a verified v0 model as read-only Python records.

Verification, every index check and the reading of the records happen in C++
(msv0._core.Model). Here tensors, nodes and subgraphs become frozen records, constant data are
NumPy arrays aliasing the model bytes, and each node's attributes are the fields its primitive
table holds over every field of the schema table at its default (the generated msv0.fb
object-API classes give those).
"""
from __future__ import annotations

import collections
import functools
import importlib
import math
import os
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from msv0 import _core, dtypes
from msv0.errors import ModelError
from msv0.fb.NodeType import NodeType
from msv0.fb.PrimitiveType import PrimitiveType
from msv0.fb.QuantParam import QuantParamT


def _record_of(table_type: type, name: str) -> type:
    """A named tuple with the fields, in schema order, and the defaults of a generated object-API
    class, so a schema table's field list is written in the schema alone. (A tuple, not a frozen
    dataclass: cheap to make, and int8 Sessions read thousands.)"""
    defaults = vars(table_type())
    return collections.namedtuple(name, defaults, defaults=defaults.values())


# A tensor's quantParams entry (format-v0.md §3).
QuantParam = _record_of(QuantParamT, "QuantParam")


class QuantParams(Sequence):
    """A tensor's quantParams: its rows [lo, hi) of the model's columns, each a QuantParam record
    when read (a per-channel int8 model holds tens of thousands: ~1 µs each to make, all at load);
    column() gives one field of them all as an array."""

    __slots__ = ("_columns", "_lo", "_hi")

    def __init__(self, columns: Mapping[str, np.ndarray], lo: int, hi: int):
        self._columns, self._lo, self._hi = columns, lo, hi

    def __len__(self) -> int:
        return self._hi - self._lo

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        if not -len(self) <= i < len(self):
            raise IndexError("quantParams index out of range")
        row = self._lo + i % len(self)
        return QuantParam(*(self._columns[f][row].item() for f in QuantParam._fields))

    def column(self, field: str) -> np.ndarray:
        """Field `field` (a QuantParam name) of every entry, read-only."""
        return self._columns[field][self._lo:self._hi]

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


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
    quant: QuantParams
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
        count = math.prod(self.shape)
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
    output_quant: tuple[QuantParams, ...] = ()

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


@functools.cache
def _defaults(op: str) -> tuple[dict, tuple[str, ...]]:
    """Every field of the op's schema table at its schema default (a vector or string the file
    omits is None), and the fields' names in schema order, from the generated object-API class."""
    defaults = vars(getattr(importlib.import_module(f"msv0.fb.{op}"), f"{op}T")())
    return defaults, tuple(defaults)


def _attrs(op: str, present: list[tuple[int, Any]]) -> Attrs:
    """The op's attributes: the fields the file holds, (schema field number, value), over the defaults."""
    defaults, names = _defaults(op)
    attrs = dict(defaults)
    attrs.update((names[i], v) for i, v in present)
    return Attrs(attrs)


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
    # Inputs whose tensor carries data: name -> that value (read-only), which a run takes when
    # the input is not fed (a streaming model's initial state, as msv0 convert writes it).
    input_defaults: Mapping[str, np.ndarray]
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

    def release_pages(self, t: Tensor) -> None:
        """Let the OS drop the file pages of t's data from memory (a mapped file only): a Session
        calls it once a kernel holds the weight packed. Reads of t.data refill them."""
        self._core_model.release(t.raw)

    def __reduce__(self):
        # The file's bytes travel; the receiver verifies and reads them again.
        return load, (self._core_model.buffer.tobytes(),)


def load(source: str | os.PathLike | bytes | bytearray | memoryview) -> Model:
    """Load and verify a v0 .ms model from a path or from bytes; raises ModelError if invalid."""
    core = _core.Model(source)  # verified: every offset, index and union below is known good
    buf = core.buffer
    name, version, model_inputs, model_outputs, tensor_rows, node_rows, subgraph_rows = core.graph()
    offsets, columns = core.quant_params()
    # Reading every table maps the page-cache pages around each read (fault-around, large
    # folios): MobileNetV2's whole 14 MB file and 54 of ResNet-50's 97 MB counted in the RSS after
    # load. Dropped again here; a Session maps each weight's pages as it packs it.
    core.release(buf)
    for c in columns.values():
        c.flags.writeable = False
    offsets = offsets.tolist()
    tensors = [Tensor(i, t_name, type_id, dims, fmt, node_type, None if at < 0 else buf[at:at + size],
                      QuantParams(columns, offsets[i], offsets[i + 1]), clusters)
               for i, (t_name, type_id, dims, fmt, node_type, at, size, clusters) in enumerate(tensor_rows)]
    nodes = []
    for i, (n_name, primitive, present, inputs, outputs, quant_type) in enumerate(node_rows):
        op = PRIMITIVE_NAMES[primitive]
        nodes.append(Node(i, n_name, op, _attrs(op, present), inputs, outputs, quant_type,
                          tuple(tensors[k].quant for k in outputs)))
    subgraphs = [SubGraph(*row) for row in subgraph_rows]
    if subgraphs:  # subGraph[0] is the main graph (format-v0.md §1)
        main = subgraphs[0]
        graph_inputs, graph_outputs, order = main.inputs, main.outputs, main.nodes
    else:
        graph_inputs, graph_outputs = model_inputs, model_outputs
        order = tuple(range(len(nodes)))
    for i in graph_inputs + graph_outputs:
        tensors[i].dtype  # an input or output of unknown dtype is a ModelError now, not at run
    defaults = {}
    for i in graph_inputs:  # an input's data is its default, not a constant: the tensor keeps none
        t = tensors[i]
        if t.raw is not None:
            value = t.data
            if value.shape != t.shape:  # a string or bit-packed input (the verifier checks the others)
                raise ModelError(f"graph input {t.label}: its data ({t.raw.size} bytes) is not one {t.dtype} "
                                 f"value of shape {list(t.shape)}")
            defaults[t.name] = value
            tensors[i] = replace(t, raw=None)
    return Model(name, version, tuple(tensors), tuple(nodes), tuple(subgraphs), graph_inputs,
                 graph_outputs, order, types.MappingProxyType(defaults), core)
