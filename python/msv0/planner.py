"""Arena planning: offsets for intermediate tensors in one buffer, from their live ranges."""
from __future__ import annotations

from dataclasses import dataclass

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
