"""Constant weights as float32, with r1.1's weight-quant dequantisation (format-v0.md §3).

Conv2D, DeConv2D, DeDepthwiseConv2D, FullConnection and MatMul dequantise when the weight has
quantParams with quantParams[0].inited (rule "inited"); DepthwiseConv2D whenever the weight is
int8/int16 (rule "dtype"). A float weight that carries an inited QuantParam fails in r1.1.
"""
from __future__ import annotations

import numpy as np

from msv0.bitpack import is_packed, packed_words, unpack_bits
from msv0.model import Node, Tensor
from msv0.registry import WEIGHTS, Value, const_input, fail
from msv0.fb.TypeId import TypeId


def float_weight(node: Node, v: Value, rule: str = "inited", what: str = "weight") -> np.ndarray:
    """The constant `v` as a C-contiguous float32 array of its declared shape. A stored weight is
    dequantised once per planning Session (registry.WEIGHTS) and then shared, read-only."""
    data = const_input(node, v, what)
    t = v.tensor
    quant = t.quant
    if rule == "dtype":
        wants_dequant = t.type_id in (TypeId.kNumberTypeInt8, TypeId.kNumberTypeInt16)
        if wants_dequant and not quant:
            raise fail(node, f"{what} {t.label} is {data.dtype} but has no quantParams")
    else:
        wants_dequant = bool(quant) and quant[0].inited
        if wants_dequant and t.type_id not in (TypeId.kNumberTypeInt8, TypeId.kNumberTypeInt16):
            raise fail(node, f"{what} {t.label} has an inited QuantParam but dataType {t.type_id} "
                             "(r1.1 dequantises only int8/int16 weights)")
    if not wants_dequant:
        if data.dtype.kind not in "fiu":
            raise fail(node, f"{what} {t.label} has unsupported dtype {data.dtype}")
        return np.ascontiguousarray(data, np.float32)
    cache = WEIGHTS.get()
    if cache is None or not t.is_const:
        return dequantise(node, t, data, what)
    w = cache.get(t.index)
    if w is None:
        w = cache[t.index] = dequantise(node, t, data, what)
        w.flags.writeable = False
    return w


def dequantise(node: Node, t: Tensor, data: np.ndarray, what: str) -> np.ndarray:
    """`data`, the values of `t` (int8/int16 with QuantParams or clusters), as float32."""
    quant = t.quant
    shape = t.shape
    count = int(np.prod(shape, dtype=np.int64))
    word_bits = 8 if t.type_id == TypeId.kNumberTypeInt8 else 16
    bits = quant[0].numBits
    if word_bits == 8 and 8 < bits < 16:
        raise fail(node, f"{what} {t.label} is int8 with numBits {bits} (9 to 15 bits are packed into int16)")
    if is_packed(bits, word_bits):  # r1.1 unpacks by numBits alone
        need = packed_words(count, bits, word_bits) * word_bits // 8
        if t.raw.size != need:
            raise fail(node, f"{what} {t.label}: {bits}-bit packed data is {t.raw.size} bytes, "
                             f"its dims {list(shape)} need {need}")
        q = unpack_bits(t.raw, bits, count)
    elif data.size != count:
        raise fail(node, f"{what} {t.label}: data holds {data.size} values, its dims {list(shape)} need {count}")
    else:
        q = np.asarray(data, np.int64).reshape(-1)
    q = q.reshape(shape)
    if t.clusters:
        clusters = np.asarray(t.clusters, np.float32)
        idx = q + 128
        if idx.min(initial=0) < 0 or idx.max(initial=0) >= clusters.size:
            raise fail(node, f"{what} {t.label}: cluster index out of range ({clusters.size} clusters)")
        return np.ascontiguousarray(clusters[idx])
    if len(quant) == 1:
        w = (q - quant[0].zeroPoint).astype(np.float32) * np.float32(quant[0].scale)
        return np.ascontiguousarray(w, np.float32)
    if not shape or len(quant) != shape[0]:
        raise fail(node, f"{what} {t.label}: {len(quant)} quantParams for dim0 = {shape[0] if shape else 0}")
    per = (-1,) + (1,) * (len(shape) - 1)
    zp = np.array([p.zeroPoint for p in quant], np.int64).reshape(per)
    scale = np.array([p.scale for p in quant], np.float32).reshape(per)
    var = np.array([p.varCorr if 0 <= p.varCorr <= 10 else 1.0 for p in quant], np.float32).reshape(per)
    mean = np.array([p.meanCorr for p in quant], np.float32).reshape(per)
    w = ((q - zp).astype(np.float32) * scale) * var + mean
    return np.ascontiguousarray(w, np.float32)
