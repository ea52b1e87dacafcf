"""This process's memory mappings as Linux's /proc/self/smaps describes them (the tests of a
Session's weight memory: test_api, test_weight_memory)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

SMAPS = Path("/proc/self/smaps")


class Mapping(NamedTuple):
    start: int
    size_kib: int
    path: str  # "" for anonymous memory
    rss_kib: int
    flags: tuple[str, ...]  # VmFlags: "hg" where advised MADV_HUGEPAGE


def mappings() -> list[Mapping]:
    maps: list[dict] = []
    for line in SMAPS.read_text().splitlines():
        head = re.match(r"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+ *(.*)$", line)
        if head:
            start, end = int(head[1], 16), int(head[2], 16)
            maps.append(dict(start=start, size_kib=(end - start) // 1024, path=head[3], rss_kib=0, flags=()))
        elif line.startswith("Rss:"):
            maps[-1]["rss_kib"] = int(line.split()[1])
        elif line.startswith("VmFlags:"):
            maps[-1]["flags"] = tuple(line.split()[1:])
    return [Mapping(**m) for m in maps]
