import functools
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

import msv0


# Every tier up to the active one: all this CPU runs, or fewer when MSV0_ISA caps it.
TIERS = msv0.available_isas()[: msv0.available_isas().index(msv0.isa()) + 1]


@pytest.fixture(params=TIERS)
def isa(request):
    """Runs the test once per ISA tier this CPU can execute (up to MSV0_ISA), scalar included."""
    with msv0.isa_cap(request.param):
        yield request.param


def _amx_int8_here():
    """Whether the avx512vnni tier's int8 GEMM takes its AMX slot here (asks the OS for the tiles)."""
    if "avx512vnni" not in TIERS:
        return False
    with msv0.isa_cap("avx512vnni"):
        return msv0._core.gemm_s8_tile() == (32, 32)


# The int8 GEMM's slots: every tier's plain one with AMX off, then avx512vnni's AMX one where it runs.
GEMM_S8_SLOTS = TIERS + (("avx512vnni-amx",) if _amx_int8_here() else ())


@pytest.fixture(params=GEMM_S8_SLOTS)
def gemm_isa(request):
    """The isa fixture for kernels on the int8 GEMM: each tier with AMX off (so avx512vnni runs
    vpdpbusd), and once more with the AMX slot where this machine has AMX-INT8."""
    tier, _, amx = request.param.partition("-")
    before = msv0._core.amx_enabled()
    msv0._core.set_amx(amx == "amx")
    try:
        with msv0.isa_cap(tier):
            assert (msv0._core.gemm_s8_tile()[0] == 32) == (amx == "amx")
            yield request.param
    finally:
        msv0._core.set_amx(before)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# MSV0_SEED_DIR=DIR python -m pytest ... saves every model the tests load (DIR/ms) and every ONNX
# model they convert (DIR/onnx): the fuzzers' seed corpora (tests/fuzz/README.md).
if os.environ.get("MSV0_SEED_DIR"):
    _SEEDS = Path(os.environ["MSV0_SEED_DIR"])

    def _saver(kind, fn):
        @functools.wraps(fn)  # pickle finds the wrapper under fn's name (Model.__reduce__ names load)
        def wrapper(src, *args, **kwargs):
            data = src
            if hasattr(src, "SerializeToString"):
                data = src.SerializeToString()
            elif isinstance(src, (str, os.PathLike)):
                data = Path(src).read_bytes()
            if isinstance(data, (bytes, bytearray, memoryview)) and len(data) <= 1 << 20:
                (_SEEDS / kind).mkdir(parents=True, exist_ok=True)
                data = bytes(data)
                (_SEEDS / kind / hashlib.sha1(data).hexdigest()).write_bytes(data)
            return fn(src, *args, **kwargs)
        return wrapper

    import msv0.model
    import msv0.session
    msv0.model.load = msv0.session.load = msv0.load = _saver("ms", msv0.model.load)
    try:
        import msv0.convert.onnx_frontend as _onnx_frontend
        _onnx_frontend.load_graph = _saver("onnx", _onnx_frontend.load_graph)
    except ImportError:
        pass


def pytest_collection_modifyitems(config, items):
    """MSV0_TEST_SHARD=I/N keeps every N-th collected test from the I-th (0-based), so that
    scripts/build_aarch64.sh can run N emulated pytest processes on disjoint parts of one suite."""
    shard = os.environ.get("MSV0_TEST_SHARD")
    if not shard:
        return
    index, count = (int(n) for n in shard.split("/"))
    config.hook.pytest_deselected(items=[t for k, t in enumerate(items) if k % count != index])
    items[:] = items[index::count]
