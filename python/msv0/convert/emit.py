"""Writing converted graphs: values with a per-tensor layout, on top of msv0.builder.Builder.

Every converted value keeps its source (ONNX) logical shape. A 4-D value may be *stored* NHWC
(logical NCHW permuted by (0,2,3,1)), which is how r1.1 kept every 4-D activation
(format-v0.md §2, §7.4). Constants stay NumPy arrays until a node needs them as a tensor,
and are then written in the layout that node asks for.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from msv0.builder import Builder
from msv0.fb.Format import Format

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
# Where a logical NCHW axis lives in NHWC storage.
NHWC_AXIS = (0, 3, 1, 2)


class Unsupported(Exception):
    """A source node the converter cannot express in v0; the message is the reason."""


@dataclass
class Val:
    shape: tuple[int, ...]  # logical (source) shape
    dtype: np.dtype
    index: int | None = None  # tensor index in the file; None for a constant not written yet
    nhwc: bool = False  # stored as NHWC (4-D only)
    const: np.ndarray | None = None

    @property
    def stored_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[p] for p in TO_NHWC) if self.nhwc else tuple(self.shape)

    def axis(self, a: int) -> int:
        """The stored position of logical axis a (a already non-negative)."""
        return NHWC_AXIS[a] if self.nhwc else a

    @classmethod
    def of(cls, a) -> Val:
        """A constant holding array a (copied to C order if it is a strided view)."""
        a = np.asarray(a)
        if not a.flags.c_contiguous:
            a = a.copy(order="C")
        return cls(a.shape, a.dtype, const=a)


def dense_order_matches(shape, perm) -> bool:
    """Whether permuting by perm keeps the order of the non-unit dims (a pure reshape)."""
    big = [p for p in perm if shape[p] != 1]
    return big == sorted(big)


# v0 ops whose activationType field applies RELU or RELU6 to their output (format-v0.md §5).
APPLIES_ACTIVATION = frozenset({"Conv2D", "DepthwiseConv2D", "DeConv2D", "FullConnection", "Add"})


class Emitter:
    def __init__(self, name: str):
        self.b = Builder(name)
        self._count = 0
        self._writer: dict[int, Any] = {}  # tensor index -> the node (CNodeT) that writes it

    def _name(self, base: str) -> str:
        self._count += 1
        return f"{base}_{self._count}"

    def const(self, value: np.ndarray, name: str, fmt: int = Format.NHWC) -> int:
        value = np.asarray(value)
        if value.dtype == np.float64:
            value = value.astype(np.float32)
        return self.b.const(self._name(name), value, format=fmt)

    def index(self, v: Val, name: str = "const") -> int:
        if v.index is None:
            data = v.const.transpose(TO_NHWC) if v.nhwc else v.const
            v.index = self.const(data, name)
        return v.index

    def node(self, op: str, inputs: list[int], outs: list[tuple[tuple[int, ...], np.dtype]], name: str,
             **attrs) -> list[int]:
        """Emit op; outs are the stored shapes and dtypes of its outputs. Returns their indices."""
        idx = [self.b.tensor(f"{name}:{k}" if len(outs) > 1 else name, np.dtype(dt), shape=shape)
               for k, (shape, dt) in enumerate(outs)]
        self.b.node(op, inputs, outputs=idx, name=name, **attrs)
        for i in idx:
            self._writer[i] = self.b.graph.nodes[-1]
        return idx

    def ops(self, op: str, ins: list[Val], outs: list[tuple[tuple[int, ...], np.dtype]], name: str, /,
            **attrs) -> list[Val]:
        """A node with several outputs (their stored shapes and dtypes), as values in that layout."""
        idx = self.node(op, [self.index(v) for v in ins], outs, self._name(name), **attrs)
        return [Val(tuple(shape), np.dtype(dtype), index=i) for (shape, dtype), i in zip(outs, idx)]

    def fuse_activation(self, v: Val, act: int) -> bool:
        """Make act (RELU or RELU6) the activationType of the node that wrote v, if its op applies
        one and it has none yet; the caller knows that nothing else reads v."""
        node = self._writer.get(v.index)
        if node is None or len(node.outputIndex) != 1:
            return False
        attrs = node.primitive.value
        if type(attrs).__name__.removesuffix("T") not in APPLIES_ACTIVATION or attrs.activationType:
            return False
        attrs.activationType = act
        return True

    def op(self, op: str, ins: list[Val], shape, dtype, name: str, nhwc: bool = False, /, **attrs) -> Val:
        """One-output op; ins must already be in the layout the op wants."""
        out = Val(tuple(shape), np.dtype(dtype), nhwc=nhwc)
        out.index = self.node(op, [self.index(v) for v in ins], [(out.stored_shape, out.dtype)], name, **attrs)[0]
        return out

    def plain(self, v: Val, name: str) -> Val:
        """v stored in its logical order."""
        if not v.nhwc:
            return v
        if v.index is None:
            return Val(v.shape, v.dtype, const=v.const)
        if dense_order_matches(v.shape, TO_NHWC):
            return self.op("Reshape", [v], v.shape, v.dtype, self._name(name + "/to_nchw"), shape=list(v.shape))
        return self.op("Transpose", [v], v.shape, v.dtype, self._name(name + "/to_nchw"), perm=list(TO_NCHW))

    def to_nhwc(self, v: Val, name: str) -> Val:
        """v (4-D) stored NHWC."""
        if v.nhwc:
            return v
        if len(v.shape) != 4:
            raise Unsupported(f"expected a 4-D tensor, got shape {list(v.shape)}")
        if v.index is None:
            return Val(v.shape, v.dtype, const=v.const, nhwc=True)
        out = Val(v.shape, v.dtype, nhwc=True)
        op = "Reshape" if dense_order_matches(v.shape, TO_NHWC) else "Transpose"
        attrs = {"shape": list(out.stored_shape)} if op == "Reshape" else {"perm": list(TO_NHWC)}
        out.index = self.node(op, [v.index], [(out.stored_shape, v.dtype)], self._name(name + "/to_nhwc"), **attrs)[0]
        return out


def emit_if(e: Emitter, name: str, cond: int, data: list[tuple[int, tuple[int, ...], np.dtype]],
            outs: list[tuple[tuple[int, ...], np.dtype]], then: int, other: int) -> list[int]:
    """A conditional over v0 subgraphs `then` and `other` (each taking `data`, giving `outs`),
    which v0 has no op for: Switch on `cond` routes the data to one half, one Partial per branch
    runs on its half, and Merge takes the result of the branch that fired (format-v0.md §8).
    data: (tensor index, stored shape, dtype) of each routed value. Returns Merge's outputs."""
    routed = e.node("Switch", [cond] + [i for i, _, _ in data], [(s, d) for _, s, d in data] * 2, name + "/Switch")
    n = len(data)
    taken = e.node("Partial", routed[:n], outs, name + "/Partial_then", subGraphIndex=then)
    not_taken = e.node("Partial", routed[n:], outs, name + "/Partial_else", subGraphIndex=other)
    return e.node("Merge", taken + not_taken, outs, name + "/Merge")


def handler_table():
    """An empty {source op: handler} table and the decorator that fills it."""
    table = {}

    def handles(*names):
        def register(fn):
            for name in names:
                table[name] = fn
            return fn

        return register

    return table, handles
