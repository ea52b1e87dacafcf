"""Statically quantized ONNX -> v0: QDQ graphs (QuantizeLinear/DequantizeLinear around float ops,
as onnxruntime.quantization writes them) and QOperator graphs (QLinearConv, QLinearMatMul,
com.microsoft QLinearAdd, ...), written as r1.1's aware-training path wrote int8 files.

Three steps. (1) The quantized graph becomes its float twin: every QLinear op its float op, every
Q/DQ pair on an activation dropped, every quantized constant dequantized; what was int8 is
remembered as (scale, zero point) per float tensor name, and each weight's int8 values and
params. (2) The float twin converts as any ONNX model does (layouts, fusions, folding). (3)
msv0.quantize.rewrite writes the v0 graph in int8 with exactly those activation params and
weights (recovered from the converted float weight per output channel, which checks that the
conversion kept them), int32 biases at s_in·s_w, and QuantDTypeCast where int8 meets float.
uint8 tensors become int8 with the zero point lowered by 128 (the real values are unchanged).

What r1.1's int8 kernels cannot express (int16 or 4-bit types, per-channel activations, a weight
quantized along another axis than its output channels) is reported for every node at once.
"""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Unsupported
from msv0.convert.onnx_control import outer_reads
from msv0.errors import Error, ModelError, UnsupportedOpError
from msv0.fb.QuantParam import QuantParamT
from msv0.fb.QuantType import QuantType
from msv0.model import load
from msv0.quantize import SAME_PARAMS, WEIGHTS, rewrite

# The static-quantization ops; a model with any of them converts here. (Dynamically quantized
# graphs, DynamicQuantizeLinear/ConvInteger/MatMulInteger, are the float frontend's.)
MS = "com.microsoft."
QLINEAR = {  # op -> (float op, its (x, scale, zp) input triples, the output's (scale, zp) positions)
    "QLinearConv": ("Conv", [0, 3], (6, 7)),
    "QLinearMatMul": ("MatMul", [0, 3], (6, 7)),
    MS + "QLinearAdd": ("Add", [0, 3], (6, 7)),
    MS + "QLinearMul": ("Mul", [0, 3], (6, 7)),
    MS + "QLinearGlobalAveragePool": ("GlobalAveragePool", [0], (3, 4)),
    MS + "QLinearAveragePool": ("AveragePool", [0], (3, 4)),
    MS + "QLinearSigmoid": ("Sigmoid", [0], (3, 4)),
    MS + "QLinearLeakyRelu": ("LeakyRelu", [0], (3, 4)),
    MS + "QLinearSoftmax": ("Softmax", [0], (3, 4)),
    MS + "QGemm": ("Gemm", [0, 3], (7, 8)),
}
STATIC = {"QuantizeLinear", "DequantizeLinear", MS + "QuantizeLinear", MS + "DequantizeLinear", MS + "QLinearConcat",
          *QLINEAR}
SHIFT = {np.dtype(np.int8): 0, np.dtype(np.uint8): -128}


def _op(n) -> str:
    return n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"


DYNAMIC = {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"}


def is_static_quantized(model) -> bool:
    ops = {_op(n) for n in model.graph.node}
    return bool(ops & STATIC) and not ops & DYNAMIC


class _Twin:
    """The float twin of a quantized ONNX graph, built node by node."""

    def __init__(self, model):
        from onnx import numpy_helper
        self.g = model.graph
        self.inits = {t.name: numpy_helper.to_array(t) for t in self.g.initializer}
        # Paddle2ONNX writes weights as Constant nodes, which quantize_static leaves in front of
        # their QuantizeLinear: read as activations, their int8 values were lost.
        for n in self.g.node:
            if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.output) == 1:
                value = _constant_value(n)
                if value is not None:
                    self.inits.setdefault(n.output[0], value)
        self.ref: dict[str, str] = {}  # a name of the quantized graph -> the float twin's name
        self.act: dict[str, tuple[float, int]] = {}  # float tensor -> its int8 (scale, zero point)
        self.int8: set[str] = set()  # names of the quantized graph that hold int8 activations
        self.weights: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}  # float init -> (scales, zps, axis)
        self.nodes = []
        self.new_inits: dict[str, np.ndarray] = {}
        self.bad: list[tuple[str, str, str]] = []

    def name(self, x: str) -> str:
        return self.ref.get(x, x)

    def const(self, x: str):
        return self.inits.get(x, self.new_inits.get(x))

    def params(self, n, s: str, z: str | None, what: str):
        """(scales, int8 zero points) of a quantization; the source dtype decides the shift."""
        scales = self.const(s)
        if scales is None:
            raise Unsupported(f"the {what} scale must be a constant")
        zp = self.const(z) if z else None
        dtype = np.dtype(np.uint8) if zp is None else zp.dtype
        if dtype not in SHIFT:
            raise Unsupported(f"{dtype} quantization of the {what} (r1.1 has int8 kernels only)")
        scales = np.asarray(scales, np.float32).reshape(-1)
        zps = np.zeros(scales.shape, np.int64) if zp is None else np.asarray(zp, np.int64).reshape(-1)
        if not np.all((scales > 0) & np.isfinite(scales)):
            raise Unsupported(f"the {what} has scale {scales.tolist()} (must be positive and finite)")
        return scales, zps + SHIFT[dtype], SHIFT[dtype]

    def set_act(self, x: str, scales, zps, what: str) -> None:
        if len(scales) != 1:
            raise Unsupported(f"the {what} is quantized per channel (r1.1 takes one QuantParam per activation)")
        p = (float(scales[0]), int(zps[0]))
        if self.act.get(x, p) != p:
            raise Unsupported(f"the {what} '{x}' is quantized twice with different params")
        self.act[x] = p

    def dequantized(self, q: np.ndarray, scales, zps, shift, axis: int, name: str) -> str:
        """A float initializer for the int8/uint8/int32 constant q; int8 weights are remembered."""
        axis = axis % q.ndim if q.ndim else 0  # a scalar (magika's quantized constants) has no axis
        shape = [1] * q.ndim
        if len(scales) > 1:
            if len(scales) != (q.shape[axis] if q.ndim else 1):
                raise Unsupported(f"'{name}' has {len(scales)} scales for its shape {list(q.shape)}")
            shape[axis] = -1
        q8 = q.astype(np.int64) + shift
        f = ((q8 - zps.reshape(shape)) * scales.reshape(shape).astype(np.float64)).astype(np.float32)
        out = name + "/dequantized"
        self.new_inits[out] = f
        if q.dtype != np.int32:
            self.weights[out] = (scales, zps, axis)
        return out

    def input(self, n, k: int, what: str, axis: int = 0) -> str:
        """Input triple (x, scale, zp) at k of a QLinear op, as a float name; a constant one is
        quantized along axis when per channel."""
        x = n.input[k]
        scales, zps, shift = self.params(n, n.input[k + 1], n.input[k + 2] if len(n.input) > k + 2 else "", what)
        q = self.const(x)
        if q is not None:
            return self.dequantized(q, scales, zps, shift, axis, x)
        if x not in self.int8:
            raise Unsupported(f"the {what} '{x}' is not an int8 activation")
        self.set_act(self.name(x), scales, zps, what)
        return self.name(x)

    def add(self, op: str, n, ins: list[str], outs: list[str]) -> None:
        from onnx import helper
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        attrs.pop("channels_last", None)
        self.nodes.append(helper.make_node(op, ins, outs, name=n.name or outs[0], **attrs))

    def node(self, n) -> None:
        op = _op(n)
        if op == "Constant" and n.output[0] in self.inits:  # the twin's initializer where read
            return
        if op in ("QuantizeLinear", MS + "QuantizeLinear"):
            return self.quantize(n)
        if op in ("DequantizeLinear", MS + "DequantizeLinear"):
            return self.dequantize(n)
        if op == MS + "QLinearConcat":
            ins = [self.input(n, k, f"input {k // 3}") for k in range(2, len(n.input), 3)]
            return self.qlinear(n, "Concat", ins, (0, 1))
        if op in QLINEAR:
            fop, triples, out = QLINEAR[op]
            if op.endswith("AveragePool") and any(a.name == "channels_last" and a.i for a in n.attribute):
                raise Unsupported("channels_last pooling")
            trans_b = next((a.i for a in n.attribute if a.name == "transB"), 0)
            axis = {"QLinearMatMul": -1, MS + "QGemm": 0 if trans_b else 1}.get(op, 0)  # the weight's output channels
            ins = [self.input(n, k, f"input {j}", axis) for j, k in enumerate(triples)]
            ins += self.bias(n, op, triples)
            return self.qlinear(n, fop, ins, out if out[0] < len(n.input) and n.input[out[0]] else None)
        ins = [self.name(x) if x else "" for x in n.input]
        self.nodes.append(_copy(n, ins))
        if n.input and n.input[0] in self.int8:  # a layout op on int8 data: same params
            for o in n.output:
                self.int8.add(o)
                self.act[o] = self.act[self.name(n.input[0])]

    def bias(self, n, op: str, triples) -> list[str]:
        """QLinearConv's and QGemm's int32 bias (scale s_in·s_w) as a float initializer."""
        k = 8 if op == "QLinearConv" else 6 if op == MS + "QGemm" else None
        if k is None or len(n.input) <= k or not n.input[k]:
            return []
        b = self.const(n.input[k])
        if b is None or b.dtype != np.int32:
            raise Unsupported("the bias must be an int32 constant")
        s_in = np.float64(self.const(n.input[triples[0] + 1]).reshape(-1)[0])
        s_w = np.asarray(self.const(n.input[triples[1] + 1]), np.float64).reshape(-1)
        out = n.input[k] + "/dequantized"
        self.new_inits[out] = (b.astype(np.float64) * s_in * s_w).astype(np.float32)
        return [out]

    def qlinear(self, n, fop: str, ins: list[str], out) -> None:
        y = n.output[0]
        self.add(fop, n, ins, [y])
        if out is None:  # QGemm without an output scale: a float output
            return
        scales, zps, _ = self.params(n, n.input[out[0]], n.input[out[1]] if len(n.input) > out[1] else "", "output")
        self.set_act(y, scales, zps, "output")
        self.int8.add(y)

    def quantize(self, n) -> None:
        x, y = n.input[0], n.output[0]
        scales, zps, shift = self.params(n, n.input[1], n.input[2] if len(n.input) > 2 else "", "output")
        c = self.const(x)
        if c is not None:  # a float constant quantized in the graph: its int8 values as the model has them
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
            shape = [1] * c.ndim
            if len(scales) > 1:
                shape[axis % c.ndim] = -1
            q = np.clip(np.round(c / scales.reshape(shape)) + zps.reshape(shape), -128, 127)
            self.inits[y] = (q - shift).astype(np.uint8 if shift else np.int8)
            return
        self.set_act(self.name(x), scales, zps, "input")
        self.ref[y] = self.name(x)
        self.int8.add(y)

    def dequantize(self, n) -> None:
        x, y = n.input[0], n.output[0]
        q = self.const(x)
        axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
        if q is not None and q.dtype == np.int32:  # a bias: float, requantized at s_in·s_w by the rewrite
            scales = np.asarray(self.const(n.input[1]), np.float64).reshape(-1)
            zps = np.zeros(1, np.int64) if len(n.input) < 3 or not n.input[2] else self.const(n.input[2]).reshape(-1)
            self.ref[y] = self.dequantized(q, scales, zps.astype(np.int64), 0, axis, x)
            return
        scales, zps, shift = self.params(n, n.input[1], n.input[2] if len(n.input) > 2 else "", "input")
        if q is not None:
            self.ref[y] = self.dequantized(q, scales, zps, shift, axis, x)
            return
        if x not in self.int8:
            raise Unsupported(f"DequantizeLinear of '{x}', which is not an int8 activation")
        self.set_act(self.name(x), scales, zps, "input")
        # An Identity (no v0 op) keeps the float conversion from fusing across the int8 tensor
        # (Conv -> Q -> DQ -> BatchNormalization is not Conv+BN folded).
        self.nodes.append(_identity(self.name(x), y))

    def model(self, src):
        from onnx import TensorProto, helper, numpy_helper
        outputs = []
        for vi in self.g.output:
            if vi.name in self.int8 and self.name(vi.name) == vi.name:
                self.bad.append((vi.name, "graph output", "an int8 graph output (a float one is written by "
                                 "DequantizeLinear)"))
            if self.name(vi.name) != vi.name:
                self.nodes.append(_identity(self.name(vi.name), vi.name))
            outputs.append(helper.make_tensor_value_info(vi.name, TensorProto.FLOAT, None))
        used = {x for nd in self.nodes for x in nd.input}
        consts = {**self.inits, **self.new_inits}
        # A branch of an If reads outer values by name: a weight the main graph dequantizes keeps
        # its name there (openWakeWord's hey_jarvis verifier), as the dequantized float.
        for nd in self.nodes:
            for g in (g for a in nd.attribute for g in ([a.g] if a.HasField("g") else a.graphs)):
                for r in outer_reads(g):
                    if r not in consts and self.ref.get(r) in consts:
                        consts[r] = consts[self.ref[r]]
                    used.add(r)
        inits = [numpy_helper.from_array(v, k) for k, v in consts.items() if k in used]
        graph = helper.make_graph(self.nodes, self.g.name or "onnx", [vi for vi in self.g.input if vi.name not in
                                                                        self.inits], outputs, inits)
        return helper.make_model(graph, opset_imports=[o for o in src.opset_import if o.domain in ("", "ai.onnx")],
                                 ir_version=src.ir_version)


    def check_axes(self) -> None:
        """Per-channel weights must lie along the output channels, the only axis r1.1 reads."""
        for n in self.nodes:
            if n.op_type not in ("Conv", "Gemm", "MatMul") or len(n.input) < 2 or n.input[1] not in self.weights:
                continue
            scales, _, axis = self.weights[n.input[1]]
            ndim = self.new_inits[n.input[1]].ndim
            trans_b = next((a.i for a in n.attribute if a.name == "transB"), 0)
            want = {"Conv": 0, "Gemm": 0 if trans_b else 1, "MatMul": ndim - 1}[n.op_type]
            if len(scales) > 1 and axis != want:
                self.bad.append((n.name, n.op_type, f"weight quantized per channel along axis {axis}; r1.1 takes "
                                 f"per-channel params only along the output channels (axis {want})"))


def _constant_value(n):
    """A Constant node's value as an array, or None for forms a quantization never reads (sparse)."""
    from onnx import helper, numpy_helper
    for a in n.attribute:
        if a.name == "value":
            return numpy_helper.to_array(a.t)
        if a.name in ("value_float", "value_floats", "value_int", "value_ints"):
            return np.asarray(helper.get_attribute_value(a), np.float32 if "float" in a.name else np.int64)
    return None


def _identity(x: str, y: str):
    from onnx import helper
    return helper.make_node("Identity", [x], [y], name=y + "/int8")


def _copy(n, ins):
    from onnx import helper
    m = helper.make_node(n.op_type, ins, list(n.output), name=n.name, domain=n.domain)
    m.attribute.extend(n.attribute)
    return m


def _param(scale: float, zp: int) -> QuantParamT:
    p = QuantParamT()
    p.scale, p.zeroPoint, p.inited, p.numBits = float(scale), int(zp), True, 8
    return p


def _weights(twin: _Twin, graph, model, bad) -> dict:
    """{v0 weight tensor: (int8 values, QuantParams)} from the int8 weights the ONNX model had,
    recovered from the converted float weight along its output channels (dim0)."""
    by_name = {n.name: n for n in graph.nodes}
    out = {}
    for i in model.main_nodes:
        node = model.nodes[i]
        rule = WEIGHTS.get(node.op)
        src = by_name.get(node.name.rsplit("/", 1)[0])
        if rule is None or src is None or len(node.inputs) <= rule.weight:
            continue
        rec = next((twin.weights[x] for x in src.inputs if x in twin.weights), None)
        k = node.inputs[rule.weight]
        w = model.tensors[k].data
        if rec is None or w is None or k in out:
            continue
        scales, zps, _ = rec
        if len(scales) > 1 and (rule.channel_axis is None or w.shape[0] != len(scales)):
            bad.append((src.name, src.op, "weight quantized per channel along an axis other than its output "
                        "channels" if rule.channel_axis is not None else "per-channel weights on an int8 MatMul "
                        "(r1.1 reads one QuantParam)"))
            continue
        shape = (-1,) + (1,) * (w.ndim - 1)
        s, z = scales.astype(np.float64).reshape(shape), zps.reshape(shape)
        q = np.round(w.astype(np.float64) / s) + z
        if not np.allclose((q - z) * s, w, rtol=1e-6, atol=1e-12) or q.min() < -128 or q.max() > 127:
            bad.append((src.name, src.op, "its int8 weight does not survive conversion (folded with other "
                        "constants, or quantized along another axis than its output channels)"))
            continue
        out[k] = (q.astype(np.int8), [_param(a, b) for a, b in zip(scales, zps)])
    return out


def _same_params(model, params) -> None:
    """Tensors the float conversion inserted between named ones (layout transposes, reshapes)
    take their input's params."""
    for i in model.main_nodes:
        node = model.nodes[i]
        if node.op in SAME_PARAMS and node.inputs and node.inputs[0] in params:
            for k in node.outputs:
                params.setdefault(k, params[node.inputs[0]])


def convert_onnx(src, *, keep_nchw_input=False, batch=None, input_shapes=None, input_values=None) -> bytes:
    """Convert an ONNX model (path or bytes), statically quantized or not, to v0 bytes: the one
    entry of every ONNX conversion, which loads the model once."""
    from msv0.convert import onnx_dynq, onnx_frontend
    onnx = onnx_frontend._onnx()
    try:
        proto = onnx.load(src) if not isinstance(src, (bytes, bytearray)) else onnx.load_from_string(bytes(src))
    except Exception as err:
        raise ModelError(f"cannot read the ONNX model: {type(err).__name__}: {err}") from err
    external = [t.name for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if external:  # onnx.load reads them from beside the file; bytes have no beside
        raise ModelError(f"the model's weights ({', '.join(external[:3])}{', ...' if len(external) > 3 else ''}) "
                         "are in an external data file: convert it by its path")
    onnx_dynq.dequantized_tables(proto.graph)  # first: an embedding lookup may be all the graph quantizes
    if not is_static_quantized(proto):
        return onnx_frontend.convert_onnx(proto, keep_nchw_input=keep_nchw_input, batch=batch,
                                          input_shapes=input_shapes, input_values=input_values)
    try:
        return _convert(proto, keep_nchw_input, batch, input_shapes, input_values)
    except (Error, ImportError):
        raise
    except Exception as err:  # a malformed graph surfaces as decode, type or index errors
        raise ModelError(f"cannot convert the quantized ONNX model: {type(err).__name__}: {err}") from err


def _convert(proto, keep_nchw_input: bool, batch, input_shapes, input_values) -> bytes:
    from msv0.convert.onnx_frontend import emit_graph, load_graph
    twin = _Twin(proto)
    for n in proto.graph.node:
        try:
            twin.node(n)
        except Unsupported as err:
            twin.bad.append((n.name or n.output[0], _op(n), str(err)))
    float_model = twin.model(proto)
    twin.check_axes()
    if twin.bad:
        lines = "\n".join(f"  {name}: {op} ({why})" for name, op, why in twin.bad)
        raise UnsupportedOpError(f"{len(twin.bad)} ONNX node(s) cannot be converted:\n{lines}", twin.bad)
    graph = load_graph(float_model.SerializeToString(), batch, input_shapes, input_values)
    e, vals = emit_graph(graph, keep_nchw_input)
    model = load(e.b.finish())
    params = {}
    for name, (s, z) in twin.act.items():
        v = vals.get(name)
        if v is not None and v.index is not None and v.index >= 0:
            params[v.index] = (s, z, (-128 - z) * s, (127 - z) * s)
    _same_params(model, params)
    bad: list = []
    weights = _weights(twin, graph, model, bad)
    if bad:
        lines = "\n".join(f"  {name}: {op} ({why})" for name, op, why in bad)
        raise UnsupportedOpError(f"{len(bad)} ONNX node(s) cannot be converted:\n{lines}", bad)
    return rewrite(model, params, weights, QuantType.AwareTraining, own_params=True)
