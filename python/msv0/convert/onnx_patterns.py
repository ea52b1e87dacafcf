"""Subgraphs exporters unroll that v0 has one op for, fused back into that one ONNX node.

LayerNorm (torch.onnx before opset 17): m = ReduceMean(x), d = x − m, v = ReduceMean(d² or d·d),
y = d / Sqrt(v + eps) [· gamma] [+ beta], the means over trailing axes -> LayerNormalization.
GELU's tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) in the orders exporters write it
-> Gelu(approximate="tanh"), and its erf form, 0.5·x·(1 + erf(x/√2)) -> Gelu(approximate="none"):
the Gelu handler lowers both in fewer passes than the unrolled forms, and Sessions run those as one
(msv0.gelu).
Hard-swish as Paddle exports it: x · Clip(x + 3, 0, 6) / 6 -> HardSwish, v0's HSWISH, which computes
exactly that in float32 (a Div by 6, not a Mul by 1/6, which rounds differently and stays).
"""
from __future__ import annotations

import math

import numpy as np


def _axes(n, consts) -> list[int] | None:
    if "axes" in n.attrs:
        return list(n.attrs["axes"])
    if len(n.inputs) > 1 and n.inputs[1] in consts:
        return [int(a) for a in consts[n.inputs[1]]]
    return None


def _scalar(name, consts) -> float | None:
    v = consts.get(name)
    return float(v.reshape(-1)[0]) if v is not None and v.size == 1 else None


def _affine(c: np.ndarray, norm) -> np.ndarray | None:
    """c as a gamma/beta over the normalized dims, or None when broadcasting it would reach other dims."""
    shape = c.shape
    while shape and shape[0] == 1:
        shape = shape[1:]
    if len(shape) > len(norm):
        return None
    try:
        return np.ascontiguousarray(np.broadcast_to(c.reshape(shape), norm), np.float32)
    except ValueError:
        return None


def _graph_index(graph):
    """(tensor -> the node writing it, tensor -> its reads, tensor -> the nodes reading it)."""
    consumers = {}
    for n in graph.nodes:
        for i in n.inputs:
            consumers.setdefault(i, []).append(n)
    return {o: n for n in graph.nodes for o in n.outputs if o}, graph.uses(), consumers


def fuse_unrolled(graph, make_node) -> None:
    """Every pattern this module knows, fused in graph.nodes (make_node(op, name, inputs, outputs,
    attrs) builds the fused nodes)."""
    fuse_layer_norm(graph, make_node)
    fuse_tanh_gelu(graph, make_node)
    fuse_erf_gelu(graph, make_node)
    fuse_hard_swish(graph, make_node)


def fuse_layer_norm(graph, make_node) -> None:
    """Replace every unrolled LayerNorm in graph.nodes by one LayerNormalization node (made by make_node(
    op, name, inputs, outputs, attrs)); constants it needs go into graph.consts and graph.shapes."""
    producer, uses, consumers = _graph_index(graph)
    consts = graph.consts
    replace: dict[int, object] = {}  # id(last node of a pattern) -> the fused node
    dead: set[int] = set()
    for div in graph.nodes:
        if div.op != "Div":
            continue
        sub, sqrt = producer.get(div.inputs[0]), producer.get(div.inputs[1])
        if sub is None or sub.op != "Sub" or sqrt is None or sqrt.op != "Sqrt":
            continue
        mean, add = producer.get(sub.inputs[1]), producer.get(sqrt.inputs[0])
        if mean is None or mean.op != "ReduceMean" or mean.inputs[0] != sub.inputs[0] or add is None or add.op != "Add":
            continue
        var = producer.get(add.inputs[0])
        eps = _scalar(add.inputs[1], consts)
        if var is None or var.op != "ReduceMean" or eps is None:
            continue
        sq = producer.get(var.inputs[0])
        if sq is None or not (sq.op == "Pow" and sq.inputs[0] == sub.outputs[0] and _scalar(sq.inputs[1], consts) == 2.0
                              or sq.op == "Mul" and sq.inputs == [sub.outputs[0]] * 2):
            continue
        x = sub.inputs[0]
        if x not in graph.shapes or graph.shapes[x][1] != np.float32:
            continue
        rank = len(graph.shapes[x][0])
        ax1, ax2 = _axes(mean, consts), _axes(var, consts)
        if ax1 is None or ax2 is None or rank == 0:
            continue
        ax = sorted(a % rank for a in ax1)
        if ax != sorted(a % rank for a in ax2) or ax != list(range(rank - len(ax), rank)) or not ax:
            continue
        if not all(n.attrs.get("keepdims", 1) for n in (mean, var)):
            continue
        inner = [mean, sub, sq, var, add, sqrt]
        if uses.get(sub.outputs[0]) != (3 if sq.op == "Mul" else 2) or any(uses.get(n.outputs[0]) != 1 for n in (mean, sq, var, add, sqrt)):
            continue
        norm = tuple(graph.shapes[x][0][ax[0]:])
        gamma, beta = np.ones(norm, np.float32), np.zeros(norm, np.float32)
        chain = [div]
        for op in ("Mul", "Add"):  # the optional affine part, gamma then beta
            tail = chain[-1].outputs[0]
            nxt = consumers.get(tail, [])
            if uses.get(tail) != 1 or len(nxt) != 1 or nxt[0].op != op:
                continue
            other = [i for i in nxt[0].inputs if i != tail]
            if len(other) != 1 or other[0] not in consts or consts[other[0]].ndim > rank:
                continue
            value = _affine(consts[other[0]], norm)
            if value is None:
                continue
            if op == "Mul":
                gamma = value
            else:
                beta = value
            chain.append(nxt[0])
        inner += chain[:-1]
        last = chain[-1]
        name = div.name + "/layer_norm"
        consts[name + "/gamma"], consts[name + "/beta"] = gamma, beta
        graph.shapes[name + "/gamma"] = graph.shapes[name + "/beta"] = (norm, np.dtype(np.float32))
        replace[id(last)] = make_node("LayerNormalization", name, [x, name + "/gamma", name + "/beta"],
                                      [last.outputs[0]], {"axis": ax[0], "epsilon": eps})
        dead.update(id(n) for n in inner)
    graph.nodes = [replace.get(id(n), n) for n in graph.nodes if id(n) not in dead]


def _mul_by(node, value: float, consts) -> str | None:
    """The other operand of node when it is a Mul by the scalar constant value, else None."""
    if node is None or node.op != "Mul" or len(node.inputs) != 2:
        return None
    for a, b in (node.inputs, node.inputs[::-1]):
        v = _scalar(b, consts)
        if v is not None and np.isclose(v, value, rtol=1e-6, atol=0):
            return a
    return None


def _reader(name, uses, consumers):
    """The node that alone reads tensor name, else None."""
    nxt = consumers.get(name, [])
    return nxt[0] if uses.get(name) == 1 and len(nxt) == 1 else None


def _gelu_tail(t, x, producer, uses, consumers, consts):
    """(last node, the nodes after t up to it) of 0.5·x·(1 + t's output), in the three orders
    exporters write the product, else None."""
    one = _reader(t.outputs[0], uses, consumers)
    if one is None or one.op != "Add" or one.inputs.count(t.outputs[0]) != 1:
        return None
    if _scalar(one.inputs[1] if one.inputs[0] == t.outputs[0] else one.inputs[0], consts) != 1.0:
        return None
    m1 = _reader(one.outputs[0], uses, consumers)
    if m1 is None or m1.op != "Mul":
        return None
    other = m1.inputs[1] if m1.inputs[0] == one.outputs[0] else m1.inputs[0]
    if other == x:  # (x·p)·0.5
        last = _reader(m1.outputs[0], uses, consumers)
        return (last, [one, m1]) if _mul_by(last, 0.5, consts) == m1.outputs[0] else None
    if _mul_by(producer.get(other), 0.5, consts) == x and uses.get(other) == 1:  # (0.5·x)·p
        return m1, [one, producer[other]]
    if _mul_by(m1, 0.5, consts) == one.outputs[0]:  # x·(p·0.5)
        last = _reader(m1.outputs[0], uses, consumers)
        ok = last is not None and last.op == "Mul" and sorted(last.inputs) == sorted([x, m1.outputs[0]])
        return (last, [one, m1]) if ok else None
    return None


def fuse_erf_gelu(graph, make_node) -> None:
    """Replace every unrolled erf-form GELU, 0.5·x·(1 + erf(x/√2)) (torch.onnx's nn.GELU before
    opset 20, with x/√2 as a Div or a Mul), by one Gelu node, which lowers in fewer passes than Erf."""
    producer, uses, consumers = _graph_index(graph)
    consts = graph.consts

    replace: dict[int, object] = {}
    dead: set[int] = set()
    for erf in graph.nodes:
        scaled = producer.get(erf.inputs[0]) if erf.op == "Erf" else None
        if scaled is None:
            continue
        root2 = _scalar(scaled.inputs[1], consts) if scaled.op == "Div" and len(scaled.inputs) == 2 else None
        x = scaled.inputs[0] if root2 is not None and np.isclose(root2, math.sqrt(2), rtol=1e-6, atol=0) else None
        x = x or _mul_by(scaled, 1 / math.sqrt(2), consts)
        if x is None or graph.shapes.get(x, (None, None))[1] != np.float32:
            continue
        found = _gelu_tail(erf, x, producer, uses, consumers, consts)
        if found is None:
            continue
        last, tail = found
        inner_nodes = [scaled, erf] + tail
        if any(uses.get(n.outputs[0]) != 1 for n in inner_nodes):
            continue
        replace[id(last)] = make_node("Gelu", last.name + "/gelu", [x], [last.outputs[0]], {"approximate": "none"})
        dead.update(id(n) for n in inner_nodes)
    graph.nodes = [replace.get(id(n), n) for n in graph.nodes if id(n) not in dead]


def fuse_tanh_gelu(graph, make_node) -> None:
    """Replace every unrolled tanh-form GELU in graph.nodes by one Gelu node (approximate="tanh")."""
    producer, uses, consumers = _graph_index(graph)
    consts = graph.consts

    def cube_of(name, x):  # the nodes computing x³ as Pow(x, 3), Mul(Mul(x, x), x) or Mul(x, Mul(x, x))
        n = producer.get(name)
        if n is None:
            return None
        if n.op == "Pow" and n.inputs[0] == x and _scalar(n.inputs[1], consts) == 3.0:
            return [n]
        if n.op != "Mul" or x not in n.inputs:
            return None
        sq = producer.get(n.inputs[1] if n.inputs[0] == x else n.inputs[0])
        if sq is None or sq.op != "Mul" or sq.inputs != [x, x] or uses.get(sq.outputs[0]) != 1:
            return None
        return [n, sq]

    replace: dict[int, object] = {}
    dead: set[int] = set()
    for th in graph.nodes:
        if th.op != "Tanh":
            continue
        scaled = producer.get(th.inputs[0])
        inner = producer.get(_mul_by(scaled, math.sqrt(2 / math.pi), consts))
        if inner is None or inner.op != "Add":
            continue
        for x, m in (inner.inputs, inner.inputs[::-1]):
            cube = _mul_by(producer.get(m), 0.044715, consts)
            body = cube_of(cube, x) if cube is not None else None
            if body is not None:
                body += [producer[m]]
                break
        else:
            continue
        if graph.shapes.get(x, (None, None))[1] != np.float32:
            continue
        found = _gelu_tail(th, x, producer, uses, consumers, consts)
        if found is None:
            continue
        last, tail = found
        inner_nodes = body + [inner, scaled, th] + tail
        if any(uses.get(n.outputs[0]) != 1 for n in inner_nodes):
            continue
        replace[id(last)] = make_node("Gelu", last.name + "/gelu", [x], [last.outputs[0]], {"approximate": "tanh"})
        dead.update(id(n) for n in inner_nodes)
    graph.nodes = [replace.get(id(n), n) for n in graph.nodes if id(n) not in dead]


def clip_bounds(n, graph) -> tuple[float | None, float | None] | None:
    """(min, max) of a Clip whose bounds are constants (None where absent), else None."""
    if graph.opset < 11:
        return n.attrs.get("min"), n.attrs.get("max")
    ins = n.inputs + ["", ""]
    # Bounds are scalars by the spec; exporters also write one-element tensors.
    if any(i and (i not in graph.consts or graph.consts[i].size != 1) for i in ins[1:3]):
        return None
    return tuple(float(graph.consts[i].reshape(-1)[0]) if i else None for i in ins[1:3])


def fuse_hard_swish(graph, make_node) -> None:
    """Replace every Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6) in graph.nodes by one HardSwish node."""
    producer, uses, _ = _graph_index(graph)
    consts = graph.consts

    def only_use(name, op):  # the node writing name when it is an `op` that nothing else reads
        n = producer.get(name)
        return n if n is not None and n.op == op and uses.get(name) == 1 else None

    replace: dict[int, object] = {}
    dead: set[int] = set()
    for div in graph.nodes:
        if div.op != "Div" or len(div.inputs) != 2 or _scalar(div.inputs[1], consts) != 6.0:
            continue
        mul = only_use(div.inputs[0], "Mul")
        if mul is None or len(mul.inputs) != 2:
            continue
        for x, c in (mul.inputs, mul.inputs[::-1]):
            clip = only_use(c, "Clip")
            if clip is None or clip_bounds(clip, graph) != (0.0, 6.0):
                continue
            add = only_use(clip.inputs[0], "Add")
            if add is None or len(add.inputs) != 2 or x not in add.inputs:
                continue
            three = add.inputs[1 - add.inputs.index(x)]
            shape, dtype = graph.shapes.get(x, (None, None))
            if _scalar(three, consts) != 3.0 or dtype != np.float32 or shape is None:
                continue
            if max(consts[three].ndim, consts[div.inputs[1]].ndim) > len(shape):  # a 3 or 6 that broadcasts x up
                continue
            replace[id(div)] = make_node("HardSwish", div.name + "/hard_swish", [x], [div.outputs[0]], {})
            dead.update((id(add), id(clip), id(mul)))
            break
    graph.nodes = [replace.get(id(n), n) for n in graph.nodes if id(n) not in dead]
