"""Plan-time folding of element-wise runs on an int8 tensor into one table lookup.

A run of element-wise steps that starts from an int8 tensor x, reads nothing else computed, and
ends in one int8 tensor y computes each element of y from the same element of x alone, and at
most its position along the last dim (per-channel constants: a BatchNorm's, the Mul of a QDQ
graph). So y is a table of x's 256 values, per channel where the constants differ: one native
LookupS8 step in place of the run. The table is the steps' own plans, built for a [256, C] grid
and run on every int8 value, so the result is theirs bit for bit. This folds YOLO's int8 SiLU,
Mul(x, Sigmoid(x)), and the dequantize -> float ops -> quantize runs between the int8 convs of
a QDQ model whose float ops (HardSwish's Add, Clip, Mul and Div; BatchNorm) have no int8 form.
"""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.errors import Error
from msv0.registry import Plan, Value, build

I8 = np.dtype(np.int8)
ALL_Q = np.arange(-128, 128, dtype=np.int8)
# Ops whose every output element is a function of the same element of each input: constants
# that vary along the last dim (BiasAdd, BatchNorm, PReLU's slope) keep them so, per channel.
ELEMENTWISE = frozenset({
    "Abs", "Activation", "Add", "Asin", "Atan", "BatchNorm", "BiasAdd", "Cast", "Ceil", "Clip", "Cos", "Div", "Elu",
    "Exp", "Floor", "FloorDiv", "FloorMod", "FusedBatchNorm", "LeakyReLU", "Log", "Maximum", "Minimum", "Mod", "Mul",
    "Neg", "PReLU", "Power", "QuantDTypeCast", "RealDiv", "Reciprocal", "Round", "Rsqrt", "Sin", "Sqrt", "Square",
    "SquaredDifference", "Sub", "Tan"})
MAX_CHANNELS = 4096  # 1 MiB of tables


def _varies(shape, x_shape) -> bool | None:
    """Whether a constant of `shape`, broadcast against x, varies along x's last dim (True) or
    not at all (False); None where it varies along another dim or would broadcast x."""
    if len(shape) > len(x_shape):
        return None
    padded = (1,) * (len(x_shape) - len(shape)) + tuple(shape)
    if any(d != 1 for d in padded[:-1]) or (padded and padded[-1] not in (1, x_shape[-1])):
        return None
    return bool(padded) and padded[-1] != 1


def _admits(model, step, inside: set[int], values: dict, x_shape) -> bool | None:
    """Whether the step extends a run over `inside` tensors of x's shape: None where it does not,
    else whether one of its constants varies along the last dim."""
    nodes, plan, ins, outs = step
    if len(nodes) != 1 or len(outs) != 1 or plan.known is not None or plan.views \
            or model.nodes[nodes[0]].op not in ELEMENTWISE or values[outs[0]].shape != x_shape:
        return None
    per_channel = False
    for k in ins:
        if k in inside:
            continue
        v = values[k]
        varies = None if v.const is None else _varies(v.shape, x_shape)
        if varies is None:
            return None
        per_channel |= varies
    return per_channel


def _table(model, planned, run: list[int], x: int, y: int, values: dict, channels: int) -> np.ndarray | None:
    """The run's y for every int8 x (and channel): [256] or [channels, 256] int8, or None where a
    step cannot be built or run for the grid."""
    rank = len(values[x].shape)
    grid = (1,) * (max(rank, 2) - 2) + (256, channels)
    arrays = {x: np.ascontiguousarray(np.broadcast_to(ALL_Q[:, None], (256, channels))).reshape(grid)}
    try:
        for j in run:
            nodes, _, ins, outs = planned[j]
            plan = build(model.nodes[nodes[0]], [Value(grid, values[k].dtype, values[k].tensor) if k in arrays
                                                 else values[k] for k in ins])
            want = values[outs[0]].dtype
            if len(plan.outputs) != 1 or tuple(plan.outputs[0][0]) != grid or np.dtype(plan.outputs[0][1]) != want:
                return None
            out = np.empty(grid, want)
            plan.run([arrays[k] if k in arrays else values[k].const for k in ins], [out])
            arrays[outs[0]] = out
    except (Error, ValueError):
        return None
    table = arrays[y].reshape(256, channels).T
    return np.ascontiguousarray(table[0] if channels == 1 else table)


def fuse_tables(model, planned: list, uses: dict[int, int], values: dict) -> list:
    """planned: the (nodes, Plan, inputs, outputs) steps; uses: reads of each tensor, graph
    outputs counted (updated here). Returns the steps with each element-wise run from an int8
    tensor to one int8 tensor, its intermediates read by nothing else, as one LookupS8 step in
    the place of the step that writes that tensor."""
    claimed: set[int] = set()
    replaced: dict[int, tuple] = {}
    tried: set[int] = set()
    for first, (_, _, first_ins, _) in enumerate(planned):
        for x in first_ins:
            if x in tried or values[x].dtype != I8 or values[x].const is not None:
                continue
            tried.add(x)
            found = _fold(model, planned, first, x, claimed, uses, values)
            if found is not None:
                run, y, step = found
                claimed.update(run)
                replaced[max(j for j in run if planned[j][3][0] == y)] = step
    return [replaced.get(j, step) for j, step in enumerate(planned) if j not in claimed or j in replaced]


def _fold(model, planned, first: int, x: int, claimed: set[int], uses: dict[int, int], values: dict):
    """The longest run from x (read first by step `first`) that ends in one int8 tensor, as
    (its steps, that tensor, the LookupS8 step), or None."""
    x_shape = values[x].shape
    inside, run, per_channel = {x}, [], False
    for j in range(first, len(planned)):
        if j in claimed or not any(k in inside for k in planned[j][2]):
            continue
        varies = _admits(model, planned[j], inside, values, x_shape)
        if varies is not None:
            run.append(j)
            inside.add(planned[j][3][0])
            per_channel |= varies
    while run:
        reads = {}
        for j in run:
            for k in planned[j][2]:
                reads[k] = reads.get(k, 0) + 1
        exits = [planned[j][3][0] for j in run if uses.get(planned[j][3][0], 0) > reads.get(planned[j][3][0], 0)]
        # One native step alone (an Activation's table, a vectorised int8 Add) is as fast already.
        worth = len(run) > 1 or planned[run[0]][1].kernel is None
        if len(exits) == 1 and values[exits[0]].dtype == I8 and worth:
            y = exits[0]
            channels = x_shape[-1] if per_channel else 1
            if channels > MAX_CHANNELS:
                return None
            table = _table(model, planned, run, x, y, values, channels)
            if table is None:
                return None
            uses[x] += 1 - reads[x]
            nodes = tuple(n for j in run for n in planned[j][0])
            return run, y, (nodes, Plan([(x_shape, I8)], kernel=_core.LookupS8([table], [x_shape], 0)), [x], [y])
        run.pop()
        per_channel = any(_admits(model, planned[j], inside, values, x_shape) for j in run)
    return None
