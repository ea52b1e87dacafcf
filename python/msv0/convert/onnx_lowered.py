"""ONNX ops with no v0 primitive of their own, written as v0 ops that compute the same values exactly."""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Unsupported, Val
from msv0.convert.onnx_ctx import Ctx, emit_binary, handles


@handles("IsNaN")
def is_nan(c: Ctx):
    x = c.inp(0)
    shape, _ = c.out()
    c.set(0, c.op("NotEqual", [x, x], shape, np.bool_, x.nhwc))  # only NaN differs from itself


@handles("GatherND")
def gather_nd(c: Ctx):
    if int(c.attr("batch_dims", 0)):
        raise Unsupported("batch_dims > 0 (v0 GatherNd gathers from the whole tensor)")
    x, ind = c.e.plain(c.inp(0), c.name), c.inp(1)
    shape, dtype = c.out()
    dims = np.array(x.shape[:ind.shape[-1]], np.int64)
    if ind.const is not None:  # ONNX wraps negative indices, v0 rejects them
        k = np.where(ind.const < 0, ind.const + dims, ind.const).astype(np.int32)
        ind = Val.of(k)
    else:
        ind = c.e.plain(ind, c.name)
        d = dims.astype(ind.dtype)
        neg = emit_binary(c, "Less", ind, c.scalar(0, ind.dtype), ind.shape, np.bool_)
        up = emit_binary(c, "Add", ind, Val.of(d), ind.shape, ind.dtype)
        ind = c.op("Where", [neg, up, ind], ind.shape, ind.dtype)
    c.set(0, c.op("GatherNd", [x, ind], shape, dtype))


def _einsum_terms(eq: str, ranks) -> tuple[list[str], str]:
    """The input and output index strings of `eq`, '...' spelt out as upper-case letters."""
    lhs, _, rhs = eq.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise Unsupported(f"equation '{eq}' names {len(terms)} operands, the node has {len(ranks)}")
    ell = max((r - len(t) + 3 for t, r in zip(terms, ranks) if "..." in t), default=0)
    fill = "ABCDEFGHIJ"[:ell]
    terms = [t.replace("...", fill[ell - (r - len(t) + 3):]) for t, r in zip(terms, ranks)]
    if not rhs and "->" not in eq:  # implicit output: the indices seen once, sorted, after '...'
        rhs = fill + "".join(sorted(i for i in set("".join(terms)) if "".join(terms).count(i) == 1 and i.islower()))
    return terms, rhs.replace("...", fill)


@handles("Einsum")
def einsum(c: Ctx):
    """Two-operand contractions that are a (batched) MatMul: each index is batch (both operands and
    the output), row (A and output), column (B and output) or summed (A and B only)."""
    if len(c.node.inputs) != 2:
        raise Unsupported("only two-operand Einsum (a MatMul)")
    a, b = c.inp(0), c.inp(1)
    (ta, tb), to = _einsum_terms(c.attr("equation"), [len(a.shape), len(b.shape)])
    if any(len(set(t)) != len(t) for t in (ta, tb, to)) or not set(to) <= set(ta + tb) or (set(ta) ^ set(tb)) - set(to):
        raise Unsupported(f"equation '{c.attr('equation')}' is not a MatMul (a diagonal or a one-sided sum)")
    batch = [i for i in ta if i in tb and i in to]
    rows = [i for i in ta if i not in tb]
    cols = [i for i in tb if i not in ta]
    summed = [i for i in ta if i in tb and i not in to]
    size_a, size_b = dict(zip(ta, a.shape)), dict(zip(tb, b.shape))
    if any(size_a[i] != size_b[i] for i in batch + summed):
        raise Unsupported("Einsum with broadcast batch dims")
    size = size_a | size_b
    shape, dtype = c.out()
    if dtype != np.float32:
        raise Unsupported(f"Einsum on {dtype} (v0 MatMul is float32)")
    nb, nm, nn, nk = (int(np.prod([size[i] for i in g], dtype=np.int64)) for g in (batch, rows, cols, summed))
    am = _arranged(c, a, ta, batch + rows + summed, (nb, nm, nk))
    bm = _arranged(c, b, tb, batch + summed + cols, (nb, nk, nn))
    y = c.op("MatMul", [am, bm], (nb, nm, nn), dtype)
    order = batch + rows + cols
    if [size[i] for i in order] != [nb, nm, nn]:
        y = c.op("Reshape", [y], [size[i] for i in order], dtype, shape=[size[i] for i in order])
    perm = [order.index(i) for i in to]
    if perm != sorted(perm):
        y = c.op("Transpose", [y], shape, dtype, perm=perm)
    c.set(0, y)


def _arranged(c: Ctx, v: Val, term: str, order: list[str], shape3) -> Val:
    """v with its axes in `order`, viewed as the 3-D MatMul operand shape3."""
    perm = [term.index(i) for i in order]
    if v.const is not None:
        a = np.ascontiguousarray(v.const.transpose(perm).reshape(shape3))
        return Val.of(a)
    v = c.e.plain(v, c.name)
    if perm != sorted(perm):
        v = c.op("Transpose", [v], [v.shape[p] for p in perm], v.dtype, perm=perm)
    if tuple(v.shape) == tuple(shape3):
        return v
    return c.op("Reshape", [v], shape3, v.dtype, shape=list(shape3))
