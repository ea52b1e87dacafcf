"""Which SIMD tier kernels use: detected once at import, capped by MSV0_ISA or set_isa()."""
from __future__ import annotations

import contextlib

from msv0 import _core


def isa() -> str:
    """The tier kernels dispatch to now (scalar, avx2, avx512, avx512vnni, neon, neondot)."""
    return _core.isa()


def available_isas() -> tuple[str, ...]:
    """Tiers this CPU and OS can run, lowest first."""
    return _core.available_isas()


def known_isas() -> tuple[str, ...]:
    """Every tier msv0 knows, of every architecture (csrc/runtime/isa_tiers.def)."""
    return _core.known_isas()


def set_isa(name: str) -> None:
    """Cap dispatch at tier `name` (one of available_isas())."""
    _core.set_isa(name)


@contextlib.contextmanager
def isa_cap(name: str):
    """Within the block, kernels run at most tier `name`."""
    before = isa()
    set_isa(name)
    try:
        yield name
    finally:
        set_isa(before)
