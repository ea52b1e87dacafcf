"""ONNX conv, pooling, dense, normalisation, softmax and resize ops -> v0 (format-v0.md §2, §5)."""
from __future__ import annotations

import math

import numpy as np

from msv0.convert.emit import Unsupported, Val
from msv0.convert.onnx_1d import one_d
from msv0.convert.onnx_ctx import Ctx, axis_index, broadcast, dense, emit_binary, handles, khwc_weight, reshaped
from msv0.convert.resize_lowering import (filter_matrix, gather_nearest, interpolate, nearest_index,
                                          r11_nearest_index, resize_bilinear, source_coords)
from msv0.fb.Format import Format
from msv0.fb.PaddingMode import PaddingMode
from msv0.fb.PadMode import PadMode
from msv0.fb.PoolMode import PoolMode
from msv0.fb.ReduceMode import ReduceMode
from msv0.fb.ResizeMethod import ResizeMethod
from msv0.fb.RoundMode import RoundMode


def _spatial_pads(c: Ctx, in_hw, kernel, strides, dilations):
    """Explicit (up, left, down, right) pads; SAME_* are resolved here since r1.1 recomputes only SAME_UPPER."""
    auto = c.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for n, k, s, d in zip(in_hw, kernel, strides, dilations):
            out = -(-n // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            begin.append(lo)
            end.append(total - lo)
        return begin[0], begin[1], end[0], end[1]
    if auto == "VALID":
        return 0, 0, 0, 0
    p = list(c.attr("pads", [0, 0, 0, 0]))
    return p[0], p[1], p[2], p[3]


def _window_attrs(c: Ctx, x: Val, kernel):
    if len(x.shape) != 4 or len(kernel) != 2:
        raise Unsupported("only 1-D and 2-D spatial ops (3-D NCL or 4-D NCHW input) are supported")
    strides = list(c.attr("strides", [1, 1]))
    dil = list(c.attr("dilations", [1, 1]))
    up, left, down, right = _spatial_pads(c, x.shape[2:], kernel, strides, dil)
    return strides, dil, dict(padMode=PadMode.NOTSET, padUp=up, padDown=down, padLeft=left, padRight=right,
                              strideH=strides[0], strideW=strides[1])


@handles("Conv")
@one_d
def conv(c: Ctx):
    x, w = c.inp(0), c.const(1, "the weight")
    if w.ndim != 4:
        raise Unsupported(f"only 1-D and 2-D convolution (weight rank {w.ndim})")
    x = c.e.to_nhwc(x, c.name)
    shape, dtype = c.out()
    kernel = list(c.attr("kernel_shape", w.shape[2:]))
    strides, dil, attrs = _window_attrs(c, x, kernel)
    attrs.update(kernelH=kernel[0], kernelW=kernel[1], dilateH=dil[0], dilateW=dil[1],
                 activationType=c.node.fused_act)
    group, cin, cout = int(c.attr("group", 1)), x.shape[1], w.shape[0]
    ins = [x, khwc_weight(c, w.transpose(0, 2, 3, 1), "weight")]  # [Cout, kH, kW, Cin/g]
    b = c.const(2, "the bias")
    if b is not None:
        ins.append(Val(b.shape, b.dtype, const=b.astype(np.float32)))
    if group > 1 and group == cin == cout:
        c.set(0, c.op("DepthwiseConv2D", ins, shape, dtype, True, channelIn=cin, channelMultiplier=1, **attrs))
    else:
        c.set(0, c.op("Conv2D", ins, shape, dtype, True, group=group, channelIn=cin, channelOut=cout, **attrs))


@handles("ConvTranspose")
@one_d
def conv_transpose(c: Ctx):
    x, w = c.inp(0), c.const(1, "the weight")
    if w.ndim != 4:
        raise Unsupported(f"only 1-D and 2-D transposed convolution (weight rank {w.ndim})")
    group = int(c.attr("group", 1))
    x = c.e.to_nhwc(x, c.name)
    shape, dtype = c.out()
    kernel = list(c.attr("kernel_shape", w.shape[2:]))
    strides = list(c.attr("strides", [1, 1]))
    dil = list(c.attr("dilations", [1, 1]))
    # pads from the output size ONNX settled on: full = (in-1)s + (k-1)d + 1, crop the rest
    pads = list(c.attr("pads", [0, 0, 0, 0]))
    opad = list(c.attr("output_padding", [0, 0]))
    begin, end = [], []
    for i in range(2):
        full = (x.shape[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1
        total = full - shape[2 + i]
        auto = c.attr("auto_pad", "NOTSET")
        if auto in ("SAME_UPPER", "SAME_LOWER") or c.attr("output_shape") is not None:
            padding = total + opad[i]  # ONNX total_padding; the output is cropped from pads[start]
            lo = padding // 2 if auto == "SAME_UPPER" else padding - padding // 2
        else:
            lo = pads[i]
        hi = total - lo
        if lo < 0 or hi < 0:
            raise Unsupported("output_padding beyond the transposed-convolution extent (r1.1 crops only)")
        begin.append(lo)
        end.append(hi)
    attrs = dict(padMode=PadMode.NOTSET, padUp=begin[0], padLeft=begin[1], padDown=end[0], padRight=end[1],
                 strideH=strides[0], strideW=strides[1], kernelH=kernel[0], kernelW=kernel[1],
                 dilateH=dil[0], dilateW=dil[1], activationType=c.node.fused_act)
    cin = x.shape[1]
    b = c.const(2, "the bias")
    if group == 1:
        ins = [x, khwc_weight(c, w.transpose(0, 2, 3, 1), "weight")]  # [Cin, kH, kW, Cout]
        op, extra = "DeConv2D", dict(group=1, channelIn=cin, channelOut=shape[1])
    elif group == cin == shape[1] and w.shape[1] == 1:
        ins = [x, khwc_weight(c, w.transpose(0, 2, 3, 1), "weight")]  # [C, kH, kW, 1]
        op, extra = "DeDepthwiseConv2D", dict(channelIn=cin, channelMultiplier=1)
    else:
        raise Unsupported("grouped ConvTranspose (r1.1 DeConv2D supports group 1 only)")
    if b is not None:
        ins.append(Val(b.shape, b.dtype, const=b.astype(np.float32)))
    c.set(0, c.op(op, ins, shape, dtype, True, **extra, **attrs))


@handles("MaxPool", "AveragePool")
@one_d
def pool(c: Ctx):
    if c.used(1):
        raise Unsupported("MaxPool indices output")
    x = c.inp(0)
    kernel = list(c.attr("kernel_shape"))
    strides, dil, attrs = _window_attrs(c, x, kernel)
    if dil != [1, 1]:
        raise Unsupported("dilated pooling")
    x = c.e.to_nhwc(x, c.name)
    shape, dtype = c.out()
    ceil = int(c.attr("ceil_mode", 0))
    avg = c.node.op == "AveragePool"
    pads = [attrs["padUp"], attrs["padDown"], attrs["padLeft"], attrs["padRight"]]

    def windows(n, i):  # r1.1's window count along spatial axis i (n long) under the current pads
        span = n + pads[2 * i] + pads[2 * i + 1] - kernel[i]
        return (math.ceil if ceil else math.floor)(span / strides[i]) + 1

    for i, (n, k, s, want) in enumerate(zip(x.shape[2:], kernel, strides, shape[2:])):
        size = windows(n, i)
        if ceil and (size - 1) * s >= n + pads[2 * i]:  # ONNX (and torch) drop a window starting in the end padding
            size -= 1
        if size != want:
            raise Unsupported(f"output size {want} where ONNX Runtime pools to {size} (ceil_mode's last window)")
        # Only the end padding the windows reach: r1.1's ceil mode keeps a window that starts past it.
        pads[2 * i + 1] = min(pads[2 * i + 1], max(0, (want - 1) * s + k - n - pads[2 * i]))
    if avg and c.attr("count_include_pad", 0) and any(pads):
        # r1.1 averages over the valid cells only: the pads become cells of zeros (torch's default).
        n, ch, h, w = x.shape
        x = c.op("Pad", [x], (n, ch, h + pads[0] + pads[1], w + pads[2] + pads[3]), dtype, True,
                 paddings=[0, 0, *pads, 0, 0], paddingMode=PaddingMode.CONSTANT, constantValue=0.0)
        pads = [0, 0, 0, 0]
    attrs.update(padUp=pads[0], padDown=pads[1], padLeft=pads[2], padRight=pads[3])
    r11 = [windows(n, i) for i, n in enumerate(x.shape[2:])]
    if r11 != list(shape[2:]):
        raise Unsupported(f"output size {tuple(shape[2:])} where r1.1 pools to {tuple(r11)}")
    mode = PoolMode.MEAN_POOLING if avg else PoolMode.MAX_POOLING
    c.set(0, c.op("Pooling", [x], shape, dtype, True, poolingMode=mode, windowH=kernel[0], windowW=kernel[1],
                  roundMode=RoundMode.CEIL if ceil else RoundMode.FLOOR, activationType=c.node.fused_act, **attrs))


@handles("GlobalAveragePool", "GlobalMaxPool")
@one_d
def global_pool(c: Ctx):
    x = c.inp(0)
    if len(x.shape) != 4:
        raise Unsupported("only 3-D and 4-D global pooling")
    x = c.e.to_nhwc(x, c.name)
    shape, dtype = c.out()
    mode = PoolMode.MEAN_POOLING if c.node.op == "GlobalAveragePool" else PoolMode.MAX_POOLING
    c.set(0, c.op("Pooling", [x], shape, dtype, True, poolingMode=mode, global_=True, windowH=x.shape[2],
                  windowW=x.shape[3], strideH=1, strideW=1))


def _lp(c: Ctx) -> tuple[Val, int]:
    x, p = c.inp(0), int(c.attr("p", 2))
    if x.dtype != np.float32:
        raise Unsupported(f"{c.node.op} on {x.dtype} (float32 only)")
    if p < 1:
        raise Unsupported(f"p={p} (only p >= 1)")
    return x, p


def _abs_pow(c: Ctx, x: Val, p: int) -> Val:
    """|x|^p; an even power needs no Abs."""
    v = x if p % 2 == 0 else c.op("Abs", [x], x.shape, x.dtype, x.nhwc)
    return v if p == 1 else c.op("Power", [v], v.shape, v.dtype, v.nhwc, power=float(p), scale=1.0, shift=0.0)


@handles("LpPool")
@one_d
def lp_pool(c: Ctx):
    """(window size · average of |x|^p)^(1/p), the average over input zero-padded by a Pad: r1.1
    averages over the valid cells only, so Pooling's own padding would not give the window sum."""
    x, p = _lp(c)
    kernel = list(c.attr("kernel_shape"))
    strides, dil, attrs = _window_attrs(c, x, kernel)
    if dil != [1, 1]:
        raise Unsupported("dilated pooling (v0 Pooling has no dilation)")
    shape, dtype = c.out()
    x = c.e.to_nhwc(x, c.name)
    pads = [attrs["padUp"], attrs["padDown"], attrs["padLeft"], attrs["padRight"]]
    for i, (n, k, s) in enumerate(zip(x.shape[2:], kernel, strides)):
        # zeros up to the end of ONNX's last window (ceil_mode's may pass the pads)
        pads[2 * i + 1] = max(pads[2 * i + 1], (shape[2 + i] - 1) * s + k - n - pads[2 * i])
    v = _abs_pow(c, x, p)
    if any(pads):
        padded = tuple(x.shape[:2]) + (x.shape[2] + pads[0] + pads[1], x.shape[3] + pads[2] + pads[3])
        v = c.op("Pad", [v], padded, dtype, True, paddings=[0, 0, *pads, 0, 0], paddingMode=PaddingMode.CONSTANT,
                 constantValue=0.0)
    mean = c.op("Pooling", [v], shape, dtype, True, poolingMode=PoolMode.MEAN_POOLING, windowH=kernel[0],
                windowW=kernel[1], strideH=strides[0], strideW=strides[1], padMode=PadMode.NOTSET,
                roundMode=RoundMode.FLOOR)
    c.set(0, c.op("Power", [mean], shape, dtype, True, power=1.0 / p, scale=float(kernel[0] * kernel[1]), shift=0.0))


@handles("GlobalLpPool")
def global_lp_pool(c: Ctx):
    x, p = _lp(c)
    if len(x.shape) < 3:
        raise Unsupported(f"input of rank {len(x.shape)} (no spatial axes)")
    shape, dtype = c.out()
    axes = [x.axis(a) for a in range(2, len(x.shape))]
    y = c.op("Reduce", [_abs_pow(c, x, p)], shape, dtype, x.nhwc, axes=axes, keepDims=1, mode=ReduceMode.ReduceSum)
    c.set(0, y if p == 1 else c.op("Power", [y], shape, dtype, x.nhwc, power=1.0 / p, scale=1.0, shift=0.0))


@handles("Gemm")
def gemm(c: Ctx):
    a = c.e.plain(c.inp(0), c.name)
    shape, dtype = c.out()
    alpha, beta = float(c.attr("alpha", 1.0)), float(c.attr("beta", 1.0))
    if c.attr("transA", 0):
        a = c.op("Transpose", [a], a.shape[::-1], a.dtype, perm=[1, 0])
    b, cv = c.inp(1), c.inp(2)
    n = shape[1]
    if b.const is None:
        y = c.op("MatMul", [a, c.e.plain(b, c.name)], shape, dtype, transposeB=bool(c.attr("transB", 0)))
        if alpha != 1.0:
            y = emit_binary(c, "Mul", y, c.scalar(alpha, dtype), shape, dtype)
        if cv is not None:
            y = emit_binary(c, "Add", y, _scaled(c, cv, beta), shape, dtype, c.node.fused_act)
        elif c.node.fused_act:
            raise Unsupported("fused activation on a MatMul-form Gemm")
        c.set(0, y)
        return
    w = b.const if c.attr("transB", 0) else b.const.T
    w = w * alpha if alpha != 1.0 else w
    bias, late = None, None
    if cv is not None:
        if cv.const is not None and cv.const.size in (1, n) and (cv.const.ndim < 2 or cv.const.shape[0] == 1):
            bias = np.broadcast_to(cv.const.reshape(-1) * beta, (n,)).astype(np.float32)
        else:
            late = cv
    if late is None:
        c.set(0, dense(c, a, w, bias, shape, dtype, c.node.fused_act))
        return
    y = dense(c, a, w, None, shape, dtype)
    c.set(0, emit_binary(c, "Add", y, _scaled(c, late, beta), shape, dtype, c.node.fused_act))


def _scaled(c: Ctx, v: Val, beta: float) -> Val:
    """beta·v: folded for a constant, a Mul node for a runtime value."""
    if beta == 1.0:
        return v
    if v.const is not None:
        a = (v.const * beta).astype(v.dtype)
        return Val.of(a)
    return emit_binary(c, "Mul", v, c.scalar(beta, v.dtype), v.shape, v.dtype)


@handles("MatMul")
def matmul(c: Ctx):
    a, b = c.e.plain(c.inp(0), c.name), c.inp(1)
    shape, dtype = c.out()
    if dtype != np.float32:
        raise Unsupported(f"MatMul on {dtype}")
    # NumPy's matmul: a 1-D a is a row [1, K], a 1-D b a column [K, 1], and that dim leaves the
    # result; batch dims broadcast, which r1.1's MatMul does not (it needs them equal).
    if len(a.shape) == 1:
        a = reshaped(c, a, (1, *a.shape))
    if len(b.shape) == 1:
        b = reshaped(c, b, (*b.shape, 1))
    batch = tuple(np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
    full = (*batch, a.shape[-2], b.shape[-1])
    bias = c.inp(2)  # a bias Add folded in by onnx_frontend._fold_matmul_bias
    if b.const is not None and b.const.ndim == 2:
        y = dense(c, a, b.const.T, None if bias is None else bias.const, full, dtype, c.node.fused_act)
    else:
        ins = [broadcast(c, v, (*batch, *v.shape[-2:])) for v in (a, c.e.plain(b, c.name))]
        y = c.op("MatMul", ins, full, dtype)
    c.set(0, y if full == tuple(shape) else reshaped(c, y, shape))


@handles("BatchNormalization")
@one_d
def batch_norm(c: Ctx):
    if any(c.used(k) for k in range(1, 5)):
        raise Unsupported("training-mode BatchNormalization outputs")
    x = c.inp(0)
    shape, dtype = c.out()
    if len(shape) == 4:
        x = c.e.to_nhwc(x, c.name)
    elif len(shape) != 2:
        raise Unsupported(f"BatchNormalization on a rank-{len(shape)} tensor")
    params = [c.const(k, "BatchNormalization parameters").astype(np.float32) for k in range(1, 5)]
    ins = [x] + [Val.of(p) for p in params]
    c.set(0, c.op("FusedBatchNorm", ins, shape, dtype, len(shape) == 4, epsilon=float(c.attr("epsilon", 1e-5))))


@handles("InstanceNormalization")
def instance_norm(c: Ctx):
    x = c.inp(0)
    shape, dtype = c.out()
    x = c.e.to_nhwc(x, c.name)
    gamma, beta = (c.const(k, "scale and bias").astype(np.float32) for k in (1, 2))
    c.set(0, c.op("InstanceNorm", [x, Val.of(gamma), Val.of(beta)],
                  shape, dtype, True, epsilon=float(c.attr("epsilon", 1e-5))))


@handles("LayerNormalization")
def layer_norm(c: Ctx):
    x = c.e.plain(c.inp(0), c.name)
    shape, dtype = c.out()
    axis = int(c.attr("axis", -1))
    axis = axis + len(shape) if axis < 0 else axis
    norm = tuple(shape[axis:])
    gamma = np.ascontiguousarray(np.broadcast_to(c.const(1, "scale"), norm), np.float32)
    b = c.const(2, "bias")
    beta = np.zeros(norm, np.float32) if b is None else np.ascontiguousarray(np.broadcast_to(b, norm), np.float32)
    eps = float(c.attr("epsilon", 1e-5))
    c.set(0, c.op("LayerNorm", [x, Val(norm, gamma.dtype, const=gamma), Val(norm, beta.dtype, const=beta)], shape,
                  dtype, normalizedShape=list(norm), epsilon=eps, elementwiseAffine=True))
    if c.used(1) or c.used(2):  # training-style statistics outputs: mean and 1/sqrt(var + eps), two-pass
        axes = list(range(axis, len(shape)))
        stat = tuple(shape[:axis]) + (1,) * len(norm)
        mean = c.op("Reduce", [x], stat, dtype, axes=axes, keepDims=1, mode=ReduceMode.ReduceMean)
        d = emit_binary(c, "Sub", x, mean, shape, dtype)
        var = c.op("Reduce", [emit_binary(c, "Mul", d, d, shape, dtype)], stat, dtype, axes=axes, keepDims=1, mode=ReduceMode.ReduceMean)
        std = c.op("Sqrt", [emit_binary(c, "Add", var, c.scalar(eps, dtype), stat, dtype)], stat, dtype)
        c.set(1, mean)
        if len(c.node.outputs) > 2:
            c.set(2, c.op("Reciprocal", [std], stat, dtype))


def _softmax(c: Ctx, x: Val, shape, dtype) -> Val:
    rank = len(shape)
    axis = int(c.attr("axis", -1 if c.graph.opset >= 13 else 1))
    axis = axis + rank if axis < 0 else axis
    if c.graph.opset < 13 and axis != rank - 1:  # coerced to 2-D [prod(:axis), prod(axis:)]
        x = c.e.plain(x, c.name)
        flat = (int(np.prod(shape[:axis])), int(np.prod(shape[axis:])))
        x2 = c.op("Reshape", [x], flat, dtype, shape=list(flat))
        y = c.op("SoftMax", [x2], flat, dtype, axis=1)
        return c.op("Reshape", [y], shape, dtype, shape=list(shape))
    return c.op("SoftMax", [x], shape, dtype, x.nhwc, axis=x.axis(axis))


@handles("Softmax")
def softmax(c: Ctx):
    shape, dtype = c.out()
    c.set(0, _softmax(c, c.inp(0), shape, dtype))


@handles("LogSoftmax")
def log_softmax(c: Ctx):
    shape, dtype = c.out()
    y = _softmax(c, c.inp(0), shape, dtype)
    c.set(0, c.op("Log", [y], shape, dtype, y.nhwc))


def _resize(c: Ctx, mode: str, coord: str, nearest_mode: str, scales=None, antialias=False):
    """Resize written as r1.1's Resize where its meaning (src = dst·in/out, or align corners) is ONNX's,
    else as the exact lowering (resize_lowering)."""
    x = c.inp(0)
    shape, dtype = c.out()
    if len(shape) != 4 or tuple(shape[:2]) != tuple(x.shape[:2]):
        raise Unsupported("only spatial (H, W) resizing of a 4-D tensor")
    if mode not in ("nearest", "linear", "cubic"):
        raise Unsupported(f"mode={mode}")
    pairs = list(zip(x.shape[2:], shape[2:]))
    ratio = [np.float32(o) / np.float32(i) for i, o in pairs]
    # ONNX maps coordinates by the given scales; r1.1's Resize knows only the size ratio
    sc = ratio if scales is None or len(scales) != 4 else [np.float32(s) for s in scales[2:]]
    by_ratio = sc == ratio
    if not by_ratio and coord in ("align_corners", "pytorch_half_pixel"):
        # these read the resized length: ONNX takes in·scale, ONNX Runtime the integer size
        raise Unsupported(f"coordinate_transformation_mode={coord} with scales {[float(s) for s in sc]} "
                          "that do not give a whole output size")
    if tuple(shape) == tuple(x.shape) and by_ratio:
        c.set(0, x)
        return
    x = c.e.to_nhwc(x, c.name)
    stored = Val(x.stored_shape, dtype, index=c.e.index(x))  # what resize_lowering works on
    excl = bool(c.attr("exclude_outside", 0))
    if mode == "cubic" or mode == "linear" and (excl or antialias and min(sc) < 1):
        # r1.1's Resize has no cubic, no antialiasing filter: interpolation matrices
        a = float(c.attr("cubic_coeff_a", -0.75))
        my, mx = (filter_matrix(source_coords(i, o, s, coord), i, mode, s, a, excl, antialias)
                  for (i, o), s in zip(pairs, sc))
        c.set(0, Val(shape, dtype, index=interpolate(c, stored, my, mx).index, nhwc=True))
        return
    if mode == "nearest":
        idx = [nearest_index(source_coords(i, o, s, coord), i, nearest_mode) for (i, o), s in zip(pairs, sc)]
        if not by_ratio or not all(np.array_equal(t, r11_nearest_index(i, o)) for t, (i, o) in zip(idx, pairs)):
            c.set(0, Val(shape, dtype, index=gather_nearest(c, stored, *idx).index, nhwc=True))
            return
        method, align = ResizeMethod.NEAREST, False
    else:
        if not by_ratio or coord not in ("asymmetric", "align_corners"):
            c.set(0, Val(shape, dtype, index=resize_bilinear(c, stored, shape[2:], sc, coord).index, nhwc=True))
            return
        method, align = ResizeMethod.LINEAR, coord == "align_corners"
    c.set(0, c.op("Resize", [x], shape, dtype, True, format=Format.NHWC, method=method, newHeight=shape[2],
                  newWidth=shape[3], alignCorners=align))


@handles("Resize")
def resize(c: Ctx):
    coord = c.attr("coordinate_transformation_mode", "half_pixel") if c.graph.opset >= 11 else "asymmetric"
    scales = c.inp(2 if c.graph.opset >= 11 else 1)
    if scales is not None and scales.const is None and int(np.prod(scales.shape)) != 0:
        raise Unsupported("runtime scales (ONNX maps coordinates by the scale values, unknown when converting)")
    scales = None if scales is None or scales.const.size == 0 else scales.const
    rank = len(c.inp(0).shape)
    axes = [axis_index(a, rank) for a in c.attr("axes", range(rank))]
    policy = c.attr("keep_aspect_ratio_policy", "stretch")
    sizes = c.const(3, "sizes") if policy != "stretch" else None  # the policy reads sizes alone
    if sizes is not None and sizes.size:
        # one scale for every resized axis, from the sizes it must not exceed / undercut
        ratios = [np.float32(n) / np.float32(c.inp(0).shape[a]) for n, a in zip(sizes, axes)]
        scales = [min(ratios) if policy == "not_larger" else max(ratios)] * len(axes)
    if scales is not None and len(axes) != rank:  # scales of the listed axes only
        full = np.ones(rank, np.float32)
        full[axes] = scales
        scales = full
    _resize(c, c.attr("mode", "nearest"), coord, c.attr("nearest_mode", "round_prefer_floor"), scales,
            bool(c.attr("antialias", 0)))


@handles("Upsample")
def upsample(c: Ctx):
    scales = c.attr("scales") if c.graph.opset < 9 else c.const(1, "scales")
    _resize(c, c.attr("mode", "nearest"), "asymmetric", "floor", scales)


@handles("LRN")
def lrn(c: Ctx):
    size = int(c.attr("size"))
    if size % 2 == 0:
        raise Unsupported("even LRN size (r1.1's window is symmetric)")
    x = c.e.to_nhwc(c.inp(0), c.name)
    shape, dtype = c.out()
    c.set(0, c.op("LocalResponseNormalization", [x], shape, dtype, True, depthRadius=(size - 1) // 2,
                  bias=float(c.attr("bias", 1.0)), alpha=float(c.attr("alpha", 1e-4)) / size,
                  beta=float(c.attr("beta", 0.75))))


@handles("DepthToSpace", "SpaceToDepth")
def depth_space(c: Ctx):
    if c.attr("mode", "DCR") != "DCR":
        raise Unsupported(f"{c.node.op} mode {c.attr('mode')} (r1.1 uses the DCR order only)")
    x = c.e.to_nhwc(c.inp(0), c.name)
    shape, dtype = c.out()
    c.set(0, c.op(c.node.op, [x], shape, dtype, True, blockSize=int(c.attr("blocksize")), format=Format.NHWC))

