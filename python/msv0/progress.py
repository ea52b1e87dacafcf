"""Progress bars for long steps (conversion, calibration, benchmarks): tqdm bars on stderr,
drawn only when stderr is a terminal, so logs and pipes get no control characters."""
from __future__ import annotations

import sys
from typing import Iterable, TypeVar

from tqdm import tqdm

T = TypeVar("T")


def bar(total: int, label: str) -> tqdm:
    """A bar of `total` steps; advance it with .update(n) and end it with .close()."""
    return tqdm(total=total, desc=label, unit="step", leave=False, disable=not sys.stderr.isatty(), file=sys.stderr)


def progress(items: Iterable[T], total: int, label: str) -> Iterable[T]:
    """`items`, with a bar that advances per item."""
    return tqdm(items, total=total, desc=label, unit="step", leave=False, disable=not sys.stderr.isatty(),
                file=sys.stderr)
