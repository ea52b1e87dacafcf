"""ONNX -> v0: load, fix the input shapes, fold constants, fuse, then emit op by op.

The ONNX graph is first made static: dynamic batch dims become `batch`, onnx shape inference
gives every tensor a shape, and every node whose inputs are known (Shape of a static tensor
included) is evaluated with onnx's reference evaluator, so Shape->Gather->Concat->Reshape
chains become constants; an If whose condition folds becomes its taken branch, and an integer
`x * 0` becomes zeros (onnx_fold); folding and inference repeat until nothing changes (an If
that does not fold becomes v0 control flow over its branches, onnx_control). Then unrolled LayerNorms,
GELUs and hard-swishes (onnx_patterns), Conv/ConvTranspose+Add/Mul of constants and
+BatchNormalization, and Conv/Gemm/Add+Relu/Clip(0,6) are fused, and the
handlers (onnx_ops, onnx_nn, onnx_shape, onnx_rnn, onnx_lowered, onnx_unary, onnx_index, onnx_norm)
emit each remaining node.
"""
from __future__ import annotations

import heapq
import os
import select
import signal
import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from msv0 import dtypes
# importing the handler modules registers their handlers
from msv0.convert import (onnx_attention, onnx_control, onnx_dynq, onnx_grid_sample, onnx_index,  # noqa: F401
                          onnx_lowered, onnx_nn, onnx_norm, onnx_ops, onnx_rnn, onnx_shape, onnx_spectral,
                          onnx_unary)
from msv0.convert.emit import Emitter, Unsupported, Val
from msv0.convert.onnx_ctx import HANDLERS, Ctx
from msv0.convert.onnx_fold import inline_branch, taken_branch, zero_product
from msv0.convert.onnx_fp16 import widen_fp16
from msv0.convert.onnx_patterns import clip_bounds, fuse_unrolled
from msv0.errors import Error, ModelError, UnsupportedOpError
from msv0.fb.ActivationType import ActivationType
from msv0.fb.Format import Format
from msv0.fb.NodeType import NodeType
from msv0.progress import progress

# Ops that are never folded at conversion time (random or with side effects).
_NO_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli",
            "If", "Loop", "Scan"}


@dataclass
class ONode:
    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict
    proto: object = None
    fused_act: int = ActivationType.NO_ACTIVATION  # activationType fused into this node
    extra: dict = field(default_factory=dict)


@dataclass
class OGraph:
    nodes: list[ONode]
    consts: dict[str, np.ndarray]
    shapes: dict[str, tuple[tuple[int, ...], np.dtype]]
    inputs: list[str]
    outputs: list[str]
    opset: int
    name: str
    in_branch: bool = False  # an If branch's graph, whose inputs are the outer values it reads

    def uses(self) -> dict[str, int]:
        """How many node inputs and graph outputs read each tensor name."""
        count: dict[str, int] = {}
        for n in self.nodes:
            for i in n.inputs:
                count[i] = count.get(i, 0) + 1
        for o in self.outputs:
            count[o] = count.get(o, 0) + 1
        return count


def _onnx():
    try:
        import onnx
    except ImportError:
        raise ImportError("converting ONNX models needs the 'onnx' package (pip install onnx)") from None
    return onnx


def _attrs(node) -> dict:
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _fix_inputs(model, batch, input_shapes: dict, input_values: dict):
    init = {t.name for t in model.graph.initializer}
    names = [vi.name for vi in model.graph.input if vi.name not in init]
    for what, given in (("input_shapes", input_shapes), ("input_values", input_values)):
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ModelError(f"{what} names {unknown}, which are not inputs of the model (its inputs: {names})")
    _freeze(model, input_values)
    for vi in model.graph.input:
        if vi.name in init:
            continue
        tt = vi.type.tensor_type
        if vi.name in input_shapes:
            _pin(vi, [int(d) for d in input_shapes[vi.name]])
        if not tt.HasField("shape"):
            raise ModelError(f"ONNX input '{vi.name}' has no shape")
        for k, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            if d.HasField("dim_value") and d.dim_value == 0:
                raise UnsupportedOpError(f"ONNX input '{vi.name}' has an empty (size 0) dimension {k}",
                                         [(vi.name, "graph input", "empty tensor")])
            # dynamic: a dim_param, no value at all, or -1 (what Paddle's exporter writes)
            if k == 0 and batch is not None:
                d.Clear()
                d.dim_value = int(batch)
            elif k == 0:
                raise ModelError(f"ONNX input '{vi.name}' has a dynamic batch dimension: pass batch=N (--batch N)")
            else:
                raise ModelError(f"ONNX input '{vi.name}' dim {k} is dynamic ('{d.dim_param or d.dim_value}'): give its "
                                 f"shape, input_shapes={{'{vi.name}': (...)}} (--shape {vi.name}=d0,d1,...)")


def _freeze(model, values: dict) -> None:
    """Inputs named in values become initializers holding them (in the input's dtype, and its shape
    where that is static), so that what depends on them folds: silero-vad's sample-rate input picks
    an If branch whose other branch has no static shapes for the input size of this one."""
    from onnx import helper, numpy_helper
    for vi in [vi for vi in model.graph.input if vi.name in values]:
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in tt.shape.dim]
        try:
            given = np.asarray(values[vi.name])
            v = given.astype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        except (TypeError, ValueError) as err:
            raise ModelError(f"input_values: '{vi.name}': {err}") from err
        if v.dtype.kind in "iub" and not np.array_equal(given, v):
            raise ModelError(f"input_values: '{vi.name}' is {v.dtype}, which cannot hold {given.tolist()}")
        if tt.HasField("shape") and (len(dims) != v.ndim and not (-1 not in dims and int(np.prod(dims)) == v.size)
                                     or len(dims) == v.ndim and any(d not in (-1, n) for d, n in zip(dims, v.shape))):
            raise ModelError(f"input_values: '{vi.name}' is {['?' if d < 0 else d for d in dims]} in the model, "
                             f"the value given {list(v.shape)}")
        if -1 not in dims and tt.HasField("shape"):
            v = v.reshape(dims)
        model.graph.initializer.append(numpy_helper.from_array(v, vi.name))
        model.graph.input.remove(vi)


def _pin(vi, dims: list[int]) -> None:
    """Sets input vi's shape to dims, which keep its rank and the sizes it fixes."""
    tt = vi.type.tensor_type
    old = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tt.shape.dim]
    if tt.HasField("shape") and (len(old) != len(dims) or any(o is not None and o != d for o, d in zip(old, dims))):
        shown = ["?" if o is None else o for o in old]
        raise ModelError(f"input_shapes: '{vi.name}' is {shown} in the model, not {dims}")
    if any(d < 1 for d in dims):
        raise ModelError(f"input_shapes: '{vi.name}' {dims} has a dimension below 1")
    tt.ClearField("shape")
    tt.shape.SetInParent()
    for d in dims:
        tt.shape.dim.add().dim_value = d


def _loose_outputs(model) -> dict:
    """Clears the shapes the graph declares for its outputs and other values (value_info), which
    inference then gives from the nodes, and returns those that were static: exporters write wrong
    ones (ddddocr's OCR model declares [1, seqlen] for a [20, 1, 8210] output; onnx-asr's resamplers
    symbolic dims for a mask), which ONNX Runtime merges leniently and onnx's inference would keep,
    leaving the value without a shape. A declared static shape serves where inference finds none."""
    from onnx import helper
    declared = {}
    for vi in list(model.graph.output) + list(model.graph.value_info):
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        if tt.elem_type and all(d >= 0 for d in dims):
            declared[vi.name] = (tuple(dims), np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)))
        tt.ClearField("shape")
    del model.graph.value_info[:]  # their types too: inference infers them with the shapes
    return declared


# onnx infers a real model's shapes in well under a second; the fuzzer found an 835-byte file it
# spends 40 s on. Past this, in all for one conversion (folding reruns inference), the child is
# killed and the conversion goes on without the shapes it has not got.
INFER_SECONDS = 5.0


def _inferred(model, deadline: float):
    """The model with onnx's inferred shapes, or the model itself where inference fails or runs
    past the deadline (time.monotonic()). onnx's C++ inference can kill the process on a
    malformed model (a LayerNormalization axis out of range segfaults onnx 1.2x), so it runs in
    a forked child that sends the result back."""
    if time.monotonic() >= deadline:
        return model
    onnx = _onnx()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: infer, send, and leave without running the parent's cleanup
        os.close(read_end)
        try:
            data = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True).SerializeToString()
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    with os.fdopen(read_end, "rb", buffering=0) as src:
        while True:
            if not select.select([src], [], [], max(0.0, deadline - time.monotonic()))[0]:
                os.kill(pid, signal.SIGKILL)  # out of time: go on without the shapes
                chunks = []
                break
            chunk = src.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    data = b"".join(chunks)
    if status != 0 or not data:
        return model
    return onnx.load_from_string(data)


def _shapes(model, deadline: float) -> dict:
    from onnx import helper
    inferred = _inferred(model, deadline)
    out = {}
    g = inferred.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape") or tt.elem_type == 0:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        if all(d >= 0 for d in dims):
            out[vi.name] = (tuple(dims), np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)))
    return out


def _evaluate(node, values: list[np.ndarray | None], opset: int) -> list[np.ndarray]:
    _onnx()
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for n, v in zip(node.input, values) if n]
    outs = [helper.make_tensor_value_info(n, 0, None) for n in node.output if n]
    g = helper.make_graph([node], "fold", ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {n: v for n, v in zip(node.input, values) if n}
    res = ReferenceEvaluator(m).run(None, feeds)
    return [np.asarray(r) for r in res]


def _sort_nodes(g) -> None:
    """g's nodes, in place, each after the producers of what it reads, its subgraphs' reads of
    outer names included (otherwise in file order). onnxruntime's quantizer sorts by explicit
    inputs only and can put an If before the producer of a value its branch reads (silero-vad
    after quantize_dynamic): once the If was inlined, onnx's shape inference saw that value read
    before it was written and left everything after it without shapes."""
    producer = {o: k for k, n in enumerate(g.node) for o in n.output if o}
    users: list[list[int]] = [[] for _ in g.node]
    missing = [0] * len(g.node)
    for k, n in enumerate(g.node):
        nested = [sg for a in n.attribute for sg in ([a.g] if a.HasField("g") else a.graphs)]
        deps = {producer[x] for x in [*n.input, *(r for sg in nested for r in onnx_control.outer_reads(sg))]
                if x in producer} - {k}
        missing[k] = len(deps)
        for j in deps:
            users[j].append(k)
    ready = [k for k, m in enumerate(missing) if m == 0]
    order: list[int] = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for u in users[k]:
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(ready, u)
    if len(order) < len(g.node) or order == sorted(order):  # a cycle is reported later; sorted: nothing to do
        return
    nodes = [type(g.node[k])() for k in order]
    for node, k in zip(nodes, order):
        node.CopyFrom(g.node[k])
    del g.node[:]
    g.node.extend(nodes)


def load_graph(src, batch=None, input_shapes=None, input_values=None) -> OGraph:
    """src: a path, bytes, or a ModelProto this converter loaded (which load_graph changes)."""
    onnx = _onnx()
    from onnx import numpy_helper
    if isinstance(src, onnx.ModelProto):
        model = src
    else:
        model = onnx.load(src) if not isinstance(src, (bytes, bytearray)) else onnx.load_from_string(bytes(src))
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    widen_fp16(model)
    _fix_inputs(model, batch, input_shapes or {}, input_values or {})
    _sort_nodes(model.graph)
    declared = _loose_outputs(model)
    g = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    deadline = time.monotonic() + INFER_SECONDS
    shapes = {**declared, **_shapes(model, deadline)}
    for name, v in consts.items():
        shapes[name] = (v.shape, v.dtype)
    inputs = [vi.name for vi in g.input if vi.name not in consts]
    nodes = [_onode(n, i) for i, n in enumerate(g.node)]
    graph = OGraph(nodes, consts, shapes, inputs, [vi.name for vi in g.output], opset, g.name or "onnx")
    initial = {t.name for t in g.initializer}
    # Folding can give shape inference what it lacked (a Reshape target, a taken If branch), and
    # new shapes let more Shape nodes fold: repeat until nothing changes.
    while True:
        changed = _fold(graph)
        changed = _declare_custom_shapes(graph, g) or changed
        if not changed or all(o in graph.shapes or o in graph.consts for n in graph.nodes for o in n.outputs if o):
            break
        for name, v in graph.consts.items():
            if name not in initial:
                g.initializer.append(numpy_helper.from_array(v, name))
                initial.add(name)
        del g.node[:]
        g.node.extend(n.proto for n in graph.nodes)
        graph.shapes.update(_shapes(model, deadline))
    return graph


def _stft_shapes(n: ONode, graph: OGraph) -> list | None:
    """STFT's [batch, frames, bins, 2], also of a rank-2 signal, which ONNX Runtime takes as
    [batch, length, 1] and onnx's inference leaves unknown, and with onesided missing, which the
    spec and ONNX Runtime take as 1 and onnx's inference as 0 (onnx-asr's preprocessors)."""
    x = graph.shapes.get(n.inputs[0])
    step, length = (graph.consts.get(n.inputs[k]) if len(n.inputs) > k else None for k in (1, 3))
    window = graph.shapes.get(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
    if x is None or len(x[0]) not in (2, 3) or step is None:
        return None
    (batch, samples, *_), dtype = x
    frame = int(length.reshape(-1)[0]) if length is not None else window[0][0] if window else samples
    onesided = n.attrs.get("onesided", 1)
    if not 1 <= frame <= samples or int(step.reshape(-1)[0]) < 1:
        return None
    frames = 1 + (samples - frame) // int(step.reshape(-1)[0])
    return [((batch, frames, frame // 2 + 1 if onesided else frame, 2), dtype)]


def _lstm_shapes(n: ONode, graph: OGraph) -> list | None:
    """An LSTM's output shapes (Y [seq, dirs, batch, H], Y_h and Y_c [dirs, batch, H]) from its
    time-major X's, or None while X has none."""
    x = graph.shapes.get(n.inputs[0])
    if x is None or len(x[0]) != 3 or "hidden_size" not in n.attrs:
        return None
    (seq, batch, _), dtype = x
    dirs, hid = 2 if n.attrs.get("direction") in ("bidirectional", b"bidirectional") else 1, int(n.attrs["hidden_size"])
    return [((seq, dirs, batch, hid), dtype), ((dirs, batch, hid), dtype), ((dirs, batch, hid), dtype)]


def _input_shape(n: ONode, graph: OGraph) -> list | None:
    x = graph.shapes.get(n.inputs[0])
    return None if x is None else [x]


# Output shapes that onnx's inference leaves unknown or gets wrong, and with them everything
# downstream: operators of other domains, GroupNormalization and MeanVarianceNormalization (with
# default axes), whose function bodies it fails on, and STFT (see _stft_shapes). A rule's shape
# replaces onnx's.
CUSTOM_SHAPES = {"com.microsoft.DynamicQuantizeLSTM": _lstm_shapes, "STFT": _stft_shapes,
                 "GroupNormalization": _input_shape, "MeanVarianceNormalization": _input_shape}


def _declare_custom_shapes(graph: OGraph, g) -> bool:
    """Gives the outputs of CUSTOM_SHAPES operators their shapes, in graph.shapes and as value_info
    of g for the next inference to start from. Whether any changed."""
    from onnx import helper
    added = False
    for n in graph.nodes:
        rule = CUSTOM_SHAPES.get(n.op)
        outs = rule(n, graph) if rule else None
        for name, (shape, dtype) in zip(n.outputs, outs or []):
            if not name or graph.shapes.get(name, (None,))[0] == tuple(shape):
                continue
            graph.shapes[name] = (tuple(shape), dtype)
            for vi in [vi for vi in g.value_info if vi.name == name]:
                g.value_info.remove(vi)
            g.value_info.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(dtype), shape))
            added = True
    return added


def _onode(n, i: int) -> ONode:
    return ONode(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}",
                 n.name or f"{n.op_type}_{i}", list(n.input), list(n.output), _attrs(n), n)


def _fold(graph: OGraph) -> bool:
    """Evaluate every node whose value is known at conversion time and drop it from the graph;
    inline the taken branch of an If with a known condition. Whether anything changed."""
    kept, todo, changed = [], list(reversed(graph.nodes)), False
    while todo:
        n = todo.pop()
        known = all(i == "" or i in graph.consts for i in n.inputs)
        if n.op in ("Shape", "Size") and n.inputs[0] in graph.shapes:
            shape = graph.shapes[n.inputs[0]][0]
            value = np.array(shape, np.int64)
            if n.op == "Shape":
                r = len(shape)
                start, end = n.attrs.get("start", 0), n.attrs.get("end", r)
                value = value[slice(start, end)]
            else:
                value = np.array(int(np.prod(shape)), np.int64)
            graph.consts[n.outputs[0]] = value
            graph.shapes[n.outputs[0]] = (value.shape, value.dtype)
            changed = True
            continue
        zero = zero_product(n, graph.consts, graph.shapes)
        if zero is not None:
            graph.consts[n.outputs[0]] = zero
            graph.shapes[n.outputs[0]] = (zero.shape, zero.dtype)
            changed = True
            continue
        if n.op == "If" and n.inputs[0] in graph.consts:
            branch = taken_branch(n, graph.consts[n.inputs[0]])
            todo.extend(reversed(inline_branch(n, branch, lambda p: _onode(p, 0), graph.consts)))
            changed = True
            continue
        if not known or n.op in _NO_FOLD or "." in n.op or not n.outputs:
            kept.append(n)
            continue
        try:
            res = _evaluate(n.proto, [graph.consts.get(i) if i else None for i in n.inputs], graph.opset)
        except Exception:
            kept.append(n)
            continue
        for name, v in zip([o for o in n.outputs if o], res):
            graph.consts[name] = v
            graph.shapes[name] = (v.shape, v.dtype)
        changed = True
    graph.nodes = kept
    return changed


def _fold_affine(graph: OGraph) -> None:
    """Conv/ConvTranspose followed by an Add or a Mul of a per-channel or scalar constant -> the
    convolution with that bias added, or with its weights and bias scaled (as ONNX Runtime folds
    them): Paddle's exporter writes conv biases as an Add, so a BatchNormalization after it folds,
    and PP-LCNetV3's learnable affine blocks as x·a + b after a conv. MatMul by a constant matrix
    followed by an Add of a constant over its last axis (a linear layer as torch exports it) ->
    that MatMul with the bias as a third input, which becomes the FullConnection's bias, added in
    the GEMM's store instead of in a pass of its own."""
    uses = graph.uses()
    producer = {o: n for n in graph.nodes for o in n.outputs}
    drop = set()
    for n in graph.nodes:
        if n.op not in ("Add", "Mul") or len(n.inputs) != 2:
            continue
        for x, c in (n.inputs, n.inputs[::-1]):
            p, k = producer.get(x), graph.consts.get(c)
            if n.op == "Add" and p is not None and p.op == "MatMul" and k is not None and uses.get(x) == 1 and id(p) not in drop:
                if _fold_matmul_bias(graph, p, n, k):
                    drop.add(id(n))
                    break
                continue
            if (p is None or k is None or k.dtype != np.float32 or p.op not in ("Conv", "ConvTranspose")
                    or uses.get(x) != 1 or id(p) in drop or p.inputs[1] not in graph.consts):
                continue
            old = p.inputs[2] if len(p.inputs) > 2 and p.inputs[2] else None
            if old is not None and old not in graph.consts:
                continue
            w = graph.consts[p.inputs[1]]
            cout = w.shape[0] if p.op == "Conv" else w.shape[1] * int(p.attrs.get("group", 1))
            full = (1,) * (w.ndim - k.ndim) + k.shape  # aligned to the NC... output
            if k.ndim > w.ndim or full[1] not in (1, cout) or any(d != 1 for i, d in enumerate(full) if i != 1):
                continue
            k = np.broadcast_to(k.reshape(-1), (cout,))
            b = graph.consts[old] if old is not None else np.zeros(cout, np.float32)
            if n.op == "Mul":
                graph.consts[p.name + "/mul_weight"] = _scaled_out_channels(p, w, k)
                p.inputs = [p.inputs[0], p.name + "/mul_weight"]
            name = p.name + "/affine_bias"
            graph.consts[name] = (b + k if n.op == "Add" else b * k).astype(np.float32)
            p.inputs = [p.inputs[0], p.inputs[1], name]
            p.outputs = [n.outputs[0]]
            producer[n.outputs[0]] = p
            drop.add(id(n))
            break
    graph.nodes = [n for n in graph.nodes if id(n) not in drop]


def _fold_into_next_conv(graph: OGraph) -> None:
    """A Mul or an Add of a scalar constant whose only reader is a Conv that pads nothing -> that
    Conv with its weights scaled, or with b·(the sum of each output channel's weights) added to
    its bias: conv(a·x + b) = (a·W)·x + b·ΣW wherever every tap reads x. PP-LCNetV3 writes such an
    affine block after each hard-swish, in front of the next conv."""
    uses = graph.uses()
    producer = {o: n for n in graph.nodes for o in n.outputs}
    drop = set()
    for p in graph.nodes:
        if (p.op != "Conv" or any(p.attrs.get("pads", [])) or p.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID")
                or p.inputs[1] not in graph.consts or len(p.inputs) > 2 and p.inputs[2] and p.inputs[2] not in graph.consts):
            continue
        while True:
            q = producer.get(p.inputs[0])
            if q is None or q.op not in ("Add", "Mul") or len(q.inputs) != 2 or uses.get(q.outputs[0]) != 1:
                break
            consts = [i for i in q.inputs if i in graph.consts]
            if len(consts) != 1 or graph.consts[consts[0]].size != 1 or graph.consts[consts[0]].dtype != np.float32:
                break
            x = q.inputs[1 - q.inputs.index(consts[0])]
            if x not in graph.shapes or graph.shapes[x] != graph.shapes.get(q.outputs[0]):  # the constant broadcasts x up
                break
            k = float(graph.consts[consts[0]].reshape(-1)[0])
            w = graph.consts[p.inputs[1]]
            bias = graph.consts[p.inputs[2]] if len(p.inputs) > 2 and p.inputs[2] else np.zeros(w.shape[0], np.float32)
            if q.op == "Mul":
                graph.consts[p.name + "/pre_weight"] = (w * np.float32(k)).astype(np.float32)
            else:
                graph.consts[p.name + "/pre_bias"] = (bias + k * w.sum(axis=tuple(range(1, w.ndim)), dtype=np.float64)).astype(np.float32)
            weight = p.name + "/pre_weight" if q.op == "Mul" else p.inputs[1]
            p.inputs = [x, weight, p.name + "/pre_bias"] if q.op == "Add" else [x, weight, *p.inputs[2:]]
            drop.add(id(q))
    graph.nodes = [n for n in graph.nodes if id(n) not in drop]


def _scaled_out_channels(p: ONode, w: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The weights w of Conv/ConvTranspose p with each output channel's times s[channel], in float32."""
    if p.op == "Conv":  # [Cout, Cin/g, k...]
        return (w * s.reshape(-1, *([1] * (w.ndim - 1)))).astype(np.float32)
    # ConvTranspose: [Cin, Cout/g, k...], output channel = group * Cout/g + column
    g = int(p.attrs.get("group", 1))
    k = [1] * (w.ndim - 2)
    return (w.reshape(g, -1, *w.shape[1:]) * s.reshape(g, 1, -1, *k)).reshape(w.shape).astype(np.float32)


def _fold_matmul_bias(graph: OGraph, p: ONode, add: ONode, bias: np.ndarray) -> bool:
    """Gives MatMul p (x · W, W a constant matrix) the bias that add adds to its output, when
    that bias is the same along every axis but the last (so the Add's output shape is p's)."""
    w, x = graph.consts.get(p.inputs[1]), graph.shapes.get(p.inputs[0])
    if w is None or w.ndim != 2 or x is None or len(x[0]) < 2 or x[1] != np.float32 or bias.dtype != np.float32:
        return False
    n = w.shape[1]
    if bias.ndim > len(x[0]) or bias.size not in (1, n) or any(d != 1 for d in bias.shape[:-1]):
        return False
    name = p.name + "/add_bias"
    graph.consts[name] = np.ascontiguousarray(np.broadcast_to(bias.reshape(-1), (n,)))
    graph.shapes[name] = ((n,), np.dtype(np.float32))
    p.inputs = [p.inputs[0], p.inputs[1], name]
    p.outputs = [add.outputs[0]]
    return True


def _fuse(graph: OGraph) -> None:
    """Conv/ConvTranspose+Add/Mul and MatMul+bias Add folding, Conv/ConvTranspose+BatchNormalization weight
    folding, then Relu/Clip(0,6) into Conv/Gemm/Add and a MatMul that took a bias."""
    _fold_affine(graph)
    _fold_into_next_conv(graph)
    uses = graph.uses()
    producer = {o: n for n in graph.nodes for o in n.outputs}
    drop = set()
    for n in graph.nodes:
        if n.op != "BatchNormalization" or len(n.outputs) > 1 and any(n.outputs[1:]):
            continue
        p = producer.get(n.inputs[0])
        if (p is None or p.op not in ("Conv", "ConvTranspose") or uses.get(p.outputs[0]) != 1 or id(p) in drop
                or any(i not in graph.consts for i in n.inputs[1:5]) or p.inputs[1] not in graph.consts):
            continue
        if len(p.inputs) > 2 and p.inputs[2] and p.inputs[2] not in graph.consts:
            continue
        scale, bias, mean, var = (graph.consts[i].astype(np.float64) for i in n.inputs[1:5])
        s = scale / np.sqrt(var + n.attrs.get("epsilon", 1e-5))
        w2 = _scaled_out_channels(p, graph.consts[p.inputs[1]], s)
        b = graph.consts[p.inputs[2]] if len(p.inputs) > 2 and p.inputs[2] else np.zeros(len(s))
        b2 = ((b - mean) * s + bias).astype(np.float32)
        wn, bn = p.name + "/bn_weight", p.name + "/bn_bias"
        graph.consts[wn], graph.consts[bn] = w2, b2
        p.inputs = [p.inputs[0], wn, bn]
        p.outputs = [n.outputs[0]]
        drop.add(id(n))
    graph.nodes = [n for n in graph.nodes if id(n) not in drop]
    uses = graph.uses()
    producer = {o: n for n in graph.nodes for o in n.outputs}
    for n in graph.nodes:
        act = _activation_of(n, graph)
        if not act:
            continue
        p = producer.get(n.inputs[0])
        if p is None or p.op not in ("Conv", "Gemm", "Add", "ConvTranspose", "MatMul") or p.fused_act:
            continue
        # a MatMul with a folded bias is sure to become a FullConnection; others may not
        if uses.get(p.outputs[0]) != 1 or p.op == "MatMul" and len(p.inputs) != 3:
            continue
        p.fused_act = act
        p.outputs = [n.outputs[0]]
        drop.add(id(n))
    graph.nodes = [n for n in graph.nodes if id(n) not in drop]
    _fuse_swish(graph)


def _fuse_swish(graph: OGraph) -> None:
    """Mul(x, Sigmoid(x)) with the Sigmoid read by that Mul alone (SiLU as torch exports it) -> one
    Swish node: v0's SWISH activation is x·sigmoid(x) with the same sigmoid, one pass for two."""
    uses = graph.uses()
    producer = {o: n for n in graph.nodes for o in n.outputs}
    drop = set()
    for n in graph.nodes:
        if n.op != "Mul" or len(n.inputs) != 2:
            continue
        for x, s in (n.inputs, n.inputs[::-1]):
            sig = producer.get(s)
            if sig is not None and sig.op == "Sigmoid" and sig.inputs == [x] and uses.get(s) == 1 and id(sig) not in drop:
                n.op, n.inputs, n.attrs = "Swish", [x], {}
                drop.add(id(sig))
                break
    graph.nodes = [n for n in graph.nodes if id(n) not in drop]


def _activation_of(n: ONode, graph: OGraph) -> int:
    if n.op == "Relu":
        return ActivationType.RELU
    bounds = clip_bounds(n, graph) if n.op == "Clip" else None
    if bounds is None or bounds[0] is None:
        return ActivationType.NO_ACTIVATION
    lo, hi = bounds
    if lo == 0 and hi == 6:
        return ActivationType.RELU6
    if lo == 0 and (hi is None or hi >= 3.4e38):
        return ActivationType.RELU
    return ActivationType.NO_ACTIVATION


def convert_onnx(src, *, keep_nchw_input=False, batch=None, input_shapes=None, input_values=None) -> bytes:
    try:
        return _convert(src, keep_nchw_input, batch, input_shapes, input_values)
    except (Error, ImportError):
        raise
    except Exception as err:  # a malformed protobuf or graph surfaces as decode, type or index errors
        raise ModelError(f"cannot convert the ONNX model: {type(err).__name__}: {err}") from err


def _convert(src, keep_nchw_input: bool, batch, input_shapes, input_values) -> bytes:
    e, _ = emit_graph(load_graph(src, batch, input_shapes, input_values), keep_nchw_input)
    return e.b.finish()


def emit_graph(graph: OGraph, keep_nchw_input: bool) -> tuple[Emitter, dict[str, Val]]:
    """The v0 graph being built, and the value each ONNX tensor name became (onnx_quant reads it)."""
    fuse_unrolled(graph, ONode)
    _fuse(graph)
    e = Emitter(graph.name)
    vals: dict[str, Val] = {}
    for name, v in graph.consts.items():
        vals[name] = Val(tuple(v.shape), v.dtype, const=v)
    bad: list[tuple[str, str, str]] = []
    for name in graph.inputs:
        if name not in graph.shapes:
            bad.append((name, "graph input", "not a tensor with a static shape (sequence/optional inputs have no v0 form)"))
            continue
        shape, dtype = graph.shapes[name]
        if not _dtype_ok(dtype):
            bad.append((name, "graph input", f"dtype {dtype} has no v0 TypeId"))
            continue
        if len(shape) == 4 and not keep_nchw_input:
            v = Val(shape, dtype, nhwc=True)
            v.index = e.b.input(name, v.stored_shape, dtype)
        else:
            v = Val(shape, dtype)
            v.index = e.b.input(name, shape, dtype, format=Format.NCHW if len(shape) == 4 else Format.NHWC)
        vals[name] = v
    _emit_nodes(e, graph, vals, bad)
    if bad:
        lines = "\n".join(f"  {name}: {op} ({why})" for name, op, why in bad)
        raise UnsupportedOpError(f"{len(bad)} ONNX node(s) cannot be converted:\n{lines}", bad)
    _outputs(e, graph, vals)
    return e, vals


def _emit_nodes(e: Emitter, graph: OGraph, vals: dict[str, Val], bad: list[tuple[str, str, str]]) -> None:
    """Emit every node of graph whose inputs are in vals; what cannot be converted joins bad."""
    branches = partial(_emit_branches, e, graph, vals, bad=bad)
    poisoned = {name for name, _, _ in bad}  # already reported: do not report their consumers again
    for n in progress(graph.nodes, len(graph.nodes), "converting"):
        if any(name in poisoned for name in n.inputs if name):
            poisoned.update(o for o in n.outputs if o)
            continue
        try:
            handler = HANDLERS.get(n.op)
            if handler is None:
                raise Unsupported("no v0 equivalent")
            if any(i and i not in vals for i in n.inputs):
                raise Unsupported("an input has no static shape")
            _check_dtypes(n, graph, vals)
            ctx = Ctx(e, graph, vals, n, branches)
            handler(ctx)
        except Unsupported as err:
            bad.append((n.name, n.op, str(err)))
            for o in n.outputs:
                if o in graph.shapes:
                    shape, dtype = graph.shapes[o]
                    vals[o] = Val(shape, dtype, index=-1)
                elif o:  # its consumers fail only because of it: not reported again
                    poisoned.add(o)
        except Error:
            raise
        except Exception as err:  # attributes or inputs of a kind the node's handler cannot read
            raise ModelError(f"ONNX node '{n.name}' ({n.op}): {type(err).__name__}: {err}") from err


def _emit_branches(e: Emitter, outer: OGraph, outer_vals: dict[str, Val], protos, routed: list[str],
                   reads: list[str], *, bad: list) -> list[tuple[int, list[Val]]] | None:
    """Each branch GraphProto as a v0 subgraph whose inputs are the outer values `routed`
    (in that order): the branch is made a model of its own (outer constants it reads become its
    initializers), made static and folded like the main graph, and emitted into e. Outputs are
    stored plain. Problems join bad; then None."""
    from onnx import helper, numpy_helper
    result, failed = [], False
    for proto in protos:
        ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(outer_vals[n].dtype),
                                             outer_vals[n].shape) for n in routed]
        consts = [numpy_helper.from_array(outer_vals[n].const, n) for n in reads if n not in routed]
        g = helper.make_graph(list(proto.node), proto.name or "branch", ins, list(proto.output),
                              initializer=list(proto.initializer) + consts)
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", outer.opset)])
        sub = load_graph(model.SerializeToString())
        sub.name, sub.in_branch = f"{outer.name}/{proto.name}", True
        fuse_unrolled(sub, ONode)
        _fuse(sub)
        vals = {name: Val(tuple(v.shape), v.dtype, const=v) for name, v in sub.consts.items()}
        for name in routed:
            v = outer_vals[name]
            vals[name] = Val(v.shape, v.dtype, nhwc=v.nhwc)
            vals[name].index = e.b.tensor(f"{sub.name}/{name}", v.dtype, shape=v.stored_shape)
        first, problems = len(e.b.graph.nodes), []
        _emit_nodes(e, sub, vals, problems)
        bad.extend(problems)
        failed = failed or bool(problems)
        if failed:
            continue
        outs = [e.plain(vals[o], o) for o in sub.outputs]
        out_idx = [e.index(v, f"{sub.name}/{o}") for v, o in zip(outs, sub.outputs)]
        claimed = {n for sg in (e.b.graph.subGraph or [])[1:] for n in sg.nodeIndices}
        nodes = [n for n in range(first, len(e.b.graph.nodes)) if n not in claimed]
        index = e.b.subgraph(sub.name, [vals[n].index for n in routed], out_idx, nodes)
        result.append((index, outs))
    return None if failed else result


def _dtype_ok(dtype) -> bool:
    try:
        return np.dtype(dtype) in dtypes.FROM_NUMPY
    except TypeError:
        return False


def _check_dtypes(n: ONode, graph: OGraph, vals: dict[str, Val]) -> None:
    """Refuse a node touching a dtype v0 has no TypeId for (bfloat16, float8, int4, string, ...)."""
    seen = [vals[i].dtype for i in n.inputs if i] + [graph.shapes[o][1] for o in n.outputs if o in graph.shapes]
    for dt in seen:
        if not _dtype_ok(dt):
            raise Unsupported(f"dtype {dt} has no v0 TypeId")


def _outputs(e: Emitter, graph: OGraph, vals: dict[str, Val]) -> None:
    """Graph outputs keep their ONNX names; 4-D outputs are NHWC, as r1.1 left them."""
    used = set(e.b.inputs)
    for name in graph.outputs:
        v = vals[name]
        if len(v.shape) == 4:
            v = e.to_nhwc(v, name)
        else:
            v = e.plain(v, name)
        idx = e.index(v, name)
        if idx in used or v.const is not None and v.index is not None and e.b.graph.allTensors[idx].nodeType == NodeType.ValueNode:
            # an input or a constant returned as is, or a value returned twice: copy it
            copy = Val(v.shape, v.dtype, index=idx, nhwc=v.nhwc)
            idx = e.op("Reshape", [copy], v.shape, v.dtype, name + "/copy", v.nhwc,
                       shape=list(copy.stored_shape)).index
        e.b.graph.allTensors[idx].name = name
        used.add(idx)
        e.b.output(idx)
