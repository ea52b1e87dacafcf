"""int8 layout ops as r1.1's int8 kernels run them (format-v0.md §3.1 "Layout / copy ops int8").

Each op's own build checks the attributes and infers the shapes; the int8 entry wraps its
data movement with the requantization from the input's to the output's (scale, zero point).
That requantization is a function of the int8 value alone, so it is evaluated once per node
for all 256 values (where r1.1 would overflow an int conversion for any of them, the node is
rejected) and applied as a table lookup. Kernels that never read the quant params (Transpose,
StridedSlice, ExpandDims, Unsqueeze, TopK) keep the plain byte movement.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from msv0 import _core
from msv0.fb.PaddingMode import PaddingMode
from msv0.fb.ResizeMethod import ResizeMethod
from msv0.ops import copy_moves
from msv0.ops.fixed_point_s8 import c_round, mbqm
from msv0.ops.shape import int_values
from msv0.quant import I8, f32, input_param, output_param, round_parameter
from msv0.registry import OPS, Plan, Value, expect_inputs, fail, normalize_axis, op

Q = np.arange(-128, 128, dtype=np.int64)  # every int8 value, in table order
IDENTITY = Q.astype(np.int8)


def own_build(node, ins: list[Value], as_dtype=None) -> Plan:
    """The op's non-int8 build: attribute checks, output shapes and the data movement. A build
    that accepts only some dtypes sees input 0 as `as_dtype` (its int8 kernel takes the same
    attributes); the caller then runs its own kernel."""
    if as_dtype is not None:
        ins = [dataclasses.replace(ins[0], dtype=np.dtype(as_dtype))] + list(ins[1:])
    return OPS[node.op].build(node, ins)


def lookup(table: np.ndarray, q: np.ndarray) -> np.ndarray:
    """table[q + 128]: an int8's bits xor 0x80 are q + 128."""
    return table[q.view(np.uint8) ^ np.uint8(0x80)]


def _rounded(node, v: np.ndarray, zp_out: int) -> np.ndarray:
    """C's `int32_t t = round(v) + zp`, then the clamp to int8; an out-of-range double-to-int
    conversion is undefined in r1.1, so it rejects the node."""
    r = c_round(v) + zp_out
    if not np.all(np.abs(r) < 2.0**31):
        raise fail(node, "the quant params make int8 requantization overflow int32")
    return np.clip(r, -128, 127).astype(np.int8)


def float_table(node, p_in, p_out, divide: bool = False) -> np.ndarray:
    """round(q·s + b) + zp_out, clamped, all in float with s = s_in·(1/s_out) (Concat, Reshape,
    Squeeze, DepthToSpace, BatchToSpace) or s_in/s_out (Split, Crop) and b = −zp_in·s."""
    s_in, s_out = f32(p_in.scale), f32(p_out.scale)
    with np.errstate(over="ignore"):
        s = s_in / s_out if divide else s_in * (np.float32(1) / s_out)
        b = np.float32(-p_in.zeroPoint) * s
        v = Q.astype(np.float32) * s + b
    return _rounded(node, v.astype(np.float64), p_out.zeroPoint)


def double_table(node, alpha: float, zp_in: int, zp_out: int) -> np.ndarray:
    """round(α·(q − zp_in)) + zp_out in double, clamped (Slice, Gather, GatherNd)."""
    with np.errstate(over="ignore"):
        return _rounded(node, alpha * (Q - zp_in).astype(np.float64), zp_out)


def same_params(p_in, p_out) -> bool:
    """r1.1's copy test: the float scales and the zero points equal."""
    return f32(p_in.scale) == f32(p_out.scale) and p_in.zeroPoint == p_out.zeroPoint


def copy_or_float(node, p_in, p_out, divide: bool = False) -> np.ndarray:
    return IDENTITY if same_params(p_in, p_out) else float_table(node, p_in, p_out, divide)


def with_tables(plan: Plan, post: list) -> Plan:
    """The plan with its outputs mapped through int8 tables; identity tables cost nothing, and a
    view plan stays a view when nothing is left to map."""
    post = [None if t is None or np.array_equal(t, IDENTITY) else t for t in post]
    outputs = [(s, I8) for s, _ in plan.outputs]
    if all(t is None for t in post):
        return dataclasses.replace(plan, outputs=outputs, run=None if plan.kernel is not None else plan.run)
    move = plan.run

    def run(inputs, outs):
        move(inputs, outs)
        for o, t in zip(outs, post):
            if t is not None:
                o[...] = lookup(t, o)

    return Plan(outputs, run)


@op("Transpose", "Nchw2Nhwc", "Nhwc2Nchw", "StridedSlice", "ExpandDims", "Unsqueeze", int8=True)
def byte_move(node, ins):
    """r1.1's int8 kernels of these ops move bytes and never read an output quant param.
    (int8 Unsqueeze reads its "output" params from the input tensor, so its requantization is
    the identity, but it needs that param.)"""
    if node.op == "Unsqueeze":
        input_param(node, ins[0])
    return own_build(node, ins)


@op("Concat", int8=True)
def concat_s8(node, ins):
    """Each input requantized to the output's params in float, s = s_in·(1/s_out), as it is
    copied into place by the native LookupS8."""
    plan = own_build(node, ins)
    p_out = output_param(node)
    tables = [copy_or_float(node, input_param(node, v, f"input {k}"), p_out) for k, v in enumerate(ins)]
    axis = normalize_axis(node, node.attrs.axis, len(ins[0].shape))
    return Plan([(s, I8) for s, _ in plan.outputs], kernel=_core.LookupS8(tables, [v.shape for v in ins], axis))


@op("Reshape", "DepthToSpace", "BatchToSpace", "BatchToSpaceND", int8=True)
def recip_requant(node, ins):
    """Copy when the params are equal, else requantize in float with s = s_in·(1/s_out)."""
    plan = own_build(node, ins)
    table = copy_or_float(node, input_param(node, ins[0]), output_param(node))
    return with_tables(plan, [table])


@op("Squeeze", int8=True)
def squeeze_s8(node, ins):
    """Always requantized (no copy test), in float with s = s_in·(1/s_out)."""
    plan = own_build(node, ins)
    return with_tables(plan, [float_table(node, input_param(node, ins[0]), output_param(node))])


@op("Split", int8=True)
def split_s8(node, ins):
    """Each output requantized in float with s = s_in/s_out (a division), or copied."""
    plan = own_build(node, ins)
    p_in = input_param(node, ins[0])
    tables = [copy_or_float(node, p_in, output_param(node, k), divide=True) for k in range(len(plan.outputs))]
    return with_tables(plan, tables)


@op("Slice", int8=True)
def slice_s8(node, ins):
    """round(α·(q − zp_in)) + zp_out with α = s_in/s_out, the float scales divided in double."""
    plan = own_build(node, ins)
    p_in, p_out = input_param(node, ins[0]), output_param(node)
    table = IDENTITY if same_params(p_in, p_out) else double_table(
        node, float(f32(p_in.scale)) / float(f32(p_out.scale)), p_in.zeroPoint, p_out.zeroPoint)
    return with_tables(plan, [table])


@op("Crop", int8=True)
def crop_s8(node, ins):
    """int8 Crop applies a single offset to every dim from `axis` on (fp32 Crop pads the list
    with zeros), handles ranks 1 to 4 only, and requantizes in float with s = s_in/s_out."""
    expect_inputs(node, ins, 2)
    x, ref = ins
    rank, axis = len(x.shape), node.attrs.axis
    offsets = list(node.attrs.offsets or ())
    if not 1 <= rank <= 4:
        raise fail(node, f"int8 Crop handles ranks 1 to 4, got {rank}")
    if axis >= rank:
        raise fail(node, f"axis {axis} is out of range for rank {rank}")
    if axis < 0 and len(offsets) > 1:
        raise fail(node, f"int8 Crop does not normalise the negative axis {axis} (r1.1 reads past its offsets)")
    table = copy_or_float(node, input_param(node, x), output_param(node), divide=True)
    if len(offsets) != 1:
        return with_tables(own_build(node, ins), post=[table])
    first = max(axis, 0)  # a negative axis is compared raw: every dim takes the offset
    begin = [0] * first + offsets * (rank - first)
    out_shape = tuple(ref.shape)
    if len(out_shape) != rank or any(b < 0 or b + n > d for b, n, d in zip(begin, out_shape, x.shape)):
        raise fail(node, f"crop of {out_shape} at offsets {begin} does not fit input {x.shape}")
    index = tuple(slice(b, b + n) for b, n in zip(begin, out_shape))

    def run(inputs, outputs):
        outputs[0][...] = lookup(table, inputs[0][index])

    return Plan([(out_shape, I8)], run)


@op("Gather", int8=True)
def gather_s8(node, ins):
    """Always requantized: round(α·(q − zp_in)) + zp_out with α = s_in/s_out in double (the
    tensors' double scales). The int8 kernel reads the indices as int32 whatever their type."""
    plan = own_build(node, ins)
    if ins[1].dtype != np.int32:
        raise fail(node, f"int8 Gather reads its indices as int32, got {ins[1].dtype}")
    p_in, p_out = input_param(node, ins[0]), output_param(node)
    return with_tables(plan, [double_table(node, p_in.scale / p_out.scale, p_in.zeroPoint, p_out.zeroPoint)])


@op("GatherNd", int8=True)
def gather_nd_s8(node, ins):
    """The indices are int8 with their own quant param: each index is (int)round((q − zp)·scale)
    in double; the gathered values are requantized as Gather's."""
    plan = own_build(node, ins)
    p_in, p_out = input_param(node, ins[0]), output_param(node)
    p_idx = input_param(node, ins[1], "indices")
    index_of = double_index(p_idx)
    table = double_table(node, p_in.scale / p_out.scale, p_in.zeroPoint, p_out.zeroPoint)
    move = plan.run

    def run(inputs, outputs):
        move([inputs[0], lookup(index_of, inputs[1])], outputs)
        outputs[0][...] = lookup(table, outputs[0])

    return Plan([(plan.outputs[0][0], I8)], run)


def double_index(p) -> np.ndarray:
    v = (Q - p.zeroPoint).astype(np.float64) * p.scale
    return c_round(v).astype(np.int64)


@op("SpaceToBatch", "SpaceToBatchND", int8=True)
def space_to_batch_s8(node, ins):
    """Bytes moved as they are; the padding is the output's zero point."""
    plan = own_build(node, ins)
    zp = np.int8(output_param(node).zeroPoint)
    move = plan.run

    def run(inputs, outputs):
        move([inputs[0] - zp] + list(inputs[1:]), outputs)  # the zeros it pads with become zp
        outputs[0] += zp

    return Plan([(plan.outputs[0][0], I8)], run)


@op("Pad", int8=True)
def pad_s8(node, ins):
    """The input and output (float scale, zp) must be equal. CONSTANT pads with
    (int8)round(constantValue/s_in + zp_in) in float (the cast wraps) and places the data by
    the `paddings` attribute; REFLECT and SYMMETRIC need the paddings as input 1."""
    p_in, p_out = input_param(node, ins[0]), output_param(node)
    if not same_params(p_in, p_out):
        raise fail(node, "int8 Pad needs equal input and output quant params")
    # Built as int32 for its checks and output shape (rank <= 4): the float form fills with
    # constantValue, and the int8 bytes move through the Copy kernel below.
    out_shape = own_build(node, ins, np.int32).outputs[0][0]
    a = node.attrs
    x = ins[0]
    fill = 0
    if a.paddingMode != PaddingMode.CONSTANT:
        if len(ins) != 2:
            raise fail(node, "int8 REFLECT/SYMMETRIC Pad needs the paddings as input 1 (r1.1 divides by zero)")
        pads = int_values(node, ins[1], "paddings")
    else:
        attr = list(a.paddings or ())
        rank = len(x.shape)
        # r1.1 right-aligns the attribute into 8 entries, then into the input's rank.
        pads = ([0] * 2 * rank + attr)[-2 * rank:] if rank else []
        if len(ins) == 2 and (len(attr) > 8 or pads != int_values(node, ins[1], "paddings")):
            raise fail(node, "int8 CONSTANT Pad places the data by the paddings attribute but sizes the output "
                             "by input 1, and they differ")
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            v = float(np.float32(a.constantValue) / f32(p_in.scale) + np.float32(p_in.zeroPoint))
        if not abs(v) < 2.0**31:
            raise fail(node, f"constantValue {a.constantValue} does not quantize to an int32")
        r = int(math.copysign(math.floor(abs(v) + 0.5), v))
        fill = (r + 128) % 256 - 128  # r1.1 stores the int32 into an int8: it wraps
    before = pads[0::2]
    after = [o - b - d for o, b, d in zip(out_shape, before, x.shape)]
    kernel = copy_moves.pad(x.shape, before, after, a.paddingMode, float(fill), I8)
    return Plan([(out_shape, I8)], kernel=kernel)


def _nearest_index(n_in: int, n_out: int, align: bool) -> np.ndarray:
    """ComputeNearestNeighborInt: integer arithmetic, not the fp32 kernel's float one."""
    pos = np.arange(n_out, dtype=np.int64)
    if align and n_out != 1:
        i = ((n_in - 1) * pos + (n_out - 1) // 2) // (n_out - 1)
    else:
        i = n_in * pos // n_out
    return np.minimum(i, n_in - 1)


def _linear_fixed(node, n_in: int, n_out: int, align: bool):
    """zp_in == 0: positions in 1/1024 steps, ratio rounded in integers."""
    if align and n_out > 1:
        ratio = (1024 * (n_in - 1) + (n_out - 1) // 2) // (n_out - 1)
    else:
        ratio = (1024 * n_in + n_out // 2) // n_out
    scaled = np.arange(n_out, dtype=np.int64) * ratio
    lower = scaled // 1024
    _check_lower(node, lower, n_in)
    return lower, np.minimum(lower + 1, n_in - 1), scaled - 1024 * lower


def _linear_float(node, n_in: int, n_out: int, align: bool):
    """zp_in != 0: positions in float."""
    if align and n_out > 1:
        ratio = np.float32(n_in - 1) / np.float32(n_out - 1)
    else:
        ratio = np.float32(n_in) / np.float32(n_out)
    scaled = np.arange(n_out, dtype=np.float32) * ratio
    lower = np.floor(scaled).astype(np.int64)
    _check_lower(node, lower, n_in)
    return lower, np.minimum(lower + 1, n_in - 1), (scaled - lower.astype(np.float32)).astype(np.float32)


def _check_lower(node, lower, n_in):
    if lower.size and lower.max() > n_in - 1:
        raise fail(node, "int8 bilinear Resize would read past the input (r1.1's rounded ratio)")


def _tap(src, ys, xs, rows, dtype):
    """One bilinear tap for the output rows in slice `rows`: src at (ys[rows], xs), both axes
    gathered at once."""
    return src[:, ys[rows, None], xs[None, :]].astype(dtype)


@op("Resize", int8=True)
def resize_s8(node, ins):
    """NEAREST: integer source positions; copied when the zero points are equal and the float
    scales differ by less than 1e-6, else MBQM with s_in/s_out (float), shifts offset by 20.
    LINEAR ignores the output params: 10-bit fixed-point weights when zp_in == 0, float
    weights (the sum truncated to int) otherwise."""
    plan = own_build(node, ins, np.float32)
    p_in, p_out = input_param(node, ins[0]), output_param(node)
    out_shape = plan.outputs[0][0]
    _, h, w, _ = ins[0].shape
    oh, ow = out_shape[1:3]
    align = bool(node.attrs.alignCorners)
    if node.attrs.method == ResizeMethod.NEAREST:
        ys, xs = _nearest_index(h, oh, align), _nearest_index(w, ow, align)
        table = IDENTITY
        if p_in.zeroPoint != p_out.zeroPoint or not abs(float(f32(p_out.scale) - f32(p_in.scale))) < 1e-6:
            m, left, right = round_parameter(node, float(f32(p_in.scale) / f32(p_out.scale)))
            if left + 20 > 30 or right + 20 > 31:
                raise fail(node, "int8 nearest Resize's requantization shift is out of range")
            table = np.clip(mbqm(Q - p_in.zeroPoint, m, left + 20, right + 20) + p_out.zeroPoint,
                            -128, 127).astype(np.int8)

        if table is IDENTITY:
            return Plan([(out_shape, I8)], kernel=_core.Resize(ins[0].shape, out_shape, ys, xs, type="b"))

        def nearest(inputs, outputs):  # both axes in one gather: no (oh, w) intermediate
            outputs[0][...] = lookup(table, inputs[0][:, ys[:, None], xs[None, :]])

        return Plan([(out_shape, I8)], nearest)
    # Blocks of output rows, each tap gathered on both axes at once: the temporaries stay near
    # 8 MiB, where gathering whole input rows first took 13 GB for 2x3x4100x3 -> 65537x1 (a fuzz find).
    n, c = out_shape[0], out_shape[3]
    rows = max(1, (8 << 20) // (8 * n * ow * c))
    blocks = [slice(r, min(oh, r + rows)) for r in range(0, oh, rows)]
    if p_in.zeroPoint == 0:
        y0, y1, wy = _linear_fixed(node, h, oh, align)
        x0, x1, wx = _linear_fixed(node, w, ow, align)
        wy, wx = wy[None, :, None, None], wx[None, None, :, None]

        def fixed(inputs, outputs):
            src = inputs[0]
            for b in blocks:
                v = wy[:, b]
                acc = ((1024 - wx) * (1024 - v) * _tap(src, y0, x0, b, np.int64)
                       + v * (1024 - wx) * _tap(src, y1, x0, b, np.int64)
                       + wx * (1024 - v) * _tap(src, y0, x1, b, np.int64)
                       + wx * v * _tap(src, y1, x1, b, np.int64)) + (1 << 19)
                outputs[0][:, b] = np.where(acc >= 0, acc >> 20, -((-acc) >> 20))  # C division truncates

        return Plan([(out_shape, I8)], fixed)
    y0, y1, wy = _linear_float(node, h, oh, align)
    x0, x1, wx = _linear_float(node, w, ow, align)
    one = np.float32(1)

    def floating(inputs, outputs):
        src = inputs[0]
        for b in blocks:
            v = wy[b]
            c_lb = ((one - wx)[None, :] * (one - v)[:, None])[None, :, :, None]
            c_lt = (v[:, None] * (one - wx)[None, :])[None, :, :, None]
            c_rb = (wx[None, :] * (one - v)[:, None])[None, :, :, None]
            c_rt = (wx[None, :] * v[:, None])[None, :, :, None]
            v = (c_lb * _tap(src, y0, x0, b, np.float32) + c_lt * _tap(src, y1, x0, b, np.float32)
                 + c_rb * _tap(src, y0, x1, b, np.float32) + c_rt * _tap(src, y1, x1, b, np.float32))
            outputs[0][:, b] = np.trunc(v)  # the float-to-int8 conversion truncates

    return Plan([(out_shape, I8)], floating)


@op("TopK", int8=True)
def top_k_s8(node, ins):
    """Values moved as bytes. qsort with an exact int comparator; glibc's qsort is a stable
    merge sort, so equal values keep their order in both directions (unlike fp32 TopK)."""
    plan = own_build(node, ins)
    (shape, _), (ishape, idt) = plan.outputs
    k, descending = shape[-1], bool(node.attrs.sorted)

    def run(inputs, outputs):
        data = inputs[0].astype(np.int16)
        order = np.argsort(-data if descending else data, axis=-1, kind="stable")[..., :k]
        np.copyto(outputs[0], np.take_along_axis(inputs[0], order, -1))
        np.copyto(outputs[1], order, casting="unsafe")

    return Plan([(shape, I8), (ishape, idt)], run)
