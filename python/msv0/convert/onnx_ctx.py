"""What every ONNX handler shares: the handler table, the context a handler sees (Ctx), and
the helpers that more than one handler module uses. The handler modules import from here and
never from each other."""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Unsupported, Val, dense_order_matches, handler_table
from msv0.fb.ActivationType import ActivationType
from msv0.fb.Format import Format

HANDLERS, handles = handler_table()


class Ctx:
    """What a handler sees: the node, its input values, its ONNX output shapes, the emitter."""

    def __init__(self, e, graph, vals, node, branches=None):
        self.e, self.graph, self.vals, self.node = e, graph, vals, node
        # the frontend's branches(protos, routed, reads): each If branch as a v0 subgraph
        # taking the routed values, as (subgraph index, output Vals); None when one failed
        self.branches = branches
        self.attrs = node.attrs
        self.name = node.name
        self._n = 0

    def inp(self, k) -> Val | None:
        if k >= len(self.node.inputs) or not self.node.inputs[k]:
            return None
        return self.vals[self.node.inputs[k]]

    def const(self, k, what) -> np.ndarray | None:
        v = self.inp(k)
        if v is None:
            return None
        if v.const is None:
            raise Unsupported(f"{what} must be a constant")
        return v.const

    def attr(self, name, default=None):
        v = self.attrs.get(name, default)
        return v.decode() if isinstance(v, bytes) else v

    def out(self, k=0):
        name = self.node.outputs[k]
        if name not in self.graph.shapes:
            raise Unsupported(f"no static shape for output '{name}'")
        return self.graph.shapes[name]

    def used(self, k) -> bool:
        if k >= len(self.node.outputs) or not self.node.outputs[k]:
            return False
        o = self.node.outputs[k]
        return o in self.graph.outputs or any(o in n.inputs for n in self.graph.nodes)

    def set(self, k, v: Val):
        self.vals[self.node.outputs[k]] = v

    def sub(self, tag=""):
        self._n += 1
        return f"{self.name}/{tag}{self._n}"

    def op(self, op, ins, shape, dtype, nhwc=False, /, **attrs) -> Val:
        return self.e.op(op, ins, shape, dtype, self.sub(op + "_"), nhwc, **attrs)

    def scalar(self, value, dtype) -> Val:
        a = np.array([value], dtype)
        return Val.of(a)


def khwc_weight(c: Ctx, w: np.ndarray, tag: str) -> Val:
    """A conv weight already in v0's [Cout, kH, kW, Cin] order, written as a KHWC constant."""
    idx = c.e.const(np.ascontiguousarray(w.astype(np.float32)), f"{c.name}/{tag}", fmt=Format.KHWC)
    return Val(w.shape, np.dtype(np.float32), index=idx)


def dense(c: Ctx, a: Val, w_nk: np.ndarray, bias, shape, dtype, act=ActivationType.NO_ACTIVATION) -> Val:
    """FullConnection y = a·Wᵀ (+b) over a's last axis."""
    ins = [a, Val(w_nk.shape, np.dtype(np.float32), const=np.ascontiguousarray(w_nk, np.float32))]
    if bias is not None:
        ins.append(Val(bias.shape, np.dtype(np.float32), const=np.ascontiguousarray(bias, np.float32)))
    rank = len(a.shape)
    return c.op("FullConnection", ins, shape, dtype, hasBias=bias is not None, useAxis=rank > 2,
                axis=max(rank - 1, 1), activationType=act)


def reshaped(c: Ctx, v: Val, shape) -> Val:
    """v (constant or runtime) viewed as shape, in its logical order."""
    shape = tuple(shape)
    if v.const is not None:
        return Val.of(v.const.reshape(shape))
    return c.op("Reshape", [c.e.plain(v, c.name)], shape, v.dtype, shape=list(shape))


def transposed(c: Ctx, v: Val, perm) -> Val:
    """v (in its logical order) with its dims permuted by perm: a Reshape, which a Session runs as
    a view, where the dims that are not 1 keep their order (one head, one token), else a Transpose."""
    perm = list(perm)
    shape = tuple(v.shape[p] for p in perm)
    if dense_order_matches(v.shape, perm):
        return v if perm == sorted(perm) else reshaped(c, v, shape)
    return c.op("Transpose", [c.e.plain(v, c.name)], shape, v.dtype, perm=perm)


# The most entries a lowering writes into a constant table of positions (Pad edge/wrap, ArgMax's
# reversal, scatter-add): far beyond real tensors' axes, and what keeps a file's absurd dims from
# exhausting memory while it converts.
MAX_TABLE = 1 << 24


def table_size(n: int, what: str) -> int:
    """n, or Unsupported when a table of n positions would be over MAX_TABLE."""
    if n > MAX_TABLE:
        raise Unsupported(f"{what}: a table of {n} positions (over {MAX_TABLE})")
    return n


def broadcast(c: Ctx, v: Val, shape) -> Val:
    """v (constant or runtime) broadcast to exactly `shape`, in its logical order: where an r1.1
    op needs its operands' shapes equal."""
    shape = tuple(shape)
    if tuple(v.shape) == shape:
        return v
    if v.const is not None:
        return Val.of(np.ascontiguousarray(np.broadcast_to(v.const, shape)))
    return c.op("BroadcastTo", [c.e.plain(v, c.name)], shape, v.dtype, dstShape=list(shape))


def axis_index(a, rank):
    """A non-negative axis from ONNX's possibly negative one."""
    a = int(a)
    return a + rank if a < 0 else a


def align_layouts(c: Ctx, ins: list[Val], rank: int) -> tuple[list[Val], bool]:
    """Bring broadcasting operands to one layout: NHWC when every runtime 4-D operand allows it.
    A runtime scalar (one value: a dynamically quantized tensor's scale) broadcasts alike in both."""
    def scalar(v: Val) -> bool:
        return v.const is None and int(np.prod(v.shape)) == 1 and len(v.shape) <= rank

    runtime = [v for v in ins if v.const is None and not scalar(v)]
    if rank == 4 and any(v.nhwc for v in runtime) and all(len(v.shape) == 4 for v in runtime):
        out = []
        for v in ins:
            if scalar(v):
                out.append(v)
            elif v.const is None:
                out.append(c.e.to_nhwc(v, c.name))
            elif v.const.size == 1:
                out.append(Val((1,) * v.const.ndim, v.dtype, const=v.const))
            else:
                a = v.const.reshape((1,) * (4 - v.const.ndim) + v.const.shape)
                out.append(Val(a.shape, a.dtype, const=a, nhwc=True))
        return out, True
    return [c.e.plain(v, c.name) for v in ins], False


# The v0 binary ops with a fused activationType field.
_ACT_ATTR = {"Add", "Sub", "Mul", "Div"}


def emit_binary(c: Ctx, op, a: Val, b: Val, shape, dtype, act=ActivationType.NO_ACTIVATION) -> Val:
    """A two-input v0 op with broadcasting operands brought to one layout."""
    (a, b), nhwc = align_layouts(c, [a, b], len(shape))
    attrs = {"activationType": act} if op in _ACT_ATTR else {}
    return c.op(op, [a, b], shape, dtype, nhwc, **attrs)
