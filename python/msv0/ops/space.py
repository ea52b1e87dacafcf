"""Space/depth/batch rearrangements on NHWC tensors, TF orders (format-v0.md §5).

DepthToSpace is DCR: out[n, h*b+i, w*b+j, c] = in[n, h, w, (i*b+j)*C_out + c], SpaceToDepth its
inverse. BatchToSpace: input batch (i*bw + j)*N_out + n feeds out[n, h*bh+i, w*bw+j];
SpaceToBatch (not traced in r1.1, [S]) is taken as its exact inverse with zero padding, as in TF.
The `format` attributes are ignored: activations are NHWC at run time.
"""
from __future__ import annotations

import numpy as np

from msv0.ops import copy_moves
from msv0.registry import Plan, expect_inputs, fail, op


def _nhwc(node, v):
    if len(v.shape) != 4:
        raise fail(node, f"input must be 4-D NHWC, got {v.shape}")
    return v.shape


def _block(node, b):
    if b < 1:
        raise fail(node, f"blockSize {b} must be >= 1")
    return b


def _permuted(dtype, in_shape, out_shape, view, box) -> Plan:
    """The output, reshaped to `box`, as the input reshaped to `view` with its axes 2 and 3
    swapped: both rearrangements. A native Copy for float32, as Transpose is."""
    if copy_moves.native(dtype, len(in_shape)):
        kernel = copy_moves.gather(in_shape, out_shape, box, (0, 1, 3, 2, 4, 5), [0] * 6, [1] * 6, dtype, view)
        return Plan([(out_shape, dtype)], kernel=kernel)

    def run(inputs, outputs):
        np.copyto(outputs[0], inputs[0].reshape(view).transpose(0, 1, 3, 2, 4, 5).reshape(out_shape))

    return Plan([(out_shape, dtype)], run)


@op("DepthToSpace")
def depth_to_space(node, ins):
    expect_inputs(node, ins, 1)
    n, h, w, c = _nhwc(node, ins[0])
    b = _block(node, node.attrs.blockSize)
    if c % (b * b):
        raise fail(node, f"channels {c} are not a multiple of blockSize² = {b * b}")
    oc = c // (b * b)
    out_shape = (n, h * b, w * b, oc)
    return _permuted(ins[0].dtype, (n, h, w, c), out_shape, (n, h, w, b, b, oc), (n, h, b, w, b, oc))


@op("SpaceToDepth")
def space_to_depth(node, ins):
    expect_inputs(node, ins, 1)
    n, h, w, c = _nhwc(node, ins[0])
    b = _block(node, node.attrs.blockSize)
    if h % b or w % b:
        raise fail(node, f"height {h} and width {w} must be multiples of blockSize {b}")
    out_shape = (n, h // b, w // b, c * b * b)
    return _permuted(ins[0].dtype, (n, h, w, c), out_shape, (n, h // b, b, w // b, b, c), (n, h // b, w // b, b, b, c))


def _pair_attrs(node, ins, block_attr, pads_attr, what):
    """[bh, bw] and [top, bottom, left, right] from the attributes or constant inputs 1 and 2
    (the r1.2 form)."""
    if len(ins) == 3:
        vals = []
        for v, name in zip(ins[1:], ("block shape", what)):
            if v.const is None:
                raise fail(node, f"{name} ({v.tensor.label}) must be constant: the output shape depends on it")
            vals.append([int(x) for x in np.asarray(v.const).reshape(-1)])
        block, pads = vals
    else:
        expect_inputs(node, ins, 1, 3)
        block, pads = list(block_attr or ()), list(pads_attr or ())
    if len(block) == 1:  # SpaceToBatch/BatchToSpace with one block size for both dims
        block = block * 2
    if len(block) != 2 or len(pads) != 4:
        raise fail(node, f"need 2 block sizes and 4 {what}, got {block} and {pads}")
    if min(block) < 1 or min(pads) < 0:
        raise fail(node, f"block {block} must be >= 1 and {what} {pads} >= 0")
    return block, pads


@op("BatchToSpace", "BatchToSpaceND")
def batch_to_space(node, ins):
    n, h, w, c = _nhwc(node, ins[0])
    (bh, bw), (top, bottom, left, right) = _pair_attrs(node, ins, node.attrs.blockShape, node.attrs.crops, "crops")
    if n % (bh * bw):
        raise fail(node, f"batch {n} is not a multiple of the block size {bh}x{bw}")
    on = n // (bh * bw)
    oh, ow = h * bh - top - bottom, w * bw - left - right
    if oh < 0 or ow < 0:
        raise fail(node, f"crops {[top, bottom, left, right]} exceed the {h * bh}x{w * bw} output")
    out_shape = (on, oh, ow, c)

    def run(inputs, outputs):
        t = inputs[0].reshape(bh, bw, on, h, w, c).transpose(2, 3, 0, 4, 1, 5).reshape(on, h * bh, w * bw, c)
        np.copyto(outputs[0], t[:, top:top + oh, left:left + ow])

    return Plan([(out_shape, ins[0].dtype)], run)


@op("SpaceToBatch", "SpaceToBatchND")
def space_to_batch(node, ins):
    n, h, w, c = _nhwc(node, ins[0])
    (bh, bw), (top, bottom, left, right) = _pair_attrs(node, ins, node.attrs.blockShape, node.attrs.paddings,
                                                       "paddings")
    ph, pw = h + top + bottom, w + left + right
    if ph % bh or pw % bw:
        raise fail(node, f"padded size {ph}x{pw} is not a multiple of the block {bh}x{bw}")
    oh, ow = ph // bh, pw // bw
    out_shape = (n * bh * bw, oh, ow, c)

    def run(inputs, outputs):
        padded = np.zeros((n, ph, pw, c), inputs[0].dtype)
        padded[:, top:top + h, left:left + w] = inputs[0]
        t = padded.reshape(n, oh, bh, ow, bw, c).transpose(2, 4, 0, 1, 3, 5)
        np.copyto(outputs[0], t.reshape(out_shape))

    return Plan([(out_shape, ins[0].dtype)], run)
