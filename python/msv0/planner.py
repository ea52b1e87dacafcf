"""Arena planning: offsets for intermediate tensors in one buffer, from their live ranges."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from msv0 import _core
from msv0.errors import ResourceError

ALIGN = 64


@dataclass(frozen=True)
class Interval:
    key: int  # tensor index
    size: int  # bytes
    first: int  # step that writes it
    last: int  # last step that reads it (inclusive)


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def plan_arena(intervals: list[Interval]) -> tuple[dict[int, int], int]:
    """Greedy by size, largest first: each tensor takes the lowest offset that does not overlap
    a placed tensor whose live range meets its own. Returns (offsets, total bytes)."""
    placed: list[tuple[int, int, Interval]] = []  # (offset, aligned size, interval)
    offsets: dict[int, int] = {}
    total = 0
    for iv in sorted(intervals, key=lambda iv: (-iv.size, iv.first, iv.key)):
        size = _align(max(iv.size, 1))
        busy = sorted((off, sz) for off, sz, other in placed if other.first <= iv.last and iv.first <= other.last)
        offset = 0
        for off, sz in busy:
            if offset + size <= off:
                break
            offset = max(offset, off + sz)
        placed.append((offset, size, iv))
        offsets[iv.key] = offset
        total = max(total, offset + size)
    return offsets, total


def allocate(values: dict, steps: Sequence[tuple[list[int], list[int]]], graph_inputs: Sequence[int],
             graph_outputs: Sequence[int], limit: int,
             views: Mapping[int, int] | None = None) -> tuple[dict[int, np.ndarray], int]:
    """Buffers (views of one arena) for every non-constant tensor that `steps` (each its
    (inputs, outputs)) touch: graph inputs live from before the first step, graph outputs to
    after the last. `views` maps a tensor to the non-constant tensor whose data it is under a
    new shape (Reshape and its kin): it gets no bytes of its own but a reshaped view of the
    other's, and that storage lives from the first write to the last read of either.
    Returns ({tensor: array}, arena bytes); ResourceError when the arena would exceed `limit`
    bytes."""
    views = views or {}
    first: dict[int, int] = {k: -1 for k in graph_inputs}
    last: dict[int, int] = {}
    for s, (ins, outs) in enumerate(steps):
        for k in outs:
            first.setdefault(k, s)
            last[k] = max(last.get(k, s), s)
        for k in ins:
            if values[k].const is None:
                last[k] = s
    for k in graph_outputs:
        if values[k].const is None:
            last[k] = len(steps)

    def storage(k: int) -> int:  # the tensor that owns k's bytes (views may chain)
        while k in views:
            k = views[k]
        return k

    live: dict[int, tuple[int, int]] = {}  # storage owner -> (first, last) over all its views
    for k, f in first.items():
        owner = storage(k)
        lo, hi = live.get(owner, (f, last.get(k, f)))
        live[owner] = (min(lo, f), max(hi, last.get(k, f)))
    intervals = [Interval(k, values[k].size * values[k].dtype.itemsize, f, l) for k, (f, l) in live.items()]
    offsets, total = plan_arena(intervals)
    if total > limit:
        biggest = max(intervals, key=lambda iv: iv.size)
        raise ResourceError(f"the tensors live at once need a {total}-byte arena, over the Session's memory_limit "
                            f"of {limit} (the largest, {values[biggest.key].tensor.label}, takes {biggest.size})")
    arena = _core.arena(total)  # page-aligned, so every offset keeps its ALIGN
    buffers = {}
    for k in first:
        v, off = values[k], offsets[storage(k)]
        buffers[k] = arena[off : off + v.size * v.dtype.itemsize].view(v.dtype).reshape(v.shape)
    return buffers, total
