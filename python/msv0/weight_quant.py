"""Weight-only compression: r1.1's WeightQuant files (format-v0.md §3). The float weights of
convolutions and matrix products become int8 (2 to 8 bits) or int16 (9 to 16 bits) with
QuantParams, bit-packed when the width is not 8 or 16; activations stay float and the runtime
dequantises each weight once, when it plans the model (msv0.weights).

Linear: per output channel (dim 0) asymmetric min/max, then r1.1's converter's correction of
each channel's mean and spread (varCorr, meanCorr). K-means (2 to 8 bits): 2^bits centres over
the whole tensor, stored as r1.1's runtime reads them, one QuantParam and `quantClusters`
indexed by value + 128; the stored value of centre j is j - 2^(bits-1), so the table holds
128 + 2^(bits-1) floats, the first 128 - 2^(bits-1) unused."""
from __future__ import annotations

import flatbuffers
import numpy as np

from msv0.bitpack import is_packed, pack_bits
from msv0.errors import InputError
from msv0.fb.MetaGraph import MetaGraphT
from msv0.fb.QuantParam import QuantParamT
from msv0.fb.QuantType import QuantType
from msv0.fb.TypeId import TypeId
from msv0.model import Model, load

# The ops whose float kernels dequantise a weight (format-v0.md §3), and where it is.
WEIGHT_INPUT = {"Conv2D": 1, "DepthwiseConv2D": 1, "DeConv2D": 1, "DeDepthwiseConv2D": 1, "FullConnection": 1,
                "MatMul": 1}
PARAM_BYTES = 48  # about what one QuantParam table costs in the file
KMEANS_STEPS = 30
KMEANS_SAMPLE = 1 << 18  # values the centres are fitted on; every value is then assigned


def _param(bits: int, scale: float = 1.0, zp: int = 0, var_corr: float = 1.0, mean_corr: float = 0.0) -> QuantParamT:
    p = QuantParamT()
    p.scale, p.zeroPoint, p.numBits, p.inited = float(scale), int(zp), bits, True
    p.varCorr, p.meanCorr = float(var_corr), float(mean_corr)
    return p


def linear(w: np.ndarray, bits: int) -> tuple[np.ndarray, list[QuantParamT]]:
    """Values in [-2^(bits-1), 2^(bits-1)) and one QuantParam per slice of dim 0 (one for the
    whole tensor when dim 0 is 1 or w is 1-D: r1.1 then applies no correction)."""
    qmin, qmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    rows = w.reshape(w.shape[0] if w.ndim > 1 else 1, -1).astype(np.float64)
    lo, hi = np.minimum(rows.min(axis=1), 0), np.maximum(rows.max(axis=1), 0)
    scale = np.where(hi > lo, (hi - lo) / (qmax - qmin), 1.0)
    zp = np.clip(np.round(qmin - lo / scale), qmin, qmax)
    q = np.clip(np.round(rows / scale[:, None] + zp[:, None]), qmin, qmax)
    if len(rows) == 1:
        return q.astype(np.int64).reshape(w.shape), [_param(bits, scale[0], zp[0])]
    # the runtime's arithmetic: float (q - zp) times float scale
    deq = ((q - zp[:, None]).astype(np.float32) * scale.astype(np.float32)[:, None]).astype(np.float64)
    raw_std, deq_std = rows.std(axis=1), deq.std(axis=1)
    ratio = np.where((raw_std > 0) & (deq_std > 0), raw_std / np.where(deq_std > 0, deq_std, 1), 1.0)
    var = np.where((ratio > 0) & (ratio < 10), ratio, 1.0)
    mean = rows.mean(axis=1) - deq.mean(axis=1) * var
    return q.astype(np.int64).reshape(w.shape), [_param(bits, *p) for p in zip(scale, zp, var, mean)]


def kmeans(w: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Values in [-2^(bits-1), 2^(bits-1)) and the cluster table r1.1 indexes by value + 128."""
    k = 1 << bits
    x = w.reshape(-1).astype(np.float64)
    fit = x[:: max(1, x.size // KMEANS_SAMPLE)]
    distinct = np.unique(fit)
    centres = distinct if distinct.size <= k else np.unique(np.quantile(fit, (np.arange(k) + 0.5) / k))
    if centres.size < k <= distinct.size:  # tied quantiles: more starts, spread over the distinct values
        spread = np.setdiff1d(distinct[np.linspace(0, distinct.size - 1, k).astype(np.int64)], centres)
        centres = np.union1d(centres, spread[np.linspace(0, spread.size - 1, k - centres.size).astype(np.int64)])
    for _ in range(KMEANS_STEPS):  # Lloyd's steps; in 1-D a value's centre is found by bisection
        idx = np.searchsorted((centres[1:] + centres[:-1]) / 2, fit)
        counts = np.bincount(idx, minlength=centres.size)
        sums = np.bincount(idx, weights=fit, minlength=centres.size)
        new = np.where(counts > 0, sums / np.maximum(counts, 1), centres)
        new = np.unique(new)
        if new.size == centres.size and np.allclose(new, centres, rtol=0, atol=1e-12):
            break
        centres = new
    idx = np.searchsorted((centres[1:] + centres[:-1]) / 2, x)
    half = k // 2
    table = np.zeros(128 + half, np.float32)
    table[128 - half: 128 - half + centres.size] = centres
    return (idx - half).reshape(w.shape), table


def quantize_weights(model: Model | str | bytes, bits: int, use_kmeans: bool = False) -> bytes:
    """`model` with every float32 weight of WEIGHT_INPUT's ops quantized to `bits`, as .ms
    bytes (quantType WeightQuant on the nodes that read one). A weight another node reads as
    float, or too small to get smaller, stays float."""
    if not 2 <= bits <= 16:
        raise InputError(f"weight quantization takes 2 to 16 bits, not {bits}")
    if use_kmeans and bits > 8:
        raise InputError(f"k-means weights take 2 to 8 bits (r1.1 indexes its clusters by an int8), not {bits}")
    model = model if isinstance(model, Model) else load(model)
    readers: dict[int, list[int]] = {}
    for i, node in enumerate(model.nodes):
        for pos, k in enumerate(node.inputs):
            readers.setdefault(int(k), []).append(i if WEIGHT_INPUT.get(node.op) == pos else -1)
    g = MetaGraphT.InitFromPackedBuf(bytes(model._core_model.buffer))
    type_id, word_bits = (TypeId.kNumberTypeInt8, 8) if bits <= 8 else (TypeId.kNumberTypeInt16, 16)
    for k, nodes in readers.items():
        t = model.tensors[k]
        if -1 in nodes or not t.is_const or t.type_id != TypeId.kNumberTypeFloat32:
            continue
        w = t.data
        if use_kmeans:
            q, table = kmeans(w, bits)
            params, extra = [_param(bits)], PARAM_BYTES + 4 * table.size
        else:
            (q, params), table = linear(w, bits), None
            extra = PARAM_BYTES * len(params)
        data = pack_bits(q, bits, word_bits) if is_packed(bits, word_bits) else \
            q.astype(np.int8 if word_bits == 8 else "<i2").reshape(-1).view(np.uint8)
        if data.size + extra >= t.raw.size:
            continue
        out = g.allTensors[k]
        out.dataType, out.data, out.quantParams = type_id, data, params
        out.quantClusters = None if table is None else [float(c) for c in table]
        for i in nodes:
            g.nodes[i].quantType = QuantType.WeightQuant
    fbb = flatbuffers.Builder(1024)
    fbb.Finish(g.Pack(fbb), file_identifier=b"MSL1")
    return bytes(fbb.Output())
