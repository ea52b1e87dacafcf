"""Packed weights and arenas in their own mappings (csrc/runtime/weight_memory.cc): zeroed and
aligned, huge-page-advised where the kernel offers transparent huge pages, each allocation's
pages returned when it is freed, the mappings gone with the last of them."""
import gc
import os
from pathlib import Path

import numpy as np
import pytest

import msv0
import smaps
from msv0 import _core
from msv0.builder import Builder

RNG = np.random.default_rng(7)
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
needs_advised_maps = pytest.mark.skipif(
    not smaps.SMAPS.exists() or not THP.exists() or "[never]" in THP.read_text()
    or bool(os.environ.get("MSV0_SANITIZED"))  # under ASan every buffer comes from the heap
    or bool(os.environ.get("MSV0_TEST_PYTHON")),  # under qemu-user smaps describes the emulator
    reason="needs /proc/self/smaps and transparent huge pages")


def _advised_maps() -> dict[int, tuple[int, int]]:
    """start -> (size KiB, Rss KiB) of this process's mappings advised MADV_HUGEPAGE."""
    return {m.start: (m.size_kib, m.rss_kib) for m in smaps.mappings() if "hg" in m.flags}


@pytest.mark.parametrize("nbytes", [0, 1, 4097, (5 << 20) + 3])
def test_arena_is_zeroed_page_aligned_and_writable(nbytes):
    a = _core.arena(nbytes)
    assert a.dtype == np.uint8 and a.shape == (nbytes,) and a.flags.writeable
    assert a.ctypes.data % 4096 == 0 and not a.any()
    a[:] = 7
    assert (a == 7).all()
    with pytest.raises(ValueError, match="negative"):
        _core.arena(-1)


def test_weight_pool_enters_once():
    pool = _core.WeightPool()
    with pool:
        with pytest.raises(ValueError, match="already entered"):
            pool.__enter__()
    with _core.WeightPool(), _core.WeightPool():  # nested pools: the inner one is current
        pass


def _gemm(w: np.ndarray) -> _core.Gemm:
    n, k = w.shape
    return _core.Gemm(w, True, None, (1, k), (1, n), -np.inf, np.inf)


@needs_advised_maps
def test_pool_pages_go_with_each_kernel_and_the_mapping_with_the_last():
    """Two 4 MiB kernels from one pool share one advised mapping: freeing one returns its pages
    (the other still computes), freeing both unmaps it. Built outside a pool, nothing is advised."""
    ws = [RNG.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2)]
    before = set(_advised_maps())  # NumPy advises its own large arrays too
    with _core.WeightPool():
        kernels = [_gemm(w) for w in ws]
    new = {k: v for k, v in _advised_maps().items() if k not in before}
    assert len(new) == 1
    (start, (size, rss)), = new.items()
    assert size >= 8192 and rss >= 8192
    del kernels[0]
    gc.collect()
    assert 4096 <= _advised_maps()[start][1] <= rss - 4000
    x = RNG.standard_normal((1, 1024)).astype(np.float32)
    y = np.empty((1, 1024), np.float32)
    kernels[0]([x], [y])
    np.testing.assert_allclose(y, x @ ws[1].T, rtol=1e-4, atol=1e-3)
    del kernels[0]
    gc.collect()
    assert start not in _advised_maps()
    outside = _gemm(ws[0])
    assert set(_advised_maps()) <= before
    del outside


@needs_advised_maps
def test_session_packs_into_advised_maps_and_frees_them():
    w = RNG.standard_normal((1024, 1024)).astype(np.float32)
    b = Builder("big")
    x = b.input("x", (1, 1024))
    b.output(b.node("FullConnection", [x, b.const("w", w)], outputs=[b.tensor("y")]))
    model = msv0.load(b.finish())
    before = set(_advised_maps())
    s = msv0.Session(model)
    assert sum(size for k, (size, _) in _advised_maps().items() if k not in before) >= 4096
    xv = RNG.standard_normal((1, 1024)).astype(np.float32)
    np.testing.assert_allclose(s.run([xv])["y"], xv @ w.T, rtol=1e-4, atol=1e-3)
    del s
    gc.collect()
    assert set(_advised_maps()) <= before
