"""Cast and QuantDTypeCast (format-v0.md §5 and §3)."""
from __future__ import annotations

import numpy as np

from msv0 import _core, dtypes
from msv0.fb.TypeId import TypeId
from msv0.ops.fixed_point_s8 import c_round
from msv0.registry import Plan, expect_inputs, fail, op

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
I8, U8, I32, I64 = np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32), np.dtype(np.int64)
BOOL = np.dtype(np.bool_)

# The pairs r1.1's Cast kernels convert (same-type copies aside); the converters' Cast handlers
# write only these.
CAST_PAIRS = {(F32, I32), (F32, I64), (F32, F16), (F16, F32), (I32, I64), (BOOL, F32), (U8, F32), (I32, F32)}


def _dtype(node, type_id: int, what: str) -> np.dtype:
    if type_id not in dtypes.TO_NUMPY or type_id in dtypes.OBJECT_TYPES:
        raise fail(node, f"{what} {type_id} is not a supported TypeId")
    return dtypes.TO_NUMPY[type_id]


@op("Cast")
def cast(node, ins):
    expect_inputs(node, ins, 1)
    x = ins[0]
    a = node.attrs
    if a.srcT != TypeId.kTypeUnknown and _dtype(node, a.srcT, "srcT") != x.dtype:
        raise fail(node, f"srcT {a.srcT} does not match the input dtype {x.dtype}")
    dst = _dtype(node, a.dstT, "dstT")
    if dst != x.dtype and (x.dtype, dst) not in CAST_PAIRS:
        raise fail(node, f"Cast from {x.dtype} to {dst} is not supported in r1.1")

    # To float32: exact, or C's round-to-nearest for int32. float32 to int32: C's truncation,
    # saturating where C is undefined (the kernel's comment).
    if (dst == F32 and x.dtype in (BOOL, U8, I32)) or (x.dtype, dst) == (F32, I32):
        return Plan([(x.shape, dst)], kernel=_core.CastF32(x.dtype.char, x.shape))
    if (x.dtype, dst) == (F32, I64):
        return Plan([(x.shape, dst)], _f32_to_i64)

    def run(inputs, outputs):  # exact, or float16's rounding (inf beyond its range)
        with np.errstate(over="ignore"):
            outputs[0][...] = inputs[0].astype(dst)

    return Plan([(x.shape, dst)], run)


def _f32_to_i64(inputs, outputs):
    """As CastF32 casts to int32: truncation toward zero, saturating outside int64, NaN 0 (NumPy's
    own result there depends on the CPU: INT64_MIN for all of them on x86)."""
    x, y = inputs[0], outputs[0]
    with np.errstate(invalid="ignore"):
        y[...] = x.astype(I64)
    y[x >= 2.0**63] = np.iinfo(I64).max  # -2**63 itself is exact
    y[x < -(2.0**63)] = np.iinfo(I64).min
    y[np.isnan(x)] = 0


def quantize_i8(x: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """f32 -> i8: x·(1.0f/scale) + zp in float (reciprocal, then multiply), C round, clamp."""
    with np.errstate(invalid="ignore", over="ignore"):
        v = x * (np.float32(1) / np.float32(scale)) + np.float32(zp)
        q = np.clip(c_round(v), -128, 127)
        q = np.where(np.isinf(x), 127, q)  # r1.1 maps both infinities to 127
        return np.nan_to_num(q).astype(np.int8)


def quantize_u8(x: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """f32 -> u8: (double)x / (double)scale + zp, C round, clamp to [0, 255]."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        v = x.astype(np.float64) / np.float64(np.float32(scale)) + zp
        q = np.clip(c_round(v), 0, 255)
        q = np.where(np.isinf(x), 255, q)
        return np.nan_to_num(q).astype(np.uint8)


def dequantize(q: np.ndarray, scale: float, zp: int) -> np.ndarray:
    return (q.astype(np.int32) - np.int32(zp)).astype(np.float32) * np.float32(scale)


@op("QuantDTypeCast")
@op("QuantDTypeCast", int8=True)
def quant_dtype_cast(node, ins):
    expect_inputs(node, ins, 1)
    x = ins[0]
    a = node.attrs
    src, dst = _dtype(node, a.srcT, "srcT"), _dtype(node, a.dstT, "dstT")
    if (src, dst) not in {(F32, I8), (I8, F32), (U8, I8), (I8, U8), (U8, F32), (F32, U8), (I8, I8)}:
        raise fail(node, f"QuantDTypeCast from {src} to {dst} is not supported in r1.1")
    if x.dtype != src:
        raise fail(node, f"srcT {a.srcT} does not match the input dtype {x.dtype}")
    in_q = x.quant[0] if x.quant else None
    out_qs = node.output_quant[0] if node.output_quant else ()
    out_q = out_qs[0] if out_qs and out_qs[0].inited else None
    if (src, dst) in {(U8, I8), (I8, U8)}:
        # A fixed shift by 128, scale and zero point unused: the byte xor 0x80 either way, which is
        # the index LookupS8 takes, so its table is the identity on bytes.
        table = np.arange(256, dtype=np.uint8).view(np.int8)
        return Plan([(x.shape, dst)], kernel=_core.LookupS8([table], [x.shape], 0, src.char, dst.char))
    if src == I8 and dst == I8:
        # Broken in r1.1 (arguments out of order); done as requantisation through float.
        if in_q is None or not out_qs:
            raise fail(node, "int8 -> int8 needs quantParams on both the input and the output")
        qi, qo = in_q, out_qs[0]

        def run(inputs, outputs):
            outputs[0][...] = quantize_i8(dequantize(inputs[0], qi.scale, qi.zeroPoint), qo.scale, qo.zeroPoint)

        return Plan([(x.shape, dst)], run)
    p = out_q or in_q
    if p is None:
        raise fail(node, "neither the output nor the input has a quantParam")
    if src == F32 and p.scale == 0:
        raise fail(node, "quantParam scale is 0")
    if dst == I8:  # the C++ kernel of quantize_i8
        with np.errstate(over="ignore", divide="ignore"):
            inv = np.float32(1) / np.float32(p.scale)
        return Plan([(x.shape, dst)], kernel=_core.QuantCast(0, x.shape, inv, p.zeroPoint))
    if src == I8:  # f32: the C++ kernel of dequantize
        return Plan([(x.shape, dst)], kernel=_core.QuantCast(1, x.shape, np.float32(p.scale), p.zeroPoint))
    if dst == U8:
        fn = lambda v: quantize_u8(v, p.scale, p.zeroPoint)  # noqa: E731
    else:
        fn = lambda v: dequantize(v, p.scale, p.zeroPoint)  # noqa: E731

    def run(inputs, outputs):
        outputs[0][...] = fn(inputs[0])

    return Plan([(x.shape, dst)], run)
