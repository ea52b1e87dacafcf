"""Post-training quantization: a float v0 model and calibration feeds in, a PostTraining v0 file
out, as r1.1's quantizer wrote them (format-v0.md §3). Every node msv0 runs in int8 gets int8
activations with one per-tensor QuantParam calibrated by min/max, symmetric int8 weights with
one QuantParam per output channel and int32 biases at scale s_in·s_w; QuantDTypeCast nodes join
the int8 and float parts, so the file still takes and returns float under the same names."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import flatbuffers
import numpy as np

from msv0.errors import InputError, ModelError
from msv0.fb.ActivationType import ActivationType
from msv0.fb.CNode import CNodeT
from msv0.fb.Maximum import MaximumT
from msv0.fb.MetaGraph import MetaGraphT
from msv0.fb.NodeType import NodeType
from msv0.fb.Primitive import PrimitiveT
from msv0.fb.PrimitiveType import PrimitiveType
from msv0.fb.QuantDTypeCast import QuantDTypeCastT
from msv0.fb.QuantParam import QuantParamT
from msv0.fb.QuantType import QuantType
from msv0.fb.Tensor import TensorT
from msv0.fb.TypeId import TypeId
from msv0.model import Model, load
from msv0.registry import INT8
from msv0.session import Session
from msv0.weight_quant import quantize_weights

F32, I8, I32 = TypeId.kNumberTypeFloat32, TypeId.kNumberTypeInt8, TypeId.kNumberTypeInt32
# Float ops whose outputs are finite wherever their inputs are (short of overflow in a sum).
KEEP_FINITE = frozenset({"Activation", "BatchNorm", "Concat", "Conv2D", "DeConv2D", "DeDepthwiseConv2D",
                         "DepthwiseConv2D", "FullConnection", "FusedBatchNorm", "Gather", "MatMul", "Pad", "Pooling",
                         "Reshape", "Resize", "Slice", "SoftMax", "Split", "Squeeze", "StridedSlice", "Transpose",
                         "Unsqueeze"})


@dataclass(frozen=True)
class WeightRule:
    """Where an op keeps its constant weight and bias, and the weight's output-channel axis
    (None: one QuantParam for the whole weight, as r1.1's int8 MatMul reads only the first)."""

    weight: int
    bias: int | None
    channel_axis: int | None


WEIGHTS = {
    "Conv2D": WeightRule(1, 2, 0),  # [Cout, kH, kW, Cin/group]
    "DepthwiseConv2D": WeightRule(1, 2, 0),  # [C, kH, kW, 1]
    "FullConnection": WeightRule(1, 2, 0),  # [N, K]
    "MatMul": WeightRule(1, None, None),
}
# Ops whose int8 output rearranges or selects input values: the output takes the input's
# QuantParam, so r1.1's kernels copy bytes instead of requantizing.
SAME_PARAMS = {"Reshape", "Squeeze", "Unsqueeze", "ExpandDims", "Flatten", "Transpose", "Nchw2Nhwc", "Nhwc2Nchw",
               "Pooling", "Slice", "StridedSlice", "Gather", "Crop", "Split", "DepthToSpace", "SpaceToBatch",
               "SpaceToBatchND", "BatchToSpace", "BatchToSpaceND", "Resize", "Pad"}
# Output params r1.1's int8 kernels fix (format-v0.md §3.1), by op and attributes.
FIXED_PARAMS: dict[str, Callable[[object], tuple[float, int] | None]] = {
    "SoftMax": lambda a: (1 / 256, -128),
    "Activation": lambda a: (1 / 256, -128) if a.type == ActivationType.SIGMOID else None,
}
# The ops this quantizer writes in int8: those whose int8 kernels take any calibrated value
# (int8 Div, Reciprocal, Rsqrt, Log, ... stop on a zero or negative quantized input, so they
# stay float). A node whose int8 kernel refuses its attributes or shapes (a mean window over
# 128 cells, Add's general broadcasting, ...) stays float too: see quantize().
_INT8_ACTIVATIONS = (ActivationType.RELU, ActivationType.RELU6, ActivationType.SIGMOID, ActivationType.TANH,
                     ActivationType.HSWISH, ActivationType.LEAKY_RELU)
QUANTIZABLE = {"Conv2D", "DepthwiseConv2D", "FullConnection", "MatMul", "Add", "Sub", "Mul", "Concat", "SoftMax",
               "Activation", *SAME_PARAMS}


def activation_param(lo: float, hi: float) -> tuple[float, int]:
    """Asymmetric int8 (scale, zero point) covering [lo, hi] and 0."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi == lo:
        return 1.0, 0
    scale = (hi - lo) / 255
    return scale, int(np.clip(np.round(-128 - lo / scale), -128, 127))


def _param(scale: float, zp: int, lo: float = 0.0, hi: float = 0.0) -> QuantParamT:
    p = QuantParamT()
    p.scale, p.zeroPoint, p.min, p.max, p.inited, p.numBits = float(scale), int(zp), float(lo), float(hi), True, 8
    return p


def samples(model: Model, calibration) -> Iterable[list[np.ndarray]]:
    """Calibration feeds, positional: from {input name: [K, *shape]} (or [K, *shape without a
    leading batch of 1]), or an iterable of feeds as Session.run takes them."""
    infos = model.inputs
    if not isinstance(calibration, Mapping):
        for feeds in calibration:
            yield [np.asarray(feeds[i.name] if isinstance(feeds, Mapping) else feeds[j], i.dtype)
                   for j, i in enumerate(infos)]
        return
    arrays = []
    for info in infos:
        if info.name not in calibration:
            raise InputError(f"calibration data has no array for input '{info.name}'")
        a = np.asarray(calibration[info.name], info.dtype)  # an int32 input (token ids) stays int32
        shape = tuple(info.shape)
        if a.shape[1:] != shape and shape[:1] == (1,) and a.shape[1:] == shape[1:]:
            a = a[:, None]
        if a.ndim != len(shape) + 1:
            raise InputError(f"calibration array '{info.name}' has shape {a.shape}; expected [K, *{list(shape)}]")
        arrays.append(a)
    counts = {len(a) for a in arrays}
    if len(counts) != 1:
        raise InputError(f"calibration arrays hold different sample counts: {sorted(counts)}")
    for k in range(counts.pop()):
        yield [a[k] for a in arrays]


def probe(model: Model, watched: list[int], num_threads: int = 1) -> Session:
    """A Session on `model` whose outputs are the tensors `watched`, named f"t{index}"."""
    g = MetaGraphT.InitFromPackedBuf(bytes(model._core_model.buffer))
    for k, t in enumerate(g.allTensors):
        t.name = f"t{k}"  # unique names: the probe's outputs are looked up by name
    g.outputIndex = watched
    if g.subGraph:
        g.subGraph[0].outputIndices = watched
    fbb = flatbuffers.Builder(1024)
    fbb.Finish(g.Pack(fbb))
    return Session(bytes(fbb.Output()), num_threads=num_threads)


METHODS = ("minmax", "kl", "percentile")
BINS = 2048  # histogram of |x| over [0, max|x|] for KL and percentile


def calibrate(model: Model, calibration, num_threads: int = 1, on_sample: Callable[[int], None] | None = None,
              method: str = "minmax", percentile: float = 99.99) -> dict[int, tuple[float, float]]:
    """{tensor index: (min, max)} over the calibration feeds, for the graph inputs and every
    float32 tensor a main-graph node writes. minmax: the observed range; kl and percentile clip
    it symmetrically at a threshold on |x| found from a second pass's histogram (KL: the one
    whose int8 quantization loses least information, as TensorRT's entropy calibrator;
    percentile: that share of the values). on_sample(k) is called after the k-th sample run."""
    if method not in METHODS:
        raise InputError(f"calibration method '{method}': expected one of {', '.join(METHODS)}")
    if method != "minmax" and not isinstance(calibration, Mapping):
        calibration = list(calibration)  # read twice
    watched = list(model.graph_inputs) + [k for i in model.main_nodes for k in model.nodes[i].outputs
                                          if model.tensors[k].type_id == F32]
    session = probe(model, watched, num_threads)
    ranges: dict[int, tuple[float, float]] = {}
    count = 0
    for feeds in samples(model, calibration):
        out = session.run(feeds)
        for k in watched:
            a = out[f"t{k}"]
            if a.size:
                lo, hi = ranges.get(k, (np.inf, -np.inf))
                ranges[k] = (min(lo, float(a.min())), max(hi, float(a.max())))
        count += 1
        if on_sample is not None:
            on_sample(count)
    if not ranges:
        raise InputError("calibration data holds no samples")
    if method == "minmax":
        return ranges
    hists = {k: np.zeros(BINS, np.int64) for k in ranges}
    for feeds in samples(model, calibration):
        out = session.run(feeds)
        for k, h in hists.items():
            amax = max(-ranges[k][0], ranges[k][1])
            if amax > 0:
                h += np.histogram(np.abs(out[f"t{k}"]), bins=BINS, range=(0, amax))[0]
        count += 1
        if on_sample is not None:
            on_sample(count)
    clipped = {}
    for k, (lo, hi) in ranges.items():
        amax = max(-lo, hi)
        if amax <= 0:
            clipped[k] = (lo, hi)
            continue
        # KL: a tensor that is never negative gets all 256 int8 levels, a signed one 128 per side
        edge = _kl_bin(hists[k], 256 if lo >= 0 else 128) if method == "kl" else _percentile_bin(hists[k], percentile)
        t = amax * edge / BINS
        clipped[k] = (max(lo, -t), min(hi, t))
    return clipped


def _percentile_bin(hist: np.ndarray, percentile: float) -> int:
    """The number of leading bins holding `percentile` % of the values."""
    cum = np.cumsum(hist)
    return int(np.searchsorted(cum, cum[-1] * percentile / 100)) + 1


def _kl_bin(hist: np.ndarray, levels: int) -> int:
    """The number of leading bins to keep whose quantization to `levels` has the least KL
    divergence from the clipped distribution (outliers folded into the last kept bin)."""
    best, best_kl = len(hist), np.inf
    h = hist.astype(np.float64)
    h[0] = h[1]  # the spike of exact zeros (after a ReLU) would decide alone: flattened, as TensorRT's tools do
    for i in range(levels, len(h) + 1, 16):
        p = h[:i].copy()
        p[-1] += h[i:].sum()
        nz = p > 0
        # Q: the first i bins (outliers not folded) merged into LEVELS groups, each spread
        # evenly over the bins where P is non-zero
        groups = np.arange(i) * levels // i
        total = np.bincount(groups, weights=h[:i], minlength=levels)
        filled = np.bincount(groups, weights=nz, minlength=levels)
        q = np.where(nz, total[groups] / np.maximum(filled[groups], 1), 0.0)
        if p.sum() == 0 or q.sum() == 0:
            continue
        # where only the folded outliers land, Q is empty: a floor of 1e-4 of the mass keeps KL finite
        q = np.where(nz & (q == 0), 1e-4 * q.sum(), q)
        pn, qn = p[nz] / p.sum(), q[nz] / q.sum()
        kl = float(np.sum(pn * np.log(pn / qn)))
        if kl < best_kl:
            best, best_kl = i, kl
    return best


def layer_snr(model: Model, quantized: bytes, feeds: list, num_threads: int = 1) -> list[tuple[str, str, float]]:
    """(node name, op, SNR dB) of every node output written in int8, against the float model on
    `feeds`, the worst first. The int8 tensor is dequantized with its own QuantParam."""
    qmodel = load(quantized)
    watched = [k for i in model.main_nodes for k in model.nodes[i].outputs
               if model.tensors[k].type_id == F32 and k < len(qmodel.tensors) and qmodel.tensors[k].type_id == I8
               and qmodel.tensors[k].quant]
    producer = {k: model.nodes[i] for i in model.main_nodes for k in model.nodes[i].outputs}
    fp32, int8 = probe(model, watched, num_threads), probe(qmodel, watched, num_threads)
    ref, got = {k: [] for k in watched}, {k: [] for k in watched}
    for f in feeds:
        a, b = fp32.run(f), int8.run(f)
        for k in watched:
            p = qmodel.tensors[k].quant[0]
            ref[k].append(a[f"t{k}"].ravel())
            got[k].append((b[f"t{k}"].astype(np.float32).ravel() - p.zeroPoint) * np.float32(p.scale))
    rows = [(producer[k].name, producer[k].op, snr_db(np.concatenate(ref[k]), np.concatenate(got[k])))
            for k in watched]
    return sorted(rows, key=lambda r: r[2])


# An activation's int8 parameters: (scale, zero point, min, max).
Params = tuple[float, int, float, float]
# A weight given already quantized: its int8 values (in the file's layout) and QuantParams.
Weight = tuple[np.ndarray, list[QuantParamT]]


class _Rewriter:
    """Rewrites the main graph of `g` into its quantized form: activations with `params`, weights
    from `weights` (by tensor index) or quantized here symmetric per channel. Layout ops
    (SAME_PARAMS) copy their input's param unless own_params (an imported model's own params;
    pooling copies it always). With own_params, a float node's output that the model quantizes
    is quantized and dequantized at once, as ONNX Runtime runs its Q/DQ pair: onnxruntime's
    quantizer folds a Relu or Clip after an op into the pair's range (PP-OCRv4's detection head,
    BatchNormalization then a dropped Relu, ran without its ReLU here)."""

    def __init__(self, model: Model, g: MetaGraphT, params: dict[int, Params], keep_float: set[int],
                 weights: dict[int, Weight], quant_type: int, own_params: bool):
        self.model, self.g, self.params, self.keep_float = model, g, params, keep_float
        self.weights, self.quant_type, self.own_params = weights, quant_type, own_params
        self.nodes: list[CNodeT] = []
        self.origin: dict[int, int] = {}  # node index in the rewritten graph -> in the model
        self.int8_nodes: set[int] = set()  # model nodes written in int8
        self.int8: set[int] = set()  # tensors now holding int8 activations
        self.as_int8: dict[int, int] = {}  # float tensor -> its quantized copy
        self.as_float: dict[int, int] = {}  # int8 tensor -> its dequantized copy
        self.through: dict[int, int] = {}  # a float node's output -> its quantized-dequantized copy
        self.uses = np.zeros(len(g.allTensors), np.int64)
        for i in model.main_nodes:
            for k in model.nodes[i].inputs:
                self.uses[k] += 1

    def tensor(self, name: str, type_id: int, like: TensorT, quant=None, data: np.ndarray | None = None,
               node_type: int = NodeType.CNode) -> int:
        """A new tensor with the dims and format of `like`."""
        t = TensorT()
        t.name, t.nodeType, t.dataType, t.format = name, node_type, type_id, like.format
        t.dims = [int(d) for d in like.dims] if like.dims is not None else []
        t.quantParams = quant
        t.data = None if data is None else np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
        self.g.allTensors.append(t)
        return len(self.g.allTensors) - 1

    def cast(self, src: int, src_t: int, dst_t: int, dst: int) -> None:
        attrs = QuantDTypeCastT()
        attrs.srcT, attrs.dstT = src_t, dst_t
        n = CNodeT()
        n.name = f"{_name(self.g.allTensors[dst])}/QuantDTypeCast"
        n.nodeType, n.quantType = NodeType.CNode, self.quant_type
        n.primitive = PrimitiveT()
        n.primitive.valueType, n.primitive.value = PrimitiveType.QuantDTypeCast, attrs
        n.inputIndex, n.outputIndex = [src], [dst]
        self.nodes.append(n)

    def activation(self, k: int, producer: str | None = None) -> int:
        """Tensor k as int8: itself when a quantized node wrote it, else a quantized copy. A
        converted graph's float op (`producer`) that can make -inf of finite values passes a
        Maximum with -FLT_MAX first: r1.1's float -> int8 cast takes -inf to 127, the source's
        QuantizeLinear to the lowest code (a log-mel front end's Log of 0: openWakeWord's
        melspectrogram quantized, -3 dB against ONNX Runtime's 13.5). At plan time the Maximum
        joins the cast's table (int8_tables.py) or its producer's kernel."""
        if k in self.int8:
            return k
        if k not in self.as_int8:
            t = self.g.allTensors[k]
            q = self.tensor(f"{_name(t)}/int8", I8, t, [_param(*self.params[k])])
            self.cast(k if producer is None or producer in KEEP_FINITE else self.above_minus_inf(k), F32, I8, q)
            self.as_int8[k] = q
        return self.as_int8[k]

    def above_minus_inf(self, k: int) -> int:
        """A new tensor: Maximum(k, -FLT_MAX)."""
        t = self.g.allTensors[k]
        lowest = self.tensor(f"{_name(t)}/lowest", F32, t, data=np.array([np.finfo(np.float32).min], np.float32),
                             node_type=NodeType.ValueNode)
        self.g.allTensors[lowest].dims = [1]
        out = self.tensor(f"{_name(t)}/finite", F32, t)
        n = CNodeT()
        n.name = f"{_name(t)}/Maximum"
        n.nodeType, n.quantType = NodeType.CNode, QuantType.QUANT_NONE
        n.primitive = PrimitiveT()
        n.primitive.valueType, n.primitive.value = PrimitiveType.Maximum, MaximumT()
        n.inputIndex, n.outputIndex = [k, lowest], [out]
        self.nodes.append(n)
        return out

    def float_of(self, k: int) -> int:
        """Tensor k as a float op reads it: a converted graph's quantized input through its
        quantize-dequantize copy, as the source's DequantizeLinear gives it."""
        if k not in self.int8:
            if self.own_params and k in self.params and k in self.model.graph_inputs:
                q = self.activation(k)
                self.int8.add(q)
                return self.float_of(q)
            return self.through.get(k, k)
        if k not in self.as_float:
            t = self.g.allTensors[k]
            f = self.tensor(f"{_name(t)}/float", F32, t)
            self.cast(k, I8, F32, f)
            self.as_float[k] = f
        return self.as_float[k]

    def const(self, k: int, type_id: int, values: np.ndarray, quant: list[QuantParamT] | None) -> int:
        """A constant's quantized form: in place when this node is its only reader."""
        t = self.g.allTensors[k]
        if self.uses[k] > 1:
            return self.tensor(f"{_name(t)}/{np.dtype(values.dtype).name}", type_id, t, quant, values,
                               NodeType.ValueNode)
        t.dataType, t.quantParams = type_id, quant
        t.data = np.frombuffer(np.ascontiguousarray(values).tobytes(), np.uint8)
        return k

    def zero_point(self, k: int) -> int:
        """The zero point activation k has (or will have) in int8."""
        quant = self.g.allTensors[k].quantParams
        if k in self.int8 and quant:
            return int(quant[0].zeroPoint)
        return int(self.params[k][1]) if k in self.params else 0

    def quantizable(self, i: int) -> bool:
        node = self.model.nodes[i]
        if node.op not in INT8 or node.op not in QUANTIZABLE or i in self.keep_float:
            return False
        if node.op == "Activation" and node.attrs.type not in _INT8_ACTIVATIONS:
            return False
        if node.op == "Activation" and node.attrs.type == ActivationType.LEAKY_RELU and self.zero_point(node.inputs[0]):
            # r1.1's int8 LeakyReLU slopes the raw values q <= 0, not q - zp <= 0: right only for
            # a zero point of 0 (openWakeWord's embedding model: 46 % of its first LeakyRelu's
            # outputs off by up to 16 steps).
            return False
        if node.op == "Pooling" and self.own_params:
            # A converted model's pooling whose output has other params than its input runs in
            # float: r1.1's int8 pooling keeps its input's grid (it requantizes without a clamp),
            # half an input step from the model's value (PP-OCRv4's squeeze-excite averages, on an
            # output grid 200x finer, were ~100 steps off and its detection map unrelated to ONNX
            # Runtime's).
            src, dst = self.params.get(node.inputs[0]), self.params.get(node.outputs[0])
            if src is not None and dst is not None and src[:2] != dst[:2]:
                return False
        tensors = self.model.tensors
        first = tensors[node.inputs[0]] if node.inputs else None
        if first is None or first.type_id != F32 or first.is_const:
            return False
        known = all(k in self.params or k in self.int8 for k in node.inputs
                    if tensors[k].type_id == F32 and not tensors[k].is_const)
        return known and all(tensors[k].type_id == F32 and k in self.params for k in node.outputs)

    def quantize_node(self, i: int, n: CNodeT) -> None:
        node, tensors = self.model.nodes[i], self.model.tensors
        rule = WEIGHTS.get(node.op)
        s_in, s_w = None, None
        for pos, k in enumerate(node.inputs):
            t = tensors[k]
            if t.type_id != F32:
                continue
            if not t.is_const:
                n.inputIndex[pos] = self.activation(k)
                if pos == 0:
                    s_in = self.g.allTensors[n.inputIndex[0]].quantParams[0].scale
            elif rule is not None and pos == rule.weight:
                q, quant = self.weights[k] if k in self.weights else _weight(t.data, rule.channel_axis)
                s_w = np.array([p.scale for p in quant], np.float64)
                n.inputIndex[pos] = self.const(k, I8, q, quant)
            elif rule is not None and pos == rule.bias and s_in is not None and s_w is not None:
                scale = s_in * s_w
                b = np.clip(np.round(t.data.astype(np.float64).reshape(-1) / scale), -2**31, 2**31 - 1)
                n.inputIndex[pos] = self.const(k, I32, b.astype(np.int32).reshape(t.data.shape), None)
            else:  # a constant operand (Add's, Concat's): per-tensor, from its own range
                scale, zp = activation_param(t.data.min(initial=0), t.data.max(initial=0))
                q = np.clip(np.round(t.data / scale) + zp, -128, 127).astype(np.int8)
                n.inputIndex[pos] = self.const(k, I8, q, [_param(scale, zp)])
        fixed = FIXED_PARAMS.get(node.op, lambda a: None)(node.attrs)
        for k in node.outputs:
            t = self.g.allTensors[k]
            if fixed is not None:
                param = _param(*fixed)
            elif node.op in SAME_PARAMS and (not self.own_params or node.op == "Pooling"):
                # r1.1's int8 pooling requantizes without a clamp (format-v0.md §3.1): an output
                # with other params than its input would wrap, so it keeps the input's.
                src = self.g.allTensors[n.inputIndex[0]].quantParams[0]
                param = _param(src.scale, src.zeroPoint, src.min, src.max)
            else:
                param = _param(*self.params[k])
            t.dataType, t.quantParams = I8, [param]
            self.int8.add(k)
        n.quantType = self.quant_type
        self.int8_nodes.add(i)

    def run(self) -> None:
        g, model = self.g, self.model
        for i in model.main_nodes:
            n = g.nodes[i]
            n.inputIndex = [int(k) for k in n.inputIndex]  # the reader's arrays are read-only views
            quantized = self.quantizable(i)
            if quantized:
                self.quantize_node(i, n)
            else:
                n.inputIndex = [self.float_of(k) for k in n.inputIndex]
            self.origin[len(self.nodes)] = i
            self.nodes.append(n)
            if self.own_params and not quantized:
                for k in n.outputIndex:
                    if k in self.params and g.allTensors[k].dataType == F32:
                        q = self.activation(k, model.nodes[i].op)
                        self.int8.add(q)
                        self.through[k] = self.float_of(q)
        outputs = []
        for k in model.graph_outputs:
            if k in self.through:  # the quantized-dequantized copy takes the output's name
                t, f = g.allTensors[k], g.allTensors[self.through[k]]
                f.name, t.name = _name(t), f"{_name(t)}/unquantized"
                outputs.append(self.through[k])
                continue
            if k not in self.int8:
                outputs.append(k)
                continue
            # The float output keeps the tensor's name; the int8 tensor is renamed.
            t = g.allTensors[k]
            name, t.name = _name(t), f"{_name(t)}/int8"
            f = self.tensor(name, F32, t)
            self.cast(k, I8, F32, f)
            outputs.append(f)
        # The other subgraphs' nodes (an If's branches, which stay float) follow the main graph's.
        main_nodes = set(model.main_nodes)
        moved = {i: len(self.nodes) + k for k, i in enumerate(i for i in range(len(g.nodes)) if i not in main_nodes)}
        count = len(self.nodes)
        g.nodes = self.nodes + [g.nodes[i] for i in moved]
        g.outputIndex = outputs
        if g.subGraph:
            main = g.subGraph[0]
            main.outputIndices = outputs
            main.nodeIndices = list(range(count))
            main.tensorIndices = list(range(len(g.allTensors)))
            for sub in g.subGraph[1:]:
                sub.nodeIndices = [moved[int(i)] for i in sub.nodeIndices]


def _name(t: TensorT) -> str:
    """A tensor's name (bytes as the generated reader leaves it, str once rewritten)."""
    return t.name.decode("utf-8", "replace") if isinstance(t.name, bytes) else (t.name or "")


def _weight(w: np.ndarray, axis: int | None) -> tuple[np.ndarray, list[QuantParamT]]:
    """Symmetric int8 weights, zero point 0: per slice along axis, or per tensor."""
    w = w.astype(np.float32)
    if axis is None:
        amax = np.abs(w).max(initial=0).reshape(1)
    else:
        amax = np.abs(np.moveaxis(w, axis, 0)).reshape(w.shape[axis], -1).max(axis=1, initial=0)
    scale = np.where(amax > 0, amax / 127, 1.0).astype(np.float64)
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, [_param(s, 0) for s in scale]


def quantize(model: Model | str | bytes, calibration=None, num_threads: int = 1,
             on_sample: Callable[[int], None] | None = None, method: str = "minmax",
             percentile: float = 99.99, weights_only: bool = False, bits: int = 8, kmeans: bool = False) -> bytes:
    """A PostTraining int8 version of a float model, as .ms bytes. calibration: {input name:
    [K, *input shape]} or an iterable of feeds (as Session.run takes them); method and
    percentile: see calibrate(). A node whose int8 kernel refuses it (as r1.1's would have) is
    written in float, with casts around it.

    weights_only: a WeightQuant file instead, without calibration: the weights in `bits` (2 to
    16) bits, linear per channel or, with kmeans, 2^bits clusters (msv0.weight_quant)."""
    model = model if isinstance(model, Model) else load(model)
    if weights_only:
        return quantize_weights(model, bits, kmeans)
    if bits != 8 or kmeans:
        raise InputError("post-training quantization is int8: other bit widths and k-means need weights_only")
    if calibration is None:
        raise InputError("post-training quantization needs calibration data")
    if len(model.subgraphs) > 1:
        raise ModelError("quantize: models with control flow (several subgraphs) are not supported")
    ranges = calibrate(model, calibration, num_threads, on_sample, method, percentile)
    params = {k: (*activation_param(lo, hi), lo, hi) for k, (lo, hi) in ranges.items()}
    return rewrite(model, params, {}, QuantType.PostTraining, num_threads=num_threads)


def rewrite(model: Model, params: dict[int, Params], weights: dict[int, Weight], quant_type: int,
            own_params: bool = False, num_threads: int = 1) -> bytes:
    """The float `model` with int8 activations where `params` has them (by tensor index) and
    int8 weights (from `weights`, else symmetric per channel), as .ms bytes; own_params: see
    _Rewriter. A node whose int8 kernel refuses it (as r1.1's would have) is written in float,
    with casts around it."""
    keep_float: set[int] = set()
    while True:
        g = MetaGraphT.InitFromPackedBuf(bytes(model._core_model.buffer))
        rewriter = _Rewriter(model, g, params, keep_float, weights, quant_type, own_params)
        rewriter.run()
        fbb = flatbuffers.Builder(1024)
        fbb.Finish(g.Pack(fbb), file_identifier=b"MSL1")
        data = bytes(fbb.Output())
        try:  # planning the file builds every kernel: an int8 node r1.1 could not run fails here
            Session(data, num_threads=num_threads)
            return data
        except ModelError as e:
            failed = re.match(r"node (\d+) ", str(e))
            i = rewriter.origin.get(int(failed.group(1))) if failed else None
            if i not in rewriter.int8_nodes:  # not a node this quantizer made int8
                raise
            keep_float.add(i)


def snr_db(reference: np.ndarray, value: np.ndarray) -> float:
    """Signal-to-noise ratio of value against reference, in dB."""
    ref = np.asarray(reference, np.float64)
    noise = np.sum((np.asarray(value, np.float64) - ref) ** 2)
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(ref**2) / noise))
