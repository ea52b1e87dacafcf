"""BatchNorm, FusedBatchNorm, Scale and BiasAdd, fp32 (format-v0.md §5; nnacl/fp32/batchnorm_fp32.c,
scale_fp32.c, bias_fp32.cc). Per-channel vectors are read at run time, so they may be computed."""
from __future__ import annotations

import numpy as np

from msv0.fb.ActivationType import ActivationType
from msv0.ops.elementwise import fused_activation
from msv0.registry import Plan, as_float32, expect_inputs, fail, op

F32 = np.dtype(np.float32)


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
