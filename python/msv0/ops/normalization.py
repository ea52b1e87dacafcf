"""Normalisations, fp32 (format-v0.md §5).

BatchNorm, FusedBatchNorm, Scale and BiasAdd apply given per-channel vectors (nnacl/fp32/
batchnorm_fp32.c, scale_fp32.c, bias_fp32.cc); the vectors are read at run time, so they may be
computed. LRN, L2Norm, LayerNorm, InstanceNorm and LpNormalization compute their statistics
from the input. Activations are NHWC, so "channels" is the last axis throughout."""
from __future__ import annotations

import math

import numpy as np

from msv0 import _core
from msv0.fb.ActivationType import ActivationType
from msv0.fb.Format import Format
from msv0.errors import ResourceError
from msv0.ops.elementwise import fused_activation
from msv0.registry import Plan, activation_range, as_float32, const_input, expect_inputs, fail, normalize_axis, op

F32 = np.dtype(np.float32)
MAX_WINDOW_ADDS = 1 << 30  # about a second of _window_square_sum's slice adds


def _per_channel(node, ins, names) -> int:
    """Check every input is float32 and each vector holds one value per last-dim channel."""
    x = ins[0]
    as_float32(node, x, "input")
    if not x.shape:
        raise fail(node, "input must have at least one dimension")
    channels = x.shape[-1]
    for v, name in zip(ins[1:], names):
        as_float32(node, v, name)
        if v.size != channels:
            raise fail(node, f"{name} has {v.size} values, input has {channels} channels")
    return channels


def _normalize(x, mean, var, epsilon, out):
    # (x − mean[c]) / sqrtf(var[c] + eps): divided, not multiplied by a reciprocal, as r1.1 does.
    std = np.sqrt(var.reshape(-1) + epsilon)
    np.subtract(x, mean.reshape(-1), out=out)
    out /= std


@op("BatchNorm")
def batch_norm(node, ins):
    expect_inputs(node, ins, 3)
    _per_channel(node, ins, ("mean", "variance"))
    epsilon = np.float32(node.attrs.epsilon)

    def run(inputs, outputs):
        x, mean, var = inputs
        _normalize(x, mean, var, epsilon, outputs[0])

    return Plan([(ins[0].shape, F32)], run)


@op("FusedBatchNorm")
def fused_batch_norm(node, ins):
    # momentum/spatial only matter for training.
    expect_inputs(node, ins, 5)
    _per_channel(node, ins, ("scale", "offset", "mean", "variance"))
    epsilon = np.float32(node.attrs.epsilon)

    def run(inputs, outputs):
        x, scale, offset, mean, var = inputs
        out = outputs[0]
        _normalize(x, mean, var, epsilon, out)
        out *= scale.reshape(-1)
        out += offset.reshape(-1)

    return Plan([(ins[0].shape, F32)], run)


@op("Scale")
def scale(node, ins):
    """y = x·scale + offset, scale's dims matching x's dims from `axis` on, then RELU/RELU6."""
    expect_inputs(node, ins, 2, 3)
    x, s = ins[0], ins[1]
    as_float32(node, x, "input")
    as_float32(node, s, "scale")
    act_type = node.attrs.activationType
    # fp32 Scale fails at init instead of ignoring (§4).
    if act_type not in (ActivationType.NO_ACTIVATION, ActivationType.RELU, ActivationType.RELU6):
        raise fail(node, f"Scale does not support activation type {act_type}")
    rank = len(x.shape)
    axis = node.attrs.axis + rank if node.attrs.axis < 0 else node.attrs.axis
    if axis < 0 or axis + len(s.shape) > rank:
        raise fail(node, f"scale shape {s.shape} at axis {node.attrs.axis} does not fit input {x.shape}")
    if tuple(x.shape[axis:axis + len(s.shape)]) != tuple(s.shape):
        raise fail(node, f"scale shape {s.shape} does not match input {x.shape} at axis {axis}")
    if len(ins) == 3:
        as_float32(node, ins[2], "offset")
        if ins[2].size != s.size:
            raise fail(node, f"offset has {ins[2].size} values, scale has {s.size}")
    # scale/offset get trailing 1s for the dims after them; NumPy left-pads the outer dims.
    per_axis = tuple(s.shape) + (1,) * (rank - axis - len(s.shape))
    act = fused_activation(act_type)

    def run(inputs, outputs):
        out = outputs[0]
        np.multiply(inputs[0], inputs[1].reshape(per_axis), out=out)
        # r1.1 always adds an offset (zeros when absent), which turns −0 into +0.
        if len(inputs) == 3:
            out += inputs[2].reshape(per_axis)
        else:
            out += np.float32(0)
        if act is not None:
            act(out)

    return Plan([(x.shape, F32)], run)


@op("BiasAdd")
def bias_add(node, ins):
    # `axis` is deprecated and ignored: the bias always runs along the last dim.
    expect_inputs(node, ins, 2)
    _per_channel(node, ins, ("bias",))
    if len(ins[0].shape) > 5:
        raise fail(node, f"input rank must be 1..5, got {len(ins[0].shape)}")

    def run(inputs, outputs):
        np.add(inputs[0], inputs[1].reshape(-1), out=outputs[0])

    return Plan([(ins[0].shape, F32)], run)


def _window(node, shape: tuple, before: int, after: int) -> range:
    """The offsets of the window [c - before, c + after] along the last axis that can reach a
    channel: offsets past the axis add nothing, however wide the window. The sum costs an add per
    offset and value, in r1.1 too; past MAX_WINDOW_ADDS the node raises ResourceError."""
    c = shape[-1]
    offsets = range(-min(before, c - 1), min(after, c - 1) + 1)
    values = math.prod(shape)
    if len(offsets) * values > MAX_WINDOW_ADDS:
        raise ResourceError(f"{node.label}: a window of {len(offsets)} channels over {values} values is over "
                            f"the {MAX_WINDOW_ADDS} adds it may take")
    return offsets


def _window_square_sum(x: np.ndarray, offsets: range) -> np.ndarray:
    """Σ x_{c+d}² over the offsets d (from _window) that stay in [0, C), along the last axis, in
    float32 and in the order of d."""
    sq = x * x
    c = x.shape[-1]
    acc = np.zeros_like(sq)
    for d in offsets:
        lo, hi = max(0, -d), min(c, c - d)
        if lo < hi:
            acc[..., lo:hi] += sq[..., lo + d:hi + d]
    return acc


@op("LocalResponseNormalization")
def local_response_normalization(node, ins):
    """r1.1: y_c = x_c · (bias + alpha·Σ_{|k-c|<=r} x_k²)^(-beta) on the last axis; alpha is
    not divided by the window size; pow in double."""
    expect_inputs(node, ins, 1)
    as_float32(node, ins[0], "input")
    a = node.attrs
    r = a.depthRadius
    if r < 0:
        raise fail(node, f"depthRadius {r} is negative")
    if not ins[0].shape:
        raise fail(node, "input must be at least 1-D")
    offsets = _window(node, ins[0].shape, r, r)

    def run(inputs, outputs):
        x = inputs[0]
        s = _window_square_sum(x, offsets).astype(np.float64)
        scale = np.power(np.float64(a.bias) + np.float64(np.float32(a.alpha)) * s, -np.float64(a.beta))
        np.copyto(outputs[0], x * scale, casting="same_kind")

    return Plan([(ins[0].shape, np.dtype(np.float32))], run)


@op("Lrn")
def lrn(node, ins):
    """No r1.1 kernel. ONNX/Caffe LRN over the channel (last, NHWC) axis:
    y_c = x_c / (bias + alpha/size · Σ x_k²)^beta, k in [c - floor((size-1)/2), c + ceil((size-1)/2)]."""
    expect_inputs(node, ins, 1)
    as_float32(node, ins[0], "input")
    a = node.attrs
    size = a.size
    if size < 1:
        raise fail(node, f"size {size} must be >= 1")
    if not ins[0].shape:
        raise fail(node, "input must be at least 1-D")
    offsets = _window(node, ins[0].shape, (size - 1) // 2, size // 2)

    def run(inputs, outputs):
        x = inputs[0]
        s = _window_square_sum(x, offsets)
        np.copyto(outputs[0], x / np.power(np.float32(a.bias) + np.float32(a.alpha / size) * s, np.float32(a.beta)))

    return Plan([(ins[0].shape, np.dtype(np.float32))], run)


@op("L2Norm")
def l2_norm(node, ins):
    """y = x / sqrt(max(Σx², epsilon)) over all axes (an empty or full axis list) or only the
    last axis; other axis sets fail as in r1.1. Then the fused RELU/RELU6."""
    expect_inputs(node, ins, 1)
    as_float32(node, ins[0], "input")
    rank = len(ins[0].shape)
    axes = sorted({normalize_axis(node, ax, rank) for ax in node.attrs.axis or ()})
    if not axes or axes == list(range(rank)):
        reduce_axes = None
    elif axes == [rank - 1]:
        reduce_axes = -1
    else:
        raise fail(node, f"axis {list(node.attrs.axis)} is not supported (all axes or the last only)")
    eps = np.float32(node.attrs.epsilon)
    lo, hi = activation_range(node.attrs.activationType)

    def run(inputs, outputs):
        x = inputs[0]
        s = np.sum(x * x, axis=reduce_axes, keepdims=True, dtype=np.float32)
        y = x / np.sqrt(np.maximum(s, eps))
        np.copyto(outputs[0], np.clip(y, lo, hi))

    return Plan([(ins[0].shape, np.dtype(np.float32))], run)


@op("LayerNorm")
def layer_norm(node, ins):
    """r1.1: normalise over the trailing len(normalizedShape) dims (which must equal them);
    single-pass var = Σx²/n − mean² in float; y = (x − mean)/sqrt(var + eps) [· gamma + beta]
    element-wise over the block. Exactly 3 inputs with elementwiseAffine, else exactly 1.
    An empty normalizedShape normalises dims 1.. of an NHWC-labelled input; the NCHW-labelled
    variant (gamma per outer row) is not supported."""
    a = node.attrs
    expect_inputs(node, ins, 3 if a.elementwiseAffine else 1)
    x = ins[0]
    as_float32(node, x, "input")
    shape = tuple(a.normalizedShape or ())
    if shape:
        if len(shape) > len(x.shape) or tuple(x.shape[len(x.shape) - len(shape):]) != shape:
            raise fail(node, f"normalizedShape {list(shape)} does not match the trailing dims of {x.shape}")
        k = len(shape)
    else:
        if x.tensor.format == Format.NCHW:
            raise fail(node, "LayerNorm with empty normalizedShape on an NCHW-labelled input is not supported")
        if len(x.shape) < 2:
            raise fail(node, f"input {x.shape} needs a dim after the batch")
        k = len(x.shape) - 1
    block = int(np.prod(x.shape[len(x.shape) - k:]))
    if block == 0:
        raise fail(node, "normalised block is empty")
    gamma = beta = None
    if a.elementwiseAffine:
        gamma = np.asarray(const_input(node, ins[1], "gamma"), np.float32).reshape(-1)
        beta = np.asarray(const_input(node, ins[2], "beta"), np.float32).reshape(-1)
        if gamma.size != block or beta.size != block:
            raise fail(node, f"gamma/beta hold {gamma.size}/{beta.size} values, the block has {block}")
    kernel = _core.LayerNorm(block, float(np.float32(a.epsilon)), gamma, beta, x.shape)
    return Plan([(x.shape, np.dtype(np.float32))], kernel=kernel)


@op("InstanceNorm")
def instance_norm(node, ins):
    """No r1.1 kernel. ONNX InstanceNormalization on NHWC: per (n, c), normalise over the
    spatial dims 1..rank-2 with the population variance; y = gamma[c]·(x − mean)/sqrt(var + eps)
    + beta[c] (gamma/beta from inputs 1 and 2; with 1 input no affine step)."""
    expect_inputs(node, ins, 1, 3)
    x = ins[0]
    as_float32(node, x, "input")
    if len(x.shape) < 3:
        raise fail(node, f"input must be at least 3-D [N, spatial..., C], got {x.shape}")
    c = x.shape[-1]
    affine = None
    if len(ins) == 3:
        gamma = np.asarray(const_input(node, ins[1], "scale"), np.float32).reshape(-1)
        beta = np.asarray(const_input(node, ins[2], "bias"), np.float32).reshape(-1)
        if gamma.size != c or beta.size != c:
            raise fail(node, f"scale/bias hold {gamma.size}/{beta.size} values for {c} channels")
        affine = gamma, beta
    eps = np.float32(node.attrs.epsilon)
    axes = tuple(range(1, len(x.shape) - 1))

    def run(inputs, outputs):
        v = inputs[0]
        mean = np.mean(v, axis=axes, keepdims=True, dtype=np.float32)
        var = np.mean(np.square(v - mean), axis=axes, keepdims=True, dtype=np.float32)
        y = (v - mean) / np.sqrt(var + eps)
        if affine is not None:
            y = y * affine[0] + affine[1]
        np.copyto(outputs[0], y)

    return Plan([(x.shape, np.dtype(np.float32))], run)


@op("LpNormalization")
def lp_normalization(node, ins):
    """No r1.1 kernel: ONNX LpNormalization, x / ||x||_p along `axis` (p 1 or 2); a zero norm
    gives 0 (0/0 is defined as 0, as ONNX Runtime does)."""
    expect_inputs(node, ins, 1)
    as_float32(node, ins[0], "input")
    p = node.attrs.p
    if p not in (1, 2):
        raise fail(node, f"p must be 1 or 2, got {p}")
    axis = normalize_axis(node, node.attrs.axis, len(ins[0].shape))

    def run(inputs, outputs):
        x = inputs[0]
        norm = (np.sum(np.abs(x), axis=axis, keepdims=True) if p == 1
                else np.sqrt(np.sum(x * x, axis=axis, keepdims=True)))
        with np.errstate(all="ignore"):
            np.copyto(outputs[0], np.where(norm == 0, np.float32(0), x / norm))

    return Plan([(ins[0].shape, F32)], run)
